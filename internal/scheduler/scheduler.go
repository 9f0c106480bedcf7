package scheduler

import (
	"cmp"
	"slices"
	"strings"

	"github.com/drover-org/drover/internal/spec"
)

// Request asks for one instance of a group to be placed.
type Request struct {
	Job   *spec.Job   // name and priority; must not be nil
	Group *spec.Group // resources and drivers; must not be nil
	Index int
	// Cause and Reason are the reconciler's for the placement, carried
	// through untouched so that the plan can say why each alloc exists.
	Cause  spec.DesiredCause
	Reason string
	// Previous is the ID of the alloc this one replaces, and WaitFor the
	// stopping alloc it waits for (reconcile.Place.WaitFor), carried
	// through untouched.
	Previous string
	WaitFor  string
	// AvoidNode is a node ID to place on only when no other node fits: the
	// node the replaced alloc failed on. "" avoids nothing.
	AvoidNode string
	// Node pins the request to one node ID (a system job's instance on
	// that node); "" lets the scheduler choose.
	Node string
	// DeploymentID and Canary are carried through untouched to the alloc:
	// the deployment that places it, and whether it runs beside the
	// instance it may replace.
	DeploymentID string
	Canary       bool
	// Update, when set, is the strategy by which the alloc's agent judges
	// its health; carried through untouched.
	Update *spec.UpdateStrategy
}

// Input is a snapshot of the cluster and the instances to place.
type Input struct {
	Nodes []*spec.Node
	// Allocs are the existing allocs. A non-terminal alloc reserves its
	// Resources on its NodeID unless its ID is in Freed.
	Allocs []*spec.Alloc
	// Freed holds the IDs of allocs that the same plan stops, so that their
	// room can be reused by the placements in it.
	Freed    map[string]bool
	Requests []Request
	// Jobs are the jobs of the existing allocs, by name, so that their
	// conflicts and replaces rules keep new work off their nodes. Optional:
	// without them only the placing job's own rules are checked.
	Jobs map[string]*spec.Job
	// Cache, when set, carries work from one call to the next; see Cache.
	Cache *Cache
	// Changed, with a Warm Cache, stands for Allocs: what changed since
	// the Cache's previous call. Allocs is then not read.
	Changed *Changes
}

// Changes are the allocs that changed since a Cache's previous call.
type Changes struct {
	// Allocs are the current values of the allocs that are new or
	// changed; Gone the IDs of those that are no longer there.
	Allocs []*spec.Alloc
	Gone   []string
}

// Placement puts one request on one node.
type Placement struct {
	Request  Request
	NodeID   string
	NodeName string
	// Ports are the host ports reserved for the new alloc, in the order of
	// the group's network ports.
	Ports []spec.AllocPort
}

// Eviction is an existing alloc that a placement needs stopped: it was
// preempted by higher-priority work, or replaced (fleet's Replaces). The
// evicted instance waits to be placed again like any other.
type Eviction struct {
	Alloc *spec.Alloc
	// Cause is spec.CausePreempted or spec.CauseDisplaced; Reason says it
	// in words: "preempted by web.api[2] (priority 80 > 50)".
	Cause  spec.DesiredCause
	Reason string
	// By is the request the eviction makes room for.
	By Request
}

// Failure gathers the requests of one (job, group) that found no node, and
// why. PlacementFailure.Missing is len(Requests).
type Failure struct {
	Job      string
	Requests []Request
	spec.PlacementFailure
}

// Result is what Place decided: placements in the order they were made
// (see Place), and one Failure per (job, group) with unplaced requests, in
// the order of each group's first failure.
type Result struct {
	Placements []Placement
	Failures   []Failure
	// Evictions are the allocs to stop so that the placements fit.
	Evictions []Eviction
}

// Place puts each request on the best feasible ready node by the job's
// scoring, affinities and spreads, other than the request's AvoidNode
// unless that is the only one; a pinned request (Request.Node) only on its
// node. When a request finds no node and its job may preempt (or replaces
// other jobs), Place evicts lower-priority instances to make room, and
// says so in Result.Evictions.
//
// Requests are handled by priority (highest first), then job name, group
// name and index, so that when room runs out it is the lower priority work
// that waits, and the outcome does not depend on the order of the input.
// Each placement adds to its node's use before the next request is handled.
//
// Once an unpinned request of a (job, group) finds no node, the later
// unpinned requests of the same (job, group) are not tried: they join its
// Failure. All instances of a group are alike, so index 3 taking room that
// index 2 could not use would only mean that some other, smaller group got
// it instead; keeping a group's instances together also keeps the failure
// readable and costs one scan of the nodes per failing group rather than
// per failing request. Pinned requests each try their own node. The
// instances of a group with a per_alloc host volume are not alike (each
// needs its own volume, data[N], and goes only where that is), so each of
// them is tried, and the group's Failure says which volumes no node has.
//
// Place does not modify its input.
func Place(in Input) Result {
	reqs := slices.Clone(in.Requests)
	slices.SortStableFunc(reqs, compareRequests)

	var s *state
	if in.Cache != nil && len(reqs) == 0 {
		// Most of the leader's passes place nothing: the Cache learns
		// what changed, and its node index waits for a call that places.
		in.Cache.note(in)
		return Result{}
	}
	if in.Cache != nil {
		s = in.Cache.state(in)
	} else {
		s = newState(in)
	}
	var res Result
	failed := map[groupKey]int{} // index into res.Failures
	gaveUp := map[groupKey]bool{}
	explained := map[groupKey]bool{} // an unpinned request's failure is explained
	pins := map[int]*pinFailures{}   // by index into res.Failures
	var gr *groupRun
	for _, r := range reqs {
		key := groupKey{r.Job.Name, r.Group.Name}
		if gr == nil || gr.key != key {
			gr = s.newGroupRun(r)
		}
		gr.index = r.Index
		if r.Node == "" && gaveUp[key] {
			f := &res.Failures[failed[key]]
			f.Requests = append(f.Requests, r)
			f.Missing = len(f.Requests)
			continue
		}
		var n *nodeState
		if r.Node != "" {
			n = gr.pinned(r.Node)
		} else {
			n = gr.pick(r.AvoidNode)
		}
		if n == nil {
			var evict []*spec.Alloc
			if n, evict = gr.preempt(r); n != nil {
				res.Evictions = append(res.Evictions, gr.evict(r, n, evict)...)
			}
		}
		if n != nil {
			ports := gr.charge(n)
			res.Placements = append(res.Placements, Placement{Request: r, NodeID: n.node.ID, NodeName: n.node.Name, Ports: ports})
			continue
		}
		i, ok := failed[key]
		if !ok {
			i = len(res.Failures)
			failed[key] = i
			res.Failures = append(res.Failures, Failure{Job: r.Job.Name, PlacementFailure: spec.PlacementFailure{Group: r.Group.Name}})
		}
		f := &res.Failures[i]
		f.Requests = append(f.Requests, r)
		f.Missing = len(f.Requests)
		if r.Node == "" {
			// Explained now, against the use at the time of the failure.
			f.PlacementFailure = mergeFailures(f.PlacementFailure, gr.explain(s.all), explained[key])
			explained[key] = true
			gaveUp[key] = !gr.perAlloc
			continue
		}
		// Explained once at the end, over all the group's failed pins.
		p := pins[i]
		if p == nil {
			p = &pinFailures{gr: gr}
			pins[i] = p
		}
		if n := s.node(r.Node); n != nil {
			p.nodes = append(p.nodes, n)
			p.indexes = append(p.indexes, r.Index)
		} else {
			p.unknown++
		}
	}
	for i, p := range pins {
		pf := p.explain()
		if p.unknown > 0 {
			pf.Dimensions = append([]spec.DimensionFailure{{Dimension: "unregistered", Nodes: p.unknown}}, pf.Dimensions...)
		}
		f := &res.Failures[i]
		f.PlacementFailure = mergeFailures(f.PlacementFailure, pf, false)
	}
	if s.cache != nil {
		s.cache.keep(s)
	}
	return res
}

// explain says why none of the pinned requests fit their nodes. The
// instances of a per_alloc group each need their own volumes, so each
// node is explained for its own request's index.
func (p *pinFailures) explain() spec.PlacementFailure {
	if !p.gr.perAlloc {
		return p.gr.explain(p.nodes)
	}
	var out spec.PlacementFailure
	for i, n := range p.nodes {
		p.gr.index = p.indexes[i]
		out = mergeFailures(out, p.gr.explain([]*nodeState{n}), false)
	}
	return out
}

// pinFailures are the nodes on which a group's pinned requests failed.
type pinFailures struct {
	gr      *groupRun
	nodes   []*nodeState
	indexes []int // the index of each node's request
	unknown int   // pins to nodes that are not registered
}

type groupKey struct{ job, group string }

// compareRequests orders requests by priority desc, then job name, group
// name and index.
func compareRequests(a, b Request) int {
	return cmp.Or(
		cmp.Compare(b.Job.Priority, a.Job.Priority),
		strings.Compare(a.Job.Name, b.Job.Name),
		strings.Compare(a.Group.Name, b.Group.Name),
		cmp.Compare(a.Index, b.Index),
	)
}
