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

// allocBegan is when the alloc began on this node: as the agent that took
// it up recorded it (AllocStatus.Began), or now for an alloc new here. A
// status an agent of an older version wrote has no Began: its tasks'
// earliest event stands for it (events are bounded, so it may be later;
// never earlier). A task's StartedAt would not do: each restart of the
// task moves it.
func allocBegan(alloc *spec.Alloc, now time.Time) time.Time {
	if alloc.Status == nil {
		return now
	}
	if !alloc.Status.Began.IsZero() {
		return alloc.Status.Began
	}
	began := now
	for _, ts := range alloc.Status.Tasks {
		for _, e := range ts.Events {
			if !e.Time.IsZero() && e.Time.Before(began) {
				began = e.Time
			}
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
