package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/drover-org/drover/internal/driver"
	"github.com/drover-org/drover/internal/netbridge"
	"github.com/drover-org/drover/internal/spec"
)

// allocRunner runs the tasks of one alloc, keeps its observed status, and
// reports every change to the server. It is the only writer of that status.
type allocRunner struct {
	agent *Agent
	alloc *spec.Alloc
	dir   string
	log   *slog.Logger
	// redactor hides the tasks' env values in messages (redact.go).
	redactor *strings.Replacer

	mu     sync.Mutex
	status *spec.AllocStatus
	tasks  []*taskRunner
	// judged is set once the alloc's health was healthy or unhealthy:
	// from then on a task not running makes it unhealthy, not pending.
	judged bool
	// deploy is set while the alloc's deployment health verdict is due
	// (deployhealth.go).
	deploy *deployWatch

	dirOnce sync.Once
	dirErr  error

	stopOnce sync.Once
	stopping chan struct{}
	// stopWhy is why the alloc stops, as its tasks' Killing events and its
	// description say it: the server's reason, or the agent's own (a
	// sibling task failed, no contact with any server). Written once,
	// before stopping closes, so read safely after it.
	stopWhy string
	// stopCause is the agent's own cause for stopping, when it has one
	// (spec.EndCause): written with stopWhy.
	stopCause spec.EndCause
	done      chan struct{} // closed when every task has finished
	// lc orders the tasks when some are lifecycle hooks (lifecycle.go);
	// nil otherwise. Guarded by mu.
	lc *lifecycle
	// templaters render the templates of the tasks that have some, by
	// task name (templates.go).
	templaters map[string]*templater

	// netMu guards the alloc's network namespace (network.go): made by
	// the first task start, kept when that fails for the next to retry.
	netMu   sync.Mutex
	netDone bool
	net     netbridge.Net
}

func newAllocRunner(a *Agent, alloc *spec.Alloc) *allocRunner {
	ar := &allocRunner{
		agent:    a,
		alloc:    alloc,
		dir:      filepath.Join(a.allocsDir, alloc.ID),
		log:      a.log.With("alloc", alloc.ID[:8], "name", alloc.Name),
		redactor: newRedactor(alloc.Tasks),
		status:   &spec.AllocStatus{ClientStatus: spec.ClientPending, Tasks: map[string]*spec.TaskState{}, Began: allocBegan(alloc, time.Now())},
		stopping: make(chan struct{}),
		done:     make(chan struct{}),
	}
	for _, t := range alloc.Tasks {
		ts := &spec.TaskState{State: spec.TaskPending}
		// Starting again after an agent restart: keep the history.
		if alloc.Status != nil && alloc.Status.Tasks[t.Name] != nil {
			prev := alloc.Status.Tasks[t.Name]
			ts.Restarts, ts.Events = prev.Restarts, prev.Events
		}
		ar.status.Tasks[t.Name] = ts
	}
	ar.lc = newLifecycle(alloc.Tasks)
	ar.templaters = newTemplaters(alloc.Tasks)
	carryEndedHooks(alloc, ar.status)
	if alloc.Status != nil {
		ar.judged = alloc.Status.Health == spec.HealthHealthy || alloc.Status.Health == spec.HealthUnhealthy
		// A verdict given is final: carry it, as the tasks' history.
		if dh := alloc.Status.DeploymentHealth; dh != nil {
			c := *dh
			ar.status.DeploymentHealth = &c
		}
	}
	if deploying(alloc) {
		ar.deploy = &deployWatch{exits: map[string]string{}}
	}
	return ar
}

// start launches the tasks, or adopts the processes in adopt (by task name)
// that an earlier agent left running; a task in died ended while no agent
// ran, and goes on from that exit (adoptLeft). They run under taskCtx,
// which ends only when the agent itself stops; stop() is how a task is stopped. The
// alloc directory is made by the first task to start (taskRunner.start),
// in its goroutine, so that starting many allocs at once pipelines one's
// mkdir with another's fork instead of doing all of one, then all of the
// other.
func (ar *allocRunner) start(taskCtx context.Context, adopt map[string]driver.Process, died map[string]bool) {
	if ar.alloc.MaxRunDuration > 0 {
		go ar.watchMaxRun(taskCtx, ar.status.Began)
	}
	var wg sync.WaitGroup
	for _, t := range ar.alloc.Tasks {
		if ar.status.Tasks[t.Name].State == spec.TaskDead {
			continue // a hook that ran to its end before an agent restart
		}
		// The directories are laid out as in taskdir.go.
		tr := &taskRunner{ar: ar, task: t, drv: ar.agent.drivers[t.Driver],
			dir: filepath.Join(ar.dir, t.Name), logDir: ar.logDir(), stop: ar.stopOf(t),
			restartReq: make(chan string, 1)}
		if p, ok := adopt[t.Name]; ok {
			tr.adopt = &p
		}
		if tm := ar.templaters[t.Name]; tm != nil {
			tm.tr = tr
		}
		tr.died = died[t.Name]
		ar.tasks = append(ar.tasks, tr)
		if len(ar.tasks) == 1 {
			continue // run by the goroutine below
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr.run(taskCtx)
		}()
	}
	// The first task runs in the goroutine that waits for the alloc's end:
	// a goroutine fewer per alloc, a thousand on a node of a thousand
	// one-task allocs.
	go func() {
		if len(ar.tasks) > 0 {
			ar.tasks[0].run(taskCtx)
		}
		wg.Wait()
		// Finished, or let go by an agent going away: the next agent
		// judges what it adopts, in the namespace it left.
		if taskCtx.Err() == nil {
			ar.teardownNetwork()
		}
		ar.endDeployment()
		close(ar.done)
	}()
}

// stop asks every task to stop, for why; it does not wait. The first
// call's why stays. An alloc asked to stop gets no deployment health
// verdict.
func (ar *allocRunner) stop(why string) {
	ar.stopFor("", why, false)
}

// stopFor is stop with the agent's own cause, recorded in the alloc's
// status (spec.EndCause); skipPoststop stops the poststop tasks too, so
// that they never start. It reports whether this call stopped the alloc.
func (ar *allocRunner) stopFor(cause spec.EndCause, why string, skipPoststop bool) bool {
	first := false
	ar.stopOnce.Do(func() {
		first = true
		ar.stopWhy, ar.stopCause = why, cause
		close(ar.stopping)
		ar.mu.Lock()
		ar.lc.stopAll(skipPoststop)
		ar.mu.Unlock()
		ar.endDeployment()
	})
	return first
}

func (ar *allocRunner) stopRequested() bool {
	select {
	case <-ar.stopping:
		return true
	default:
		return false
	}
}

// mutate changes the status under the lock, recomputes the alloc's overall
// state and deployment health, and marks it for reporting.
func (ar *allocRunner) mutate(f func(st *spec.AllocStatus)) {
	ar.mu.Lock()
	f(ar.status)
	ar.lc.advance(ar.status.Tasks)
	failedTask := ar.recompute()
	leader := ar.endedLeaderLocked()
	now := time.Now().UTC()
	verdict := ar.judgeDeploymentLocked(now)
	ar.status.UpdateTime = now
	ar.mu.Unlock()
	if verdict {
		// The deployment waits on it: no coalescing wait.
		ar.agent.reportSoon()
	}
	ar.agent.markDirty(ar)
	// A failed task fails the alloc: stop its siblings, as Nomad does.
	if failedTask != "" && !ar.stopRequested() {
		ar.log.Info("task failed; stopping the alloc's other tasks", "task", failedTask)
		ar.stop(fmt.Sprintf("task %s failed", failedTask))
	} else if leader != "" && !ar.stopRequested() {
		ar.log.Info("leader task ended; stopping the alloc's other tasks", "task", leader)
		ar.stop(fmt.Sprintf("leader task %s ended", leader))
	}
}

// recompute derives the alloc's client status and health from its tasks'.
// Called with mu held.
func (ar *allocRunner) recompute() (failedTask string) {
	st := ar.status
	running, dead, failed := 0, 0, ""
	for name, ts := range st.Tasks {
		switch ts.State {
		case spec.TaskRunning:
			running++
		case spec.TaskDead:
			dead++
			if ts.Failed && (failed == "" || name < failed) {
				failed = name
			}
		}
	}
	n := len(st.Tasks)
	prev := st.ClientStatus
	switch {
	case prev.Terminal():
		// States only move forward.
	case dead == n && failed != "":
		st.ClientStatus = spec.ClientFailed
		st.Description = fmt.Sprintf("task %s failed: %s", failed, lastMessage(st.Tasks[failed]))
	case dead == n:
		st.ClientStatus = spec.ClientComplete
		st.Description = "all tasks finished"
		if ar.stopRequested() {
			st.Description = "stopped: " + ar.stopWhy
			st.EndCause = ar.stopCause
		}
	case running > 0 && running+dead+ar.lc.waiting(st.Tasks) == n:
		st.ClientStatus = spec.ClientRunning
		st.Description = ""
	}
	st.Health = allocHealth(ar.alloc.Tasks, st.Tasks, ar.judged)
	if st.Health == spec.HealthHealthy || st.Health == spec.HealthUnhealthy {
		ar.judged = true
	}
	if failed != "" && prev != spec.ClientFailed {
		return failed
	}
	return ""
}

func lastMessage(ts *spec.TaskState) string {
	for i := len(ts.Events) - 1; i >= 0; i-- {
		if ts.Events[i].Message != "" {
			return ts.Events[i].Message
		}
	}
	return "no reason recorded"
}

// taskEvent records an event and applies f to the task's state.
func (ar *allocRunner) taskEvent(task string, typ spec.EventType, msg string, f func(ts *spec.TaskState)) {
	msg = ar.redact(msg)
	ar.log.Info("task event", "task", task, "event", typ, "message", msg)
	ar.mutate(func(st *spec.AllocStatus) {
		ts := st.Tasks[task]
		ts.AddEvent(spec.TaskEvent{Time: time.Now().UTC(), Type: typ, Message: msg})
		if f != nil {
			f(ts)
		}
	})
}

// taskDead marks a task finished for good; typ "" adds no event.
func (ar *allocRunner) taskDead(task string, failed bool, typ spec.EventType, msg string) {
	msg = ar.redact(msg)
	if typ != "" {
		ar.log.Info("task event", "task", task, "event", typ, "message", msg)
	}
	ar.mutate(func(st *spec.AllocStatus) {
		ts := st.Tasks[task]
		if typ != "" {
			ts.AddEvent(spec.TaskEvent{Time: time.Now().UTC(), Type: typ, Message: msg})
		}
		ts.State, ts.Failed, ts.PID = spec.TaskDead, failed, 0
		ts.RestartAt, ts.RestartAttempt, ts.RestartAttempts = time.Time{}, 0, 0
		if ts.FinishedAt.IsZero() {
			ts.FinishedAt = time.Now().UTC()
		}
	})
}

func (ar *allocRunner) snapshot() *spec.AllocStatus {
	ar.mu.Lock()
	defer ar.mu.Unlock()
	b, _ := json.Marshal(ar.status)
	var c spec.AllocStatus
	json.Unmarshal(b, &c)
	ar.redactStatus(&c)
	return &c
}
