package agent

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"time"

	"github.com/drover-org/drover/internal/driver"
	"github.com/drover-org/drover/internal/proc"
	"github.com/drover-org/drover/internal/spec"
	"github.com/drover-org/drover/internal/tasklog"
)

// taskRunner runs one task of an alloc and applies its restart policy:
//
//	start --ok--> running --exit--+--> batch and exit 0 ---------> dead (complete)
//	  |                           +--> restarts left in interval -> wait delay -> start
//	  |                           +--> mode delay ----------------> wait for interval -> start
//	  +--driver error-------------+--> mode fail -----------------> dead (failed)
//	stop request at any point -----------------------------------> dead (stopped)
type taskRunner struct {
	ar     *allocRunner
	task   *spec.Task
	drv    driver.Driver
	dir    string // working directory
	logDir string
	stop   chan struct{} // closed to ask the task to stop
	// adopt is the task's process left running by an earlier agent, to
	// take over instead of starting the task; nil for a fresh start.
	adopt *driver.Process
}

func (tr *taskRunner) run(ctx context.Context) {
	name := tr.task.Name
	if tr.adopt == nil {
		tr.ar.taskEvent(name, spec.EventReceived, "task received by node "+tr.ar.agent.nodeName, nil)
	}
	if tr.drv == nil {
		if tr.adopt != nil {
			killLeft(leftTask{Process: *tr.adopt})
		}
		tr.ar.taskDead(name, true, spec.EventDriverFail, fmt.Sprintf("driver %q is not available on this node", tr.task.Driver))
		return
	}
	policy := tr.task.Restart
	if policy == nil {
		policy = spec.DefaultRestart(tr.ar.alloc.JobType)
	}
	var window []time.Time // restarts within the current interval
	for {
		var exit driver.Exit
		var stopped bool
		if tr.adopt != nil {
			exit, stopped = tr.runAdopted(ctx)
			tr.adopt = nil
		} else {
			exit, stopped = tr.runOnce(ctx)
		}
		if stopped {
			return
		}
		if tr.ar.alloc.JobType == spec.JobBatch && exit.Successful() {
			tr.ar.taskDead(name, false, spec.EventCompleted, "exit code 0")
			return
		}
		now := time.Now()
		cut := now.Add(-policy.Interval.Std())
		for len(window) > 0 && window[0].Before(cut) {
			window = window[1:]
		}
		var wait time.Duration
		switch {
		case len(window) < policy.Attempts:
			wait = policy.Delay.Std()
			tr.ar.taskEvent(name, spec.EventRestarting,
				fmt.Sprintf("%s; restarting in %s (restart %d of %d within %s)", exit, wait, len(window)+1, policy.Attempts, policy.Interval), nil)
		case policy.Mode == spec.RestartDelay && policy.Attempts > 0:
			wait = window[0].Add(policy.Interval.Std()).Sub(now)
			if wait < policy.Delay.Std() {
				wait = policy.Delay.Std()
			}
			window = window[:0]
			tr.ar.taskEvent(name, spec.EventRestarting,
				fmt.Sprintf("%s; %d restarts used within %s, waiting %s for the interval to pass", exit, policy.Attempts, policy.Interval, wait.Round(time.Second)), nil)
		default:
			tr.ar.taskDead(name, true, spec.EventNotRestart,
				fmt.Sprintf("%s; exceeded %d restarts within %s", exit, policy.Attempts, policy.Interval))
			return
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-tr.stop:
			t.Stop()
			tr.ar.taskDead(name, false, spec.EventKilled, "stopped while waiting to restart")
			return
		case <-ctx.Done():
			t.Stop()
			return
		}
		window = append(window, time.Now())
		tr.ar.mutate(func(st *spec.AllocStatus) { st.Tasks[name].Restarts++ })
	}
}

// runOnce starts the task and waits for it to exit or be stopped. stopped
// is true when the task is finished for good because a stop was asked.
func (tr *taskRunner) runOnce(ctx context.Context) (driver.Exit, bool) {
	name := tr.task.Name
	select {
	case <-tr.stop:
		tr.ar.taskDead(name, false, spec.EventKilled, "stopped before start")
		return driver.Exit{}, true
	default:
	}
	stdout, stderr, err := tr.openLogs()
	if err != nil {
		tr.ar.taskEvent(name, spec.EventDriverFail, "cannot open log files: "+err.Error(), nil)
		return driver.Exit{Code: -1, Err: err, Time: time.Now()}, false
	}
	defer closeAll(stdout, stderr)

	tr.ar.agent.startSlots <- struct{}{}
	tr.ar.dirOnce.Do(func() { tr.ar.dirErr = mkdir(tr.ar.dir) })
	if err := tr.ar.dirErr; err != nil {
		<-tr.ar.agent.startSlots
		tr.ar.taskEvent(name, spec.EventDriverFail, "cannot create the alloc directory: "+err.Error(), nil)
		return driver.Exit{Code: -1, Err: err, Time: time.Now()}, false
	}
	h, err := tr.drv.Start(ctx, driver.Task{
		Command: tr.task.Config.Command,
		Args:    tr.task.Config.Args,
		Env:     tr.env(),
		Dir:     tr.dir,
		Stdout:  stdout,
		Stderr:  stderr,
	})
	<-tr.ar.agent.startSlots
	if err != nil {
		tr.ar.taskEvent(name, spec.EventDriverFail, err.Error(), nil)
		return driver.Exit{Code: -1, Err: err, Time: time.Now()}, false
	}
	started := time.Now()
	tr.ar.taskEvent(name, spec.EventStarted, "pid "+strconv.Itoa(h.PID()), func(ts *spec.TaskState) {
		ts.State, ts.PID, ts.StartedAt, ts.ExitCode = spec.TaskRunning, h.PID(), started, nil
	})
	return tr.supervise(ctx, h)
}

// supervise waits for the running task h to exit or be stopped; see runOnce.
func (tr *taskRunner) supervise(ctx context.Context, h driver.Handle) (driver.Exit, bool) {
	name := tr.task.Name
	select {
	case exit := <-h.Wait():
		var code *int // unknown for an adopted process reaped by another
		if !exit.Unknown {
			code = &exit.Code
		}
		tr.ar.taskEvent(name, spec.EventTerminated, exit.String(), func(ts *spec.TaskState) {
			ts.State, ts.PID, ts.ExitCode, ts.FinishedAt = spec.TaskPending, 0, code, exit.Time
		})
		return exit, false
	case <-tr.stop:
	case <-ctx.Done():
		// The agent is going away without being asked to stop tasks: leave
		// the task running (principle 5) for the next agent to adopt, and
		// stop reading its output so that nothing is in flight meanwhile.
		if d, ok := h.(driver.Detacher); ok {
			d.Detach()
		}
		return driver.Exit{}, true
	}
	grace := tr.task.KillTimeout.Std()
	tr.ar.taskEvent(name, spec.EventKilling, fmt.Sprintf("sent SIGTERM, SIGKILL after %s", grace), nil)
	sctx, cancel := context.WithTimeout(context.Background(), grace+10*time.Second)
	exit, err := h.Stop(sctx, grace)
	cancel()
	msg := exit.String()
	var code *int
	switch {
	case err != nil:
		msg = "stop did not finish: " + err.Error()
	case exit.Unknown:
		msg = "stopped (status unknown: adopted after an agent restart)"
	default:
		code = &exit.Code
	}
	tr.ar.taskEvent(name, spec.EventKilled, msg, func(ts *spec.TaskState) {
		ts.ExitCode, ts.FinishedAt = code, time.Now()
	})
	tr.ar.taskDead(name, false, "", "")
	return exit, true
}

// runAdopted takes over the task's process that an earlier agent left
// running, then supervises it as runOnce does. If the process is gone, it
// ended while no agent ran: an exit whose status is unknown, to which the
// restart policy applies as to a failure.
func (tr *taskRunner) runAdopted(ctx context.Context) (driver.Exit, bool) {
	name, p := tr.task.Name, *tr.adopt
	stdout, stderr, err := tr.openLogs()
	if err != nil {
		// Its output cannot be kept: stop it rather than let it block.
		killLeft(leftTask{Process: p})
		tr.ar.taskEvent(name, spec.EventDriverFail, "cannot open log files: "+err.Error(), nil)
		return driver.Exit{Code: -1, Err: err, Time: time.Now()}, false
	}
	defer closeAll(stdout, stderr)
	var h driver.Handle
	if ad, ok := tr.drv.(driver.Adopter); ok {
		h, err = ad.Adopt(ctx, p, stdout, stderr)
	} else {
		killLeft(leftTask{Process: p})
		err = fmt.Errorf("driver %s cannot adopt a running task; killed it", tr.task.Driver)
	}
	if err != nil {
		exit := driver.Exit{Code: -1, Unknown: true, Time: time.Now()}
		tr.ar.taskEvent(name, spec.EventTerminated, "exited while no agent ran ("+err.Error()+")", func(ts *spec.TaskState) {
			ts.State, ts.PID, ts.ExitCode, ts.FinishedAt = spec.TaskPending, 0, nil, exit.Time
		})
		return exit, false
	}
	started := proc.StartTime(p.StartTicks)
	if prev := tr.ar.alloc.Status; prev != nil && prev.Tasks[name] != nil && prev.Tasks[name].PID == p.PID && !prev.Tasks[name].StartedAt.IsZero() {
		started = prev.Tasks[name].StartedAt
	}
	msg := "pid " + strconv.Itoa(p.PID) + ", left running by an earlier agent; not restarted"
	if n, ok := h.(interface{ Note() string }); ok && n.Note() != "" {
		msg += "; " + n.Note()
	}
	tr.ar.taskEvent(name, spec.EventAdopted, msg, func(ts *spec.TaskState) {
		ts.State, ts.PID, ts.StartedAt, ts.ExitCode = spec.TaskRunning, p.PID, started, nil
	})
	return tr.supervise(ctx, h)
}

// openLogs opens the task's size-rotated stdout and stderr files.
func (tr *taskRunner) openLogs() (stdout, stderr *tasklog.Writer, err error) {
	name := tr.task.Name
	stdout, err1 := tasklog.NewWriter(tr.logDir, name+".stdout", tasklog.DefaultMaxBytes, tasklog.DefaultKeep)
	stderr, err2 := tasklog.NewWriter(tr.logDir, name+".stderr", tasklog.DefaultMaxBytes, tasklog.DefaultKeep)
	if err1 != nil || err2 != nil {
		closeAll(stdout, stderr)
		if err1 == nil {
			err1 = err2
		}
		return nil, nil, err1
	}
	return stdout, stderr, nil
}

// env is the task's environment: a fixed PATH, the DROVER_* names of where
// it runs, then the job file's env (which wins).
func (tr *taskRunner) env() []string {
	a := tr.ar.alloc
	m := map[string]string{
		"PATH":                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME":                tr.dir,
		"DROVER_JOB_NAME":     a.Job,
		"DROVER_GROUP_NAME":   a.Group,
		"DROVER_TASK_NAME":    tr.task.Name,
		"DROVER_ALLOC_ID":     a.ID,
		"DROVER_ALLOC_NAME":   a.Name,
		"DROVER_ALLOC_INDEX":  strconv.Itoa(a.Index),
		"DROVER_ALLOC_DIR":    tr.ar.dir,
		"DROVER_TASK_DIR":     tr.dir,
		"DROVER_NODE_ID":      tr.ar.agent.nodeID,
		"DROVER_NODE_NAME":    tr.ar.agent.nodeName,
		"DROVER_CPU_LIMIT":    strconv.Itoa(tr.task.Resources.CPU),
		"DROVER_MEMORY_LIMIT": strconv.Itoa(tr.task.Resources.MemoryMB),
		"DROVER_JOB_VERSION":  strconv.FormatUint(a.JobVersion, 10),
	}
	for k, v := range tr.task.Env {
		m[k] = v
	}
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

func closeAll(ws ...*tasklog.Writer) {
	for _, w := range ws {
		if w != nil {
			w.Close()
		}
	}
}

// mkdir makes one directory whose parent exists; one that is already
// there (an alloc started again after an agent restart) is fine.
func mkdir(dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
		return err
	}
	return nil
}
