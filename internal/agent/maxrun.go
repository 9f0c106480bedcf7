package agent

import (
	"context"
	"fmt"
	"time"

	"github.com/drover-org/drover/internal/spec"
)

// A batch or sysbatch group's max_run_duration (spec.Group.MaxRunDuration)
// is kept by the agent that runs the instance, as Nomad's client keeps it:
// counted from when the alloc began on the node, whatever its tasks are
// doing (a task slow to start counts, as its prestart and poststart
// tasks do), and not counting the tasks' kill_timeout. When it has run
// that long, the alloc is stopped with the cause spec.EndMaxRunDuration,
// its poststop tasks are not started, and it ends complete: the instance
// is done, not failed, so it is not rescheduled.

// maxRunStart is when the alloc began on this node: now, or, for an alloc
// an earlier agent ran, its tasks' first start as that agent recorded it.
func maxRunStart(alloc *spec.Alloc, now time.Time) time.Time {
	began := now
	if alloc.Status == nil {
		return began
	}
	for _, ts := range alloc.Status.Tasks {
		if !ts.StartedAt.IsZero() && ts.StartedAt.Before(began) {
			began = ts.StartedAt
		}
	}
	return began
}

// watchMaxRun stops the alloc once it has run for its max_run_duration;
// it returns when the alloc ended first, or when the agent goes away.
func (ar *allocRunner) watchMaxRun(ctx context.Context, began time.Time) {
	d := ar.alloc.MaxRunDuration
	t := time.NewTimer(time.Until(began.Add(d.Std())))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ar.done:
		return
	case <-ctx.Done():
		return
	}
	why := fmt.Sprintf("ran for its group's max_run_duration of %s", d)
	if ar.stopFor(spec.EndMaxRunDuration, why, true) {
		ar.log.Info("alloc ran for its max_run_duration; stopping it", "max_run_duration", d.String())
	}
}
