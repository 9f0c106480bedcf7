package agent

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/driver"
	"github.com/drover-org/drover/internal/driver/execdriver"
	"github.com/drover-org/drover/internal/spec"
)

// These tests run one alloc's real task processes through an alloc runner
// and the exec driver, without a control plane: what they check (the
// task's environment, its prestart and stop commands, its directory) is
// decided on the node alone, and an alloc with ports can be made here
// before the scheduler hands them out.

// newTestAgent is an agent that is never Run: its runners report nowhere.
func newTestAgent(t *testing.T, cfg Config) *Agent {
	t.Helper()
	c, err := client.New("http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	cfg.Name, cfg.Client = "node-1", c
	cfg.Drivers = []driver.Driver{execdriver.New("raw_exec")}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func testAlloc(typ spec.JobType, tasks ...*spec.Task) *spec.Alloc {
	for _, t := range tasks {
		t.Driver, t.KillTimeout = "raw_exec", spec.Duration(2*time.Second)
		// A failure is final, so a test sees it at once.
		t.Restart = &spec.RestartPolicy{Attempts: new(int), Interval: spec.Duration(time.Minute), Mode: spec.RestartFail}
	}
	return &spec.Alloc{ID: uuid.NewString(), Name: "j.g[0]", Job: "j", Group: "g", JobType: typ, Tasks: tasks}
}

func sh(name, script string) *spec.Task {
	return &spec.Task{Name: name, Config: spec.TaskConfig{Command: "sh", Args: []string{"-c", script}}}
}

// runAlloc starts al's runner; cleanup stops it and kills what is left.
func runAlloc(t *testing.T, a *Agent, al *spec.Alloc) *allocRunner {
	t.Helper()
	ar := newAllocRunner(a, al)
	ctx, cancel := context.WithCancel(context.Background())
	ar.start(ctx, nil, nil)
	t.Cleanup(func() {
		ar.stop("test done")
		select {
		case <-ar.done:
		case <-time.After(20 * time.Second):
			t.Error("alloc runner did not finish within 20s of stop")
		}
		cancel()
		for _, l := range findLeftTasks(a.nodeID) {
			syscall.Kill(-l.PID, syscall.SIGKILL)
		}
	})
	return ar
}

// waitDone waits for every task of ar to finish and returns the status.
func waitDone(t *testing.T, ar *allocRunner, within time.Duration) *spec.AllocStatus {
	t.Helper()
	select {
	case <-ar.done:
	case <-time.After(within):
		t.Fatalf("alloc not done within %s:\n%s", within, eventsOf(ar.snapshot()))
	}
	return ar.snapshot()
}

func eventsOf(st *spec.AllocStatus) string {
	var b strings.Builder
	b.WriteString("client status " + string(st.ClientStatus) + ": " + st.Description + "\n")
	for name, ts := range st.Tasks {
		for _, e := range ts.Events {
			b.WriteString("  " + name + " " + string(e.Type) + ": " + e.Message + "\n")
		}
	}
	return b.String()
}

// eventLines is the task's events as "Type: message" lines.
func eventLines(ts *spec.TaskState) []string {
	var out []string
	for _, e := range ts.Events {
		out = append(out, string(e.Type)+": "+e.Message)
	}
	return out
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

func TestTaskEnvHasAllocPorts(t *testing.T) {
	t.Parallel()
	a := newTestAgent(t, Config{})
	al := testAlloc(spec.JobBatch, sh("t", "env"))
	al.Ports = []spec.AllocPort{
		{Label: "http", Value: 25000},
		{Label: "admin", Value: 25001, HostIP: "10.0.0.5"},
		{Label: "v6", Value: 25002, HostIP: "fd00::1"},
	}
	ar := runAlloc(t, a, al)
	if st := waitDone(t, ar, 10*time.Second); st.ClientStatus != spec.ClientComplete {
		t.Fatalf("alloc not complete:\n%s", eventsOf(st))
	}
	var got []string
	for line := range strings.SplitSeq(readFile(t, filepath.Join(ar.logDir(), "t.stdout.log")), "\n") {
		if strings.HasPrefix(line, "DROVER_PORT_") || strings.HasPrefix(line, "DROVER_ADDR_") {
			got = append(got, line)
		}
	}
	want := []string{
		"DROVER_ADDR_admin=10.0.0.5:25001",
		"DROVER_ADDR_http=127.0.0.1:25000",
		"DROVER_ADDR_v6=[fd00::1]:25002",
		"DROVER_PORT_admin=25001",
		"DROVER_PORT_http=25000",
		"DROVER_PORT_v6=25002",
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("port variables in the task's env:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestPrestartCommandsRunInOrderBeforeTask(t *testing.T) {
	t.Parallel()
	a := newTestAgent(t, Config{})
	out := filepath.Join(t.TempDir(), "order")
	task := sh("t", "echo main >> "+out)
	task.Config.Prestart = []spec.Command{
		{Command: "sh", Args: []string{"-c", "sleep 0.2; echo pre1 >> " + out + "; echo pre1 says hi"}},
		{Command: "sh", Args: []string{"-c", "echo pre2 >> " + out}},
	}
	ar := runAlloc(t, a, testAlloc(spec.JobBatch, task))
	if st := waitDone(t, ar, 10*time.Second); st.ClientStatus != spec.ClientComplete {
		t.Fatalf("alloc not complete:\n%s", eventsOf(st))
	}
	if got, want := readFile(t, out), "pre1\npre2\nmain\n"; got != want {
		t.Errorf("order of runs = %q, want %q", got, want)
	}
	if got, want := readFile(t, filepath.Join(ar.logDir(), "t.stdout.log")), "pre1 says hi\n"; got != want {
		t.Errorf("task stdout log = %q, want the prestart's output %q", got, want)
	}
}

func TestFailingPrestartFailsTask(t *testing.T) {
	t.Parallel()
	a := newTestAgent(t, Config{})
	out := filepath.Join(t.TempDir(), "order")
	task := sh("t", "echo main >> "+out)
	task.Config.Prestart = []spec.Command{
		{Command: "sh", Args: []string{"-c", "echo pre1 >> " + out}},
		{Command: "sh", Args: []string{"-c", "exit 3"}},
		{Command: "sh", Args: []string{"-c", "echo pre3 >> " + out}},
	}
	ar := runAlloc(t, a, testAlloc(spec.JobBatch, task))
	st := waitDone(t, ar, 10*time.Second)
	ts := st.Tasks["t"]
	want := []string{
		"Received: task received by node node-1",
		`Driver Failure: prestart command 2 of 3 (sh -c "exit 3") failed: exit code 3`,
		`Not Restarting: start failed: prestart command 2 of 3 (sh -c "exit 3") failed: exit code 3; exceeded 0 restarts within 1m0s`,
	}
	if got := eventLines(ts); !slices.Equal(got, want) {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if st.ClientStatus != spec.ClientFailed || !ts.Failed || ts.State != spec.TaskDead {
		t.Errorf("alloc %s, task %s failed=%v; want failed, dead, failed=true", st.ClientStatus, ts.State, ts.Failed)
	}
	if got, want := readFile(t, out), "pre1\n"; got != want {
		t.Errorf("runs = %q, want %q: nothing after the failed prestart runs", got, want)
	}
}

func TestStopCommandRunsBeforeSIGTERM(t *testing.T) {
	t.Parallel()
	a := newTestAgent(t, Config{})
	out := filepath.Join(t.TempDir(), "order")
	// The task records SIGTERM and exits; the stop command records itself
	// and its user-visible output goes to the task's log.
	task := sh("t", `trap 'echo term >> `+out+`; exit 0' TERM; echo up >> `+out+`; while :; do sleep 0.05; done`)
	task.Config.Stop = &spec.Command{Command: "sh", Args: []string{"-c", "echo stop >> " + out + "; echo stopping"}}
	ar := runAlloc(t, a, testAlloc(spec.JobService, task))
	deadline := time.Now().Add(10 * time.Second)
	for readFile(t, out) != "up\n" {
		if time.Now().After(deadline) {
			t.Fatalf("task did not come up:\n%s", eventsOf(ar.snapshot()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	ar.stop("test done")
	st := waitDone(t, ar, 10*time.Second)
	if got, want := readFile(t, out), "up\nstop\nterm\n"; got != want {
		t.Errorf("runs = %q, want %q", got, want)
	}
	if got, want := readFile(t, filepath.Join(ar.logDir(), "t.stdout.log")), "stopping\n"; got != want {
		t.Errorf("task stdout log = %q, want the stop command's output %q", got, want)
	}
	var killing []string
	for _, e := range st.Tasks["t"].Events {
		if e.Type == spec.EventKilling {
			killing = append(killing, e.Message)
		}
	}
	want := []string{
		`running stop command sh -c "echo stop >> ` + out + `; echo stopping" (for at most 2s)`,
		"test done: sent SIGTERM, SIGKILL after 2s", // the reason the alloc was stopped for
	}
	if !slices.Equal(killing, want) {
		t.Errorf("Killing events:\n%s\nwant:\n%s", strings.Join(killing, "\n"), strings.Join(want, "\n"))
	}
}

func TestWorkDir(t *testing.T) {
	t.Parallel()
	abs := t.TempDir()
	for _, c := range []struct{ name, workDir, want string }{
		{"default", "", ""},
		{"relative", "sub/dir", "sub/dir"},
		{"absolute", abs, abs},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			a := newTestAgent(t, Config{})
			task := sh("t", `pwd -P; echo "$DROVER_TASK_DIR"`)
			task.Config.WorkDir = c.workDir
			al := testAlloc(spec.JobBatch, task)
			taskDir := filepath.Join(a.allocsDir, al.ID, "t")
			want := c.want
			if !filepath.IsAbs(want) {
				want = filepath.Join(taskDir, want)
				if err := os.MkdirAll(want, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			want, err := filepath.EvalSymlinks(want)
			if err != nil {
				t.Fatal(err)
			}
			ar := runAlloc(t, a, al)
			if st := waitDone(t, ar, 10*time.Second); st.ClientStatus != spec.ClientComplete {
				t.Fatalf("alloc not complete:\n%s", eventsOf(st))
			}
			got := readFile(t, filepath.Join(ar.logDir(), "t.stdout.log"))
			if w := want + "\n" + taskDir + "\n"; got != w {
				t.Errorf("pwd and task dir = %q, want %q", got, w)
			}
		})
	}
}

func TestMissingWorkDirFailsStart(t *testing.T) {
	t.Parallel()
	a := newTestAgent(t, Config{})
	task := sh("t", "true")
	task.Config.WorkDir = "/nonexistent-drover-dir"
	ar := runAlloc(t, a, testAlloc(spec.JobBatch, task))
	st := waitDone(t, ar, 10*time.Second)
	want := "Driver Failure: start sh: working directory /nonexistent-drover-dir does not exist"
	if got := eventLines(st.Tasks["t"]); len(got) < 2 || got[1] != want {
		t.Errorf("events:\n%s\nwant the second to be:\n%s", strings.Join(got, "\n"), want)
	}
}

func TestFingerprintDiskAndNetworkIP(t *testing.T) {
	t.Parallel()
	a := newTestAgent(t, Config{Address: "http://10.1.2.3:4647"})
	n := a.Node()
	if n.Resources.DiskMB <= 0 {
		t.Errorf("disk = %d MB, want > 0", n.Resources.DiskMB)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(a.cfg.DataDir, &st); err != nil {
		t.Fatal(err)
	}
	// Other tests write meanwhile: allow a little drift.
	if want := int(st.Bavail * uint64(st.Bsize) >> 20); n.Resources.DiskMB < want-64 || n.Resources.DiskMB > want+64 {
		t.Errorf("disk = %d MB, want the data dir's free space, about %d MB", n.Resources.DiskMB, want)
	}
	if got := n.Attributes[spec.NodeIPAttribute]; got != "10.1.2.3" {
		t.Errorf("%s = %q, want the advertised address's IP 10.1.2.3", spec.NodeIPAttribute, got)
	}
	explicit := newTestAgent(t, Config{Address: "http://10.1.2.3:4647", NetworkIP: "192.0.2.7"})
	if got := explicit.Node().Attributes[spec.NodeIPAttribute]; got != "192.0.2.7" {
		t.Errorf("%s = %q, want the explicit 192.0.2.7", spec.NodeIPAttribute, got)
	}
}

func TestNodeIPFallsBackToAnInterface(t *testing.T) {
	t.Parallel()
	// The IPv4 addresses of this machine's interfaces that are up and not
	// loopback: the node's IP must be one of them, or 127.0.0.1 if none.
	var candidates []string
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, ifc := range ifs {
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && ifc.Flags&net.FlagUp != 0 && ifc.Flags&net.FlagLoopback == 0 && n.IP.To4() != nil {
				candidates = append(candidates, n.IP.String())
			}
		}
	}
	if len(candidates) == 0 {
		candidates = []string{"127.0.0.1"}
	}
	// The advertised host is no usable IP: a name, an unspecified address,
	// or nothing.
	for _, addr := range []string{"http://node-7.example:4647", "http://0.0.0.0:4647", "http://[::]:4647", ""} {
		if got := nodeIP("", addr); !slices.Contains(candidates, got) {
			t.Errorf("nodeIP(%q) = %q, want one of %v", addr, got, candidates)
		}
	}
	if got := nodeIP("", "http://127.0.0.1:4647"); got != "127.0.0.1" {
		t.Errorf("nodeIP for an agent advertising 127.0.0.1 = %q, want 127.0.0.1", got)
	}
}

func TestStopDuringPrestartStopsIt(t *testing.T) {
	t.Parallel()
	a := newTestAgent(t, Config{})
	out := filepath.Join(t.TempDir(), "order")
	task := sh("t", "echo main >> "+out)
	task.Config.Prestart = []spec.Command{{Command: "sh", Args: []string{"-c", "echo pre >> " + out + "; sleep 30"}}}
	ar := runAlloc(t, a, testAlloc(spec.JobBatch, task))
	deadline := time.Now().Add(10 * time.Second)
	for readFile(t, out) != "pre\n" {
		if time.Now().After(deadline) {
			t.Fatalf("prestart did not run:\n%s", eventsOf(ar.snapshot()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	begin := time.Now()
	ar.stop("test done")
	st := waitDone(t, ar, 10*time.Second)
	if d := time.Since(begin); d > time.Second {
		t.Errorf("stop took %s: the prestart should end at SIGTERM", d)
	}
	want := []string{
		"Received: task received by node node-1",
		`Killed: stopped during prestart command 1 of 1 (sh -c "echo pre >> ` + out + `; sleep 30")`,
	}
	ts := st.Tasks["t"]
	if got := eventLines(ts); !slices.Equal(got, want) {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if ts.Failed || st.ClientStatus != spec.ClientComplete {
		t.Errorf("alloc %s, task failed=%v; want complete, not failed", st.ClientStatus, ts.Failed)
	}
	if left := findLeftTasks(a.nodeID); len(left) != 0 {
		t.Errorf("processes left after the stop: %+v", left)
	}
	if got := readFile(t, out); got != "pre\n" {
		t.Errorf("runs = %q, want only the prestart's", got)
	}
}

// TestLeftHookIsKilledNotAdopted: a prestart or stop command left by an
// agent that died is not taken for the task by the next agent; it is
// killed, so that the task starts again from its first prestart command.
func TestLeftHookIsKilledNotAdopted(t *testing.T) {
	node := "hook-test-" + strconv.Itoa(os.Getpid())
	start := func(hook bool) *exec.Cmd {
		cmd := exec.Command("/bin/sleep", "60")
		cmd.Env = []string{"DROVER_NODE_ID=" + node, "DROVER_ALLOC_ID=a1", "DROVER_TASK_NAME=t"}
		if hook {
			cmd.Env = append(cmd.Env, "DROVER_HOOK=1")
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	task, hook := start(false), start(true)
	left := findLeftTasks(node)
	if len(left) != 1 || left[0].PID != task.Process.Pid {
		t.Fatalf("found %+v, want only the task %d", left, task.Process.Pid)
	}
	done := make(chan error, 1)
	go func() { done <- hook.Wait() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("the left hook (pid %d) is still running", hook.Process.Pid)
	}
}

// TestLogsBlockBoundsTheFiles: a task's logs block keeps max_files files
// of its stdout (the one written included), each rotated at
// max_file_size MB; the process writes 3.5 MB, of which the newest 2 MB
// or so remain in two files.
func TestLogsBlockBoundsTheFiles(t *testing.T) {
	t.Parallel()
	a := newTestAgent(t, Config{})
	task := sh("t", `i=0; while [ $i -lt 35 ]; do head -c 102400 /dev/zero | tr '\0' x; i=$((i+1)); done; echo; echo last-line`)
	task.Logs = &spec.LogConfig{MaxFiles: 2, MaxFileSizeMB: 1}
	ar := runAlloc(t, a, testAlloc(spec.JobBatch, task))
	if st := waitDone(t, ar, 20*time.Second); st.ClientStatus != spec.ClientComplete {
		t.Fatalf("alloc not complete:\n%s", eventsOf(st))
	}
	var names []string
	total := int64(0)
	entries, err := os.ReadDir(ar.logDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "t.stdout.log") && !strings.HasSuffix(e.Name(), ".idx") {
			fi, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, e.Name())
			total += fi.Size()
			if fi.Size() > 1<<20+102400 {
				t.Errorf("%s is %d bytes, past max_file_size 1 MB and one write", e.Name(), fi.Size())
			}
		}
	}
	if !slices.Equal(names, []string{"t.stdout.log", "t.stdout.log.1"}) {
		t.Errorf("stdout files %v, want the one written and one rotated (max_files 2)", names)
	}
	if total < 1<<20 || total > 3<<20 {
		t.Errorf("%d bytes kept in all, want between 1 and 3 MB of the 3.5 MB written", total)
	}
	if got := readFile(t, filepath.Join(ar.logDir(), "t.stdout.log")); !strings.HasSuffix(got, "last-line\n") {
		t.Errorf("the file being written does not end with the task's last line")
	}
}
