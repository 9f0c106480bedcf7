package leader

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/drover-org/drover/internal/periodic"
	"github.com/drover-org/drover/internal/reconcile"
	"github.com/drover-org/drover/internal/registry"
	"github.com/drover-org/drover/internal/spec"
	"github.com/drover-org/drover/internal/state"
)

// Children returns the child jobs of job parent in ss, as the periodic
// decision reads them, oldest launch first.
func Children(ss *state.Snapshot, parent string) []periodic.Child {
	var out []periodic.Child
	for _, j := range ss.Jobs() {
		if j.ParentID != parent {
			continue
		}
		allocs := ss.JobAllocs(j.Name)
		var nodes []*spec.Node
		if j.Type.PerNode() {
			nodes = ss.Nodes()
		}
		c := periodic.Child{Name: j.Name, Launch: j.LaunchTime}
		switch reconcile.Summarize(j, allocs, nodes, ss.Schedule(j.Name)).State {
		case spec.JobComplete, spec.JobFailed, spec.JobStopped:
			for _, a := range allocs {
				if a.Status != nil && a.Status.UpdateTime.After(c.Ended) {
					c.Ended = a.Status.UpdateTime
				}
			}
		default:
			c.Running = true
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b periodic.Child) int { return a.Launch.Compare(b.Launch) })
	return out
}

// launch carries out the periodic decisions for the jobs in ss (those in
// only, when not nil): each due child job is written, fenced on this
// term, as a new job that must not exist yet, so that two passes never
// launch one tick twice. It returns the earliest next tick, or zero.
func (ls *leadership) launch(ctx context.Context, ss *state.Snapshot, only map[string]bool, now time.Time) time.Time {
	var next time.Time
	var jobs []*spec.Job
	if only == nil {
		jobs = ss.Jobs()
	} else {
		for _, name := range slices.Sorted(maps.Keys(only)) {
			if j := ss.Job(name); j != nil {
				jobs = append(jobs, j)
			}
		}
	}
	for _, j := range jobs {
		if j.Periodic == nil || j.Stopped {
			continue
		}
		sched, ps := periodic.Parse(j.Periodic, time.LoadLocation)
		if ps != nil {
			// Validation refuses such a job; one stored before would
			// launch nothing, and says so.
			ls.log.Warn("periodic job does not parse; nothing is launched", "job", j.Name, "err", ps)
			continue
		}
		d := sched.Decide(periodic.Input{Periodic: j.Periodic, Submitted: j.SubmitTime, Children: Children(ss, j.Name), Now: now})
		if !d.Next.IsZero() && (next.IsZero() || d.Next.Before(next)) {
			next = d.Next
		}
		if !d.Skipped.IsZero() && ls.skipped[j.Name] != d.Skipped {
			if ls.skipped == nil {
				ls.skipped = map[string]time.Time{}
			}
			ls.skipped[j.Name] = d.Skipped
			ls.log.Info("periodic launch skipped", "job", j.Name, "tick", d.Skipped, "why", d.Why)
		}
		if d.Launch.IsZero() {
			continue
		}
		child := periodic.ChildJob(j, d.Launch)
		_, err := ls.term.PutJob(ctx, child, 0, fmt.Sprintf("periodic launch of %s for %s", j.Name, d.Launch.Format(time.RFC3339)))
		var exists *registry.CheckIndexError
		switch {
		case errors.As(err, &exists):
			// Launched already: this pass's snapshot was older.
		case err != nil:
			ls.log.Warn("periodic launch failed; the next pass tries again", "job", j.Name, "child", child.Name, "err", err)
		default:
			ls.log.Info("periodic job launched", "job", j.Name, "child", child.Name)
		}
	}
	return next
}
