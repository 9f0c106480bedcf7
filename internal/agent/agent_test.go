package agent_test

import (
	"context"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

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
	// It was killed because bad failed, not for its alloc's placement
	// reason ("new instance").
	if k := events(ts, spec.EventKilling); len(k) != 1 || !strings.HasPrefix(k[0].Message, "task bad failed: ") {
		t.Errorf("main's Killing events = %+v, want one saying task bad failed", k)
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

// TestTaskEnvironment runs a real exec task that prints its environment,
// its arguments and working directory, and which of its directories it
// can write to: the evidence for the runtime variables (drover's and
// Nomad's), the interpolation of its args and env, and the directory
// layout.
// It runs twice: with the directories made at the start, and taken made
// ahead from the agent's pool (dirpool.go); both must be the same layout,
// mode for mode.
func TestTaskEnvironment(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		pool int
	}{{"made at start", -1}, {"taken from the pool", 2}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testTaskEnvironment(t, tc.pool)
		})
	}
}

func testTaskEnvironment(t *testing.T, pool int) {
	name := "envjob" // a job name of its own per subtest (submit)
	if pool > 0 {
		name = "envjobpool"
	}
	c := newCluster(t)
	dataDir := t.TempDir()
	ag := c.startAgentWith(agent.Config{
		DataDir: dataDir, StopTasksOnExit: true, Meta: map[string]string{"rack": "r1"},
		Drivers: []driver.Driver{execdriver.New("exec"), execdriver.New("raw_exec")},
		DirPool: pool,
	})
	if pool > 0 {
		// Two trees of each kind: wait for them, so that the start takes
		// its directories from the pool.
		waitFor(t, 30*time.Second, "the directory pool to fill", func() bool {
			ready, _ := agent.DirPoolStats(ag.Agent)
			return ready == 2*pool
		})
	}
	script := `env
echo "ARGS|$1|$2|$3|$4"
echo "PWD|$(pwd -P)"
for d in "$NOMAD_ALLOC_DIR/logs" "$NOMAD_ALLOC_DIR/data" "$NOMAD_ALLOC_DIR/tmp" "$NOMAD_TASK_DIR" "$NOMAD_SECRETS_DIR" "$DROVER_TASK_DIR/tmp"; do
	if touch "$d/probe"; then echo "WRITABLE|$d"; fi
done`
	task := &spec.Task{
		Name: "show", Driver: "exec",
		// sh: a bare name, found through the task's PATH.
		Config: spec.TaskConfig{Command: "sh", Args: []string{"-c", script, "sh",
			"${NOMAD_JOB_NAME}-${NOMAD_ALLOC_INDEX}", "${attr.os}/${meta.rack}", "${NOMAD_PORT_none}", "${env.GREETING}"}},
		Env: map[string]string{"GREETING": "hello ${NOMAD_TASK_NAME}", "EMPTY": "",
			"WHERE": "${node.unique.name} in ${node.datacenter}"},
		Meta:      map[string]string{"owner": "task"},
		Resources: spec.Resources{CPU: 20, MemoryMB: 30},
		Restart:   restart(0, time.Minute, 100*time.Millisecond, spec.RestartFail),
	}
	j := job(name, spec.JobBatch, task)
	j.Meta = map[string]string{"owner": "job", "team": "a"}
	j.Groups[0].Meta = map[string]string{"team": "b"}
	c.submit(j)

	a := c.alloc(name, 10*time.Second, "alloc complete", func(a *spec.Alloc) bool {
		if a.ClientStatusOr() == spec.ClientFailed {
			t.Fatalf("env task failed:\n%s", describe(a))
		}
		return a.ClientStatusOr() == spec.ClientComplete
	})
	out := logs(t, c.client, a.ID, "show", false)
	env := map[string]string{}
	var args, pwd string
	var writable []string
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if rest, ok := strings.CutPrefix(l, "ARGS|"); ok {
			args = rest
			continue
		}
		if rest, ok := strings.CutPrefix(l, "PWD|"); ok {
			pwd = rest
			continue
		}
		if rest, ok := strings.CutPrefix(l, "WRITABLE|"); ok {
			writable = append(writable, rest)
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			t.Fatalf("env output line %q is not KEY=value:\n%s", l, out)
		}
		env[k] = v
	}
	delete(env, "PWD") // the shell's own
	allocDir := filepath.Join(dataDir, "allocs", a.ID)
	taskDir := filepath.Join(allocDir, "show")
	shared := filepath.Join(allocDir, "alloc")
	want := map[string]string{
		"PATH":                 "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME":                 taskDir,
		"DROVER_JOB_NAME":      name,
		"DROVER_GROUP_NAME":    "g",
		"DROVER_TASK_NAME":     "show",
		"DROVER_ALLOC_ID":      a.ID,
		"DROVER_ALLOC_NAME":    name + ".g[0]",
		"DROVER_ALLOC_INDEX":   "0",
		"DROVER_ALLOC_DIR":     allocDir,
		"DROVER_TASK_DIR":      taskDir,
		"DROVER_NODE_ID":       ag.NodeID(),
		"DROVER_NODE_NAME":     ag.name,
		"DROVER_CPU_LIMIT":     "20",
		"DROVER_MEMORY_LIMIT":  "30",
		"DROVER_JOB_VERSION":   strconv.FormatUint(a.JobVersion, 10),
		"NOMAD_JOB_NAME":       name,
		"NOMAD_JOB_ID":         name,
		"NOMAD_GROUP_NAME":     "g",
		"NOMAD_TASK_NAME":      "show",
		"NOMAD_ALLOC_ID":       a.ID,
		"NOMAD_SHORT_ALLOC_ID": a.ID[:8],
		"NOMAD_ALLOC_NAME":     name + ".g[0]",
		"NOMAD_ALLOC_INDEX":    "0",
		"NOMAD_ALLOC_DIR":      shared,
		"NOMAD_TASK_DIR":       filepath.Join(taskDir, "local"),
		"NOMAD_SECRETS_DIR":    filepath.Join(taskDir, "secrets"),
		"NOMAD_CPU_LIMIT":      "20",
		"NOMAD_MEMORY_LIMIT":   "30",
		"NOMAD_NAMESPACE":      "default",
		"NOMAD_REGION":         "global",
		"NOMAD_DC":             "dc1",
		"NOMAD_META_owner":     "task",
		"NOMAD_META_team":      "b",
		"GREETING":             "hello show",
		"EMPTY":                "",
		"WHERE":                "node-1 in dc1",
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
	// An unknown variable (no port "none") stays as written, as in Nomad.
	if w := name + "-0|" + runtime.GOOS + "/r1|${NOMAD_PORT_none}|hello show"; args != w {
		t.Errorf("interpolated args = %q, want %q", args, w)
	}
	if pwd != taskDir {
		t.Errorf("working directory %q, want the task's directory %q", pwd, taskDir)
	}
	wantDirs := []string{filepath.Join(shared, "logs"), filepath.Join(shared, "data"), filepath.Join(shared, "tmp"),
		filepath.Join(taskDir, "local"), filepath.Join(taskDir, "secrets"), filepath.Join(taskDir, "tmp")}
	if !slices.Equal(writable, wantDirs) {
		t.Errorf("directories the task could write to:\n%s\nwant:\n%s", strings.Join(writable, "\n"), strings.Join(wantDirs, "\n"))
	}
	if a.Name != name+".g[0]" {
		t.Errorf("alloc name %q", a.Name)
	}
	checkAllocTree(t, allocDir, "show")
	ready, taken := agent.DirPoolStats(ag.Agent)
	if pool > 0 && taken != 2 {
		t.Errorf("the start took %d trees from the pool, want 2 (the alloc's and the task's); %d ready", taken, ready)
	}
	if pool < 0 && ready+taken != 0 {
		t.Errorf("with no pool, %d trees ready and %d taken", ready, taken)
	}
}

// checkAllocTree checks the directories of an alloc of one task, and
// their modes, against the layout (taskdir.go): the shared alloc/ with
// logs/, data/ and tmp/; the task's local/, secrets/ (the agent's user
// only) and tmp/; each tmp/ writable by all and sticky. The others are
// 0o755 whatever the umask: a task run as another user enters them.
func checkAllocTree(t *testing.T, allocDir, task string) {
	t.Helper()
	plain := os.FileMode(0o755)
	want := map[string]os.FileMode{
		".": os.ModeDir | plain, "alloc": os.ModeDir | plain,
		"alloc/logs": os.ModeDir | plain, "alloc/data": os.ModeDir | plain,
		"alloc/tmp": os.ModeDir | os.ModeSticky | 0o777,
		task:        os.ModeDir | plain, task + "/local": os.ModeDir | plain,
		task + "/secrets": os.ModeDir | 0o700, task + "/tmp": os.ModeDir | os.ModeSticky | 0o777,
	}
	got := map[string]os.FileMode{}
	err := filepath.WalkDir(allocDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(allocDir, path)
		got[rel] = fi.Mode()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, want) {
		t.Errorf("alloc directories and modes:\n%v\nwant:\n%v", got, want)
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

// TestFingerprint checks each attribute the agent publishes, under
// Nomad's name, against what this machine says of itself elsewhere:
// uname(2), sysinfo(2), the Go runtime, os-release.
func TestFingerprint(t *testing.T) {
	t.Parallel()
	res, attrs := agent.Fingerprint()
	n := &spec.Node{Attributes: attrs}
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		t.Fatal(err)
	}
	machine := map[string]string{"x86_64": "amd64", "aarch64": "arm64"}[unix.ByteSliceToString(uts.Machine[:])]
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		t.Fatal(err)
	}
	mhz, err := strconv.Atoi(attrs[spec.AttrCPUFrequency])
	if err != nil || mhz <= 0 {
		t.Fatalf("%s = %q", spec.AttrCPUFrequency, attrs[spec.AttrCPUFrequency])
	}
	want := map[string]string{
		spec.AttrKernelName:       strings.ToLower(unix.ByteSliceToString(uts.Sysname[:])),
		spec.AttrKernelVersion:    unix.ByteSliceToString(uts.Release[:]),
		spec.AttrHostname:         unix.ByteSliceToString(uts.Nodename[:]),
		spec.AttrCPUNumCores:      strconv.Itoa(runtime.NumCPU()),
		spec.AttrCPUTotalCompute:  strconv.Itoa(mhz * runtime.NumCPU()),
		spec.AttrMemoryTotalBytes: strconv.FormatUint(uint64(si.Totalram)*uint64(si.Unit), 10),
	}
	if machine != "" {
		want[spec.AttrCPUArch] = machine
	}
	if b, err := os.ReadFile("/etc/os-release"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "ID="); ok {
				want[spec.AttrOSName] = strings.Trim(v, `"`)
			}
			if v, ok := strings.CutPrefix(line, "VERSION_ID="); ok {
				want[spec.AttrOSVersion] = strings.Trim(v, `"`)
			}
		}
	}
	for k, v := range want {
		if attrs[k] != v {
			t.Errorf("%s = %q, want %q", k, attrs[k], v)
		}
	}
	// Drover's older names read the same facts.
	for old, nomad := range map[string]string{"os": spec.AttrKernelName, "arch": spec.AttrCPUArch, "kernel": spec.AttrKernelVersion,
		"cpu.count": spec.AttrCPUNumCores, "cpu.mhz": spec.AttrCPUFrequency, "hostname": spec.AttrHostname} {
		if got, _ := n.Attribute(old); got != attrs[nomad] || got == "" {
			t.Errorf("old name %s = %q, want %s's %q", old, got, nomad, attrs[nomad])
		}
	}
	if res.CPU != mhz*runtime.NumCPU() || res.MemoryMB != int(uint64(si.Totalram)*uint64(si.Unit)>>20) {
		t.Errorf("resources %+v, want cpu %d MHz and memory %d MB", res, mhz*runtime.NumCPU(), uint64(si.Totalram)*uint64(si.Unit)>>20)
	}
}

// TestNodeScope registers a node with a datacenter, a class, a pool and
// meta through the real server, and runs a job whose datacenters, pool
// and constraints name them; an agent with a bad datacenter does not
// start.
func TestNodeScope(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	ag := c.startAgentWith(agent.Config{
		DataDir: t.TempDir(), Drivers: []driver.Driver{execdriver.New("raw_exec")}, StopTasksOnExit: true,
		Datacenter: "eu-west-1", NodeClass: "big", NodePool: "batch", Meta: map[string]string{"rack": "r1"},
	})
	n, err := c.client.Node(context.Background(), ag.NodeID())
	if err != nil {
		t.Fatal(err)
	}
	if n.Datacenter != "eu-west-1" || n.NodeClass != "big" || n.NodePool != "batch" {
		t.Fatalf("registered node: datacenter %q, class %q, pool %q", n.Datacenter, n.NodeClass, n.NodePool)
	}
	if v, _ := n.Attribute("driver.raw_exec"); v != "1" {
		t.Errorf("attr.driver.raw_exec = %q, want 1", v)
	}
	task := shTask("t", "true")
	task.Driver = "raw_exec"
	task.Constraints = []*spec.Constraint{
		{Attribute: "${attr.kernel.name}", Value: runtime.GOOS},
		{Attribute: "${node.class}", Value: "big"},
		{Attribute: "${meta.rack}", Value: "r1"},
		{Attribute: "${attr.driver.raw_exec}", Value: "1"},
	}
	j := job("scoped", spec.JobBatch, task)
	j.Datacenters, j.NodePool = []string{"eu-*"}, "batch"
	c.submit(j)
	c.alloc("scoped", 10*time.Second, "alloc complete", clientStatus(spec.ClientComplete))

	_, err = agent.New(agent.Config{DataDir: t.TempDir(), Client: c.client, Datacenter: "eu west"})
	if err == nil || !strings.Contains(err.Error(), `datacenter "eu west" contains ' '`) {
		t.Errorf("agent with datacenter \"eu west\": %v", err)
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

// The directory of a purged alloc is removed beside the starts of what
// comes next, not before them: a job submitted while the agent removes a
// big purged alloc directory runs before that directory is gone.
func TestStartsDoNotWaitForPurgedAllocDirs(t *testing.T) {
	c := newCluster(t)
	dataDir := t.TempDir()
	c.startAgent(dataDir, true)
	c.submit(job("old", spec.JobService, shTask("t", "sleep 600")))
	old := c.alloc("old", 10*time.Second, "old running", running("t"))
	// Files enough that removing them takes a while (about 25 us each
	// on ext4): the agent removes its own, one by one.
	data := filepath.Join(dataDir, "allocs", old.ID, "alloc", "data")
	for i := range 30000 {
		fd, err := unix.Open(filepath.Join(data, strconv.Itoa(i)), unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		unix.Close(fd)
	}
	before, err := os.Stat(data)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.client.StopJob(context.Background(), "old", true); err != nil {
		t.Fatal(err)
	}
	// The removal has begun once the directory changes.
	waitFor(t, 30*time.Second, "the purged alloc's directory being removed", func() bool {
		fi, err := os.Stat(data)
		return err != nil || !fi.ModTime().Equal(before.ModTime())
	})
	c.submit(job("new", spec.JobService, shTask("t", "sleep 600")))
	c.alloc("new", 30*time.Second, "new running", running("t"))
	if _, err := os.Stat(data); err != nil {
		t.Fatalf("the new job ran only once the purged alloc's directory was gone (%v)", err)
	}
	waitFor(t, 30*time.Second, "the purged alloc's directory gone", func() bool {
		_, err := os.Stat(filepath.Join(dataDir, "allocs", old.ID))
		return os.IsNotExist(err)
	})
}
