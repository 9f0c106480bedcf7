package agent

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/drover-org/drover/internal/driver"
	"github.com/drover-org/drover/internal/spec"
)

// The task options around a stop: shutdown_delay, kill_signal and leader.

// shutdownDelay keeps the task h running for its shutdown_delay once it was
// asked to stop: a stop the server decided has taken its services out of
// the catalog, so that clients move away before the task goes. It ends
// early when the task exits (then exited is true: its exit was read from
// h.Wait) or the agent goes away.
func (tr *taskRunner) shutdownDelay(ctx context.Context, h driver.Handle) (exited bool) {
	d := tr.task.ShutdownDelay.Std()
	if d <= 0 {
		return false
	}
	tr.ar.taskEvent(tr.task.Name, spec.EventKilling, fmt.Sprintf("waiting shutdown_delay %s before sending %s", tr.task.ShutdownDelay.Short(), tr.task.KillSignalOf()), nil)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-h.Wait():
		return true
	case <-ctx.Done():
	}
	return false
}

// stopTask stops h with the task's kill_signal, SIGKILL after grace: a
// handle's Stop sends SIGTERM, so another signal goes first through the
// handle's Signal, and Stop with no grace then ends what is left. exited
// says h's exit was read already (shutdownDelay): Stop returns it.
func (tr *taskRunner) stopTask(ctx context.Context, h driver.Handle, grace time.Duration, exited bool) (driver.Exit, error) {
	name := tr.task.KillSignalOf()
	sig := unix.SignalNum(name)
	s, ok := h.(driver.Signaler)
	if exited || name == spec.DefaultKillSignal || sig == 0 || !ok {
		return h.Stop(ctx, grace)
	}
	if err := s.Signal(sig); err != nil {
		return h.Stop(ctx, grace)
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-h.Wait():
	case <-t.C:
	case <-ctx.Done():
	}
	return h.Stop(ctx, 0)
}

// endedLeaderLocked is the name of the alloc's leader task once it has
// ended, else "". Called with mu held.
func (ar *allocRunner) endedLeaderLocked() string {
	for _, t := range ar.alloc.Tasks {
		if t.Leader && ar.status.Tasks[t.Name].State == spec.TaskDead {
			return t.Name
		}
	}
	return ""
}
