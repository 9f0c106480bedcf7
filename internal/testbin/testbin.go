// Package testbin holds what drover's end-to-end test packages (e2e,
// clustertest, etcdcluster) share: building the drover binary, telling the
// test cache which sources it was built from, and a few small helpers for
// driving real processes. Only tests import it.
package testbin

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/proc"
)

// Build compiles ../../cmd/drover (relative to the calling test package)
// into dir and returns the binary's path.
func Build(dir string) (string, error) {
	bin := filepath.Join(dir, "drover")
	out, err := exec.Command("go", "build", "-o", bin, "../../cmd/drover").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("building drover: %v\n%s", err, out)
	}
	return bin, nil
}

// Main is a TestMain for packages that drive the drover binary: it builds
// it into a temporary directory, sets *bin, runs the tests (Run) and
// cleans up.
func Main(m *testing.M, bin *string) {
	dir, err := os.MkdirTemp("", "drover-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*bin, err = Build(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := Run(m, dir)
	os.RemoveAll(dir)
	os.Exit(code)
}

// Run runs m's tests with TMPDIR set to dir, so that every temporary
// directory they make (t.TempDir, a process's data dir, a task's alloc
// dir) is below it, and returns m.Run's code. A test stops whatever it
// starts, also when it fails: when the tests are done, a process still
// running below dir (its working directory, its command line or, for a
// drover task, whose environment drover makes, its DROVER_ALLOC_DIR) fails
// the run, named, and is killed.
func Run(m *testing.M, dir string) int {
	os.Setenv("TMPDIR", dir)
	code := m.Run()
	// What a cleanup killed may not have exited yet.
	left := Leftovers(dir)
	for deadline := time.Now().Add(5 * time.Second); len(left) > 0 && time.Now().Before(deadline); left = Leftovers(dir) {
		time.Sleep(100 * time.Millisecond)
	}
	if len(left) == 0 {
		return code
	}
	fmt.Fprintf(os.Stderr, "testbin: %d processes that the tests started are still running (a test must stop what it starts, also when it fails; killed now):\n", len(left))
	for _, l := range left {
		fmt.Fprintf(os.Stderr, "  %s\n", l)
		syscall.Kill(-l.PID, syscall.SIGKILL) // a task's process group
		syscall.Kill(l.PID, syscall.SIGKILL)
	}
	return 1
}

// Leftover is a live process found by Leftovers.
type Leftover struct {
	PID     int
	Why     string // what places it below the directory
	Command string
}

func (l Leftover) String() string { return fmt.Sprintf("pid %d (%s): %s", l.PID, l.Why, l.Command) }

// Leftovers returns the live processes, other than this one, whose working
// directory or command line is below dir, or whose DROVER_ALLOC_DIR is
// (drover's tasks: their environment and directory are drover's).
func Leftovers(dir string) []Leftover {
	below := func(p string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }
	entries, _ := os.ReadDir("/proc")
	var left []Leftover
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() || Zombie(pid) {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || len(b) == 0 {
			continue // gone, or a kernel thread
		}
		cmdline := strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
		env, _ := proc.Environ(pid)
		alloc, _ := proc.Getenv(env, "DROVER_ALLOC_DIR")
		cwd, _ := os.Readlink("/proc/" + e.Name() + "/cwd")
		var why string
		switch {
		case below(strings.TrimSuffix(cwd, " (deleted)")):
			why = "working directory " + cwd
		case strings.Contains(cmdline, dir+"/"):
			why = "command line"
		case alloc != "" && below(alloc):
			why = "DROVER_ALLOC_DIR " + alloc
		default:
			continue
		}
		left = append(left, Leftover{PID: pid, Why: why, Command: cmdline})
	}
	return left
}

// TouchSources stats every Go source file of the module under root.
// `go test` caches results keyed on the files a test opens; the binary is
// built in a subprocess it cannot see, so this tells it the tests depend on
// them all. It must run inside a test (m.Run installs the file log), not in
// TestMain.
func TouchSources(root string) {
	filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(path, ".go") || d.Name() == "go.mod" || d.Name() == "go.sum") {
			os.Stat(path)
		}
		return nil
	})
}

// WaitFor polls cond every 100 ms until it holds, and fails the test when
// timeout passes first: every wait in a test has a deadline.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s", timeout, what)
}

// Zombie reports whether pid has exited but not been reaped (or is gone).
func Zombie(pid int) bool {
	st, err := proc.ReadStat(pid)
	return err != nil || st.Dead()
}

// TaskProcs returns the PIDs of live drover task processes (process group
// leaders) of job ("" for any job) whose alloc directory is below under
// ("" for anywhere). Limiting by directory keeps another test run on the
// same machine from being counted.
func TaskProcs(job, under string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := proc.Environ(pid)
		if err != nil {
			continue
		}
		name, ok := proc.Getenv(env, "DROVER_JOB_NAME")
		if !ok || (job != "" && name != job) {
			continue
		}
		if dir, _ := proc.Getenv(env, "DROVER_ALLOC_DIR"); !strings.HasPrefix(dir, under) {
			continue
		}
		if pgid, err := syscall.Getpgid(pid); err == nil && pgid == pid && !Zombie(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// KillTasks SIGKILLs job's task processes below under (and their process
// groups) and waits, up to 10 s, until none is left: a killed agent leaves
// its tasks running, by design, and they must not outlive the test that
// started them (t.TempDir cannot remove a directory they still write to).
func KillTasks(t testing.TB, job, under string) {
	t.Helper()
	for _, pid := range TaskProcs(job, under) {
		syscall.Kill(-pid, syscall.SIGKILL)
		syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(TaskProcs(job, under)) > 0 {
		if time.Now().After(deadline) {
			t.Errorf("task processes of %s still running 10s after SIGKILL: %v", job, TaskProcs(job, under))
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Tail returns the last n lines of s.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// SyncBuffer is a bytes.Buffer safe for a process's output and a test
// reading it at once.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Block is a fenced code block of a markdown file.
type Block struct {
	// Lang is what follows the opening fence ("sh", "hcl").
	Lang string
	// Text is the block's lines, each less the indentation of a block
	// nested in a list (three spaces).
	Text string
	// Line is the opening fence's line number.
	Line int
	// Section is the heading (## ...) the block is under.
	Section string
}

// CodeBlocks are the fenced code blocks of a markdown text: what the
// tests that follow a document's instructions read.
func CodeBlocks(md string) []Block {
	var out []Block
	var cur *Block
	section := ""
	for i, line := range strings.Split(md, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case cur == nil && strings.HasPrefix(trimmed, "```"):
			cur = &Block{Lang: strings.TrimPrefix(trimmed, "```"), Line: i + 1, Section: section}
		case cur != nil && trimmed == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.Text += strings.TrimPrefix(line, "   ") + "\n"
		case strings.HasPrefix(line, "## "):
			section = strings.TrimPrefix(line, "## ")
		}
	}
	return out
}
