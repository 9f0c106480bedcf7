package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/spec"
)

// allocRunner runs the tasks of one alloc, keeps its observed status, and
// reports every change to the server. It is the only writer of that status.
type allocRunner struct {
	agent *Agent
	alloc *spec.Alloc
	dir   string
	log   *slog.Logger

	mu     sync.Mutex
	status *spec.AllocStatus
	state  allocState
	tasks  []*taskRunner

	stopOnce sync.Once
	stopping chan struct{}
	done     chan struct{} // closed when every task has finished
	dirty    chan struct{} // a status change waits to be reported
	reported chan struct{} // closed once a terminal status reached the server
}

func newAllocRunner(a *Agent, alloc *spec.Alloc) *allocRunner {
	ar := &allocRunner{
		agent:    a,
		alloc:    alloc,
		dir:      filepath.Join(a.allocsDir, alloc.ID),
		log:      a.log.With("alloc", alloc.ID[:8], "name", alloc.Name),
		status:   &spec.AllocStatus{ClientStatus: spec.ClientPending, Tasks: map[string]*spec.TaskState{}},
		state:    allocState{Tasks: map[string]procRecord{}},
		stopping: make(chan struct{}),
		done:     make(chan struct{}),
		dirty:    make(chan struct{}, 1),
		reported: make(chan struct{}),
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
	return ar
}

// start launches the tasks and the reporter. Tasks run under taskCtx, which
// ends only when the agent itself stops; stop() is how a task is stopped.
func (ar *allocRunner) start(taskCtx, reportCtx context.Context) {
	logDir := filepath.Join(ar.dir, "logs")
	err := mkdirs(ar.dir, logDir)
	var wg sync.WaitGroup
	for _, t := range ar.alloc.Tasks {
		tr := &taskRunner{ar: ar, task: t, drv: ar.agent.drivers[t.Driver],
			dir: filepath.Join(ar.dir, t.Name), logDir: logDir, stop: ar.stopping}
		if err == nil {
			err = mkdirs(tr.dir)
		}
		ar.tasks = append(ar.tasks, tr)
	}
	if err != nil {
		for _, t := range ar.alloc.Tasks {
			ar.taskDead(t.Name, true, spec.EventDriverFail, "cannot create the alloc directory: "+err.Error())
		}
		close(ar.done)
	} else {
		for _, tr := range ar.tasks {
			wg.Add(1)
			go func() {
				defer wg.Done()
				tr.run(taskCtx)
			}()
		}
		go func() { wg.Wait(); close(ar.done) }()
	}
	go ar.reportLoop(reportCtx)
}

// stop asks every task to stop; it does not wait.
func (ar *allocRunner) stop() {
	ar.stopOnce.Do(func() { close(ar.stopping) })
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
// state and marks it for reporting.
func (ar *allocRunner) mutate(f func(st *spec.AllocStatus)) {
	ar.mu.Lock()
	f(ar.status)
	failedTask := ar.recompute()
	ar.status.UpdateTime = time.Now().UTC()
	ar.mu.Unlock()
	select {
	case ar.dirty <- struct{}{}:
	default:
	}
	// A failed task fails the alloc: stop its siblings, as Nomad does.
	if failedTask != "" && !ar.stopRequested() {
		ar.log.Info("task failed; stopping the alloc's other tasks", "task", failedTask)
		ar.stop()
	}
}

// recompute derives the alloc's client status from its tasks'. Called with mu held.
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
			st.Description = "stopped: " + ar.alloc.DesiredReason
		}
	case running > 0 && running+dead == n:
		st.ClientStatus = spec.ClientRunning
		st.Description = ""
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
func (ar *allocRunner) taskEvent(task, typ, msg string, f func(ts *spec.TaskState)) {
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
func (ar *allocRunner) taskDead(task string, failed bool, typ, msg string) {
	if typ != "" {
		ar.log.Info("task event", "task", task, "event", typ, "message", msg)
	}
	ar.mutate(func(st *spec.AllocStatus) {
		ts := st.Tasks[task]
		if typ != "" {
			ts.AddEvent(spec.TaskEvent{Time: time.Now().UTC(), Type: typ, Message: msg})
		}
		ts.State, ts.Failed, ts.PID = spec.TaskDead, failed, 0
		if ts.FinishedAt.IsZero() {
			ts.FinishedAt = time.Now().UTC()
		}
	})
}

// recordPID remembers (or, with pid 0, forgets) a task's process group so
// that a later agent can find it.
func (ar *allocRunner) recordPID(task string, pid int) {
	ar.mu.Lock()
	defer ar.mu.Unlock()
	if pid == 0 {
		delete(ar.state.Tasks, task)
	} else {
		ar.state.Tasks[task] = procRecord{PID: pid, StartTime: procStartTime(pid)}
	}
	if err := writeAllocState(ar.dir, &ar.state); err != nil {
		ar.log.Warn("cannot record task pid", "err", err)
	}
}

func (ar *allocRunner) snapshot() *spec.AllocStatus {
	ar.mu.Lock()
	defer ar.mu.Unlock()
	b, _ := json.Marshal(ar.status)
	var c spec.AllocStatus
	json.Unmarshal(b, &c)
	return &c
}

// reportLoop sends the latest status whenever it changes, coalescing bursts
// and retrying while the server is unreachable. Tasks keep running
// meanwhile: losing the server never stops work.
func (ar *allocRunner) reportLoop(ctx context.Context) {
	backoff := time.Duration(0)
	for {
		select {
		case <-ar.dirty:
		case <-ctx.Done():
			return
		}
		for {
			st := ar.snapshot()
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := ar.agent.client.UpdateAllocStatus(rctx, ar.alloc.ID, ar.agent.nodeID, st)
			cancel()
			if err == nil || client.IsStatus(err, http.StatusNotFound) || client.IsStatus(err, http.StatusConflict) {
				if err != nil {
					ar.log.Info("server refused status report", "err", err)
				}
				backoff = 0
				if st.ClientStatus.Terminal() {
					select {
					case <-ar.reported:
					default:
						close(ar.reported)
					}
				}
				break
			}
			if errors.Is(err, context.Canceled) && ctx.Err() != nil {
				return
			}
			backoff = min(max(2*backoff, 250*time.Millisecond), 10*time.Second)
			ar.log.Warn("cannot report status; will retry", "err", err, "in", backoff)
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return
			}
		}
	}
}
