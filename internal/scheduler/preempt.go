package scheduler

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/drover-org/drover/internal/spec"
)

// PreemptGap is how much lower a job's priority must be for its instances
// to be evicted by preemption, as in Nomad: work of about the same
// importance never displaces each other back and forth.
const PreemptGap = 10

// preempt looks for a node where evicting instances would let the request
// fit: instances of jobs PreemptGap or more below the request's priority
// when its job may preempt, and instances of the jobs its replaces rules
// name. On each candidate node the cheapest instances go first (lowest
// priority, then largest, then by ID) until the request fits; the node
// chosen is the one whose evictions are least: lowest highest priority
// evicted, then fewest, then the smaller node ID. It returns nil when no
// node would do.
func (gr *groupRun) preempt(r Request) (*nodeState, []*spec.Alloc) {
	mayPreempt := r.Job.PreemptOf()
	if gr.impossible || !mayPreempt && len(gr.replaces) == 0 {
		return nil, nil
	}
	s := gr.s
	candidates := s.all
	if r.Node != "" {
		candidates = gr.pinnedNodes(r.Node)
	}
	var best *nodeState
	var bestEvict []*spec.Alloc
	var bestCost [2]int
	for _, n := range candidates {
		if n.cls == nil || !gr.hasClass(n.cls) || !gr.meetsStatic(n) || !gr.ownVolumes(n) || gr.conflictNodes[n.idx] || !gr.colocated(n) {
			continue
		}
		if r.Node == "" && n.node.ID == r.AvoidNode {
			continue
		}
		evict, ok := gr.evictionsOn(n, r, mayPreempt)
		if !ok {
			continue
		}
		cost := [2]int{0, len(evict)}
		for _, a := range evict {
			cost[0] = max(cost[0], s.priority(a))
		}
		if best == nil || cost[0] < bestCost[0] || cost[0] == bestCost[0] && (cost[1] < bestCost[1] || cost[1] == bestCost[1] && n.node.ID < best.node.ID) {
			best, bestEvict, bestCost = n, evict, cost
		}
	}
	return best, bestEvict
}

// priority is the priority of an alloc's job, or MaxPriority when the job
// is not known, so that such allocs are never evicted.
func (s *state) priority(a *spec.Alloc) int {
	if j := s.jobs[a.Job]; j != nil {
		return j.Priority
	}
	return spec.MaxPriority
}

// evictionsOn returns the allocs on n to evict so that the request fits:
// all the instances of jobs it replaces, then the cheapest of the
// preemptible ones until it fits.
func (gr *groupRun) evictionsOn(n *nodeState, r Request, mayPreempt bool) ([]*spec.Alloc, bool) {
	s := gr.s
	var must, may []*spec.Alloc
	for _, a := range n.allocs {
		switch {
		case s.evicted[a.ID] || s.freed[a.ID] || a.Job == r.Job.Name:
		case gr.replaced(a.Job):
			must = append(must, a)
		case mayPreempt && s.priority(a) <= r.Job.Priority-PreemptGap:
			may = append(may, a)
		}
	}
	if gr.replaceNodes[n.idx] && len(must) == 0 {
		return nil, false // a replaced job placed in this call: not evictable
	}
	slices.SortFunc(may, func(a, b *spec.Alloc) int {
		return cmp.Or(
			cmp.Compare(s.priority(a), s.priority(b)),
			cmp.Compare(b.Resources.CPU+b.Resources.MemoryMB, a.Resources.CPU+a.Resources.MemoryMB),
			cmp.Compare(a.ID, b.ID),
		)
	})
	free := n.node.Resources.Sub(n.used)
	held := map[int]bool{}
	for _, a := range must {
		free = free.Add(a.Resources)
		for _, p := range a.Ports {
			held[p.Value] = true
		}
	}
	fits := func() bool {
		if !free.Fits(gr.need) || !gr.distinctAllows(n) {
			return false
		}
		for _, p := range gr.static0 {
			if n.ports[p] && !held[p] {
				return false
			}
		}
		return gr.dynamic == 0 || n.dynFree() >= gr.dynamic
	}
	evict := must
	for _, a := range may {
		if fits() {
			break
		}
		evict = append(evict, a)
		free = free.Add(a.Resources)
		for _, p := range a.Ports {
			held[p.Value] = true
		}
	}
	return evict, fits()
}

func (gr *groupRun) distinctAllows(n *nodeState) bool {
	for _, d := range gr.distinct {
		if !d.allows(n.node) {
			return false
		}
	}
	return true
}

// replaced reports whether the group's replaces rules name job.
func (gr *groupRun) replaced(job string) bool {
	for _, r := range gr.replaces {
		if r.c.MatchJob(job) {
			return true
		}
	}
	return false
}

// evict takes the allocs off n: their use, ports and counts are freed
// for the request, and each becomes an Eviction that says why.
func (gr *groupRun) evict(r Request, n *nodeState, allocs []*spec.Alloc) []Eviction {
	s := gr.s
	if s.evicted == nil {
		s.evicted = map[string]bool{}
	}
	by := spec.AllocName(r.Job.Name, r.Group.Name, r.Index)
	var out []Eviction
	s.touch(n)
	for _, a := range allocs {
		s.evicted[a.ID] = true
		n.used = n.used.Sub(a.Resources)
		for _, p := range a.Ports {
			n.freePort(p.Value)
		}
		if s.jobNodes != nil {
			s.addJob(a.Job, n.idx, -1)
		}
		cause, reason := spec.CausePreempted, fmt.Sprintf("preempted by %s (priority %d > %d)", by, r.Job.Priority, s.priority(a))
		if gr.replaced(a.Job) {
			cause, reason = spec.CauseDisplaced, fmt.Sprintf("replaced by %s (replaces %s)", by, a.Job)
		}
		out = append(out, Eviction{Alloc: a, Cause: cause, Reason: reason, By: r})
	}
	s.moved(n)
	delete(gr.replaceNodes, n.idx)
	if gr.built && gr.pos[n.idx] < 0 {
		// Dropped by an earlier pick when it was full: the evictions
		// give it room again.
		gr.score[n.idx] = gr.rank(n)
		gr.heapOf(n).push(n.idx)
	}
	gr.rescore(n)
	return out
}

// pinnedNodes is the one node of a pinned request, or none when it is
// not known.
func (gr *groupRun) pinnedNodes(id string) []*nodeState {
	if n := gr.s.node(id); n != nil {
		return []*nodeState{n}
	}
	return nil
}
