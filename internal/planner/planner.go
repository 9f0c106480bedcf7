package planner

import (
	"maps"
	"time"

	"github.com/drover-org/drover/internal/reconcile"
	"github.com/drover-org/drover/internal/scheduler"
	"github.com/drover-org/drover/internal/spec"
)

// Input is what one pass decides from: the jobs it looks at (every job,
// or those a change concerned) with their allocs, deployments and
// schedule records; every job and node; and the other allocs, for the
// room they take, as every alloc (All) or as what changed since the
// leader's scheduler cache last saw them (Changed). The values are the
// store's, shared and read-only, but for the allocs MarkDown replaces
// with marked copies.
type Input struct {
	Jobs        []*spec.Job
	Allocs      []*spec.Alloc // the allocs of Jobs, and of the jobs looked at that are gone
	AllJobs     []*spec.Job
	Nodes       []*spec.Node
	Schedules   map[string]*spec.JobSchedule // of the jobs looked at
	Deployments []*spec.Deployment           // of the jobs looked at
	All         []*spec.Alloc                // every alloc; nil when Changed is set
	Changed     *scheduler.Changes
	// NodeAllocs returns every alloc on a node, and Node a node by ID (nil
	// when there is none). Both must be set.
	NodeAllocs func(node string) []*spec.Alloc
	Node       func(id string) *spec.Node
	// marked says MarkDown ran.
	marked bool
}

// Policy is what a pass needs of the server's configuration: when a node
// under memory pressure moves an instance elsewhere (reconcile.Input).
type Policy struct {
	MemoryHighPercent  int
	MemoryMoveInterval time.Duration
}

// Decision is what one pass decides: what the reconciler wants, what the
// scheduler made of it, and the plan that carries both out. The leader
// commits the plan; `drover plan` only reads it.
type Decision struct {
	Reconcile reconcile.Result
	Scheduler scheduler.Result
	Plan      *spec.Plan
}

// Decide computes one pass from in as of now, writing nothing and reading
// no clock, so that any server can answer "what would the leader do?"
// from its own snapshot. Allocs on down nodes must already be marked
// (MarkDown) when the caller wants them replaced. newID gives the ID of
// each new alloc and deployment.
//
// cache, when not nil, is the scheduler's cache carried across passes (the
// leader's); a plan passes nil, since it runs beside the leader. The
// reconciler looks at in's jobs; the scheduler counts every alloc.
func Decide(in *Input, now time.Time, cache *scheduler.Cache, p Policy, newID func() string) Decision {
	rin := reconcile.Input{Jobs: in.Jobs, Allocs: in.Allocs, Nodes: in.Nodes, Deployments: in.Deployments, Now: now,
		NodeAllocs: in.nodeAllocs, Node: in.Node, MemoryHighPercent: p.MemoryHighPercent, MemoryMoveInterval: p.MemoryMoveInterval}
	res := reconcile.Reconcile(rin)
	plan := &spec.Plan{DeleteAllocs: res.GC, DeleteDeployments: res.DeleteDeployments}
	// A new deployment gets its ID here, before its placements copy it.
	for _, d := range res.Deployments {
		if d.ID == "" {
			d.ID = newID()
		}
	}

	// stopped holds the allocs this plan stops: their room is free for its
	// placements, and an alloc must be written at most once per commit
	// (etcd refuses a transaction that puts one key twice).
	stopped := map[string]bool{}
	stop := func(alloc *spec.Alloc, cause spec.DesiredCause, reason string) {
		if stopped[alloc.ID] {
			return
		}
		a := *alloc
		a.Status = nil
		a.DesiredStatus, a.DesiredCause, a.DesiredReason, a.ModifyTime = spec.DesiredStop, cause, reason, now
		plan.Allocs = append(plan.Allocs, &a)
		stopped[a.ID] = true
	}
	for _, st := range res.Stop {
		stop(st.Alloc, st.Cause, st.Reason)
	}

	jobs := make(map[string]*spec.Job, len(in.AllJobs))
	for _, j := range in.AllJobs {
		jobs[j.Name] = j
	}
	// The room of the allocs this plan stops is free for its placements,
	// and so is the room of a stopping alloc that a placement waits for:
	// it is that placement's once the alloc has ended.
	freed := maps.Clone(stopped)
	reqs := make([]scheduler.Request, len(res.Place))
	for i, p := range res.Place {
		reqs[i] = requestOf(p)
		if p.WaitFor != "" {
			freed[p.WaitFor] = true
		}
	}
	out := scheduler.Place(scheduler.Input{Nodes: in.Nodes, Allocs: in.All, Changed: in.Changed, Freed: freed, Requests: reqs, Jobs: jobs, Cache: cache})
	// The scheduler counted the evicted allocs' room as free for the
	// placements that needed it; here they are only told to stop. A
	// placement that waits evicts nothing yet: the pass that writes it
	// does.
	for _, e := range out.Evictions {
		if e.By.WaitFor == "" {
			stop(e.Alloc, e.Cause, e.Reason)
		}
	}
	for _, p := range out.Placements {
		// One that waits for its instance's stopping alloc is scheduled
		// (its room is kept, and a plan shows it) but not written: a
		// later pass, woken by that alloc's end, places it.
		if p.Request.WaitFor != "" {
			continue
		}
		plan.Allocs = append(plan.Allocs, newAlloc(p, newID(), now))
	}
	plan.Deployments = res.Deployments

	// Record, per job, which version was scheduled and what could not be
	// placed; write only what changed.
	failures := map[string][]spec.PlacementFailure{}
	for _, f := range out.Failures {
		failures[f.Job] = append(failures[f.Job], f.PlacementFailure)
	}
	for _, u := range res.Unmatched {
		failures[u.Job] = append(failures[u.Job], u.PlacementFailure)
	}
	for _, j := range in.Jobs {
		want := &spec.JobSchedule{Job: j.Name, JobVersion: j.Version, Failures: failures[j.Name], UpdateTime: now}
		if have := in.Schedules[j.Name]; have == nil || !sameSchedule(have, want) {
			plan.Schedules = append(plan.Schedules, want)
		}
	}
	for name := range in.Schedules {
		if jobs[name] == nil {
			plan.DeleteSchedules = append(plan.DeleteSchedules, name)
		}
	}
	plan.Events = planEvents(plan, in.Deployments, now)
	return Decision{Reconcile: res, Scheduler: out, Plan: plan}
}

// requestOf turns the reconciler's ask into the scheduler's.
func requestOf(p reconcile.Place) scheduler.Request {
	r := scheduler.Request{Job: p.Job, Group: p.Group, Index: p.Index, Cause: p.Cause, Reason: p.Reason, Previous: p.Previous, WaitFor: p.WaitFor, AvoidNode: p.AvoidNode, Node: p.Node,
		Canary: p.Canary, Update: p.Update}
	if p.Deployment != nil {
		r.DeploymentID = p.Deployment.ID
	}
	return r
}

// newAlloc is the alloc a placement creates, with ID id: the group's
// tasks as of the job's version, so that the agent runs what was placed
// even while the job changes.
func newAlloc(p scheduler.Placement, id string, now time.Time) *spec.Alloc {
	r := p.Request
	tasks := make([]*spec.Task, len(r.Group.Tasks))
	for i, t := range r.Group.Tasks {
		c := *t
		tasks[i] = &c
	}
	update := r.Update
	if update == nil && r.DeploymentID != "" {
		update = r.Job.UpdateOf(r.Group)
	}
	return &spec.Alloc{
		ID:             id,
		Name:           spec.AllocName(r.Job.Name, r.Group.Name, r.Index),
		Job:            r.Job.Name,
		Namespace:      r.Job.Namespace,
		JobVersion:     r.Job.Version,
		JobType:        r.Job.Type,
		Payload:        r.Job.Payload,
		Group:          r.Group.Name,
		Index:          r.Index,
		NodeID:         p.NodeID,
		NodeName:       p.NodeName,
		Resources:      r.Group.Resources(),
		Ports:          p.Ports,
		NetworkMode:    networkModeOf(r.Group),
		DNS:            r.Group.NetworkDNS(),
		Hostname:       r.Group.NetworkHostname(),
		Tasks:          tasks,
		Volumes:        r.Group.Volumes,
		Meta:           spec.MergeMeta(r.Job.Meta, r.Group.Meta),
		Disconnect:     r.Group.Disconnect,
		MaxRunDuration: r.Group.MaxRunDuration,
		DeploymentID:   r.DeploymentID,
		Update:         update,
		Canary:         r.Canary,
		DesiredStatus:  spec.DesiredRun,
		DesiredCause:   r.Cause,
		DesiredReason:  r.Reason,
		CreateTime:     now,
		ModifyTime:     now,
	}
}

func sameSchedule(a, b *spec.JobSchedule) bool {
	if a.JobVersion != b.JobVersion || len(a.Failures) != len(b.Failures) {
		return false
	}
	for i := range a.Failures {
		x, y := a.Failures[i], b.Failures[i]
		if x.Group != y.Group || x.Missing != y.Missing || x.String() != y.String() {
			return false
		}
	}
	return true
}

// networkModeOf is the group's network mode as an alloc records it: "" for
// host, so that allocs of host-mode groups read as before.
func networkModeOf(g *spec.Group) string {
	if m := g.NetworkMode(); m != spec.NetworkHost {
		return m
	}
	return ""
}
