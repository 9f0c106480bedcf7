package agent_test

import (
	"context"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/agent"
	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/driver"
	"github.com/drover-org/drover/internal/driver/execdriver"
	"github.com/drover-org/drover/internal/spec"
)

func TestRestartModeFailFailsAllocAfterAttempts(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startAgent(t.TempDir(), true)
	task := shTask("t", "exit 3")
	task.Restart = restart(2, time.Minute, 100*time.Millisecond, spec.RestartFail)
	c.submit(job("failing", spec.JobService, task))

	a := c.alloc("failing", 10*time.Second, "alloc failed", clientStatus(spec.ClientFailed))
	ts := taskState(a, "t")
	if ts.State != spec.TaskDead || !ts.Failed {
		t.Errorf("task state %s failed=%v, want dead and failed\n%s", ts.State, ts.Failed, describe(a))
	}
	if ts.Restarts != 2 {
		t.Errorf("restarts = %d, want 2\n%s", ts.Restarts, describe(a))
	}
	if n := len(events(ts, spec.EventRestarting)); n != 2 {
		t.Errorf("%d Restarting events, want 2\n%s", n, describe(a))
	}
	if n := len(events(ts, spec.EventStarted)); n != 3 {
		t.Errorf("%d Started events, want 3 (first run and 2 restarts)\n%s", n, describe(a))
	}
	last := ts.Events[len(ts.Events)-1]
	if last.Type != spec.EventNotRestart || !strings.Contains(last.Message, "exit code 3") {
		t.Errorf("last event = %s: %q, want Not Restarting with exit code 3", last.Type, last.Message)
	}
	if ts.ExitCode == nil || *ts.ExitCode != 3 {
		t.Errorf("exit code = %v, want 3", ts.ExitCode)
	}
	desc := a.Status.Description
	if !strings.Contains(desc, "task t failed") || !strings.Contains(desc, "exit code 3") {
		t.Errorf("alloc description %q does not say task t failed with exit code 3", desc)
	}
}

func TestRestartModeDelayKeepsRestarting(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startAgent(t.TempDir(), true)
	task := shTask("t", "exit 1")
	task.Restart = restart(1, 2*time.Second, 100*time.Millisecond, spec.RestartDelay)
	c.submit(job("delayed", spec.JobService, task))

	// The first restart comes after the delay; the second only once the
	// 2 s interval of the first has passed. The alloc never fails meanwhile.
	begin := time.Now()
	a := c.alloc("delayed", 8*time.Second, "2 restarts", func(a *spec.Alloc) bool {
		if a.ClientStatusOr() == spec.ClientFailed {
			t.Fatalf("alloc failed in delay mode:\n%s", describe(a))
		}
		ts := taskState(a, "t")
		return ts != nil && ts.Restarts >= 2
	})
	if d := time.Since(begin); d < 1500*time.Millisecond {
		t.Errorf("second restart after %s: it should have waited for the 2s interval", d)
	}
	ts := taskState(a, "t")
	if ts.Failed {
		t.Errorf("task marked failed\n%s", describe(a))
	}
	waited := false
	for _, e := range events(ts, spec.EventRestarting) {
		waited = waited || strings.Contains(e.Message, "waiting")
	}
	if !waited {
		t.Errorf("no Restarting event says it waits for the interval\n%s", describe(a))
	}
}

func TestBatchExitZeroCompletes(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startAgent(t.TempDir(), true)
	task := shTask("t", "echo done; echo warning >&2")
	task.Restart = restart(3, time.Minute, 100*time.Millisecond, spec.RestartFail)
	c.submit(job("batchok", spec.JobBatch, task))

	a := c.alloc("batchok", 10*time.Second, "alloc complete", func(a *spec.Alloc) bool {
		if a.ClientStatusOr() == spec.ClientFailed {
			t.Fatalf("batch alloc failed:\n%s", describe(a))
		}
		return a.ClientStatusOr() == spec.ClientComplete
	})
	ts := taskState(a, "t")
	if ts.State != spec.TaskDead || ts.Failed || ts.Restarts != 0 {
		t.Errorf("task = %s failed=%v restarts=%d, want dead, not failed, 0 restarts\n%s", ts.State, ts.Failed, ts.Restarts, describe(a))
	}
	if n := len(events(ts, spec.EventRestarting)); n != 0 {
		t.Errorf("%d Restarting events for a successful batch task", n)
	}
	if n := len(events(ts, spec.EventCompleted)); n != 1 {
		t.Errorf("%d Completed events, want 1\n%s", n, describe(a))
	}
	if got := logs(t, c.client, a.ID, "t", false); got != "done\n" {
		t.Errorf("stdout log = %q, want %q", got, "done\n")
	}
	if got := logs(t, c.client, a.ID, "t", true); got != "warning\n" {
		t.Errorf("stderr log = %q, want %q", got, "warning\n")
	}
}

func TestBatchFailureWithoutAttemptsFails(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startAgent(t.TempDir(), true)
	task := shTask("t", "exit 1")
	task.Restart = restart(0, time.Minute, 100*time.Millisecond, spec.RestartFail)
	c.submit(job("batchfail", spec.JobBatch, task))

	a := c.alloc("batchfail", 10*time.Second, "alloc failed", clientStatus(spec.ClientFailed))
	ts := taskState(a, "t")
	if ts.State != spec.TaskDead || !ts.Failed || ts.Restarts != 0 {
		t.Errorf("task = %s failed=%v restarts=%d, want dead, failed, 0 restarts\n%s", ts.State, ts.Failed, ts.Restarts, describe(a))
	}
	ev := events(ts, spec.EventNotRestart)
	if len(ev) != 1 || !strings.Contains(ev[0].Message, "exit code 1") {
		t.Errorf("Not Restarting events = %+v, want one with exit code 1", ev)
	}
}

func TestFailedTaskStopsSiblings(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startAgent(t.TempDir(), true)
	main := shTask("main", "sleep 1000 & wait")
	main.KillTimeout = spec.Duration(5 * time.Second)
	bad := shTask("bad", "sleep 1; exit 2")
	bad.Restart = restart(0, time.Minute, 100*time.Millisecond, spec.RestartFail)
	c.submit(job("siblings", spec.JobService, main, bad))

	a := c.alloc("siblings", 10*time.Second, "main running", running("main"))
	pid := taskState(a, "main").PID
	waitFor(t, 5*time.Second, "main's sleep to start", func() bool { return len(groupMembers(pid)) == 2 })

	a = c.alloc("siblings", 10*time.Second, "alloc failed", clientStatus(spec.ClientFailed))
	if ts := taskState(a, "bad"); !ts.Failed {
		t.Errorf("bad not marked failed\n%s", describe(a))
	}
	ts := taskState(a, "main")
	if ts.State != spec.TaskDead || ts.Failed {
		t.Errorf("main = %s failed=%v, want dead (stopped), not failed\n%s", ts.State, ts.Failed, describe(a))
	}
	if len(events(ts, spec.EventKilled)) != 1 {
		t.Errorf("main has no Killed event\n%s", describe(a))
	}
	if !strings.Contains(a.Status.Description, "task bad failed") {
		t.Errorf("description %q does not name the failed task", a.Status.Description)
	}
	waitFor(t, 5*time.Second, "no process left in main's group", func() bool { return len(groupMembers(pid)) == 0 })
}

func TestStopJobKillsProcessGroup(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startAgent(t.TempDir(), true)
	task := shTask("t", "sleep 1000 & sleep 1000 & wait")
	task.KillTimeout = spec.Duration(5 * time.Second)
	c.submit(job("stopme", spec.JobService, task))

	a := c.alloc("stopme", 10*time.Second, "task running", running("t"))
	pid := taskState(a, "t").PID
	waitFor(t, 5*time.Second, "both sleeps to start", func() bool { return len(groupMembers(pid)) == 3 })

	if _, err := c.client.StopJob(context.Background(), "stopme", false); err != nil {
		t.Fatal(err)
	}
	// sh and the sleeps die of SIGTERM: well within the kill timeout.
	waitFor(t, 5*time.Second, "no process left in the task's group", func() bool { return len(groupMembers(pid)) == 0 })
	a = c.alloc("stopme", 5*time.Second, "alloc complete", clientStatus(spec.ClientComplete))
	ts := taskState(a, "t")
	if ts.State != spec.TaskDead || ts.Failed {
		t.Errorf("task = %s failed=%v, want dead, not failed\n%s", ts.State, ts.Failed, describe(a))
	}
	killed := events(ts, spec.EventKilled)
	if len(killed) != 1 || !strings.Contains(killed[0].Message, "SIGTERM") {
		t.Errorf("Killed events = %+v, want one saying SIGTERM", killed)
	}
	if len(events(ts, spec.EventKilling)) != 1 {
		t.Errorf("no Killing event\n%s", describe(a))
	}
	if a.DesiredStatus != spec.DesiredStop || !strings.HasPrefix(a.Status.Description, "stopped: ") {
		t.Errorf("desired %s, description %q; want stop and a stopped description", a.DesiredStatus, a.Status.Description)
	}
}

func TestStopJobSIGKILLsAfterKillTimeout(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startAgent(t.TempDir(), true)
	task := shTask("t", `trap "" TERM; sleep 1000`)
	task.KillTimeout = spec.Duration(time.Second)
	c.submit(job("stubborn", spec.JobService, task))

	a := c.alloc("stubborn", 10*time.Second, "task running", running("t"))
	pid := taskState(a, "t").PID
	// The sleep exists only once the trap is in place.
	waitFor(t, 5*time.Second, "sleep to start", func() bool { return len(groupMembers(pid)) == 2 })

	begin := time.Now()
	if _, err := c.client.StopJob(context.Background(), "stubborn", false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "no process left in the task's group", func() bool { return len(groupMembers(pid)) == 0 })
	d := time.Since(begin)
	if d < 900*time.Millisecond {
		t.Errorf("task gone after %s, before its 1s kill timeout: SIGTERM should have been ignored", d)
	}
	if d > 4*time.Second {
		t.Errorf("task gone only after %s; want about the 1s kill timeout", d)
	}
	a = c.alloc("stubborn", 5*time.Second, "alloc complete", clientStatus(spec.ClientComplete))
	killed := events(taskState(a, "t"), spec.EventKilled)
	if len(killed) != 1 || !strings.Contains(killed[0].Message, "SIGKILL") {
		t.Errorf("Killed events = %+v, want one saying SIGKILL", killed)
	}
}

func TestTaskEnvironment(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	dataDir := t.TempDir()
	ag := c.startAgent(dataDir, true)
	task := &spec.Task{
		Name: "show", Driver: "exec",
		Config:    spec.TaskConfig{Command: "env"}, // bare name: found through the task's PATH
		Env:       map[string]string{"GREETING": "hello world", "EMPTY": ""},
		Resources: spec.Resources{CPU: 20, MemoryMB: 30},
		Restart:   restart(0, time.Minute, 100*time.Millisecond, spec.RestartFail),
	}
	c.submit(job("envjob", spec.JobBatch, task))

	a := c.alloc("envjob", 10*time.Second, "alloc complete", func(a *spec.Alloc) bool {
		if a.ClientStatusOr() == spec.ClientFailed {
			t.Fatalf("env task failed:\n%s", describe(a))
		}
		return a.ClientStatusOr() == spec.ClientComplete
	})
	out := logs(t, c.client, a.ID, "show", false)
	env := map[string]string{}
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			t.Fatalf("env output line %q is not KEY=value:\n%s", l, out)
		}
		env[k] = v
	}
	// The task's directory is the alloc's or one inside it (the layout is
	// the agent's to choose); HOME is it.
	allocDir := filepath.Join(dataDir, "allocs", a.ID)
	taskDir := env["DROVER_TASK_DIR"]
	if rel, err := filepath.Rel(allocDir, taskDir); err != nil || strings.HasPrefix(rel, "..") {
		t.Errorf("DROVER_TASK_DIR %q is not inside the alloc dir %q", taskDir, allocDir)
	}
	want := map[string]string{
		"PATH":                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME":                taskDir,
		"DROVER_JOB_NAME":     "envjob",
		"DROVER_GROUP_NAME":   "g",
		"DROVER_TASK_NAME":    "show",
		"DROVER_ALLOC_ID":     a.ID,
		"DROVER_ALLOC_NAME":   "envjob.g[0]",
		"DROVER_ALLOC_INDEX":  "0",
		"DROVER_ALLOC_DIR":    allocDir,
		"DROVER_TASK_DIR":     taskDir,
		"DROVER_NODE_ID":      ag.NodeID(),
		"DROVER_NODE_NAME":    ag.name,
		"DROVER_CPU_LIMIT":    "20",
		"DROVER_MEMORY_LIMIT": "30",
		"DROVER_JOB_VERSION":  strconv.FormatUint(a.JobVersion, 10),
		"GREETING":            "hello world",
		"EMPTY":               "",
	}
	for k, v := range want {
		if got, ok := env[k]; !ok || got != v {
			t.Errorf("%s = %q (set %v), want %q", k, got, ok, v)
		}
	}
	// Nothing of the agent's own environment leaks in.
	var extra []string
	for k := range env {
		if _, ok := want[k]; !ok {
			extra = append(extra, k)
		}
	}
	sort.Strings(extra)
	if len(extra) > 0 {
		t.Errorf("task environment has unexpected variables %v", extra)
	}
	if a.Name != "envjob.g[0]" {
		t.Errorf("alloc name %q", a.Name)
	}
}

func TestJobEnvOverridesPath(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startAgent(t.TempDir(), true)
	bin := t.TempDir()
	task := shTask("t", `echo "$PATH|$DROVER_TASK_NAME|$GREETING"`)
	task.Env = map[string]string{"PATH": bin + ":/usr/bin:/bin", "GREETING": "hi"}
	task.Restart = restart(0, time.Minute, 100*time.Millisecond, spec.RestartFail)
	c.submit(job("override", spec.JobBatch, task))
	a := c.alloc("override", 10*time.Second, "alloc complete", clientStatus(spec.ClientComplete))
	if got, want := logs(t, c.client, a.ID, "t", false), bin+":/usr/bin:/bin|t|hi\n"; got != want {
		t.Errorf("output = %q, want %q", got, want)
	}
}

func TestFingerprint(t *testing.T) {
	t.Parallel()
	res, attrs := agent.Fingerprint()
	if res.MemoryMB <= 0 {
		t.Errorf("memory = %d MB, want > 0", res.MemoryMB)
	}
	if res.CPU <= 0 {
		t.Errorf("cpu = %d MHz, want > 0", res.CPU)
	}
	for _, k := range []string{"os", "arch", "kernel", "cpu.count", "hostname", "cpu.mhz", "cpu.mhz_source"} {
		if attrs[k] == "" {
			t.Errorf("attribute %s missing: %v", k, attrs)
		}
	}
	if attrs["os"] != runtime.GOOS || attrs["arch"] != runtime.GOARCH {
		t.Errorf("os/arch = %s/%s", attrs["os"], attrs["arch"])
	}
	if attrs["cpu.count"] != strconv.Itoa(runtime.NumCPU()) {
		t.Errorf("cpu.count = %s, want %d", attrs["cpu.count"], runtime.NumCPU())
	}
	mhz, err := strconv.Atoi(attrs["cpu.mhz"])
	if err != nil || res.CPU != mhz*runtime.NumCPU() {
		t.Errorf("cpu = %d, want cpu.mhz (%s) x %d cores", res.CPU, attrs["cpu.mhz"], runtime.NumCPU())
	}
}

// The node's attributes hold what its drivers say of themselves: exec, what
// isolates its tasks.
func TestNodeAttributesFromDrivers(t *testing.T) {
	c, err := client.New("http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	ag, err := agent.New(agent.Config{DataDir: t.TempDir(), Name: "node-1", Client: c,
		Drivers: []driver.Driver{execdriver.New("exec"), execdriver.New("raw_exec")}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ag.Node().Attributes["driver.exec.isolation"], execdriver.New("exec").Isolation(); got != want {
		t.Fatalf("driver.exec.isolation = %q, want %q", got, want)
	}
}
