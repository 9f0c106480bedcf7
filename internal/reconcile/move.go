package reconcile

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/drover-org/drover/internal/spec"
)

// Moves: instances of the job's current version that are replaced although
// nothing is wrong with them.
//
//	an operator asked for the instance     replaced at once          "stop requested at <t>"
//	to stop (drover alloc stop)
//	the job's restart requested after      replaced                  "restart requested at <t>"
//	the instance was created
//	its node is draining                   replaced elsewhere        "node <n> is draining"
//	                                       (batch: only at the deadline)
//	past the drain's deadline              replaced at once          "node <n> drain deadline reached"
//	its node's tasks use more memory than  the node's lowest-priority "node <n> uses 93% of its memory ..."
//	Input.MemoryHighPercent                service instance moves,
//	                                       one per MemoryMoveInterval per node
//	the group has rebalance = true and     one instance moves from    "rebalance: node <a> runs 4 instances ..."
//	an eligible node that fits one runs    the node with the most
//	at least two fewer than another        to the one with the fewest
//	... or nodes' allocated load differs   one instance moves from    "rebalance: node <a> is 80% allocated, ..."
//	by more than rebalanceSkew             the most to the least
//	                                       loaded node that fits it
//
// Moves of a group wait while a deployment of it runs, and otherwise go
// max_parallel at a time (the group's update block, else Nomad's default
// of 1; a drain's by the group's migrate block when the job has one), each
// replacement judged by its agent (it carries the strategy, as a
// deployment's do) before the next moves; the memory moves and those
// past a drain's deadline do not wait. A draining node's system-job
// instances keep running until nothing else is left on it.

// rebalanceSkew is how much more of its capacity the most loaded node must
// have allocated than the least loaded before a rebalance moves anything.
const rebalanceSkew = 0.25

// memoryReportMaxAge: an older usage report does not move anything.
const memoryReportMaxAge = 2 * time.Minute

type move struct {
	a      *spec.Alloc
	cause  spec.DesiredCause
	reason string
	avoid  string // node to avoid, or ""
	pin    string // node to place on, or ""
	force  bool   // not gated on health
}

// nodeView is what the move rules know of the cluster's nodes.
type nodeView struct {
	all  []*spec.Node
	node func(id string) *spec.Node // nil when there is none
	ids  []string                   // every node's ID, sorted: see sortedIDs
	// used is each node's allocated resources, from its live allocs;
	// busy counts its live allocs of jobs that are not system jobs. Both
	// are read from onNode for the nodes counted (see count).
	used    map[string]spec.Resources
	busy    map[string]int
	counted map[string]bool
	onNode  func(string) []*spec.Alloc
	// victims are the allocs that move off nodes under memory pressure.
	victims map[string]string
}

func newNodeView(in Input) *nodeView {
	v := &nodeView{all: in.Nodes, node: in.Node, used: map[string]spec.Resources{}, busy: map[string]int{}, victims: map[string]string{},
		onNode: in.NodeAllocs}
	if v.node == nil {
		byID := make(map[string]*spec.Node, len(in.Nodes))
		for _, n := range in.Nodes {
			byID[n.ID] = n
		}
		v.node = func(id string) *spec.Node { return byID[id] }
	}
	if v.onNode == nil {
		byNode := map[string][]*spec.Alloc{}
		for _, a := range in.Allocs {
			byNode[a.NodeID] = append(byNode[a.NodeID], a)
		}
		v.onNode = func(id string) []*spec.Alloc { return byNode[id] }
	}
	return v
}

// sortedIDs returns every node's ID in order, sorted on first use: only
// the rules that compare nodes with each other (rebalance) need it.
func (v *nodeView) sortedIDs() []string {
	if v.ids == nil {
		v.ids = make([]string, len(v.all))
		for i, n := range v.all {
			v.ids[i] = n.ID
		}
		slices.Sort(v.ids)
	}
	return v.ids
}

// count reads a node's live allocs into used and busy, once per pass:
// the nodes a pass never asks about cost nothing.
func (v *nodeView) count(id string) {
	if v.counted[id] {
		return
	}
	if v.counted == nil {
		v.counted = map[string]bool{}
	}
	v.counted[id] = true
	for _, a := range v.onNode(id) {
		if !live(a) {
			continue
		}
		v.used[id] = v.used[id].Add(a.Resources)
		if !a.JobType.PerNode() {
			v.busy[id]++
		}
	}
}

// usedOf is what a node's live allocs hold, as the pass's moves left it.
func (v *nodeView) usedOf(id string) spec.Resources {
	v.count(id)
	return v.used[id]
}

// memoryVictims picks, for each node whose tasks use more than pct% of its
// memory, its lowest-priority service instance, unless one moved off it
// within interval; it returns when the next budget opens, or zero.
func (v *nodeView) memoryVictims(in Input, jobs map[string]*spec.Job) time.Time {
	var next time.Time
	if in.MemoryHighPercent <= 0 {
		return next
	}
	// Each node is judged on its own: the order does not matter.
	for _, n := range v.all {
		id, u := n.ID, n.Usage
		if u == nil || n.Resources.MemoryMB <= 0 || n.Status != spec.NodeReady || in.Now.Sub(u.Time) > memoryReportMaxAge {
			continue
		}
		if u.Tasks.MemoryMB*100 <= in.MemoryHighPercent*n.Resources.MemoryMB {
			continue
		}
		var last time.Time
		var candidates []*spec.Alloc
		partial := false
		for _, a := range v.onNode(id) {
			// A move from before causes were recorded is not seen here:
			// after an upgrade in place a node may move one more instance
			// before its interval has passed (spec.DesiredCause).
			if a.DesiredStatus == spec.DesiredStop && a.DesiredCause == spec.CauseMemory && a.ModifyTime.After(last) {
				last = a.ModifyTime
			}
			j := jobs[a.Job]
			switch {
			case !live(a):
			case j == nil:
				partial = true
			case j.Type == spec.JobService && !j.Stopped:
				candidates = append(candidates, a)
			}
		}
		if due := last.Add(in.MemoryMoveInterval); !last.IsZero() && in.Now.Before(due) {
			if next.IsZero() || due.Before(next) {
				next = due
			}
			continue
		}
		// A report from before the last move still counts what moved; a
		// pass that sees only some jobs cannot tell which instance has the
		// lowest priority (the periodic full pass can).
		if len(candidates) == 0 || partial || !u.Time.After(last) {
			continue
		}
		slices.SortFunc(candidates, func(a, b *spec.Alloc) int {
			return cmp.Or(cmp.Compare(jobs[a.Job].Priority, jobs[b.Job].Priority),
				cmp.Compare(b.Resources.MemoryMB, a.Resources.MemoryMB), strings.Compare(a.ID, b.ID))
		})
		pct := float64(u.Tasks.MemoryMB) * 100 / float64(n.Resources.MemoryMB)
		v.victims[candidates[0].ID] = fmt.Sprintf("node %s uses %.1f%% of its memory (%d of %d MB), over %d%%: moving its lowest-priority instance",
			n.Name, pct, u.Tasks.MemoryMB, n.Resources.MemoryMB, in.MemoryHighPercent)
	}
	return next
}

// drainPast reports whether n's drain deadline has passed.
func drainPast(n *spec.Node, now time.Time) bool {
	return n != nil && n.Drain != nil && !n.Drain.Deadline.IsZero() && !now.Before(n.Drain.Deadline)
}

// drained reports whether a draining node has nothing left to move off it
// (or its deadline passed): its system-job instances may stop.
func (v *nodeView) drained(id string, now time.Time) bool {
	n := v.node(id)
	if n == nil || n.Drain == nil {
		return false
	}
	v.count(id)
	return v.busy[id] == 0 || drainPast(n, now)
}

// considerMove notes whether a, the live alloc kept for its slot, should
// move (see the table above); rollMoves decides when.
func (r *reconciler) considerMove(j *spec.Job, a *spec.Alloc) {
	if r.view == nil || j.Type.PerNode() {
		return
	}
	n := r.view.node(a.NodeID)
	switch {
	case n != nil && n.Drain != nil && drainPast(n, r.now):
		r.moves = append(r.moves, move{a: a, cause: spec.CauseDrain, reason: "node " + n.Name + " drain deadline reached", avoid: n.ID, force: true})
	case n != nil && n.Drain != nil && !j.Type.Completes():
		r.moves = append(r.moves, move{a: a, cause: spec.CauseDrain, reason: "node " + n.Name + " is draining", avoid: n.ID})
		if !n.Drain.Deadline.IsZero() {
			r.wakeAt(n.Drain.Deadline)
		}
	case n != nil && n.Drain != nil:
		if !n.Drain.Deadline.IsZero() {
			r.wakeAt(n.Drain.Deadline) // a batch instance finishes, or stops then
		}
	case !j.StopRequested(a.ID).IsZero():
		r.moves = append(r.moves, move{a: a, cause: spec.CauseAllocStop, reason: "stop requested at " + j.StopRequested(a.ID).UTC().Format(time.RFC3339), force: true})
	case r.view.victims[a.ID] != "":
		r.moves = append(r.moves, move{a: a, cause: spec.CauseMemory, reason: r.view.victims[a.ID], avoid: a.NodeID, force: true})
	case j.Type == spec.JobService && a.CreateTime.Before(j.RestartRequested):
		r.moves = append(r.moves, move{a: a, cause: spec.CauseRestart, reason: "restart requested at " + j.RestartRequested.UTC().Format(time.RFC3339)})
	}
}

// rollMoves carries out the moves noted for group g: the forced ones at
// once, the others within the group's budget, which a running deployment
// takes whole. as are the group's allocs.
func (r *reconciler) rollMoves(j *spec.Job, g *spec.Group, as []*spec.Alloc) {
	moves := r.moves
	r.moves = nil
	u := j.UpdateOf(g)
	if u == nil || u.Parallel() == 0 {
		u = spec.DefaultUpdate()
	}
	// A migrate block gives a drain's moves a budget and a health
	// judgement of their own; without one they share the update block's.
	mig := j.MigrateOf(g)
	budget, drainBudget := 0, 0
	if r.gr == nil {
		budget, drainBudget = u.Parallel(), mig.Parallel()
		for _, a := range as {
			if live(a) && a.Update != nil && verdict(a) == nil {
				if mig != nil && a.DesiredCause == spec.CauseDrain {
					drainBudget--
				} else {
					budget--
				}
			}
		}
	}
	if len(moves) == 0 && budget > 0 && g.Rebalance && j.Type == spec.JobService {
		if m, ok := r.rebalance(g, as); ok {
			moves = append(moves, m)
		}
	}
	for _, m := range moves {
		strategy, left := u, &budget
		if mig != nil && m.cause == spec.CauseDrain {
			strategy, left = mig, &drainBudget
		}
		if !m.force {
			if *left <= 0 {
				continue
			}
			*left--
		}
		r.stop(m.a, m.cause, m.reason)
		r.place(j, g, m.a.Index, m.pin, m.cause, m.reason, m.a.ID, m.avoid)
		r.res.Place[len(r.res.Place)-1].Update = strategy
	}
}

// rebalance picks one instance of g to move: from the eligible node that
// runs the most of them to one that fits another and runs at least two
// fewer (a node joined); else from the most to the least loaded eligible
// node, when their allocated load differs by more than rebalanceSkew and
// the move narrows the gap. as are g's allocs.
func (r *reconciler) rebalance(g *spec.Group, as []*spec.Alloc) (move, bool) {
	if m, ok := r.spreadOut(g, as); ok {
		return m, true
	}
	v := r.view
	load := func(id string) float64 {
		n, used := v.node(id), v.usedOf(id)
		l := 0.0
		if n.Resources.CPU > 0 {
			l = float64(used.CPU) / float64(n.Resources.CPU)
		}
		if n.Resources.MemoryMB > 0 {
			l = max(l, float64(used.MemoryMB)/float64(n.Resources.MemoryMB))
		}
		return l
	}
	var from *spec.Alloc
	for _, a := range as {
		n := v.node(a.NodeID)
		if !live(a) || n == nil || !n.Eligible() || a.Canary {
			continue
		}
		if from == nil || load(a.NodeID) > load(from.NodeID) || (load(a.NodeID) == load(from.NodeID) && a.Index > from.Index) {
			from = a
		}
	}
	if from == nil {
		return move{}, false
	}
	need := g.Resources()
	var to *spec.Node
	for _, id := range v.sortedIDs() {
		n := v.node(id)
		if id == from.NodeID || !n.Eligible() || !n.Resources.Sub(v.usedOf(id)).Fits(spec.Resources{CPU: need.CPU, MemoryMB: need.MemoryMB}) {
			continue
		}
		if to == nil || load(id) < load(to.ID) {
			to = n
		}
	}
	if to == nil {
		return move{}, false
	}
	hi, lo := load(from.NodeID), load(to.ID)
	after := v.usedOf(to.ID).Add(need)
	loAfter := max(float64(after.CPU)/float64(max(to.Resources.CPU, 1)), float64(after.MemoryMB)/float64(max(to.Resources.MemoryMB, 1)))
	if hi-lo <= rebalanceSkew || loAfter >= hi {
		return move{}, false
	}
	// The pass's later decisions see the move.
	v.used[from.NodeID] = v.usedOf(from.NodeID).Sub(from.Resources)
	v.used[to.ID] = after
	fromName := cmp.Or(v.node(from.NodeID).Name, from.NodeID)
	return move{a: from, pin: to.ID, cause: spec.CauseRebalance, reason: fmt.Sprintf("rebalance: node %s is %.0f%% allocated, node %s %.0f%%", fromName, hi*100, to.Name, lo*100)}, true
}

// spreadOut is rebalance's first rule: even out g's instance counts over
// the eligible nodes that fit one.
func (r *reconciler) spreadOut(g *spec.Group, as []*spec.Alloc) (move, bool) {
	v := r.view
	need := g.Resources()
	fits := func(n *spec.Node) bool {
		return n.Eligible() && n.Resources.Sub(v.usedOf(n.ID)).Fits(spec.Resources{CPU: need.CPU, MemoryMB: need.MemoryMB})
	}
	count := map[string]int{}
	last := map[string]*spec.Alloc{} // the highest index on each node
	for _, a := range as {
		n := v.node(a.NodeID)
		if !live(a) || n == nil || !n.Eligible() || a.Canary {
			continue
		}
		count[a.NodeID]++
		if l := last[a.NodeID]; l == nil || a.Index > l.Index {
			last[a.NodeID] = a
		}
	}
	ids := v.sortedIDs()
	from, to := "", ""
	for _, id := range ids {
		if count[id] > 0 && (from == "" || count[id] > count[from]) {
			from = id
		}
	}
	for _, id := range ids {
		if id != from && fits(v.node(id)) && (to == "" || count[id] < count[to]) {
			to = id
		}
	}
	if from == "" || to == "" || count[from]-count[to] < 2 {
		return move{}, false
	}
	a := last[from]
	v.used[from] = v.usedOf(from).Sub(a.Resources)
	v.used[to] = v.usedOf(to).Add(need)
	return move{a: a, pin: to, cause: spec.CauseRebalance, reason: fmt.Sprintf("rebalance: node %s runs %d instances of the group, node %s %d",
		cmp.Or(v.node(from).Name, from), count[from], cmp.Or(v.node(to).Name, to), count[to])}, true
}
