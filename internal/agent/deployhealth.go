package agent

import (
	"fmt"
	"strings"
	"time"

	"github.com/drover-org/drover/internal/spec"
)

// Deployment health. An alloc placed with an update strategy (by a
// deployment, Alloc.DeploymentID, or by a move such as a drain's;
// Alloc.Update) gets one verdict from its agent, which the deployment or
// move waits on before it replaces more instances. The verdict
// goes out in AllocStatus.DeploymentHealth and is final:
//
//	waiting --every task running (and, with health_check "checks",
//	   |      every check passing) for min_healthy_time------------> healthy
//	   +----a task exits (to be restarted, or dead)-----------------> unhealthy
//	   +----healthy_deadline since the first task start, unhealthy--> unhealthy
//
// "Healthy since" is the latest of the tasks' starts and of their checks'
// turns to passing, all of which are in the reported status: a check that
// stops passing starts the clock over, and an agent restarted meanwhile
// (which adopts the same processes, with their start times and checks'
// states) carries the clock on instead of starting it over. A verdict
// given is in the status the next agent reads back, so it is never given
// twice. An alloc asked to stop before its verdict gets none.
//
// judgeDeployment is the pure decision; allocRunner (judgeDeploymentLocked)
// runs it on every change of the alloc's status, and at the time it asks
// for, with one timer per alloc.

// judgeDeployment returns the deployment health verdict on an alloc with
// strategy u, tasks and status st at now; nil when it is not due yet, and
// then when to judge again if nothing changes first (zero: only at the
// next change). exits holds, by task, why a task exited since the agent
// started the alloc, as its runner noted it.
func judgeDeployment(u *spec.UpdateStrategy, tasks []*spec.Task, st *spec.AllocStatus, exits map[string]string, now time.Time) (*spec.DeploymentHealth, time.Time) {
	unhealthy := func(reason string) (*spec.DeploymentHealth, time.Time) {
		return &spec.DeploymentHealth{Healthy: false, Time: now, Reason: reason}, time.Time{}
	}
	var first time.Time // the first start of any task
	for _, t := range tasks {
		ts := st.Tasks[t.Name]
		if ts == nil {
			continue
		}
		dead := ts.State == spec.TaskDead
		switch why := exits[t.Name]; {
		case why != "" && dead:
			return unhealthy(fmt.Sprintf("task %s died: %s", t.Name, why))
		case why != "":
			return unhealthy(fmt.Sprintf("task %s restarted: %s", t.Name, why))
		// With no exit noted: a status read back after an agent restart,
		// or a task that failed without a restart policy's say (no
		// driver for it, an image that cannot be had).
		case dead:
			return unhealthy(fmt.Sprintf("task %s died: %s", t.Name, lastMessage(ts)))
		case ts.Restarts > 0:
			return unhealthy(fmt.Sprintf("task %s restarted: %s", t.Name, restartReason(ts)))
		}
		if !ts.StartedAt.IsZero() && (first.IsZero() || ts.StartedAt.Before(first)) {
			first = ts.StartedAt
		}
	}

	since, blocker := healthySince(u, tasks, st)
	var healthyAt, deadline time.Time
	if blocker == "" {
		healthyAt = since.Add(u.MinHealthyTime.Std())
	}
	if !first.IsZero() && u.HealthyDeadline > 0 {
		deadline = first.Add(u.HealthyDeadline.Std())
	}
	// Healthy in time wins over a deadline that a late timer judges after
	// the fact.
	if !healthyAt.IsZero() && !now.Before(healthyAt) && (deadline.IsZero() || !deadline.Before(healthyAt)) {
		return &spec.DeploymentHealth{Healthy: true, Time: now}, time.Time{}
	}
	if !deadline.IsZero() && !now.Before(deadline) {
		if blocker == "" {
			blocker = fmt.Sprintf("healthy for only %s of min_healthy_time %s",
				now.Sub(since).Round(time.Millisecond), u.MinHealthyTime.Short())
		}
		return unhealthy(fmt.Sprintf("not healthy within healthy_deadline %s: %s", u.HealthyDeadline.Short(), blocker))
	}
	wake := deadline
	if !healthyAt.IsZero() && (wake.IsZero() || healthyAt.Before(wake)) {
		wake = healthyAt
	}
	return nil, wake
}

// healthySince returns since when every task has run and, with
// health_check "checks", every check has passed; or, when that is not so
// now, the first thing in job file order that is not, in words.
func healthySince(u *spec.UpdateStrategy, tasks []*spec.Task, st *spec.AllocStatus) (since time.Time, blocker string) {
	later := func(t time.Time) {
		if t.After(since) {
			since = t
		}
	}
	for _, t := range tasks {
		ts := st.Tasks[t.Name]
		if ts == nil || ts.State != spec.TaskRunning {
			return time.Time{}, "task " + t.Name + " not running"
		}
		later(ts.StartedAt)
		if u.HealthCheck == spec.HealthTaskStates {
			continue
		}
		n := 0
		for _, s := range t.Services {
			n += len(s.Checks)
		}
		if len(ts.Checks) != n {
			return time.Time{}, "task " + t.Name + "'s checks not started"
		}
		for _, c := range ts.Checks {
			if c.Status == spec.CheckPassing {
				later(c.Since)
				continue
			}
			blocker = "check " + c.Check + " " + string(c.Status)
			if c.Output != "" {
				blocker += ": " + c.Output
			}
			return time.Time{}, blocker
		}
	}
	return since, ""
}

// restartReason is why a task last restarted, from its Restarting event
// ("exit code 1; restarting in 1s (restart 1 of 2 within 30m)"): for a
// status read back after an agent restart, where no exit was noted.
func restartReason(ts *spec.TaskState) string {
	for i := len(ts.Events) - 1; i >= 0; i-- {
		if e := ts.Events[i]; e.Type == spec.EventRestarting {
			if j := strings.LastIndex(e.Message, "; "); j > 0 {
				return e.Message[:j]
			}
			return e.Message
		}
	}
	return fmt.Sprintf("%d restarts", ts.Restarts)
}

// deployWatch is an alloc runner's state while its deployment health
// verdict is due. Guarded by the runner's mu.
type deployWatch struct {
	// exits holds why each task exited, as its runner noted it.
	exits map[string]string
	timer *time.Timer
	wake  time.Time // what timer is set for; zero when not set
}

// deploying reports whether alloc a is waiting for a deployment health
// verdict: placed with a strategy to judge it by (by a deployment, or a
// move that waits on it) and not judged yet (by this agent or, as read
// back in a.Status, an earlier one).
func deploying(a *spec.Alloc) bool {
	return a.Update != nil && (a.Status == nil || a.Status.DeploymentHealth == nil)
}

// noteExit records why a task exited, to be restarted or for good, just
// before its runner reports it: the deployment health's reason.
func (ar *allocRunner) noteExit(task, why string) {
	ar.mu.Lock()
	defer ar.mu.Unlock()
	if ar.deploy != nil {
		ar.deploy.exits[task] = why
	}
}

// judgeDeploymentLocked gives the alloc's deployment health verdict when
// it is due, and reports whether it did; otherwise it sets the timer for
// when it may be. Called with mu held.
func (ar *allocRunner) judgeDeploymentLocked(now time.Time) bool {
	w := ar.deploy
	if w == nil {
		return false
	}
	if ar.stopRequested() || ar.alloc.DesiredStatus == spec.DesiredStop {
		// Its tasks exit because they were told to: no verdict.
		ar.endDeploymentLocked()
		return false
	}
	v, wake := judgeDeployment(ar.alloc.Update, deployedTasks(ar.alloc.Tasks), ar.status, w.exits, now)
	if v != nil {
		ar.status.DeploymentHealth = v
		ar.endDeploymentLocked()
		ar.log.Info("deployment health", "deployment", ar.alloc.DeploymentID, "healthy", v.Healthy, "reason", ar.redact(v.Reason))
		return true
	}
	if wake.Equal(w.wake) {
		return false
	}
	w.wake = wake
	switch {
	case wake.IsZero():
		if w.timer != nil {
			w.timer.Stop()
		}
	case w.timer == nil:
		w.timer = time.AfterFunc(wake.Sub(now), ar.deploymentTick)
	default:
		// A fire of the old setting racing this is only an early look.
		w.timer.Reset(wake.Sub(now))
	}
	return false
}

// endDeploymentLocked stops waiting for a verdict. Called with mu held.
func (ar *allocRunner) endDeploymentLocked() {
	if w := ar.deploy; w != nil && w.timer != nil {
		w.timer.Stop()
	}
	ar.deploy = nil
}

// endDeployment stops waiting for a verdict: the alloc is stopping, or its
// tasks are finished or let go.
func (ar *allocRunner) endDeployment() {
	ar.mu.Lock()
	ar.endDeploymentLocked()
	ar.mu.Unlock()
}

// deploymentTick judges the alloc at the time its verdict may be due.
func (ar *allocRunner) deploymentTick() {
	ar.mu.Lock()
	if ar.deploy != nil {
		// Set again whatever it is: a wall clock stepped back makes this
		// look early.
		ar.deploy.wake = time.Time{}
	}
	now := time.Now().UTC()
	judged := ar.judgeDeploymentLocked(now)
	if judged {
		ar.status.UpdateTime = now
	}
	ar.mu.Unlock()
	if judged {
		ar.agent.reportSoon()
		ar.agent.markDirty(ar)
	}
}
