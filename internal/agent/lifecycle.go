package agent

import (
	"context"
	"slices"

	"github.com/drover-org/drover/internal/spec"
)

// lifecycle orders the tasks of an alloc that has lifecycle hooks
// (spec.Lifecycle), as Nomad does:
//
//	prestart tasks ---(ephemeral ones ended with status 0, sidecars running)--> main tasks start
//	main tasks all started ---------------------------------------------------> poststart tasks start
//	main tasks all ended -----------------------------------------------------> sidecars (and poststart tasks not yet started) stopped
//	every task but the poststop ones ended -----------------------------------> poststop tasks start
//
// Each task has a stop channel of its own, so that sidecars are stopped
// without stopping the alloc, and poststop tasks still run after the
// alloc was asked to stop. An alloc without hooks has no lifecycle: its
// tasks share the alloc's stop channel and start at once.
//
// Gates open in advance, which mutate calls with the alloc's lock held
// after every change of a task's state; nothing here has a goroutine.
type lifecycle struct {
	// mainGo, postStartGo and postStopGo are closed when the main tasks,
	// the poststart tasks and the poststop tasks may start.
	mainGo, postStartGo, postStopGo chan struct{}
	opened                          map[chan struct{}]bool
	// stops are the tasks' stop channels, closed once each (stopped).
	stops   map[string]chan struct{}
	stopped map[string]bool
	tasks   []*spec.Task
}

// newLifecycle is the lifecycle of an alloc of tasks, or nil when none
// of them is a hook.
func newLifecycle(tasks []*spec.Task) *lifecycle {
	hooks := false
	for _, t := range tasks {
		hooks = hooks || t.Lifecycle != nil
	}
	if !hooks {
		return nil
	}
	lc := &lifecycle{mainGo: make(chan struct{}), postStartGo: make(chan struct{}), postStopGo: make(chan struct{}),
		opened: map[chan struct{}]bool{}, stops: map[string]chan struct{}{}, stopped: map[string]bool{}, tasks: tasks}
	for _, t := range tasks {
		lc.stops[t.Name] = make(chan struct{})
	}
	return lc
}

// stopOf is the channel closed to stop task t.
func (ar *allocRunner) stopOf(t *spec.Task) chan struct{} {
	if ar.lc == nil {
		return ar.stopping
	}
	return ar.lc.stops[t.Name]
}

// gate is the channel that opens when t may start; nil: at once.
func (lc *lifecycle) gate(t *spec.Task) chan struct{} {
	if lc == nil {
		return nil
	}
	switch t.HookOf() {
	case "":
		return lc.mainGo
	case spec.HookPoststart:
		return lc.postStartGo
	case spec.HookPoststop:
		return lc.postStopGo
	}
	return nil
}

func (lc *lifecycle) open(c chan struct{}) {
	if !lc.opened[c] {
		lc.opened[c] = true
		close(c)
	}
}

func (lc *lifecycle) stop(name string) {
	if !lc.stopped[name] {
		lc.stopped[name] = true
		close(lc.stops[name])
	}
}

// stopAll stops every task but the poststop ones, which run once the
// others have ended (an alloc asked to stop runs them too); with
// poststop, those as well. Called with the alloc's lock held.
func (lc *lifecycle) stopAll(poststop bool) {
	if lc == nil {
		return
	}
	for _, t := range lc.tasks {
		if poststop || t.HookOf() != spec.HookPoststop {
			lc.stop(t.Name)
		}
	}
}

// stopPoststop stops the alloc's poststop tasks too, which a stop alone
// leaves to run once the others have ended: for an agent going away, whose
// wait for its allocs must stay bounded by their kill_timeout.
func (ar *allocRunner) stopPoststop() {
	ar.mu.Lock()
	defer ar.mu.Unlock()
	ar.lc.stopAll(true)
}

// advance opens the gates and stops the sidecars that the tasks' states
// st call for. Called with the alloc's lock held.
func (lc *lifecycle) advance(st map[string]*spec.TaskState) {
	if lc == nil {
		return
	}
	preDone, mainStarted, mainEnded, othersEnded := true, true, true, true
	for _, t := range lc.tasks {
		ts := st[t.Name]
		dead := ts.State == spec.TaskDead
		switch t.HookOf() {
		case spec.HookPrestart:
			if t.Lifecycle.Sidecar {
				preDone = preDone && ts.State == spec.TaskRunning
			} else {
				preDone = preDone && dead && !ts.Failed
			}
		case "":
			mainStarted = mainStarted && (!ts.StartedAt.IsZero() || dead)
			mainEnded = mainEnded && dead
		}
		if t.HookOf() != spec.HookPoststop {
			othersEnded = othersEnded && dead
		}
	}
	if preDone {
		lc.open(lc.mainGo)
	}
	if lc.opened[lc.mainGo] && mainStarted && !mainEnded {
		lc.open(lc.postStartGo)
	}
	if mainEnded {
		// What runs beside the main tasks has nothing left to do: the
		// sidecars, and the poststart tasks if the main tasks ended
		// before all of them had started.
		for _, t := range lc.tasks {
			switch {
			case t.HookOf() == spec.HookPoststop:
			case t.Lifecycle != nil && t.Lifecycle.Sidecar,
				t.HookOf() == spec.HookPoststart && !lc.opened[lc.postStartGo]:
				lc.stop(t.Name)
			}
		}
	}
	if othersEnded {
		lc.open(lc.postStopGo)
	}
}

// waiting is how many tasks wait, pending, for a gate that opens only
// once the main tasks run or have ended: those do not keep the alloc
// from running. Called with the alloc's lock held.
func (lc *lifecycle) waiting(st map[string]*spec.TaskState) int {
	if lc == nil {
		return 0
	}
	n := 0
	for _, t := range lc.tasks {
		g := lc.gate(t)
		if (t.HookOf() == spec.HookPoststart || t.HookOf() == spec.HookPoststop) && !lc.opened[g] && st[t.Name].State == spec.TaskPending {
			n++
		}
	}
	return n
}

// awaitTurn waits until the task may start (lifecycle). It returns false,
// the task finished, when it was stopped first, or when the agent goes
// away.
func (tr *taskRunner) awaitTurn(ctx context.Context) bool {
	g := tr.ar.lc.gate(tr.task)
	if g == nil {
		return true
	}
	select {
	case <-g:
		// Its gate and its stop may both be open (a poststop task of an
		// alloc that ran past max_run_duration): the stop wins.
		select {
		case <-tr.stop:
		default:
			return true
		}
	case <-tr.stop:
	case <-ctx.Done():
		return false
	}
	tr.ar.taskDead(tr.task.Name, false, spec.EventKilled, "stopped before start")
	return false
}

// carryEndedHooks keeps, for an alloc started again after an agent
// restart, the state of its hook tasks that had run to their end (prestart
// and poststart ones that are not sidecars): they are not run again.
func carryEndedHooks(alloc *spec.Alloc, st *spec.AllocStatus) {
	if alloc.Status == nil {
		return
	}
	for _, t := range alloc.Tasks {
		prev := alloc.Status.Tasks[t.Name]
		if !t.Ephemeral() || t.HookOf() == spec.HookPoststop || prev == nil || prev.State != spec.TaskDead || prev.Failed {
			continue
		}
		ts := st.Tasks[t.Name]
		ts.State, ts.StartedAt, ts.FinishedAt, ts.ExitCode = spec.TaskDead, prev.StartedAt, prev.FinishedAt, prev.ExitCode
	}
}

// deployedTasks are the tasks whose state judges a deployment: all but the
// hooks that run once to their end.
func deployedTasks(tasks []*spec.Task) []*spec.Task {
	if !slices.ContainsFunc(tasks, (*spec.Task).Ephemeral) {
		return tasks
	}
	return slices.DeleteFunc(slices.Clone(tasks), (*spec.Task).Ephemeral)
}
