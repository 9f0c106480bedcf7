package agent

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"time"

	"github.com/drover-org/drover/internal/driver"
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
}

func (tr *taskRunner) run(ctx context.Context) {
	name := tr.task.Name
	tr.ar.taskEvent(name, spec.EventReceived, "task received by node "+tr.ar.agent.nodeName, nil)
	if tr.drv == nil {
		tr.ar.taskDead(name, true, spec.EventDriverFail, fmt.Sprintf("driver %q is not available on this node", tr.task.Driver))
		return
	}
	policy := tr.task.Restart
	if policy == nil {
		policy = spec.DefaultRestart(tr.ar.alloc.JobType)
	}
	var window []time.Time // restarts within the current interval
	for {
		exit, stopped := tr.runOnce(ctx)
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
	stdout, err1 := tasklog.NewWriter(tr.logDir, name+".stdout", tasklog.DefaultMaxBytes, tasklog.DefaultKeep)
	stderr, err2 := tasklog.NewWriter(tr.logDir, name+".stderr", tasklog.DefaultMaxBytes, tasklog.DefaultKeep)
	if err1 != nil || err2 != nil {
		closeAll(stdout, stderr)
		err := err1
		if err == nil {
			err = err2
		}
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

	select {
	case exit := <-h.Wait():
		code := exit.Code
		tr.ar.taskEvent(name, spec.EventTerminated, exit.String(), func(ts *spec.TaskState) {
			ts.State, ts.PID, ts.ExitCode, ts.FinishedAt = spec.TaskPending, 0, &code, exit.Time
		})
		return exit, false
	case <-tr.stop:
	case <-ctx.Done():
		// The agent is going away without being asked to stop tasks: leave
		// the task running (principle 5).
		return driver.Exit{}, true
	}
	grace := tr.task.KillTimeout.Std()
	tr.ar.taskEvent(name, spec.EventKilling, fmt.Sprintf("sent SIGTERM, SIGKILL after %s", grace), nil)
	sctx, cancel := context.WithTimeout(context.Background(), grace+10*time.Second)
	exit, err := h.Stop(sctx, grace)
	cancel()
	msg := exit.String()
	if err != nil {
		msg = "stop did not finish: " + err.Error()
	}
	code := exit.Code
	tr.ar.taskEvent(name, spec.EventKilled, msg, func(ts *spec.TaskState) {
		ts.ExitCode, ts.FinishedAt = &code, time.Now()
	})
	tr.ar.taskDead(name, false, "", "")
	return exit, true
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
