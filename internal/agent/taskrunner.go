package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/drover-org/drover/internal/driver"
	"github.com/drover-org/drover/internal/proc"
	"github.com/drover-org/drover/internal/spec"
	"github.com/drover-org/drover/internal/tasklog"
)

// taskRunner runs one task of an alloc and applies its restart policy:
//
//	prestart commands --ok--> start --ok--> running --exit--+--> batch and exit 0 ---------> dead (complete)
//	  |                         |                           +--> restarts left in interval -> wait delay -> prestart
//	  |                         |                           +--> mode delay ----------------> wait for interval -> prestart
//	  +--fail or timeout--------+--driver error-------------+--> mode fail -----------------> dead (failed)
//	stop request at any point (a running task's stop command first) ----------------------> dead (stopped)
//
// While the task runs, its health checks run (health.go); a check_restart
// stops it as a stop request would, then goes on as a failed exit does.
//
// Prestart and stop commands are run here, through the driver like the task
// itself, rather than inside a driver: so every driver has them, an adopted
// task's stop command runs as a started one's does, and a slow prestart
// holds no start slot while it runs.
type taskRunner struct {
	ar     *allocRunner
	task   *spec.Task
	drv    driver.Driver
	dir    string // the task's directory (taskdir.go)
	logDir string
	// dirOnce makes the task's directories at its first start.
	dirOnce sync.Once
	dirErr  error
	stop    chan struct{} // closed to ask the task to stop
	// adopt is the task's process left running by an earlier agent, to
	// take over instead of starting the task; nil for a fresh start.
	adopt *driver.Process
	// died says the task's process ended while no agent ran (adoptLeft):
	// the task goes on from that exit, as from any other.
	died bool
	// checkRestart is set by supervise when a check's check_restart
	// stopped the task: why, for the restart policy to treat as a failed
	// exit. Only run's goroutine uses it.
	checkRestart string
	// restartReq takes an operator's request to restart the task in place
	// (lifecycle_api.go); restartNow is set by supervise when it did, for
	// run to start the task again at once, not counted by the policy.
	restartReq chan string
	restartNow bool
	// artifactsFetched: the task's artifacts are in place (artifacts.go);
	// only run's goroutine uses it.
	artifactsFetched bool
}

func (tr *taskRunner) run(ctx context.Context) {
	name := tr.task.Name
	if tr.adopt == nil && !tr.died {
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
	if tr.adopt == nil && !tr.died && !tr.awaitTurn(ctx) {
		return
	}
	var window []time.Time // restarts within the current interval
	for {
		var exit driver.Exit
		var stopped bool
		switch {
		case tr.adopt != nil:
			exit, stopped = tr.runAdopted(ctx)
			tr.adopt = nil
		case tr.died:
			exit = tr.diedWhileDown()
			tr.died = false
		default:
			exit, stopped = tr.runOnce(ctx)
		}
		if stopped {
			return
		}
		if tr.restartedForTemplate() {
			continue // at once, and not counted (templates.go)
		}
		if tr.restartNow {
			tr.restartNow = false
			continue // an operator's restart: at once, and not counted
		}
		why, ok := exit.String(), exit.Successful()
		if tr.checkRestart != "" {
			// The exit of a task stopped for failing its checks is what
			// the stop made it; it counts as a failure whatever its code.
			why, ok, tr.checkRestart = tr.checkRestart, false, ""
		}
		if (tr.ar.alloc.JobType.Completes() || tr.task.Ephemeral()) && ok {
			tr.ar.taskDead(name, false, spec.EventCompleted, "exit code 0")
			return
		}
		// Before the event that says what comes next, which judges the
		// deployment health with it.
		tr.ar.noteExit(name, why)
		now := time.Now()
		cut := now.Add(-policy.Interval.Std())
		for len(window) > 0 && window[0].Before(cut) {
			window = window[1:]
		}
		var wait time.Duration
		switch {
		case len(window) < policy.Allowed():
			wait = policy.Delay.Std()
			attempt := len(window) + 1
			tr.ar.taskEvent(name, spec.EventRestarting,
				fmt.Sprintf("%s; restarting in %s (restart %d of %d within %s)", why, wait, attempt, policy.Allowed(), policy.Interval),
				restartDue(now.Add(wait), attempt, policy.Allowed()))
		case policy.Mode == spec.RestartDelay && policy.Allowed() > 0:
			wait = window[0].Add(policy.Interval.Std()).Sub(now)
			if wait < policy.Delay.Std() {
				wait = policy.Delay.Std()
			}
			window = window[:0]
			tr.ar.taskEvent(name, spec.EventRestarting,
				fmt.Sprintf("%s; %d restarts used within %s, waiting %s for the interval to pass", why, policy.Allowed(), policy.Interval, wait.Round(time.Second)),
				restartDue(now.Add(wait), 0, policy.Allowed()))
		default:
			tr.ar.taskDead(name, true, spec.EventNotRestart,
				fmt.Sprintf("%s; exceeded %d restarts within %s", why, policy.Allowed(), policy.Interval))
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
		tr.ar.agent.metrics.Restarts.Inc()
	}
}

// restartDue records in a task's state when it starts again, and which
// attempt that is of how many: status shows it from the moment it died.
func restartDue(at time.Time, attempt, of int) func(*spec.TaskState) {
	return func(ts *spec.TaskState) {
		ts.RestartAt, ts.RestartAttempt, ts.RestartAttempts = at.UTC(), attempt, of
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
		return driver.Exit{Code: -1, StartErr: err, Time: time.Now()}, false
	}
	defer closeAll(stdout, stderr)

	if err := tr.fetchArtifacts(ctx, tr.stop); err != nil {
		var ae *artifactError
		switch {
		case ctx.Err() != nil:
			return driver.Exit{}, true
		case errors.Is(err, errStopRequested):
			tr.ar.taskDead(name, false, spec.EventKilled, "stopped while fetching artifacts")
			return driver.Exit{}, true
		case errors.As(err, &ae) && ae.final:
			// The server refused the request (a 404): asking again would
			// get the same answer, so the task fails now rather than on
			// the restart policy's clock.
			tr.ar.taskDead(name, true, spec.EventArtifactFail, err.Error())
			return driver.Exit{}, true
		}
		tr.ar.taskEvent(name, spec.EventArtifactFail, err.Error(), nil)
		return driver.Exit{Code: -1, Err: err, Time: time.Now()}, false
	}
	if err := tr.renderTemplates(ctx); err != nil {
		tr.ar.taskEvent(name, spec.EventTemplate, err.Error(), nil)
		return driver.Exit{Code: -1, Err: err, Time: time.Now()}, false
	}
	if err := tr.writePayload(); err != nil {
		tr.ar.taskEvent(name, spec.EventDriverFail, err.Error(), nil)
		return driver.Exit{Code: -1, Err: err, Time: time.Now()}, false
	}
	cfg := tr.task.Config
	for i, c := range cfg.Prestart {
		what := fmt.Sprintf("prestart command %d of %d (%s)", i+1, len(cfg.Prestart), commandLine(c))
		exit, err := tr.runCommand(ctx, c, prestartTimeout, stdout, stderr, tr.stop)
		switch {
		case ctx.Err() != nil:
			// The agent is going away; the prestart was killed, and the
			// next agent, finding no task process, starts over from the
			// first prestart command.
			return driver.Exit{}, true
		case errors.Is(err, errStopRequested):
			tr.poststop(stdout, stderr)
			tr.ar.taskDead(name, false, spec.EventKilled, "stopped during "+what)
			return driver.Exit{}, true
		case err == nil && !exit.Successful():
			err = fmt.Errorf("%s failed: %s", what, exit)
		case err != nil:
			err = fmt.Errorf("%s: %w", what, err)
		}
		if err != nil {
			tr.ar.taskEvent(name, spec.EventDriverFail, err.Error(), nil)
			tr.poststop(stdout, stderr)
			return driver.Exit{Code: -1, StartErr: err, Time: time.Now()}, false
		}
	}
	h, err := tr.start(ctx, spec.Command{Command: cfg.Command, Args: cfg.Args}, false, stdout, stderr)
	if errors.Is(err, driver.ErrNoRetry) {
		// Starting again would fail the same way (an image that cannot be
		// had): fail now rather than retry on the restart policy's clock.
		tr.ar.taskDead(name, true, spec.EventDriverFail, err.Error())
		return driver.Exit{}, true
	}
	if err != nil {
		tr.ar.taskEvent(name, spec.EventDriverFail, err.Error(), nil)
		tr.poststop(stdout, stderr)
		return driver.Exit{Code: -1, StartErr: err, Time: time.Now()}, false
	}
	started := time.Now()
	tr.ar.agent.setHandle(tr.ar.alloc.ID, name, h, true)
	checks := tr.newCheckRunner(h, started, nil)
	msg := "pid " + strconv.Itoa(h.PID())
	if id := containerID(h); id != "" {
		msg = "container " + id[:min(12, len(id))] + ", " + msg
	}
	if n, ok := h.(interface{ Note() string }); ok && n.Note() != "" {
		msg += "; " + n.Note()
	}
	tr.ar.taskEvent(name, spec.EventStarted, msg, func(ts *spec.TaskState) {
		ts.State, ts.PID, ts.StartedAt, ts.ExitCode = spec.TaskRunning, h.PID(), started, nil
		ts.RestartAt, ts.RestartAttempt, ts.RestartAttempts = time.Time{}, 0, 0
		ts.ContainerID = containerID(h)
		ts.Checks = checks.states()
	})
	return tr.supervise(ctx, h, checks, stdout, stderr)
}

// prestartTimeout bounds each prestart command. Prestart commands are
// setup (a migration, fetching a file, waiting for a dependency) that takes
// seconds; five minutes leaves room for a slow one, while a hung one still
// ends: it is stopped, fails the start, and the restart policy decides,
// instead of the task staying pending forever.
const prestartTimeout = 5 * time.Minute

// errStopRequested: runCommand stopped its command because the task was
// asked to stop.
var errStopRequested = errors.New("stop requested")

// start starts one process of the task (a prestart command, the task's own
// command or its stop command) with the task's environment, directory and
// user, its output going to the task's logs. The command and the task's
// config have their ${...} interpolated (spec.TaskRuntime) first. It holds
// a start slot for the fork only; the first start of an alloc makes the
// alloc's directories, a task's first start its own. A hook (prestart or
// stop command) also gets DROVER_HOOK=1, so that an agent started after
// this one died kills it rather than adopting it as the task (see
// findLeftTasks).
func (tr *taskRunner) start(ctx context.Context, c spec.Command, hook bool, stdout, stderr io.Writer) (driver.Handle, error) {
	// Before taking a slot: making the directories waits on the file
	// system, not the CPU, and a dozen mkdirs cost more than the fork.
	if err := tr.makeDirs(); err != nil {
		return nil, err
	}
	if _, err := tr.ar.network(); err != nil {
		return nil, err
	}
	tr.ar.agent.startSlots <- struct{}{}
	defer func() {
		<-tr.ar.agent.startSlots
		tr.ar.agent.dirPools.touch()
	}()
	t, err := tr.driverTask(c, hook)
	if err != nil {
		return nil, err
	}
	t.Stdout, t.Stderr = stdout, stderr
	tr.ar.agent.metrics.TaskStarts.Inc()
	return tr.drv.Start(ctx, t)
}

// driverTask is what the driver runs for c in the task, all but its
// output: c and the task's config interpolated, the task's environment,
// directory and user.
func (tr *taskRunner) driverTask(c spec.Command, hook bool) (driver.Task, error) {
	rt := tr.runtime()
	env := rt.Env()
	maps.Copy(env, tr.templateEnv()) // env = true templates' variables
	cfg, err := rt.Config(tr.task.Config, env)
	if err != nil {
		return driver.Task{}, err
	}
	cfg.User = tr.task.UserOf() // the task's user is where Nomad writes it
	if tr.drv.Info().OwnNetwork {
		groupNames(&cfg, tr.ar.alloc, func(v string) string { return rt.Interpolate(v, env) })
	}
	var args []string
	for _, arg := range c.Args {
		args = append(args, rt.Interpolate(arg, env))
	}
	vols, err := tr.volumeMounts(env, rt)
	if err != nil {
		return driver.Task{}, err
	}
	mounts := tr.mounts()
	if tr.drv.Info().OwnFilesystem {
		mounts = append(mounts, vols...)
	} else if err := linkVolumes(vols); err != nil {
		return driver.Task{}, err
	}
	a := tr.ar.alloc
	return driver.Task{
		Command: rt.Interpolate(c.Command, env),
		Args:    args,
		Env:     tr.envList(env, hook),
		Dir:     tr.workDir(cfg.WorkDir),
		User:    tr.task.UserOf(),
		ID: driver.TaskID{NodeID: tr.ar.agent.nodeID, AllocID: a.ID, AllocName: a.Name,
			Job: a.Job, Group: a.Group, Task: tr.task.Name},
		Resources: tr.task.Resources,
		Ports:     a.Ports,
		Mounts:    mounts,
		Config:    &cfg,
		Hook:      hook,
		NetNS:     tr.netNS(),
	}, nil
}

// groupNames gives a task with a network of its own (a container) the
// host name and resolver of its group's network where its config gives
// none, each value interpolated.
func groupNames(cfg *spec.TaskConfig, a *spec.Alloc, interpolate func(string) string) {
	each := func(vs []string) []string {
		out := make([]string, len(vs))
		for i, v := range vs {
			out[i] = interpolate(v)
		}
		return out
	}
	if cfg.Hostname == "" && a.Hostname != "" {
		cfg.Hostname = interpolate(a.Hostname)
	}
	if d := a.DNS; d != nil {
		if len(cfg.DNSServers) == 0 {
			cfg.DNSServers = each(d.Servers)
		}
		if len(cfg.DNSSearchDomains) == 0 {
			cfg.DNSSearchDomains = each(d.Searches)
		}
		if len(cfg.DNSOptions) == 0 {
			cfg.DNSOptions = each(d.Options)
		}
	}
}

// makeDirs makes the alloc's directories, then the task's, once each.
func (tr *taskRunner) makeDirs() error {
	tr.ar.dirOnce.Do(func() { tr.ar.dirErr = tr.ar.makeAllocDirs() })
	if err := tr.ar.dirErr; err != nil {
		return fmt.Errorf("cannot create the alloc directory: %w", err)
	}
	tr.dirOnce.Do(func() {
		if tr.dirErr = tr.makeTaskDirs(); tr.dirErr == nil {
			tr.dirErr = tr.ownTaskDirs()
		}
	})
	if err := tr.dirErr; err != nil {
		return fmt.Errorf("cannot create the task directory: %w", err)
	}
	return nil
}

// runtime is what the task's variables and interpolation are made of.
func (tr *taskRunner) runtime() spec.TaskRuntime {
	return spec.TaskRuntime{Alloc: tr.ar.alloc, Task: tr.task, Node: tr.ar.agent.nodeValues(), Dirs: tr.dirs(), AllocIP: tr.ar.allocIP()}
}

// mounts are the directories a driver that isolates the file system
// (docker) mounts into the task: the host's side of dirs.
func (tr *taskRunner) mounts() []driver.Mount {
	if !tr.drv.Info().OwnFilesystem {
		return nil
	}
	return []driver.Mount{
		{Host: tr.ar.sharedDir(), Task: containerAllocDir},
		{Host: filepath.Join(tr.dir, localDirName), Task: containerLocalDir},
		{Host: filepath.Join(tr.dir, secretsDirName), Task: containerSecretsDir},
	}
}

// runCommand runs c (see start) to completion and returns its exit. It
// stops c (SIGTERM, SIGKILL after kill_timeout) and returns an error when
// timeout passes first, or when stop is closed (errStopRequested); when
// ctx ends (the agent going away) it kills c at once, since a command left
// behind would be adopted by the next agent as the task itself.
func (tr *taskRunner) runCommand(ctx context.Context, c spec.Command, timeout time.Duration, stdout, stderr io.Writer, stop <-chan struct{}) (driver.Exit, error) {
	h, err := tr.start(ctx, c, true, stdout, stderr)
	if err != nil {
		return driver.Exit{}, err
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	grace := tr.task.KillTimeout.Std()
	select {
	case exit := <-h.Wait():
		return exit, nil
	case <-t.C:
		err = fmt.Errorf("did not finish within %s; stopped it", timeout)
	case <-stop:
		err = errStopRequested
	case <-ctx.Done():
		err, grace = ctx.Err(), 0
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace+10*time.Second)
	defer cancel()
	exit, _ := h.Stop(sctx, grace)
	return exit, err
}

// poststop runs the task's poststop commands, in order, each to its end or
// for at most kill_timeout, as systemd runs ExecStopPost= once the service
// has stopped or failed to start. They clean up after the task, so a
// failure is reported as an event and changes nothing else; they run even
// while the agent is going away, as a stop command does.
func (tr *taskRunner) poststop(stdout, stderr io.Writer) {
	cmds := tr.task.Config.Poststop
	for i, c := range cmds {
		what := fmt.Sprintf("poststop command %d of %d (%s)", i+1, len(cmds), commandLine(c))
		exit, err := tr.runCommand(context.Background(), c, tr.task.KillTimeout.Std(), stdout, stderr, nil)
		msg := what + ": " + exit.String()
		if err != nil {
			msg = what + ": " + err.Error()
		}
		tr.ar.taskEvent(tr.task.Name, spec.EventPoststop, msg, nil)
	}
}

// workDir is where the task's processes start: its work_dir wd, relative
// to the task directory unless absolute, or else the task directory.
func (tr *taskRunner) workDir(wd string) string {
	if wd == "" {
		return tr.dir
	}
	if filepath.IsAbs(wd) {
		return wd
	}
	return filepath.Join(tr.dir, wd)
}

// commandLine shows a command for events, quoting arguments that would not
// read back as one word.
func commandLine(c spec.Command) string {
	var b strings.Builder
	b.WriteString(c.Command)
	for _, a := range c.Args {
		b.WriteByte(' ')
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`;&|<>()*?[]{}~#") {
			a = strconv.Quote(a)
		}
		b.WriteString(a)
	}
	return b.String()
}

// supervise waits for the running task h to exit or be stopped, running
// its health checks meanwhile; see runOnce. A check_restart stops the task
// as a stop does, and returns its exit as not stopped for good, with
// tr.checkRestart saying why. stdout and stderr are the task's logs, for
// its stop command's output.
func (tr *taskRunner) supervise(ctx context.Context, h driver.Handle, checks *checkRunner, stdout, stderr io.Writer) (driver.Exit, bool) {
	name := tr.task.Name
	defer tr.ar.agent.clearHandle(tr.ar.alloc.ID, name)
	checks.start(ctx)
	var restartWhy string
	templated := false // restartWhy is a template's change_mode restart
	requested := false // restartWhy is an operator's request
	select {
	case exit := <-h.Wait():
		checks.stop()
		var code *int // unknown for an adopted process reaped by another
		if !exit.Unknown {
			code = &exit.Code
		}
		typ, msg := spec.EventTerminated, exit.String()
		if exit.OOMKilled {
			limit := "no memory limit: the node ran out of memory"
			if mb := tr.task.Resources.MemoryLimitMB(); mb > 0 {
				limit = fmt.Sprintf("memory limit %d MB", mb)
			}
			typ, msg = spec.EventOutOfMemory, fmt.Sprintf("%s (%s)", msg, limit)
		}
		tr.ar.taskEvent(name, typ, msg, func(ts *spec.TaskState) {
			ts.State, ts.PID, ts.ExitCode, ts.FinishedAt = spec.TaskPending, 0, code, exit.Time
		})
		tr.poststop(stdout, stderr)
		return exit, false
	case <-tr.stop:
	case restartWhy = <-checks.restarts():
	case restartWhy = <-tr.templateRestarts():
		templated = true
	case restartWhy = <-tr.restartReq:
		requested = true
	case <-ctx.Done():
		// The agent is going away without being asked to stop tasks: leave
		// the task running for the next agent to adopt, and
		// stop reading its output so that nothing is in flight meanwhile.
		checks.stop()
		if d, ok := h.(driver.Detacher); ok {
			d.Detach()
		}
		return driver.Exit{}, true
	}
	checks.stop()
	switch {
	case templated:
		tr.ar.taskEvent(name, spec.EventTemplate, restartWhy+"; restarting the task", nil)
	case requested:
		tr.ar.taskEvent(name, spec.EventRestartRequested, restartWhy+"; restarting the task in place", nil)
	case restartWhy != "":
		tr.ar.taskEvent(name, spec.EventCheckRestart, restartWhy+"; restarting", nil)
	}
	exited := restartWhy == "" && tr.shutdownDelay(ctx, h)
	grace := tr.task.KillTimeout.Std()
	killing := fmt.Sprintf("sent %s, SIGKILL after %s", tr.task.KillSignalOf(), grace)
	// Why the alloc stops (a drain, a move, a new version, a sibling's
	// failure): written before the stop was signalled, so read safely
	// after it.
	if why := tr.ar.stopWhy; restartWhy == "" && tr.ar.stopRequested() && why != "" {
		killing = why + ": " + killing
	}
	if c := tr.task.Config.Stop; c != nil {
		// As systemd's ExecStop: the task's own way to stop comes first,
		// bounded by kill_timeout; the signals follow whatever it did.
		tr.ar.taskEvent(name, spec.EventKilling, fmt.Sprintf("running stop command %s (for at most %s)", commandLine(*c), grace), nil)
		exit, err := tr.runCommand(context.Background(), *c, grace, stdout, stderr, nil)
		switch {
		case err != nil:
			killing = "stop command: " + err.Error() + "; " + killing
		case !exit.Successful():
			killing = "stop command failed: " + exit.String() + "; " + killing
		}
	}
	tr.ar.taskEvent(name, spec.EventKilling, killing, nil)
	sctx, cancel := context.WithTimeout(context.Background(), grace+10*time.Second)
	exit, err := tr.stopTask(sctx, h, grace, exited)
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
	if restartWhy != "" {
		tr.ar.taskEvent(name, spec.EventKilled, msg, func(ts *spec.TaskState) {
			ts.State, ts.PID, ts.ExitCode, ts.FinishedAt = spec.TaskPending, 0, code, time.Now()
		})
		tr.poststop(stdout, stderr)
		switch {
		case requested:
			tr.restartNow = true
		case templated:
			tr.ar.templaters[name].restarted = true
		default:
			tr.checkRestart = restartWhy
		}
		return exit, false
	}
	tr.ar.taskEvent(name, spec.EventKilled, msg, func(ts *spec.TaskState) {
		ts.ExitCode, ts.FinishedAt = code, time.Now()
	})
	tr.poststop(stdout, stderr)
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
		tr.ar.agent.removeLeft(tr.leftOf(p))
		tr.ar.taskEvent(name, spec.EventDriverFail, "cannot open log files: "+err.Error(), nil)
		return driver.Exit{Code: -1, StartErr: err, Time: time.Now()}, false
	}
	defer closeAll(stdout, stderr)
	var h driver.Handle
	if ad, ok := tr.drv.(driver.Adopter); ok {
		h, err = ad.Adopt(ctx, p, stdout, stderr)
	} else {
		tr.ar.agent.removeLeft(tr.leftOf(p))
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
	var prevChecks []spec.CheckState
	if prev := tr.ar.alloc.Status; prev != nil && prev.Tasks[name] != nil && prev.Tasks[name].PID == p.PID && !prev.Tasks[name].StartedAt.IsZero() {
		started = prev.Tasks[name].StartedAt
		// The same process: its checks' verdicts still hold.
		prevChecks = prev.Tasks[name].Checks
	}
	tr.ar.agent.setHandle(tr.ar.alloc.ID, name, h, false)
	checks := tr.newCheckRunner(h, started, prevChecks)
	msg := "pid " + strconv.Itoa(p.PID) + ", left running by an earlier agent; not restarted"
	if n, ok := h.(interface{ Note() string }); ok && n.Note() != "" {
		msg += "; " + n.Note()
	}
	tr.ar.taskEvent(name, spec.EventAdopted, msg, func(ts *spec.TaskState) {
		ts.State, ts.PID, ts.StartedAt, ts.ExitCode = spec.TaskRunning, p.PID, started, nil
		ts.ContainerID = containerID(h)
		ts.Checks = checks.states()
	})
	return tr.supervise(ctx, h, checks, stdout, stderr)
}

// diedWhileDown records the death of the task's process that ended while
// no agent ran, as supervise records any other, and returns its exit: its
// status went with its parent, the earlier agent.
func (tr *taskRunner) diedWhileDown() driver.Exit {
	exit := driver.Exit{Code: -1, Unknown: true, Time: time.Now()}
	tr.ar.taskEvent(tr.task.Name, spec.EventTerminated, "exit status unknown: the task died while the agent was down", func(ts *spec.TaskState) {
		ts.State, ts.PID, ts.ExitCode, ts.FinishedAt = spec.TaskPending, 0, nil, exit.Time
	})
	return exit
}

// leftOf is the left task p of this task: a process, or what the task's
// driver found (a container), to remove.
func (tr *taskRunner) leftOf(p driver.Process) leftTask {
	l := leftTask{Process: p, alloc: tr.ar.alloc.ID, task: tr.task.Name}
	if p.ID != "" {
		l.driver = tr.task.Driver
	}
	return l
}

// openLogs opens the task's size-rotated stdout and stderr files, or
// writers that keep nothing when its logs are disabled.
func (tr *taskRunner) openLogs() (stdout, stderr *tasklog.Writer, err error) {
	if tr.task.LogsDisabled() {
		return tasklog.Discard(), tasklog.Discard(), nil
	}
	name := tr.task.Name
	// The task's logs block counts the file being written; the writer
	// keeps that many rotated ones beside it.
	files, size := tr.task.LogLimits()
	stdout, err1 := tasklog.NewWriter(tr.logDir, name+".stdout", size, files-1)
	stderr, err2 := tasklog.NewWriter(tr.logDir, name+".stderr", size, files-1)
	if err1 != nil || err2 != nil {
		closeAll(stdout, stderr)
		if err1 == nil {
			err1 = err2
		}
		return nil, nil, err1
	}
	return stdout, stderr, nil
}

// envList is the task's environment: a fixed PATH and HOME (the task's
// directory), then env (spec.TaskRuntime.Env: the runtime variables and
// the job file's env, which wins).
func (tr *taskRunner) envList(env map[string]string, hook bool) []string {
	m := make(map[string]string, len(env)+3)
	if !tr.drv.Info().OwnFilesystem {
		// A container has its own file system: the image's PATH and HOME
		// hold there.
		m["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
		m["HOME"] = tr.dir
	}
	if hook {
		m["DROVER_HOOK"] = "1"
	}
	maps.Copy(m, env)
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// containerID is the container a handle runs its task in, "" for a process.
func containerID(h driver.Handle) string {
	if c, ok := h.(interface{ ContainerID() string }); ok {
		return c.ContainerID()
	}
	return ""
}

func closeAll(ws ...*tasklog.Writer) {
	for _, w := range ws {
		if w != nil {
			w.Close()
		}
	}
}
