package agent

import (
	"context"
	"time"

	"github.com/drover-org/drover/internal/driver"
	"github.com/drover-org/drover/internal/spec"
)

// Re-adoption. A standalone agent that exits or dies leaves its tasks
// running. When it starts again, Run finds those processes
// (findLeftTasks) and keeps them aside, touching nothing, until the first
// answer of the assignment query says what this node should run:
//
//   - an alloc desired "run" with live processes: its runner is built around
//     them (taskRunner.runAdopted): no restart, an "Adopted" event, the
//     restart count and history kept; its tasks with no live process start
//     as usual, except those the server last heard running: they died
//     while no agent ran, and that is recorded and restarted as any death
//     (a "Terminated" event, then the restart policy, counted);
//   - an alloc desired "stop": its processes are adopted and stopped as any
//     stop (SIGTERM, SIGKILL after kill_timeout), and reported;
//   - an alloc already terminal on the server (for example lost while the
//     node was down): its processes are stopped the same way, unreported;
//   - a process that matches no alloc of this node: killed, and logged.
//
// Containers (drivers that are a driver.Finder) go the same ways, found by
// their driver instead of in /proc and removed by it instead of killed; an
// exited one is removed as soon as it is found (findDriverTasks).
//
// Until that first answer comes (the servers may be unreachable) nothing is
// stopped or started, so a control-plane outage across an agent restart
// stops no work either.

// adoptLeft returns, by task name, the left processes of alloc al that its
// runner should adopt, and removes them from a.left. A second process for
// the same task, or one for a task the alloc does not have, is killed: an
// instance never runs twice. died are the tasks that the server last
// heard running and that left no process: they ended while no agent ran.
// Both are empty after the first assignments. Called with a.mu held.
func (a *Agent) adoptLeft(al *spec.Alloc) (adopt map[string]driver.Process, died map[string]bool) {
	if a.left == nil {
		return nil, nil
	}
	left := a.left[al.ID]
	delete(a.left, al.ID)
	tasks := map[string]bool{}
	for _, t := range al.Tasks {
		tasks[t.Name] = true
	}
	adopt = map[string]driver.Process{}
	for _, l := range left { // oldest first
		_, dup := adopt[l.task]
		if !tasks[l.task] || dup {
			a.dropLeft(l, "killed a task process that duplicates or does not belong to its alloc")
			continue
		}
		adopt[l.task] = l.Process
	}
	if a.stoppedOnExit || al.Status == nil {
		// Nothing of it ran yet, or this node's last agent stopped its
		// tasks itself (drover dev): none died.
		return adopt, nil
	}
	died = map[string]bool{}
	for name, ts := range al.Status.Tasks {
		if _, ok := adopt[name]; !ok && tasks[name] && ts.State == spec.TaskRunning {
			died[name] = true
		}
	}
	return adopt, died
}

// settleLeft decides the fate of the left processes that no runner adopted,
// once the first assignments are known. Called with a.mu held.
func (a *Agent) settleLeft(allocs []*spec.Alloc) {
	byID := make(map[string]*spec.Alloc, len(allocs))
	for _, al := range allocs {
		byID[al.ID] = al
	}
	for id, left := range a.left {
		al := byID[id]
		for _, l := range left {
			var task *spec.Task
			if al != nil {
				for _, t := range al.Tasks {
					if t.Name == l.task {
						task = t
					}
				}
			}
			if task == nil {
				a.dropLeft(l, "killed a task process that matches no allocation of this node")
				continue
			}
			a.log.Info("stopping a task process whose allocation is finished",
				"pid", l.PID, "alloc", l.alloc, "task", l.task, "reason", al.DesiredReason)
			go a.stopLeft(l, task)
		}
	}
	a.left = nil
}

// dropLeft kills a left task and logs why, if it was there. A container is
// removed in the background: its daemon may be slow, and a.mu is held.
func (a *Agent) dropLeft(l leftTask, why string) {
	drop := func() {
		if a.removeLeft(l) {
			a.log.Warn(why, "pid", l.PID, "id", l.ID, "alloc", l.alloc, "task", l.task)
		}
	}
	if l.driver == "" {
		drop()
		return
	}
	go drop()
}

// stopLeft stops a left process gracefully: SIGTERM, SIGKILL after the
// task's kill_timeout.
func (a *Agent) stopLeft(l leftTask, task *spec.Task) {
	ad, ok := a.drivers[task.Driver].(driver.Adopter)
	if !ok {
		a.removeLeft(l)
		return
	}
	h, err := ad.Adopt(context.Background(), l.Process, nil, nil)
	if err != nil {
		return // gone already
	}
	grace := task.KillTimeout.Std()
	ctx, cancel := context.WithTimeout(context.Background(), grace+10*time.Second)
	defer cancel()
	h.Stop(ctx, grace)
}

// waitDetached waits, up to within, for every alloc runner to let go of its
// tasks after the task context ended (a standalone agent exiting): each
// stops reading its tasks' output, so that nothing is in flight when the
// next agent re-attaches to it.
func (a *Agent) waitDetached(within time.Duration) {
	a.mu.Lock()
	runners := make([]*allocRunner, 0, len(a.runners))
	for _, ar := range a.runners {
		runners = append(runners, ar)
	}
	a.mu.Unlock()
	t := time.NewTimer(within)
	defer t.Stop()
	for _, ar := range runners {
		select {
		case <-ar.done:
		case <-t.C:
			a.log.Warn("tasks still letting go at agent exit; carrying on")
			return
		}
	}
}
