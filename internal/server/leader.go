package server

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/drover-org/drover/internal/planner"
	"github.com/drover-org/drover/internal/reconcile"
	"github.com/drover-org/drover/internal/registry"
	"github.com/drover-org/drover/internal/scheduler"
	"github.com/drover-org/drover/internal/spec"
	"github.com/drover-org/drover/internal/state"
)

// schedule is one pass of the leader's loop: snapshot (from the leader's
// mirror of the registry) -> planner.Decide -> one fenced commit. It
// returns when the reconciler next wants to run (a delayed replacement),
// or zero.
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
		snap.MarkDown()
		nodeEvents = s.noteDownSince(snap, now)
	}
	d := planner.Decide(snap, now, s.placer, s.movePolicy(), uuid.NewString)
	if d.Plan.Empty() {
		if err := s.reg.AppendEvents(ctx, nodeEvents); err != nil {
			s.log.Warn("cannot store node events", "err", err)
		}
		s.revert(ctx, l, d.Reconcile.Reverts)
		return d.Reconcile.NextRun, nil
	}
	d.Plan.Events = append(nodeEvents, d.Plan.Events...)
	rev, err := l.Commit(ctx, d.Plan)
	if err != nil {
		return time.Time{}, err
	}
	s.committed = rev
	s.observePass(d, start, time.Now())
	s.revert(ctx, l, d.Reconcile.Reverts)
	s.log.Debug("plan committed", "placed", len(d.Scheduler.Placements), "stopped", len(d.Reconcile.Stop),
		"evicted", len(d.Scheduler.Evictions), "gc", len(d.Reconcile.GC), "unplaced", len(d.Scheduler.Failures))
	return d.Reconcile.NextRun, nil
}

// readPass reads what a pass over the jobs in only (nil: every job)
// decides from, with every alloc in All.
func readPass(ss *state.Snapshot, only map[string]bool) *planner.Input {
	p := readJobs(ss, only)
	p.All = ss.Allocs()
	if only == nil {
		p.Allocs = slices.Clone(p.All)
	}
	return p
}

// readJobs is readPass without All.
func readJobs(ss *state.Snapshot, only map[string]bool) *planner.Input {
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

// noteDownSince stamps each alloc on a down node with when this leader
// first saw that node down. The map lives in the leader's memory: a new
// leader starts counting afresh (later than the truth), which only makes
// a singleton's replacement wait longer, never shorter.
//
// It returns the history's events for the nodes this leader sees go down
// or come back.
func (s *Server) noteDownSince(snap *planner.Input, now time.Time) []spec.Event {
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
		if _, ok := s.downSince[a.NodeID]; !ok && snap.Node(a.NodeID) == nil {
			s.downSince[a.NodeID] = now // a node that is gone
		}
		a.NodeDownSince = s.downSince[a.NodeID]
	}
	return evs
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
