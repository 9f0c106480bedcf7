package server

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/drover-org/drover/internal/reconcile"
	"github.com/drover-org/drover/internal/registry"
	"github.com/drover-org/drover/internal/scheduler"
	"github.com/drover-org/drover/internal/spec"
	"github.com/drover-org/drover/internal/state"
)

// schedule is one pass of the leader's loop: snapshot (from the leader's
// mirror of the registry) -> decide -> one fenced commit. It returns when the reconciler next wants to run (a
// delayed replacement), or zero.
//
// only, when not nil, limits the pass to those jobs: the jobs the changes
// since the last pass concern (see hub.takeDirty). The scheduler still
// sees every alloc.
func (s *Server) schedule(ctx context.Context, l *registry.Leader, actOnDown bool, only map[string]bool) (time.Time, error) {
	// The mirror answers once it holds this leader's last commit, so a
	// pass never re-decides what the previous one wrote, and every change
	// the server's watch has published, so that the change that woke the
	// pass is in it.
	start := time.Now()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	ss, err := s.mirror.Load().Snapshot(sctx, max(s.committed, s.hub.seenRev()))
	cancel()
	if err != nil {
		return time.Time{}, err
	}
	s.metrics.SnapshotSeconds.Observe(time.Since(start).Seconds())
	now := time.Now().UTC()
	snap := passFor(ss, only, s.placer, s.placerRev)
	s.placerRev = ss.Rev
	var nodeEvents []spec.Event
	if actOnDown {
		snap.markDown()
		nodeEvents = s.noteDownSince(snap, now)
	}
	d := decide(snap, now, s.placer, s.movePolicy())
	if d.plan.Empty() {
		if err := s.reg.AppendEvents(ctx, nodeEvents); err != nil {
			s.log.Warn("cannot store node events", "err", err)
		}
		s.revert(ctx, l, d.reconcile.Reverts)
		return d.reconcile.NextRun, nil
	}
	d.plan.Events = append(nodeEvents, d.plan.Events...)
	rev, err := l.Commit(ctx, d.plan)
	if err != nil {
		return time.Time{}, err
	}
	s.committed = rev
	s.observePass(d, start, time.Now())
	s.revert(ctx, l, d.reconcile.Reverts)
	s.log.Debug("plan committed", "placed", len(d.sched.Placements), "stopped", len(d.reconcile.Stop),
		"evicted", len(d.sched.Evictions), "gc", len(d.reconcile.GC), "unplaced", len(d.sched.Failures))
	return d.reconcile.NextRun, nil
}

// decision is what one scheduling pass decides: what the reconciler wants,
// what the scheduler made of it, and the plan that carries both out. The
// leader commits the plan; `drover plan` only reads it.
type decision struct {
	reconcile reconcile.Result
	sched     scheduler.Result
	plan      *spec.Plan
}

// passState is what one pass decides from: the jobs it looks at (every
// job, or those a change concerned) with their allocs, deployments and
// schedule records; every job and node; and the other allocs, for the
// room they take, as every alloc (All) or as what changed since the
// leader's scheduler cache last saw them (Changed). The values are the
// store's, shared and read-only, but for the allocs markDown replaces
// with marked copies.
type passState struct {
	Rev         int64
	Jobs        []*spec.Job
	Allocs      []*spec.Alloc // the allocs of Jobs, and of the jobs looked at that are gone
	AllJobs     []*spec.Job
	Nodes       []*spec.Node
	Schedules   map[string]*spec.JobSchedule // of the jobs looked at
	Deployments []*spec.Deployment           // of the jobs looked at
	All         []*spec.Alloc                // every alloc; nil when Changed is set
	Changed     *scheduler.Changes
	// onNode returns every alloc on a node, and node a node by ID (nil
	// when there is none).
	onNode func(node string) []*spec.Alloc
	node   func(id string) *spec.Node
	// marked says markDown ran.
	marked bool
}

// readPass reads what a pass over the jobs in only (nil: every job)
// decides from, with every alloc in All.
func readPass(ss *state.Snapshot, only map[string]bool) *passState {
	p := readJobs(ss, only)
	p.All = ss.Allocs()
	if only == nil {
		p.Allocs = slices.Clone(p.All)
	}
	return p
}

// readJobs is readPass without All.
func readJobs(ss *state.Snapshot, only map[string]bool) *passState {
	p := &passState{Rev: ss.Rev, AllJobs: ss.Jobs(), Nodes: ss.Nodes(), Schedules: map[string]*spec.JobSchedule{}, onNode: ss.NodeAllocs, node: ss.Node}
	if only == nil {
		p.Jobs, p.Deployments = p.AllJobs, ss.Deployments()
		for _, js := range ss.Schedules() {
			p.Schedules[js.Job] = js
		}
		p.Allocs = []*spec.Alloc{}
		return p
	}
	p.Jobs, p.Allocs, p.Deployments = []*spec.Job{}, []*spec.Alloc{}, []*spec.Deployment{}
	for _, name := range slices.Sorted(maps.Keys(only)) {
		if j := ss.Job(name); j != nil {
			p.Jobs = append(p.Jobs, j)
		}
		p.Allocs = append(p.Allocs, ss.JobAllocs(name)...)
		p.Deployments = append(p.Deployments, ss.JobDeployments(name)...)
		if js := ss.Schedule(name); js != nil {
			p.Schedules[name] = js
		}
	}
	return p
}

// passFor reads a pass of the leader's, whose scheduler cache last saw
// the allocs at revision since: the cache is told what changed since,
// when the store still knows; otherwise it is given every alloc.
func passFor(ss *state.Snapshot, only map[string]bool, cache *scheduler.Cache, since int64) *passState {
	if only != nil && cache.Warm() {
		if ch := changesFor(ss, since); ch != nil {
			p := readJobs(ss, only)
			p.Changed = ch
			return p
		}
	}
	return readPass(ss, only)
}

// changesFor is what changed in ss since the leader's scheduler cache
// last saw the allocs at revision since; nil when the store no longer
// knows.
func changesFor(ss *state.Snapshot, since int64) *scheduler.Changes {
	ids, ok := ss.AllocsChanged(since)
	if !ok {
		return nil
	}
	c := &scheduler.Changes{Allocs: []*spec.Alloc{}}
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		if a := ss.Alloc(id); a != nil {
			c.Allocs = append(c.Allocs, a)
		} else {
			c.Gone = append(c.Gone, id)
		}
	}
	return c
}

// markDown flags the allocs of the pass's jobs whose node is down or
// unknown (markNodeDown), and the ones the node rules read from then on.
func (p *passState) markDown() {
	p.marked = true
	for i, a := range p.Allocs {
		if !p.ready(a.NodeID) {
			p.Allocs[i] = downCopy(a)
		}
	}
}

// downCopy is a copy of a flagged NodeDown: the store's values are shared.
func downCopy(a *spec.Alloc) *spec.Alloc {
	c := *a
	c.NodeDown = true
	return &c
}

func (p *passState) ready(id string) bool {
	n := p.node(id)
	return n != nil && n.Status == spec.NodeReady
}

// nodeAllocs returns every alloc on a node, marked as markDown marks.
func (p *passState) nodeAllocs(id string) []*spec.Alloc {
	as := p.onNode(id)
	if !p.marked || p.ready(id) {
		return as
	}
	marked := make([]*spec.Alloc, len(as))
	for i, a := range as {
		marked[i] = downCopy(a)
	}
	return marked
}

// decide computes one pass from a snapshot as of now, writing nothing and
// reading no clock, so that any server can answer "what would the leader
// do?" from its own snapshot. Allocs on down nodes must already be marked
// (markNodeDown) when the caller wants them replaced.
//
// cache, when not nil, is the scheduler's cache carried across passes (the
// leader's); a plan passes nil, since it runs beside the leader. The
// reconciler looks at snap's jobs; the scheduler counts every alloc.
func decide(snap *passState, now time.Time, cache *scheduler.Cache, mp movePolicy) decision {
	in := reconcile.Input{Jobs: snap.Jobs, Allocs: snap.Allocs, Nodes: snap.Nodes, Deployments: snap.Deployments, Now: now,
		NodeAllocs: snap.nodeAllocs, Node: snap.node, MemoryHighPercent: mp.memoryHighPercent, MemoryMoveInterval: mp.memoryMoveInterval}
	res := reconcile.Reconcile(in)
	plan := &spec.Plan{DeleteAllocs: res.GC, DeleteDeployments: res.DeleteDeployments}
	// A new deployment gets its ID here, before its placements copy it.
	for _, d := range res.Deployments {
		if d.ID == "" {
			d.ID = uuid.NewString()
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

	jobs := make(map[string]*spec.Job, len(snap.AllJobs))
	for _, j := range snap.AllJobs {
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
	out := scheduler.Place(scheduler.Input{Nodes: snap.Nodes, Allocs: snap.All, Changed: snap.Changed, Freed: freed, Requests: reqs, Jobs: jobs, Cache: cache})
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
		plan.Allocs = append(plan.Allocs, newAlloc(p, now))
	}
	plan.Deployments = res.Deployments

	// Record, per job, which version was scheduled and what could not be
	// placed; write only what changed.
	failures := map[string][]spec.PlacementFailure{}
	for _, f := range out.Failures {
		failures[f.Job] = append(failures[f.Job], f.PlacementFailure)
	}
	for _, j := range in.Jobs {
		want := &spec.JobSchedule{Job: j.Name, JobVersion: j.Version, Failures: failures[j.Name], UpdateTime: now}
		if have := snap.Schedules[j.Name]; have == nil || !sameSchedule(have, want) {
			plan.Schedules = append(plan.Schedules, want)
		}
	}
	for name := range snap.Schedules {
		if jobs[name] == nil {
			plan.DeleteSchedules = append(plan.DeleteSchedules, name)
		}
	}
	plan.Events = planEvents(plan, snap, now)
	return decision{reconcile: res, sched: out, plan: plan}
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

// newAlloc is the alloc a placement creates: the group's tasks as of the
// job's version, so that the agent runs what was placed even while the job
// changes.
func newAlloc(p scheduler.Placement, now time.Time) *spec.Alloc {
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
		ID:            uuid.NewString(),
		Name:          spec.AllocName(r.Job.Name, r.Group.Name, r.Index),
		Job:           r.Job.Name,
		Namespace:     r.Job.Namespace,
		JobVersion:    r.Job.Version,
		JobType:       r.Job.Type,
		Group:         r.Group.Name,
		Index:         r.Index,
		NodeID:        p.NodeID,
		NodeName:      p.NodeName,
		Resources:     r.Group.Resources(),
		Ports:         p.Ports,
		Tasks:         tasks,
		Disconnect:    r.Group.Disconnect,
		DeploymentID:  r.DeploymentID,
		Update:        update,
		Canary:        r.Canary,
		DesiredStatus: spec.DesiredRun,
		DesiredCause:  r.Cause,
		DesiredReason: r.Reason,
		CreateTime:    now,
		ModifyTime:    now,
	}
}

// noteDownSince stamps each alloc on a down node with when this leader
// first saw that node down. The map lives in the leader's memory: a new
// leader starts counting afresh (later than the truth), which only makes
// a singleton's replacement wait longer, never shorter.
//
// It returns the history's events for the nodes this leader sees go down
// or come back.
func (s *Server) noteDownSince(snap *passState, now time.Time) []spec.Event {
	s.downMu.Lock()
	defer s.downMu.Unlock()
	if s.downSince == nil {
		s.downSince = map[string]time.Time{}
	}
	var evs []spec.Event
	if !slices.Equal(snap.Nodes, s.downSeen) {
		// Only a change of some node's value can change its status.
		for _, n := range snap.Nodes {
			_, wasDown := s.downSince[n.ID]
			if n.Status == spec.NodeReady {
				if wasDown {
					evs = append(evs, spec.Event{Time: now, Topic: spec.TopicNode, Type: spec.EventReady, Node: n.Name, Message: "heartbeats again"})
					delete(s.downSince, n.ID)
				}
			} else if !wasDown {
				s.downSince[n.ID] = now
				evs = append(evs, spec.Event{Time: now, Topic: spec.TopicNode, Type: spec.EventDown, Node: n.Name,
					Message: fmt.Sprintf("no heartbeat within the node TTL (%s); its instances are replaced elsewhere", s.cfg.NodeTTL)})
			}
		}
		s.downSeen = snap.Nodes
	}
	for _, a := range snap.Allocs {
		if !a.NodeDown {
			continue
		}
		if _, ok := s.downSince[a.NodeID]; !ok && snap.node(a.NodeID) == nil {
			s.downSince[a.NodeID] = now // a node that is gone
		}
		a.NodeDownSince = s.downSince[a.NodeID]
	}
	return evs
}

// markNodeDown flags the allocs whose node is down or unknown, replacing
// each in allocs with a marked copy: the values are the store's, which
// never hold the flag.
func markNodeDown(allocs []*spec.Alloc, nodes []*spec.Node) {
	up := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		up[n.ID] = n.Status == spec.NodeReady
	}
	for i, a := range allocs {
		if !up[a.NodeID] && !a.NodeDown {
			allocs[i] = downCopy(a)
		}
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

// revert carries out the reconciler's reverts after failed deployments:
// the version's spec becomes the job's next version, fenced by this
// leader's term and the job's ModifyIndex. A revert that fails is asked for
// again by the next pass, which sees the same failed deployment.
func (s *Server) revert(ctx context.Context, l *registry.Leader, reverts []reconcile.Revert) {
	for _, rv := range reverts {
		target, err := s.reg.GetJobVersion(ctx, rv.Job, rv.ToVersion)
		if err != nil {
			s.log.Warn("revert: cannot read the version to revert to", "job", rv.Job, "version", rv.ToVersion, "err", err)
			continue
		}
		stored, err := l.PutJob(ctx, target.SpecOnly(), rv.CheckIndex, fmt.Sprintf("reverted to version %d after %s", rv.ToVersion, rv.Reason))
		if err != nil {
			s.log.Warn("revert failed", "job", rv.Job, "to_version", rv.ToVersion, "err", err)
			continue
		}
		s.log.Info("job reverted", "job", rv.Job, "to_version", rv.ToVersion, "now_version", stored.Version, "why", rv.Reason)
	}
}
