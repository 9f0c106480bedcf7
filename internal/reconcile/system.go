package reconcile

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/drover-org/drover/internal/spec"
)

// A system job runs one instance of each group on every eligible node, and
// its count is ignored. An instance is therefore one (group, node) pair
// rather than one index: its allocs are the group's allocs on that node,
// and its history (reschedule attempts, delays, the terminal allocs kept)
// is that node's alone.
//
// Indexes still name allocs ("job.group[i]") and must not be shared by two
// instances that may run at once. An instance keeps its index for life: the
// index of its oldest live alloc, else of its newest alloc, so that a
// replacement or an update on the same node has the same name. A node
// without one, or whose old index another node's running alloc now holds,
// takes the smallest index no other node holds.

// nodeState is what the system rules need to know about one node for one
// group.
type nodeState struct {
	node *spec.Node // nil: not in the registry (deleted)
	// ineligible is why the group may not run on a ready node, or "" when
	// it may (or when the node is down or deleted: see down and node);
	// dimension is the same as a placement failure counts it.
	ineligible, dimension string
}

func (s nodeState) eligible() bool {
	return s.node != nil && s.node.Status == spec.NodeReady && s.ineligible == ""
}

// down reports whether the node is registered but not ready: its instance
// is lost with it, is not placed anywhere else, and comes back when the
// node does.
func (s nodeState) down() bool { return s.node != nil && s.node.Status != spec.NodeReady }

// eligibility says, for each registered node, whether group g of system job
// j may run there: the node is ready, in the job's node pool and
// datacenters, has every driver the group's tasks need, and meets every
// constraint that depends on the node alone.
// distinct_hosts, distinct_property and the job rules (colocate, conflicts,
// replaces) depend on other allocs: the scheduler checks them when it
// places the pinned instance, and reports when they stop it.
func eligibility(j *spec.Job, g *spec.Group, nodes []*spec.Node) map[string]nodeState {
	var checks []nodeCheck
	for _, c := range j.ConstraintsOf(g) {
		if c.Distinct() || c.JobRule() {
			continue
		}
		k, err := spec.CompileConstraint(c)
		checks = append(checks, nodeCheck{c, k, err})
	}
	drivers := g.Drivers()
	out := make(map[string]nodeState, len(nodes))
	for _, n := range nodes {
		why, dim := whyIneligible(n, drivers, checks)
		if ex := j.Excluded(n); ex != "" {
			why, dim = "not in "+ex, ex
		}
		out[n.ID] = nodeState{node: n, ineligible: why, dimension: dim}
	}
	return out
}

// nodeCheck is one compiled constraint, or why it does not compile.
type nodeCheck struct {
	c   spec.Constraint
	k   *spec.ConstraintCheck
	err error
}

// whyIneligible is the first reason n cannot run a group that needs drivers
// and checks, and its placement failure dimension, or "".
func whyIneligible(n *spec.Node, drivers []string, checks []nodeCheck) (why, dimension string) {
	for _, d := range drivers {
		if !n.HasDriver(d) {
			return "missing driver " + d, spec.DriverDimension(d)
		}
	}
	for _, c := range checks {
		if c.err != nil {
			// Validate refuses such a job; one stored before a rule
			// changed runs nowhere rather than everywhere.
			return fmt.Sprintf("constraint %s is invalid: %v", c.c, c.err), spec.ConstraintDimension(c.c, false)
		}
		if !c.k.Match(n) {
			return fmt.Sprintf("constraint %s not met", c.c), spec.ConstraintDimension(c.c, true)
		}
	}
	return "", ""
}

// noNodeMatches returns the failure to report when no node may run group
// g of a system job and none runs it: every node is down, draining,
// ineligible, or lacks a driver or a constraint. Such a job would
// otherwise read as 0 of 0 instances running. nodes are the nodes'
// states; as the group's allocs.
func noNodeMatches(g *spec.Group, nodes map[string]nodeState, as []*spec.Alloc) (spec.PlacementFailure, bool) {
	if slices.ContainsFunc(as, live) {
		return spec.PlacementFailure{}, false
	}
	counts := map[string]int{}
	for _, st := range nodes {
		switch n := st.node; {
		case n.Status != spec.NodeReady:
			counts[spec.DimensionNotReady]++
		case st.ineligible != "":
			counts[st.dimension]++
		case n.Drain != nil:
			counts[spec.DimensionDraining]++
		case n.Ineligible:
			counts[spec.DimensionIneligible]++
		default:
			return spec.PlacementFailure{}, false
		}
	}
	f := spec.PlacementFailure{Group: g.Name, NodesEvaluated: len(nodes), NoNodeMatched: true}
	for d, n := range counts {
		f.Dimensions = append(f.Dimensions, spec.DimensionFailure{Dimension: d, Nodes: n})
	}
	// The nodes' own states first, then the job's rules, by name.
	states := []string{spec.DimensionNotReady, spec.DimensionDraining, spec.DimensionIneligible}
	rank := func(d string) int {
		if i := slices.Index(states, d); i >= 0 {
			return i
		}
		return len(states)
	}
	slices.SortFunc(f.Dimensions, func(a, b spec.DimensionFailure) int {
		return cmp.Or(cmp.Compare(rank(a.Dimension), rank(b.Dimension)), strings.Compare(a.Dimension, b.Dimension))
	})
	return f, true
}

// system decides for group g of system job j, whose allocs are as.
func (r *reconciler) system(j *spec.Job, g *spec.Group, as []*spec.Alloc, nodes []*spec.Node) {
	states := eligibility(j, g, nodes)
	if f, none := noNodeMatches(g, states, as); none {
		r.res.Unmatched = append(r.res.Unmatched, Unmatched{Job: j.Name, PlacementFailure: f})
	}
	byNode := map[string][]*spec.Alloc{}
	for _, a := range as {
		byNode[a.NodeID] = append(byNode[a.NodeID], a)
	}
	for id, st := range states {
		if st.eligible() && byNode[id] == nil {
			byNode[id] = nil
		}
	}
	ids := make([]string, 0, len(byNode))
	for id, as := range byNode {
		slices.SortFunc(as, oldestFirst)
		ids = append(ids, id)
	}
	slices.Sort(ids)
	index := systemIndexes(ids, byNode, states)

	for _, id := range ids {
		as, st := byNode[id], states[id]
		r.stopLost(as)
		switch {
		case st.eligible() && r.view.drained(id, r.now) && !st.node.Drain.IgnoreSystemJobs:
			r.gc(as, assess(j, g, as).counted)
			r.stopLive(as, spec.CauseDrain, fmt.Sprintf("node %s is drained", st.node.Name))
		case st.eligible() && !st.node.Eligible():
			// Ineligible or draining: what runs there keeps running (and
			// restarting), nothing new is placed.
			r.gc(as, assess(j, g, as).counted)
			if slices.ContainsFunc(as, live) {
				r.instance(j, g, index[id], id, as)
			}
		case st.eligible():
			r.gc(as, assess(j, g, as).counted)
			r.instance(j, g, index[id], id, as)
		case st.down():
			// Lost with its node (stopLost above, once the leader counts
			// the node as down): not placed elsewhere, placed again here
			// when the node is back. Its history still counts then.
			r.gc(as, assess(j, g, as).counted)
		case st.node == nil:
			// The node is gone for good: so is its instance, history too.
			r.stopLive(as, spec.CauseNodeGone, fmt.Sprintf("node %s is no longer registered", cmp.Or(as[0].NodeName, id)))
			for _, a := range as {
				if ended(a) {
					r.res.GC = append(r.res.GC, a.ID)
				}
			}
		default:
			r.gc(as, nil)
			r.stopLive(as, spec.CauseNodeIneligible, "node no longer eligible: "+st.ineligible)
		}
	}
}

// systemIndexes gives each eligible node of ids its instance's index (see
// the comment at the top of this file). byNode holds each node's allocs,
// oldest first.
func systemIndexes(ids []string, byNode map[string][]*spec.Alloc, states map[string]nodeState) map[string]int {
	// holders: which nodes have an alloc that may still run under an index.
	holders := map[int][]string{}
	for _, id := range ids {
		for _, a := range byNode[id] {
			if !ended(a) && !slices.Contains(holders[a.Index], id) {
				holders[a.Index] = append(holders[a.Index], id)
			}
		}
	}
	index := map[string]int{}
	taken := map[int]bool{}
	assign := func(id string, i int) {
		index[id] = i
		taken[i] = true
	}
	// An instance keeps the index of its oldest live alloc, else of its
	// newest alloc, unless another node's alloc that may still run holds it
	// too (two instances placed at once across a partition, say): then both
	// run on, but a replacement takes a free index.
	for _, id := range ids {
		as := byNode[id]
		if len(as) == 0 || !states[id].eligible() {
			continue
		}
		i := as[len(as)-1].Index
		if k := slices.IndexFunc(as, live); k >= 0 {
			i = as[k].Index
		}
		if !taken[i] && !slices.ContainsFunc(holders[i], func(h string) bool { return h != id }) {
			assign(id, i)
		}
	}
	next := 0
	for _, id := range ids {
		if _, done := index[id]; done || !states[id].eligible() {
			continue
		}
		for taken[next] || len(holders[next]) > 0 {
			next++
		}
		assign(id, next)
	}
	return index
}
