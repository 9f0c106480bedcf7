package execdriver_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/drover-org/drover/internal/driver"
	"github.com/drover-org/drover/internal/driver/execdriver"
	"github.com/drover-org/drover/internal/spec"
)

// These tests use real cgroups: they need root and a cgroup file system,
// and skip without them, except in CI, where a skip would hide that they
// never ran.

// isolatingDriver returns an exec driver that isolates, or skips.
func isolatingDriver(t *testing.T) *execdriver.Driver {
	t.Helper()
	d := execdriver.New("exec")
	if d.Isolation() != execdriver.IsolationNone {
		return d
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI runs as root with cgroups, but exec cannot isolate: %v", d.IsolationError())
	}
	t.Skipf("exec cannot isolate here: %v", d.IsolationError())
	return nil
}

var testapp struct {
	once sync.Once
	path string
	err  error
}

// testappPath builds internal/testapp once per test binary.
func testappPath(t *testing.T) string {
	t.Helper()
	testapp.once.Do(func() {
		dir, err := os.MkdirTemp("", "drover-testapp")
		if err != nil {
			testapp.err = err
			return
		}
		testapp.path = filepath.Join(dir, "testapp")
		out, err := exec.Command("go", "build", "-o", testapp.path, "github.com/drover-org/drover/internal/testapp").CombinedOutput()
		if err != nil {
			testapp.err = err
			testapp.path = string(out)
		}
	})
	if testapp.err != nil {
		t.Fatalf("build testapp: %v\n%s", testapp.err, testapp.path)
	}
	return testapp.path
}

func startTask(t *testing.T, d *execdriver.Driver, res spec.Resources, command string, args ...string) (driver.Handle, driver.TaskID) {
	t.Helper()
	id := driver.TaskID{AllocID: uuid.NewString(), Task: "web"}
	h, err := d.Start(context.Background(), driver.Task{Command: command, Args: args, Env: []string{testPATH},
		Dir: t.TempDir(), ID: id, Resources: res})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	pgid := h.PID()
	var dirs []string
	if d.Isolation() != execdriver.IsolationNone && d.Name() == "exec" {
		dirs = taskCgroupDirs(t, pgid)
	}
	t.Cleanup(func() {
		syscall.Kill(-pgid, syscall.SIGKILL)
		// The driver removes the task's cgroup once it has seen the exit;
		// the test binary may end before, so this waits for it.
		for _, dir := range dirs {
			for i := 0; i < 100 && exists(dir); i++ {
				time.Sleep(20 * time.Millisecond)
			}
			if exists(dir) {
				t.Errorf("cgroup %s still there after the task exited", dir)
			}
		}
	})
	return h, id
}

// cgroupOf is the path of pid's cgroup in hierarchy controller (v1; "" is
// the unified hierarchy), relative to that hierarchy's root.
func cgroupOf(t *testing.T, pid int, controller string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		for c := range strings.SplitSeq(parts[1], ",") {
			if c == controller {
				return parts[2]
			}
		}
	}
	t.Fatalf("pid %d is in no %q cgroup:\n%s", pid, controller, b)
	return ""
}

// taskCgroupDirs are the directories of pid's cgroups that the driver made.
func taskCgroupDirs(t *testing.T, pid int) []string {
	if cgroupOf(t, pid, "") != "/" {
		return []string{filepath.Join("/sys/fs/cgroup", cgroupOf(t, pid, ""))}
	}
	var dirs []string
	for _, c := range []string{"memory", "cpu", "cpuacct"} {
		dirs = append(dirs, filepath.Join("/sys/fs/cgroup", c, cgroupOf(t, pid, c)))
	}
	return dirs
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// memoryLimitFile is the file that holds pid's memory limit.
func memoryLimitFile(t *testing.T, d *execdriver.Driver, pid int) string {
	if d.Isolation() == execdriver.IsolationV2 {
		return filepath.Join("/sys/fs/cgroup", cgroupOf(t, pid, ""), "memory.max")
	}
	return filepath.Join("/sys/fs/cgroup/memory", cgroupOf(t, pid, "memory"), "memory.limit_in_bytes")
}

func TestExecTaskRunsInItsCgroupWithItsLimits(t *testing.T) {
	d := isolatingDriver(t)
	h, id := startTask(t, d, spec.Resources{CPU: 500, MemoryMB: 64}, "sleep", "30")
	if n, ok := h.(interface{ Note() string }); !ok || n.Note() != "" {
		t.Fatalf("isolated start has a note: %v", h)
	}
	file := memoryLimitFile(t, d, h.PID())
	if want := "/drover/" + id.AllocID + "-web/"; !strings.Contains(file, want) {
		t.Fatalf("task's cgroup is %s, want one under %s", file, want)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(string(b)), strconv.Itoa(64<<20); got != want {
		t.Fatalf("%s = %s, want %s", file, got, want)
	}
	if d.Isolation() == execdriver.IsolationV1 {
		shares := filepath.Join("/sys/fs/cgroup/cpu", cgroupOf(t, h.PID(), "cpu"), "cpu.shares")
		b, err := os.ReadFile(shares)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(b)); got != "500" {
			t.Fatalf("%s = %s, want 500", shares, got)
		}
	}
	// The cgroup goes with the task.
	cgdir := filepath.Dir(file)
	if _, err := h.Stop(context.Background(), time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cgdir); !os.IsNotExist(err) {
		t.Fatalf("cgroup %s still there after the task exited (%v)", cgdir, err)
	}
}

func TestExecTaskOverItsMemoryIsOOMKilled(t *testing.T) {
	d := isolatingDriver(t)
	h, _ := startTask(t, d, spec.Resources{MemoryMB: 64}, testappPath(t), "-alloc-mb", "200", "-listen", "127.0.0.1:0")
	e := waitExit(t, h, 30*time.Second)
	want := driver.Exit{Code: -1, Signal: "SIGKILL", OOMKilled: true, Time: e.Time}
	if e != want {
		t.Fatalf("exit = %+v, want %+v", e, want)
	}
	if got := e.String(); got != "killed: out of memory" {
		t.Fatalf("exit reads %q", got)
	}
}

func TestExecTaskKilledOtherwiseIsNotOOM(t *testing.T) {
	d := isolatingDriver(t)
	h, _ := startTask(t, d, spec.Resources{MemoryMB: 64}, "sleep", "30")
	syscall.Kill(h.PID(), syscall.SIGKILL)
	e := waitExit(t, h, 10*time.Second)
	if e.OOMKilled || e.Signal != "SIGKILL" {
		t.Fatalf("exit = %+v, want a SIGKILL that is not an OOM kill", e)
	}
}

func TestRawExecIsNotPutInACgroup(t *testing.T) {
	isolatingDriver(t) // this host could isolate; raw_exec still must not
	self := cgroupOf(t, os.Getpid(), "memory")
	h, _ := startTask(t, execdriver.New("raw_exec"), spec.Resources{MemoryMB: 64}, "sleep", "30")
	if got := cgroupOf(t, h.PID(), "memory"); got != self {
		t.Fatalf("raw_exec task is in memory cgroup %s, want the agent's %s", got, self)
	}
	if n, ok := h.(interface{ Note() string }); ok && n.Note() != "" {
		t.Fatalf("raw_exec start has a note: %q", n.Note())
	}
}

// busy is a shell loop that keeps a core busy and holds some memory.
const busy = `x=$(head -c 20000000 /dev/zero | tr '\0' a); while :; do :; done`

func TestUsageOfBusyTask(t *testing.T) {
	for _, name := range []string{"exec", "raw_exec"} {
		t.Run(name, func(t *testing.T) {
			d := execdriver.New(name)
			if name == "exec" {
				d = isolatingDriver(t)
			}
			h, _ := startTask(t, d, spec.Resources{CPU: 500, MemoryMB: 256}, "sh", "-c", busy)
			m, ok := h.(driver.Measurer)
			if !ok {
				t.Fatalf("%T is not a driver.Measurer", h)
			}
			var u driver.Usage
			poll(t, 10*time.Second, "CPU > 100ms and memory > 10 MB", func() bool {
				var err error
				if u, err = m.Usage(context.Background(), nil); err != nil {
					t.Fatal(err)
				}
				return u.CPU > 100*time.Millisecond && u.MemoryBytes > 10<<20
			})
			if u.MemoryBytes > 256<<20 {
				t.Fatalf("usage %+v: more memory than the task can hold", u)
			}
		})
	}
}

// Measuring an isolated task reads the few cgroup files it needs: the
// agent measures every task every 10 s, and a thousand tasks each read
// through the library's GetStats (every figure of every controller) cost
// 8% of a core and tens of MB of garbage at every sample.
func TestUsageOfIsolatedTaskReadsOnlyWhatItNeeds(t *testing.T) {
	h, _ := startTask(t, isolatingDriver(t), spec.Resources{MemoryMB: 64}, "sleep", "30")
	m := h.(driver.Measurer)
	allocs := testing.AllocsPerRun(20, func() {
		if _, err := m.Usage(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 10 {
		t.Fatalf("measuring an isolated task makes %.0f allocations, want at most 10", allocs)
	}
}

func TestAdoptedExecTaskKeepsItsCgroup(t *testing.T) {
	d := isolatingDriver(t)
	h, _ := startTask(t, d, spec.Resources{MemoryMB: 64}, "sh", "-c", "sleep 1; exec "+testappPath(t)+" -alloc-mb 200 -listen 127.0.0.1:0")
	a := detachAndAdopt(t, h, &syncBuffer{}, &syncBuffer{})
	if n := a.(interface{ Note() string }).Note(); strings.Contains(n, "cgroup") {
		t.Fatalf("adopt note: %s", n)
	}
	if _, err := a.(driver.Measurer).Usage(context.Background(), nil); err != nil {
		t.Fatalf("Usage of the adopted task: %v", err)
	}
	e := waitExit(t, a, 30*time.Second)
	if !e.OOMKilled {
		t.Fatalf("adopted task's exit = %+v (%s), want OOM-killed", e, e)
	}
}

// exec tells the node what isolates its tasks; raw_exec, which never
// isolates, tells nothing.
func TestInfoSaysIsolation(t *testing.T) {
	d := execdriver.New("exec")
	if got := d.Info().Attributes["driver.exec.isolation"]; got != d.Isolation() {
		t.Errorf("exec's driver.exec.isolation = %q, want %q", got, d.Isolation())
	}
	if a := execdriver.New("raw_exec").Info().Attributes; len(a) != 0 {
		t.Errorf("raw_exec's attributes = %v, want none", a)
	}
}

// A task is in its cgroup from its first instruction: cat reads
// /proc/self/cgroup as soon as it runs, and sees the task's cgroup in
// every hierarchy (v1: joining after the fork let cat see the agent's).
// The agent's own threads are all back in its cgroups afterwards.
func TestExecTaskIsBornInItsCgroup(t *testing.T) {
	d := isolatingDriver(t)
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		id := driver.TaskID{AllocID: uuid.NewString(), Task: "web"}
		var out syncBuffer
		h, err := d.Start(context.Background(), driver.Task{Command: "cat", Args: []string{"/proc/self/cgroup"}, Env: []string{testPATH},
			Dir: t.TempDir(), ID: id, Resources: spec.Resources{CPU: 100, MemoryMB: 64}, Stdout: &out})
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
		if e := waitExit(t, h, 10*time.Second); !e.Successful() {
			t.Fatalf("cat /proc/self/cgroup: %s", e)
		}
		want := "/drover/" + id.AllocID + "-web"
		controllers := []string{"memory", "cpu", "cpuacct"}
		if d.Isolation() == execdriver.IsolationV2 {
			controllers = []string{""}
		}
		for _, c := range controllers {
			if got := cgroupLine(out.String(), c); !strings.HasSuffix(got, want) {
				t.Fatalf("start %d: the task saw itself in %s cgroup %q at its start, want one ending in %s:\n%s", i, c, got, want, out.String())
			}
		}
	}
	threads, err := filepath.Glob("/proc/self/task/*/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range threads {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread ended
		}
		if string(b) != string(own) {
			t.Fatalf("%s after the starts:\n%s\nwant the process's own:\n%s", f, b, own)
		}
	}
}

// cgroupLine is the path of controller's line in the text of a
// /proc/PID/cgroup ("" is the unified hierarchy's line).
func cgroupLine(text, controller string) string {
	for line := range strings.SplitSeq(strings.TrimSpace(text), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) < 3 {
			continue
		}
		for c := range strings.SplitSeq(parts[1], ",") {
			if c == controller {
				return parts[2]
			}
		}
	}
	return ""
}

// A cgroup left by an earlier agent with a lower memory+swap limit is
// reused with the new limits: v1 keeps memsw >= memory, so raising the
// memory limit past the old memsw limit must raise memsw first.
func TestExecReusesALeftCgroupWithNewLimits(t *testing.T) {
	d := isolatingDriver(t)
	if d.Isolation() != execdriver.IsolationV1 {
		t.Skip("cgroup v1 only: v2 has no combined memory+swap limit")
	}
	own := cgroupOf(t, os.Getpid(), "memory")
	parent := filepath.Join("/sys/fs/cgroup/memory", own, "drover")
	if !exists(filepath.Join(parent, "memory.memsw.limit_in_bytes")) {
		t.Skip("no swap accounting here: no memory+swap limit to order")
	}
	id := driver.TaskID{AllocID: uuid.NewString(), Task: "web"}
	left := filepath.Join(parent, id.AllocID+"-web")
	if err := os.Mkdir(left, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(left) })
	for _, f := range []string{"memory.limit_in_bytes", "memory.memsw.limit_in_bytes"} {
		if err := os.WriteFile(filepath.Join(left, f), []byte(strconv.Itoa(32<<20)), 0); err != nil {
			t.Fatal(err)
		}
	}
	h, err := d.Start(context.Background(), driver.Task{Command: "sleep", Args: []string{"30"}, Env: []string{testPATH},
		Dir: t.TempDir(), ID: id, Resources: spec.Resources{MemoryMB: 64}})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { syscall.Kill(-h.PID(), syscall.SIGKILL); waitExit(t, h, 10*time.Second) })
	if n, ok := h.(interface{ Note() string }); ok && n.Note() != "" {
		t.Fatalf("start in a left cgroup has a note: %s", n.Note())
	}
	for _, f := range []string{"memory.limit_in_bytes", "memory.memsw.limit_in_bytes"} {
		b, err := os.ReadFile(filepath.Join(left, f))
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(b)); got != strconv.Itoa(64<<20) {
			t.Fatalf("%s = %s, want %d", f, got, 64<<20)
		}
	}
}

// BenchmarkStart starts b.N tasks of sleep, one after the other, through
// each driver (exec isolated where it can be), as the agent does: each
// with its output pipes and, for exec, its cgroup. exec finds its cgroup
// pool (cgroup v1) holding b.N cgroups, as a node does once it has seen a
// burst that size (made with the limits of the start before); exec-cold
// finds it empty and off. Beside the wall time
// it reports the CPU time this process spent per start (cpu-ns/op, from
// getrusage: steadier than the wall time on a busy machine).
func BenchmarkStart(b *testing.B) {
	for _, name := range []string{"exec", "exec-cold", "raw_exec"} {
		b.Run(name, func(b *testing.B) {
			d := execdriver.New(strings.TrimSuffix(name, "-cold"))
			res := spec.Resources{CPU: 100, MemoryMB: 64}
			switch name {
			case "exec":
				warmPool(b, d, res)
			case "exec-cold":
				execdriver.StopCgroupPool(d)
			}
			dir := b.TempDir()
			hs := make([]driver.Handle, 0, b.N)
			defer func() {
				for _, h := range hs {
					syscall.Kill(-h.PID(), syscall.SIGKILL)
					<-h.Wait()
				}
			}()
			var ru0, ru1 syscall.Rusage
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
			b.ResetTimer()
			for range b.N {
				h, err := d.Start(context.Background(), driver.Task{Command: "/bin/sleep", Args: []string{"600"}, Env: []string{testPATH}, Dir: dir,
					ID: driver.TaskID{AllocID: uuid.NewString(), Task: "t"}, Resources: res})
				if err != nil {
					b.Fatal(err)
				}
				hs = append(hs, h)
			}
			b.StopTimer()
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
			cpu := time.Duration(ru1.Utime.Nano() - ru0.Utime.Nano() + ru1.Stime.Nano() - ru0.Stime.Nano())
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// TestExecMemoryMaxIsTheHardLimit: with memory_max, the task's hard memory
// limit is memory_max and what it reserves (memory) its soft limit.
func TestExecMemoryMaxIsTheHardLimit(t *testing.T) {
	d := isolatingDriver(t)
	h, _ := startTask(t, d, spec.Resources{CPU: 100, MemoryMB: 32, MemoryMaxMB: 96}, "sleep", "30")
	hard := memoryLimitFile(t, d, h.PID())
	soft := filepath.Join(filepath.Dir(hard), "memory.soft_limit_in_bytes")
	if d.Isolation() == execdriver.IsolationV2 {
		soft = filepath.Join(filepath.Dir(hard), "memory.low")
	}
	for file, want := range map[string]int{hard: 96 << 20, soft: 32 << 20} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(string(b)); got != strconv.Itoa(want) {
			t.Errorf("%s = %s, want %d", file, got, want)
		}
	}
}

// readCgroupFile is the trimmed content of a cgroup file.
func readCgroupFile(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// unlimitedMemory reports whether a cgroup memory limit file's value means
// no limit: v2's "max", or v1's largest value (the kernel rounds -1 down
// to a page multiple: at least 2^62 on any page size).
func unlimitedMemory(v string) bool {
	n, err := strconv.ParseInt(v, 10, 64)
	return v == "max" || (err == nil && n >= 1<<62)
}

// TestExecMemoryMaxUnlimitedSetsNoHardLimit: with memory_max = -1 (Nomad's
// "no hard limit") the task's cgroup has no memory limit, what it reserves
// is its soft limit, and it may hold more memory than it reserved without
// being killed: 160 MB held against 64 MB reserved, read from the
// cgroup's own usage.
func TestExecMemoryMaxUnlimitedSetsNoHardLimit(t *testing.T) {
	d := isolatingDriver(t)
	h, _ := startTask(t, d, spec.Resources{CPU: 100, MemoryMB: 64, MemoryMaxMB: spec.MemoryMaxUnlimited},
		testappPath(t), "-alloc-mb", "160", "-listen", "127.0.0.1:0")
	hard := memoryLimitFile(t, d, h.PID())
	soft, usage := filepath.Join(filepath.Dir(hard), "memory.soft_limit_in_bytes"), filepath.Join(filepath.Dir(hard), "memory.usage_in_bytes")
	files := []string{hard}
	if d.Isolation() == execdriver.IsolationV2 {
		soft, usage = filepath.Join(filepath.Dir(hard), "memory.low"), filepath.Join(filepath.Dir(hard), "memory.current")
		files = append(files, filepath.Join(filepath.Dir(hard), "memory.swap.max"))
	} else if sw := filepath.Join(filepath.Dir(hard), "memory.memsw.limit_in_bytes"); exists(sw) {
		files = append(files, sw)
	}
	for _, f := range files {
		if v := readCgroupFile(t, f); !unlimitedMemory(v) {
			t.Errorf("%s = %s, want no limit", f, v)
		}
	}
	if v := readCgroupFile(t, soft); v != strconv.Itoa(64<<20) {
		t.Errorf("%s = %s, want the reserved %d", soft, v, 64<<20)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		n, _ := strconv.ParseInt(readCgroupFile(t, usage), 10, 64)
		if n >= 160<<20 {
			break
		}
		select {
		case e := <-h.Wait():
			t.Fatalf("task exited (%+v) holding %d MB, before reaching 160 MB", e, n>>20)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("task's cgroup uses %d MB after 20s, want 160 MB", n>>20)
		}
	}
	select {
	case e := <-h.Wait():
		t.Fatalf("task holding 160 MB over its 64 MB reserved exited: %+v", e)
	case <-time.After(500 * time.Millisecond):
	}
}

// TestExecMemoryMaxUnlimitedClearsALeftLimit: a cgroup left by an earlier
// agent with a 32 MB memory and memory+swap limit, reused for a task with
// memory_max = -1, loses both limits (cgroup v1, which keeps them in the
// directory).
func TestExecMemoryMaxUnlimitedClearsALeftLimit(t *testing.T) {
	d := isolatingDriver(t)
	if d.Isolation() != execdriver.IsolationV1 {
		t.Skip("cgroup v1 only: a v2 cgroup is reused through the library's own Set")
	}
	own := cgroupOf(t, os.Getpid(), "memory")
	parent := filepath.Join("/sys/fs/cgroup/memory", own, "drover")
	id := driver.TaskID{AllocID: uuid.NewString(), Task: "web"}
	left := filepath.Join(parent, id.AllocID+"-web")
	if err := os.Mkdir(left, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(left) })
	files := []string{"memory.limit_in_bytes"}
	if exists(filepath.Join(parent, "memory.memsw.limit_in_bytes")) {
		files = append(files, "memory.memsw.limit_in_bytes")
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(left, f), []byte(strconv.Itoa(32<<20)), 0); err != nil {
			t.Fatal(err)
		}
	}
	h, err := d.Start(context.Background(), driver.Task{Command: "sleep", Args: []string{"30"}, Env: []string{testPATH},
		Dir: t.TempDir(), ID: id, Resources: spec.Resources{MemoryMB: 64, MemoryMaxMB: spec.MemoryMaxUnlimited}})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { syscall.Kill(-h.PID(), syscall.SIGKILL); waitExit(t, h, 10*time.Second) })
	if got := memoryLimitFile(t, d, h.PID()); filepath.Dir(got) != left {
		t.Fatalf("task runs in %s, want the left cgroup %s", filepath.Dir(got), left)
	}
	for _, f := range files {
		if v := readCgroupFile(t, filepath.Join(left, f)); !unlimitedMemory(v) {
			t.Errorf("%s = %s, want no limit", f, v)
		}
	}
	if v := readCgroupFile(t, filepath.Join(left, "memory.soft_limit_in_bytes")); v != strconv.Itoa(64<<20) {
		t.Errorf("memory.soft_limit_in_bytes = %s, want %d", v, 64<<20)
	}
}

// TestFailedStartRemovesItsCgroup: a start that fails after its task's
// cgroup was made (here: no descriptor left for the output pipes) leaves
// no cgroup behind, in any hierarchy.
func TestFailedStartRemovesItsCgroup(t *testing.T) {
	d := isolatingDriver(t)
	t.Cleanup(func() { d.Close() })
	// The pool full: its goroutine opens no descriptor during the start.
	execdriver.FillCgroupPool(d, 16, time.Minute)
	id := driver.TaskID{AllocID: uuid.NewString(), Task: "web"}
	var dirs []string
	if d.Isolation() == execdriver.IsolationV2 {
		dirs = []string{filepath.Join("/sys/fs/cgroup/drover", id.AllocID+"-web")}
	} else {
		for _, c := range []string{"memory", "cpu", "cpuacct"} {
			dirs = append(dirs, filepath.Join("/sys/fs/cgroup", c, cgroupOf(t, os.Getpid(), c), "drover", id.AllocID+"-web"))
		}
	}
	t.Cleanup(func() {
		for _, dir := range dirs {
			os.Remove(dir)
		}
	})
	// Room for one more descriptor, the most the cgroup's making holds
	// at once (v2: the cgroup directory opened for clone3), and none for
	// a pipe, which needs two.
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	low := old
	low.Cur = uint64(len(fds)) // the listing's own descriptor is closed: one free
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	_, err = d.Start(context.Background(), driver.Task{Command: "sleep", Args: []string{"30"}, Env: []string{testPATH},
		Dir: t.TempDir(), ID: id, Resources: spec.Resources{CPU: 100, MemoryMB: 64}})
	if rerr := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old); rerr != nil {
		t.Fatal(rerr)
	}
	if err == nil {
		t.Fatal("Start succeeded with no descriptor left for its pipes")
	}
	if !errors.Is(err, syscall.EMFILE) {
		t.Fatalf("Start: %v, want EMFILE (the pipes)", err)
	}
	for _, dir := range dirs {
		if exists(dir) {
			t.Errorf("cgroup %s left after the failed start (%v)", dir, err)
		}
	}
}

// warmPool readies d's cgroup pool as a burst of b.N starts before would
// have: one start first (the pool makes its cgroups with the limits starts
// ask for), then the pool filled to b.N.
func warmPool(b *testing.B, d *execdriver.Driver, res spec.Resources) {
	b.Helper()
	h, err := d.Start(context.Background(), driver.Task{Command: "/bin/true", Env: []string{testPATH}, Dir: b.TempDir(),
		ID: driver.TaskID{AllocID: uuid.NewString(), Task: "t"}, Resources: res})
	if err != nil {
		b.Fatal(err)
	}
	<-h.Wait()
	execdriver.FillCgroupPool(d, b.N, time.Minute)
}

// BenchmarkStartParallel is BenchmarkStart with starts four at a time, as
// the agent makes them (its start slots: two per CPU on the two-CPU VM of
// docs/performance.md), the cgroup pool holding b.N cgroups.
func BenchmarkStartParallel(b *testing.B) {
	for _, name := range []string{"exec", "raw_exec"} {
		b.Run(name, func(b *testing.B) {
			d := execdriver.New(name)
			res := spec.Resources{CPU: 100, MemoryMB: 64}
			if name == "exec" {
				warmPool(b, d, res)
			}
			dir := b.TempDir()
			hs := make(chan driver.Handle, b.N)
			defer func() {
				close(hs)
				for h := range hs {
					syscall.Kill(-h.PID(), syscall.SIGKILL)
					<-h.Wait()
				}
			}()
			var ru0, ru1 syscall.Rusage
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
			b.SetParallelism(2) // 2 x GOMAXPROCS goroutines
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					h, err := d.Start(context.Background(), driver.Task{Command: "/bin/sleep", Args: []string{"600"}, Env: []string{testPATH}, Dir: dir,
						ID: driver.TaskID{AllocID: uuid.NewString(), Task: "t"}, Resources: res})
					if err != nil {
						b.Error(err)
						return
					}
					hs <- h
				}
			})
			b.StopTimer()
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
			cpu := time.Duration(ru1.Utime.Nano() - ru0.Utime.Nano() + ru1.Stime.Nano() - ru0.Stime.Nano())
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}
