package leader

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/drover-org/drover/internal/planner"
	"github.com/drover-org/drover/internal/reconcile"
	"github.com/drover-org/drover/internal/scheduler"
	"github.com/drover-org/drover/internal/spec"
	"github.com/drover-org/drover/internal/state"
)

// leadership is one term's memory: what its passes carry from one to the
// next. A new term starts with a new one.
type leadership struct {
	*Loop
	term    Term
	elected time.Time
	// committed is the revision of the term's last commit (or, before its
	// first, the registry's when it was elected), which its next pass
	// must see.
	committed int64
	// placer carries the scheduler's work from one pass to the next, and
	// placerRev is the revision of the allocs it last saw.
	placer    *scheduler.Cache
	placerRev int64
	downSince map[string]time.Time // node -> when this term first saw it down
	downSeen  []*spec.Node         // the nodes downSince was last brought up to date with
	// firstPlaced is, per job, the newest version whose placement was
	// timed (SubmitToPlaced).
	firstPlaced map[string]uint64
	// skipped is, per periodic job, the last tick logged as skipped.
	skipped map[string]time.Time
	// sweep is the periodic resync under way, if any.
	sweep sweep
}

func newLeadership(l *Loop, t Term, elected time.Time) *leadership {
	return &leadership{Loop: l, term: t, elected: elected, placer: scheduler.NewCache()}
}

// snapshotWait bounds how long a pass waits for the server's state.
const snapshotWait = 10 * time.Second

// schedule is one pass: snapshot (from the server's copy of the
// registry) -> planner.Decide -> one fenced commit. It returns when the
// reconciler next wants to run (a delayed replacement), or zero.
//
// only, when not nil, limits the pass to those jobs: the jobs the changes
// since the last pass concern (State.TakeDirty), and the next slice of a
// sweep under way. The scheduler still sees every alloc.
func (ls *leadership) schedule(ctx context.Context, actOnDown bool, only map[string]bool) (time.Time, error) {
	// The state answers once it holds this term's last commit, so a pass
	// never re-decides what the previous one wrote, and every change the
	// server's watch has published, so that the change that woke the pass
	// is in it.
	start := time.Now()
	sctx, cancel := context.WithTimeout(ctx, snapshotWait)
	ss, err := ls.cfg.State.Snapshot(sctx, max(ls.committed, ls.cfg.State.SeenRev()))
	cancel()
	if err != nil {
		return time.Time{}, err
	}
	ls.cfg.Metrics.SnapshotSeconds.Observe(time.Since(start).Seconds())
	if only == nil {
		ls.sweep.stop() // this pass looks at every job
	} else {
		only = ls.sweep.slice(ss, only)
	}
	now := time.Now().UTC()
	snap := passFor(ss, only, ls.placer, ls.placerRev)
	ls.placerRev = ss.Rev
	var nodeEvents []spec.Event
	if actOnDown {
		snap.MarkDown()
		nodeEvents = ls.noteDownSince(snap, now)
	}
	d := planner.Decide(snap, now, ls.placer, ls.cfg.Policy, uuid.NewString)
	// Periodic launches are new jobs, which the next pass places.
	if tick := ls.launch(ctx, ss, only, now); !tick.IsZero() && (d.Reconcile.NextRun.IsZero() || tick.Before(d.Reconcile.NextRun)) {
		d.Reconcile.NextRun = tick
	}
	if d.Plan.Empty() {
		if err := ls.cfg.Registry.AppendEvents(ctx, nodeEvents); err != nil {
			ls.log.Warn("cannot store node events", "err", err)
		}
		ls.revert(ctx, d.Reconcile.Reverts)
		return d.Reconcile.NextRun, nil
	}
	d.Plan.Events = append(nodeEvents, d.Plan.Events...)
	rev, err := ls.term.Commit(ctx, d.Plan)
	if err != nil {
		return time.Time{}, err
	}
	ls.committed = rev
	ls.observePass(d, start, time.Now())
	ls.revert(ctx, d.Reconcile.Reverts)
	ls.log.Debug("plan committed", "placed", len(d.Scheduler.Placements), "stopped", len(d.Reconcile.Stop),
		"evicted", len(d.Scheduler.Evictions), "gc", len(d.Reconcile.GC), "unplaced", len(d.Scheduler.Failures))
	return d.Reconcile.NextRun, nil
}

// ReadPass reads what a pass over the jobs in only (nil: every job)
// decides from, with every alloc in All: the leader's passes, and `drover
// plan` on any server.
func ReadPass(ss *state.Snapshot, only map[string]bool) *planner.Input {
	p := ReadJobs(ss, only)
	p.All = ss.Allocs()
	if only == nil {
		p.Allocs = slices.Clone(p.All)
	}
	return p
}

// ReadJobs is ReadPass without All.
func ReadJobs(ss *state.Snapshot, only map[string]bool) *planner.Input {
	p := &planner.Input{AllJobs: ss.Jobs(), Nodes: ss.Nodes(), Schedules: map[string]*spec.JobSchedule{}, NodeAllocs: ss.NodeAllocs, Node: ss.Node}
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
func passFor(ss *state.Snapshot, only map[string]bool, cache *scheduler.Cache, since int64) *planner.Input {
	if only != nil && cache.Warm() {
		if ch := changesFor(ss, since); ch != nil {
			p := ReadJobs(ss, only)
			p.Changed = ch
			return p
		}
	}
	return ReadPass(ss, only)
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

// noteDownSince stamps each alloc on a down node with when this term
// first saw that node down. The map lives in the leader's memory: a new
// leader starts counting afresh (later than the truth), which only makes
// a singleton's replacement wait longer, never shorter.
//
// It returns the history's events for the nodes this term sees go down
// or come back.
func (ls *leadership) noteDownSince(snap *planner.Input, now time.Time) []spec.Event {
	if ls.downSince == nil {
		ls.downSince = map[string]time.Time{}
	}
	var evs []spec.Event
	if !slices.Equal(snap.Nodes, ls.downSeen) {
		// Only a change of some node's value can change its status.
		for _, n := range snap.Nodes {
			_, wasDown := ls.downSince[n.ID]
			if n.Status == spec.NodeReady {
				if wasDown {
					evs = append(evs, spec.Event{Time: now, Topic: spec.TopicNode, Type: spec.EventReady, Node: n.Name, Message: "heartbeats again"})
					delete(ls.downSince, n.ID)
				}
			} else if !wasDown {
				ls.downSince[n.ID] = now
				evs = append(evs, spec.Event{Time: now, Topic: spec.TopicNode, Type: spec.EventDown, Node: n.Name,
					Message: fmt.Sprintf("no heartbeat within its TTL (the node TTL, %s, or longer when its server takes many nodes); its instances are replaced elsewhere", ls.cfg.NodeTTL)})
			}
		}
		ls.downSeen = snap.Nodes
	}
	for _, a := range snap.Allocs {
		if !a.NodeDown {
			continue
		}
		if _, ok := ls.downSince[a.NodeID]; !ok && snap.Node(a.NodeID) == nil {
			ls.downSince[a.NodeID] = now // a node that is gone
		}
		a.NodeDownSince = ls.downSince[a.NodeID]
	}
	return evs
}

// revert carries out the reconciler's reverts after failed deployments:
// the version's spec becomes the job's next version, fenced by this term
// and the job's ModifyIndex. A revert that fails is asked for again by
// the next pass, which sees the same failed deployment.
func (ls *leadership) revert(ctx context.Context, reverts []reconcile.Revert) {
	for _, rv := range reverts {
		target, err := ls.cfg.Registry.GetJobVersion(ctx, rv.Job, rv.ToVersion)
		if err != nil {
			ls.log.Warn("revert: cannot read the version to revert to", "job", rv.Job, "version", rv.ToVersion, "err", err)
			continue
		}
		stored, err := ls.term.PutJob(ctx, target.SpecOnly(), rv.CheckIndex, fmt.Sprintf("reverted to version %d after %s", rv.ToVersion, rv.Reason))
		if err != nil {
			ls.log.Warn("revert failed", "job", rv.Job, "to_version", rv.ToVersion, "err", err)
			continue
		}
		ls.log.Info("job reverted", "job", rv.Job, "to_version", rv.ToVersion, "now_version", stored.Version, "why", rv.Reason)
	}
}

// observePass records a committed pass that began at start: counts, its
// duration, and for each job version placed for the first time in this
// term, the time from its submit.
func (ls *leadership) observePass(d planner.Decision, start, now time.Time) {
	m := ls.cfg.Metrics
	placed := 0
	for _, p := range d.Scheduler.Placements {
		if p.Request.WaitFor == "" { // the others are placed by a later pass
			placed++
		}
	}
	m.Placements.Add(float64(placed))
	m.Evictions.Add(float64(len(d.Scheduler.Evictions)))
	m.Unplaced.Add(float64(len(d.Scheduler.Failures)))
	m.PassSeconds.Observe(now.Sub(start).Seconds())
	if ls.firstPlaced == nil {
		ls.firstPlaced = map[string]uint64{}
	}
	for _, p := range d.Scheduler.Placements {
		j := p.Request.Job
		if p.Request.WaitFor != "" || ls.firstPlaced[j.Name] >= j.Version || j.SubmitTime.Before(ls.elected) {
			continue
		}
		ls.firstPlaced[j.Name] = j.Version
		m.SubmitToPlaced.Observe(now.Sub(j.SubmitTime).Seconds())
	}
}
