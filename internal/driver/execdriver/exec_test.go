package execdriver_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/driver"
	"github.com/drover-org/drover/internal/driver/execdriver"
)

// These tests run real processes. Every task is started in its own process
// group; cleanup SIGKILLs that group so that a failing test leaves nothing
// behind.

const testPATH = "PATH=/usr/local/bin:/usr/bin:/bin"

// syncBuffer is a bytes.Buffer safe for the driver's copy goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// start runs sh -c script and registers cleanup of its process group.
func start(t *testing.T, script string, stdout, stderr *syncBuffer) driver.Handle {
	t.Helper()
	task := driver.Task{Command: "sh", Args: []string{"-c", script}, Env: []string{testPATH}, Dir: t.TempDir()}
	if stdout != nil {
		task.Stdout = stdout
	}
	if stderr != nil {
		task.Stderr = stderr
	}
	h, err := execdriver.New("raw_exec").Start(context.Background(), task)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	pgid := h.PID()
	t.Cleanup(func() { syscall.Kill(-pgid, syscall.SIGKILL) })
	return h
}

// waitExit waits for the task's exit, failing the test after within.
func waitExit(t *testing.T, h driver.Handle, within time.Duration) driver.Exit {
	t.Helper()
	select {
	case e := <-h.Wait():
		return e
	case <-time.After(within):
		t.Fatalf("task pid %d did not exit within %s", h.PID(), within)
		return driver.Exit{}
	}
}

// groupMembers returns the live (non-zombie) processes whose process group
// is pgid, with their command names.
func groupMembers(pgid int) map[int]string {
	out := map[int]string{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || closing < open {
			continue
		}
		f := strings.Fields(s[closing+1:])
		// f[0] state, f[1] ppid, f[2] pgrp.
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if g, _ := strconv.Atoi(f[2]); g == pgid {
			out[pid] = s[open+1 : closing]
		}
	}
	return out
}

func countComm(m map[int]string, comm string) int {
	n := 0
	for _, c := range m {
		if c == comm {
			n++
		}
	}
	return n
}

// poll calls cond every 10 ms until it holds or within passes.
func poll(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestStdoutAndStderrCapturedSeparately(t *testing.T) {
	t.Parallel()
	var stdout, stderr syncBuffer
	h := start(t, `echo out1; echo err1 >&2; echo out2; echo err2 >&2`, &stdout, &stderr)
	e := waitExit(t, h, 10*time.Second)
	if !e.Successful() {
		t.Fatalf("exit = %+v, want success", e)
	}
	// The exit is delivered after the pipes drained, so output is complete.
	if got, want := stdout.String(), "out1\nout2\n"; got != want {
		t.Errorf("stdout = %q, want %q", got, want)
	}
	if got, want := stderr.String(), "err1\nerr2\n"; got != want {
		t.Errorf("stderr = %q, want %q", got, want)
	}
	if e.Time.IsZero() {
		t.Error("exit time not set")
	}
}

// What a task finds on its standard descriptors, from its own /proc:
// stdin /dev/null read-only, at its end; stdout and stderr pipes open
// read-write (so that no write of it fails while no agent reads) and
// blocking (a nonblocking one would fail its writes with EAGAIN once the
// pipe is full). Twice over, since tasks share their /dev/null.
func TestTaskStandardDescriptors(t *testing.T) {
	t.Parallel()
	// $$, the task's shell: a command substitution's own fd 1 is not the task's.
	script := `cat; for fd in 0 1 2; do printf '%s ' $fd; readlink /proc/$$/fd/$fd | tr '\n' ' '; sed -n 's/^flags:[[:space:]]*//p' /proc/$$/fdinfo/$fd; done`
	for range 2 {
		var stdout syncBuffer
		h := start(t, script, &stdout, nil)
		if e := waitExit(t, h, 10*time.Second); !e.Successful() {
			t.Fatalf("exit = %+v, want success", e)
		}
		lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
		if len(lines) != 3 {
			t.Fatalf("output %q, want a line for each of fds 0, 1, 2", stdout.String())
		}
		for fd, line := range lines {
			f := strings.Fields(line)
			if len(f) != 3 || f[0] != strconv.Itoa(fd) {
				t.Fatalf("fd %d: line %q, want \"fd target flags\"", fd, line)
			}
			flags, err := strconv.ParseUint(f[2], 8, 64)
			if err != nil {
				t.Fatalf("fd %d: flags %q: %v", fd, f[2], err)
			}
			wantTarget, wantMode := "pipe:", uint64(syscall.O_RDWR)
			if fd == 0 {
				wantTarget, wantMode = os.DevNull, syscall.O_RDONLY
			}
			if !strings.HasPrefix(f[1], wantTarget) || flags&syscall.O_ACCMODE != wantMode || flags&syscall.O_NONBLOCK != 0 {
				t.Errorf("fd %d is %s with flags %o, want %s..., access mode %o, blocking", fd, f[1], flags, wantTarget, wantMode)
			}
		}
	}
}

// The first byte a task writes is captured, also from a task that ends at
// once.
func TestFirstByteCaptured(t *testing.T) {
	t.Parallel()
	for range 5 {
		var stdout, stderr syncBuffer
		h := start(t, `printf o; printf e >&2`, &stdout, &stderr)
		if e := waitExit(t, h, 10*time.Second); !e.Successful() {
			t.Fatalf("exit = %+v, want success", e)
		}
		if stdout.String() != "o" || stderr.String() != "e" {
			t.Fatalf("stdout %q, stderr %q; want \"o\" and \"e\"", stdout.String(), stderr.String())
		}
	}
}

func TestNilWritersDiscardOutput(t *testing.T) {
	t.Parallel()
	h := start(t, `echo out; echo err >&2; exit 0`, nil, nil)
	if e := waitExit(t, h, 10*time.Second); !e.Successful() {
		t.Fatalf("exit = %+v, want success", e)
	}
}

func TestExitCodeReported(t *testing.T) {
	t.Parallel()
	h := start(t, `exit 7`, nil, nil)
	e := waitExit(t, h, 10*time.Second)
	if e.Code != 7 || e.Signal != "" || e.Err != nil {
		t.Fatalf("exit = %+v, want code 7", e)
	}
	if e.Successful() {
		t.Error("exit 7 reported successful")
	}
	if got := e.String(); got != "exit code 7" {
		t.Errorf("String() = %q", got)
	}
}

func TestKilledBySignalReported(t *testing.T) {
	t.Parallel()
	h := start(t, `kill -KILL $$`, nil, nil)
	e := waitExit(t, h, 10*time.Second)
	if e.Code != -1 || e.Signal != "SIGKILL" {
		t.Fatalf("exit = %+v, want code -1 signal SIGKILL", e)
	}
	if e.Successful() {
		t.Error("killed task reported successful")
	}
	if got := e.String(); got != "killed by SIGKILL" {
		t.Errorf("String() = %q", got)
	}
}

func TestStopTerminatesWholeProcessGroup(t *testing.T) {
	t.Parallel()
	h := start(t, `sleep 1000 & sleep 1000 & wait`, nil, nil)
	pgid := h.PID()
	poll(t, 5*time.Second, "both sleeps to start", func() bool {
		return countComm(groupMembers(pgid), "sleep") == 2
	})

	const grace = 5 * time.Second
	begin := time.Now()
	e, err := h.Stop(context.Background(), grace)
	if err != nil {
		t.Fatalf("Stop: %v", err)
	}
	// sh dies of SIGTERM at once: Stop must not have waited for the grace.
	if d := time.Since(begin); d >= grace {
		t.Errorf("Stop took %s; SIGTERM should have ended the task before the %s grace", d, grace)
	}
	if e.Signal != "SIGTERM" || e.Code != -1 {
		t.Errorf("exit = %+v, want killed by SIGTERM", e)
	}
	poll(t, 5*time.Second, "no process left in group "+strconv.Itoa(pgid), func() bool {
		return len(groupMembers(pgid)) == 0
	})
}

func TestStopEscalatesToSIGKILLAfterGrace(t *testing.T) {
	t.Parallel()
	// An ignored signal stays ignored across exec, so neither sh nor sleep
	// reacts to SIGTERM.
	h := start(t, `trap "" TERM; sleep 1000; echo not reached`, nil, nil)
	pgid := h.PID()
	poll(t, 5*time.Second, "sleep to start (trap installed)", func() bool {
		return countComm(groupMembers(pgid), "sleep") == 1
	})

	const grace = 500 * time.Millisecond
	begin := time.Now()
	e, err := h.Stop(context.Background(), grace)
	d := time.Since(begin)
	if err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if d < grace {
		t.Errorf("Stop returned after %s, before the %s grace: SIGTERM should have been ignored", d, grace)
	}
	if d > grace+3*time.Second {
		t.Errorf("Stop took %s, want about the %s grace", d, grace)
	}
	if e.Signal != "SIGKILL" {
		t.Errorf("exit = %+v, want killed by SIGKILL", e)
	}
	poll(t, 5*time.Second, "no process left in group "+strconv.Itoa(pgid), func() bool {
		return len(groupMembers(pgid)) == 0
	})
}

func TestStopReturnsWhenContextEnds(t *testing.T) {
	t.Parallel()
	h := start(t, `trap "" TERM; sleep 1000`, nil, nil)
	pgid := h.PID()
	poll(t, 5*time.Second, "sleep to start", func() bool {
		return countComm(groupMembers(pgid), "sleep") == 1
	})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	begin := time.Now()
	_, err := h.Stop(ctx, time.Hour)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop err = %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(begin); d > 3*time.Second {
		t.Errorf("Stop took %s after its context ended", d)
	}
	// Giving up waiting still kills the group rather than leaking it.
	poll(t, 5*time.Second, "no process left in group", func() bool {
		return len(groupMembers(pgid)) == 0
	})
	waitExit(t, h, 5*time.Second)
}

// A grandchild that keeps the output pipes open must not hide the task's
// exit, and Stop after the exit still cleans up the rest of the group.
func TestExitSeenWhileGrandchildHoldsPipes(t *testing.T) {
	t.Parallel()
	var stdout syncBuffer
	h := start(t, `sleep 1000 & echo leader done`, &stdout, nil)
	pgid := h.PID()
	e := waitExit(t, h, 5*time.Second)
	if !e.Successful() {
		t.Fatalf("exit = %+v, want success", e)
	}
	poll(t, 5*time.Second, "leader output", func() bool { return stdout.String() == "leader done\n" })
	// The task ended with its main process: what it left in its group is
	// killed, so restarts do not pile up strays.
	poll(t, 5*time.Second, "no process left in group", func() bool {
		return len(groupMembers(pgid)) == 0
	})
	if _, err := h.Stop(context.Background(), 5*time.Second); err != nil {
		t.Fatalf("Stop after exit: %v", err)
	}
}

func TestCommandNotFound(t *testing.T) {
	t.Parallel()
	d := execdriver.New("exec")
	_, err := d.Start(context.Background(), driver.Task{Command: "drover-no-such-command", Env: []string{testPATH}, Dir: t.TempDir()})
	if err == nil {
		t.Fatal("Start of a missing command succeeded")
	}
	for _, want := range []string{"drover-no-such-command", "not found", "/usr/local/bin:/usr/bin:/bin"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}

	_, err = d.Start(context.Background(), driver.Task{Command: "/nonexistent/drover-cmd", Dir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/drover-cmd") || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("absolute missing command: err = %v, want one naming the path and wrapping ErrNotExist", err)
	}

	_, err = d.Start(context.Background(), driver.Task{Command: "", Dir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "no command") {
		t.Errorf("empty command: err = %v, want \"no command\"", err)
	}
}

func TestRelativeCommandResolvedThroughTaskPATH(t *testing.T) {
	t.Parallel()
	bin := t.TempDir()
	tool := filepath.Join(bin, "drover-test-tool")
	if err := os.WriteFile(tool, []byte("#!/bin/sh\necho tool ran with \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A directory and a non-executable file of the same name earlier in
	// PATH are skipped.
	shadow := t.TempDir()
	if err := os.WriteFile(filepath.Join(shadow, "drover-test-tool"), []byte("not executable"), 0o644); err != nil {
		t.Fatal(err)
	}
	shadowDir := t.TempDir()
	if err := os.Mkdir(filepath.Join(shadowDir, "drover-test-tool"), 0o755); err != nil {
		t.Fatal(err)
	}

	d := execdriver.New("raw_exec")
	var stdout syncBuffer
	h, err := d.Start(context.Background(), driver.Task{
		Command: "drover-test-tool", Args: []string{"a", "b"},
		Env:    []string{"PATH=" + shadowDir + ":" + shadow + ":" + bin + ":/usr/bin:/bin"},
		Dir:    t.TempDir(),
		Stdout: &stdout,
	})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if e := waitExit(t, h, 10*time.Second); !e.Successful() {
		t.Fatalf("exit = %+v", e)
	}
	if got, want := stdout.String(), "tool ran with a b\n"; got != want {
		t.Errorf("stdout = %q, want %q", got, want)
	}

	// The agent's own PATH does not count: without bin in the task's PATH
	// the command is not found.
	t.Run("not in task PATH", func(t *testing.T) {
		_, err := d.Start(context.Background(), driver.Task{Command: "drover-test-tool", Env: []string{testPATH}, Dir: t.TempDir()})
		if err == nil || !strings.Contains(err.Error(), "not found") {
			t.Errorf("err = %v, want not found", err)
		}
	})
}

func TestEnvAndWorkingDirPassed(t *testing.T) {
	// Not parallel: it sets an environment variable of the test process to
	// check that the task does not inherit it.
	t.Setenv("DROVER_TEST_AGENT_ONLY", "leaked")
	dir := t.TempDir()
	var stdout syncBuffer
	h, err := execdriver.New("exec").Start(context.Background(), driver.Task{
		Command: "sh", Args: []string{"-c", `echo "foo=$FOO"; echo "spaced=$SPACED"; echo "pwd=$(pwd -P)"; env`},
		Env:    []string{testPATH, "FOO=bar", "SPACED=a b  c"},
		Dir:    dir,
		Stdout: &stdout,
	})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if e := waitExit(t, h, 10*time.Second); !e.Successful() {
		t.Fatalf("exit = %+v", e)
	}
	out := stdout.String()
	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"foo=bar\n", "spaced=a b  c\n", "pwd=" + realDir + "\n", "\nFOO=bar\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "DROVER_TEST_AGENT_ONLY") {
		t.Errorf("task inherited the agent's environment:\n%s", out)
	}
}

func TestExitSuccessfulAndString(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		exit driver.Exit
		ok   bool
		str  string
	}{
		{driver.Exit{}, true, "exit code 0"},
		{driver.Exit{Code: 1}, false, "exit code 1"},
		{driver.Exit{Code: 255}, false, "exit code 255"},
		{driver.Exit{Code: -1, Signal: "SIGTERM"}, false, "killed by SIGTERM"},
		{driver.Exit{Code: 0, Signal: "SIGKILL"}, false, "killed by SIGKILL"},
		{driver.Exit{Code: -1, Err: errors.New("no child")}, false, "wait failed: no child"},
		{driver.Exit{Err: errors.New("boom"), Signal: "SIGKILL"}, false, "wait failed: boom"},
		{driver.Exit{Code: -1234567}, false, "exit code -1234567"},
	} {
		if got := tc.exit.Successful(); got != tc.ok {
			t.Errorf("%+v.Successful() = %v, want %v", tc.exit, got, tc.ok)
		}
		if got := tc.exit.String(); got != tc.str {
			t.Errorf("%+v.String() = %q, want %q", tc.exit, got, tc.str)
		}
	}
}

func TestNameAndPID(t *testing.T) {
	t.Parallel()
	if got := execdriver.New("raw_exec").Name(); got != "raw_exec" {
		t.Errorf("Name() = %q", got)
	}
	h := start(t, `sleep 1000`, nil, nil)
	// The task leads its own process group.
	pgid, err := syscall.Getpgid(h.PID())
	if err != nil {
		t.Fatal(err)
	}
	if pgid != h.PID() {
		t.Errorf("pgid = %d, want the task's pid %d", pgid, h.PID())
	}
	if pgid == syscall.Getpgrp() {
		t.Error("task shares the test's process group")
	}
	if _, err := h.Stop(context.Background(), time.Second); err != nil {
		t.Fatal(err)
	}
}

// liveHeap is the heap the test process holds, after collecting garbage
// (twice: what sync.Pools hold is dropped at the second collection).
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// A running task that has printed and is quiet holds no read buffer: an
// agent with a thousand tasks would otherwise hold 64 MB of them.
func TestQuietTasksHoldNoBuffers(t *testing.T) {
	const n = 50
	before := liveHeap()
	var outs []*syncBuffer
	for range n {
		stdout, stderr := &syncBuffer{}, &syncBuffer{}
		start(t, "echo out; echo err >&2; exec sleep 30", stdout, stderr)
		outs = append(outs, stdout, stderr)
	}
	// Each pipe has been read: a copy that keeps its buffer has one now.
	poll(t, 20*time.Second, "every task's output copied", func() bool {
		for _, b := range outs {
			if b.String() == "" {
				return false
			}
		}
		return true
	})
	perTask := (int64(liveHeap()) - int64(before)) / n
	if perTask > 16<<10 {
		t.Fatalf("each running task holds %d bytes of heap, want at most 16 KB (two pipes' 32 KB read buffers would be 64 KB)", perTask)
	}
	t.Logf("%d bytes of heap per running task", perTask)
}
