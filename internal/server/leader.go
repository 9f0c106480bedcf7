package server

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/drover-org/drover/internal/reconcile"
	"github.com/drover-org/drover/internal/registry"
	"github.com/drover-org/drover/internal/scheduler"
	"github.com/drover-org/drover/internal/spec"
)

// schedule is one pass of the leader's loop: snapshot -> reconcile ->
// place -> one fenced commit. It returns when the reconciler next wants to
// run (a delayed replacement), or zero.
func (s *Server) schedule(ctx context.Context, l *registry.Leader, actOnDown bool) (time.Time, error) {
	snap, err := s.reg.Snapshot(ctx)
	if err != nil {
		return time.Time{}, err
	}
	now := time.Now().UTC()
	if actOnDown {
		markNodeDown(snap.Allocs, snap.Nodes)
		s.noteDownSince(snap.Allocs, snap.Nodes, now)
	}
	res := reconcile.Reconcile(reconcile.Input{Jobs: snap.Jobs, Allocs: snap.Allocs, Nodes: snap.Nodes, Now: now})
	plan := &registry.Plan{DeleteAllocs: res.GC}

	freed := map[string]bool{}
	for _, st := range res.Stop {
		a := *st.Alloc
		a.Status = nil
		a.DesiredStatus, a.DesiredReason, a.ModifyTime = spec.DesiredStop, st.Reason, now
		plan.Allocs = append(plan.Allocs, &a)
		freed[a.ID] = true
	}

	reqs := make([]scheduler.Request, len(res.Place))
	for i, p := range res.Place {
		reqs[i] = scheduler.Request{Job: p.Job, Group: p.Group, Index: p.Index, Reason: p.Reason, Previous: p.Previous, AvoidNode: p.AvoidNode}
	}
	out := scheduler.Place(scheduler.Input{Nodes: snap.Nodes, Allocs: snap.Allocs, Freed: freed, Requests: reqs})
	for _, p := range out.Placements {
		r := p.Request
		tasks := make([]*spec.Task, len(r.Group.Tasks))
		for i, t := range r.Group.Tasks {
			c := *t
			tasks[i] = &c
		}
		plan.Allocs = append(plan.Allocs, &spec.Alloc{
			ID:            uuid.NewString(),
			Name:          spec.AllocName(r.Job.Name, r.Group.Name, r.Index),
			Job:           r.Job.Name,
			JobVersion:    r.Job.Version,
			JobType:       r.Job.Type,
			Group:         r.Group.Name,
			Index:         r.Index,
			NodeID:        p.NodeID,
			NodeName:      p.NodeName,
			Resources:     r.Group.Resources(),
			Tasks:         tasks,
			Disconnect:    r.Group.Disconnect,
			DesiredStatus: spec.DesiredRun,
			DesiredReason: r.Reason,
			CreateTime:    now,
			ModifyTime:    now,
		})
	}

	// Record, per job, which version was scheduled and what could not be
	// placed; write only what changed.
	failures := map[string][]spec.PlacementFailure{}
	for _, f := range out.Failures {
		failures[f.Job] = append(failures[f.Job], f.PlacementFailure)
	}
	jobs := map[string]bool{}
	for _, j := range snap.Jobs {
		jobs[j.Name] = true
		want := &spec.JobSchedule{Job: j.Name, JobVersion: j.Version, Failures: failures[j.Name], UpdateTime: now}
		if have := snap.Schedules[j.Name]; have == nil || !sameSchedule(have, want) {
			plan.Schedules = append(plan.Schedules, want)
		}
	}
	for name := range snap.Schedules {
		if !jobs[name] {
			plan.DeleteSchedules = append(plan.DeleteSchedules, name)
		}
	}

	if len(plan.Allocs)+len(plan.DeleteAllocs)+len(plan.Schedules)+len(plan.DeleteSchedules) == 0 {
		return res.NextRun, nil
	}
	if _, err := l.Commit(ctx, plan); err != nil {
		return time.Time{}, err
	}
	s.log.Debug("plan committed", "placed", len(out.Placements), "stopped", len(res.Stop),
		"gc", len(res.GC), "unplaced", len(out.Failures))
	return res.NextRun, nil
}

// noteDownSince stamps each alloc on a down node with when this leader
// first saw that node down. The map lives in the leader's memory: a new
// leader starts counting afresh (later than the truth), which only makes
// a singleton's replacement wait longer, never shorter.
func (s *Server) noteDownSince(allocs []*spec.Alloc, nodes []*spec.Node, now time.Time) {
	s.downMu.Lock()
	defer s.downMu.Unlock()
	if s.downSince == nil {
		s.downSince = map[string]time.Time{}
	}
	seen := map[string]bool{}
	for _, n := range nodes {
		seen[n.ID] = true
		if n.Status == spec.NodeReady {
			delete(s.downSince, n.ID)
		} else if _, ok := s.downSince[n.ID]; !ok {
			s.downSince[n.ID] = now
		}
	}
	for _, a := range allocs {
		if !a.NodeDown {
			continue
		}
		if !seen[a.NodeID] {
			if _, ok := s.downSince[a.NodeID]; !ok {
				s.downSince[a.NodeID] = now
			}
		}
		a.NodeDownSince = s.downSince[a.NodeID]
	}
}

// markNodeDown flags the allocs whose node is down or unknown.
func markNodeDown(allocs []*spec.Alloc, nodes []*spec.Node) {
	up := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		up[n.ID] = n.Status == spec.NodeReady
	}
	for _, a := range allocs {
		a.NodeDown = !up[a.NodeID]
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
