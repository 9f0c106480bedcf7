package execdriver_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/drover-org/drover/internal/driver"
	"github.com/drover-org/drover/internal/driver/execdriver"
	"github.com/drover-org/drover/internal/proc"
	"github.com/drover-org/drover/internal/spec"
)

// v1Driver is an exec driver isolating on cgroup v1, or the test skips
// (in CI too where the cgroups are v2: v2 has no pool, and its start is
// tested by the other cgroup tests).
func v1Driver(t *testing.T) *execdriver.Driver {
	t.Helper()
	d := isolatingDriver(t)
	if d.Isolation() != execdriver.IsolationV1 {
		t.Skip("cgroup v1 only: v2 cannot rename a cgroup, and starts tasks in theirs by clone3")
	}
	return d
}

// droverDirs are the drover directories this process's v1 task cgroups go
// in, one per hierarchy, read from /proc/self/cgroup.
func droverDirs(t *testing.T) []string {
	var dirs []string
	for _, c := range []string{"memory", "cpu", "cpuacct"} {
		dirs = append(dirs, filepath.Join("/sys/fs/cgroup", c, cgroupOf(t, os.Getpid(), c), "drover"))
	}
	return dirs
}

// inodes maps the inode of each directory in dir whose name starts with
// prefix to its name.
func inodes(t *testing.T, dir, prefix string) map[uint64]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint64]string{}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(dir, e.Name()), &st); err == nil {
			out[st.Ino] = e.Name()
		}
	}
	return out
}

// A start takes a cgroup the pool made ahead: in every hierarchy, the
// task's cgroup (named by alloc and task, as the task itself reads it in
// /proc/self/cgroup at its start) is a directory that was in the pool
// before the start (the same inode, renamed), and the pool holds one
// fewer. The task's limits are written to it.
func TestExecTakesItsCgroupFromThePool(t *testing.T) {
	d := v1Driver(t)
	if !execdriver.FillCgroupPool(d, 4, 30*time.Second) {
		t.Fatal("the cgroup pool did not fill to 4 within 30s")
	}
	prefix := execdriver.CgroupPoolPrefix(d)
	dirs := droverDirs(t)
	before := make([]map[uint64]string, len(dirs))
	for i, dir := range dirs {
		before[i] = inodes(t, dir, prefix)
		if len(before[i]) < 4 {
			t.Fatalf("%s holds %d cgroups named %s*, want at least 4: %v", dir, len(before[i]), prefix, before[i])
		}
	}
	id := driver.TaskID{AllocID: uuid.NewString(), Task: "web"}
	var out syncBuffer
	h, err := d.Start(context.Background(), driver.Task{Command: "sh", Args: []string{"-c", "cat /proc/self/cgroup; exec sleep 30"}, Env: []string{testPATH},
		Dir: t.TempDir(), ID: id, Resources: spec.Resources{CPU: 100, MemoryMB: 48}, Stdout: &out})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { syscall.Kill(-h.PID(), syscall.SIGKILL); waitExit(t, h, 10*time.Second) })
	name := id.AllocID + "-web"
	poll(t, 10*time.Second, "the task to print its cgroups", func() bool { return strings.Count(out.String(), "\n") >= 3 })
	for i, c := range []string{"memory", "cpu", "cpuacct"} {
		if got := cgroupLine(out.String(), c); !strings.HasSuffix(got, "/drover/"+name) {
			t.Fatalf("the task saw itself in %s cgroup %q at its start, want one ending in /drover/%s", c, got, name)
		}
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(dirs[i], name), &st); err != nil {
			t.Fatal(err)
		}
		if _, ok := before[i][st.Ino]; !ok {
			t.Errorf("%s: the task's cgroup (inode %d) was not in the pool before the start: %v", c, st.Ino, before[i])
		}
		if after := inodes(t, dirs[i], prefix); len(after) >= len(before[i]) {
			t.Errorf("%s: the pool holds %d cgroups after a start, %d before", c, len(after), len(before[i]))
		}
	}
	b, err := os.ReadFile(filepath.Join(dirs[0], name, "memory.limit_in_bytes"))
	if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(48<<20) {
		t.Errorf("memory.limit_in_bytes = %q (%v), want %d", b, err, 48<<20)
	}
	b, err = os.ReadFile(filepath.Join(dirs[1], name, "cpu.shares"))
	if err != nil || strings.TrimSpace(string(b)) != "100" {
		t.Errorf("cpu.shares = %q (%v), want 100", b, err)
	}
}

// Pooled cgroups an agent no longer running left (named by its pid and
// start time) are removed when the next driver is made, and so are those
// named by a running process's pid with another start time (the pid
// reused: an agent that is PID 1 of a restarted container); those of a
// running process stay.
func TestCgroupPoolsOfDeadAgentsAreRemoved(t *testing.T) {
	v1Driver(t)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	st, err := proc.ReadStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	pid, start := strconv.Itoa(os.Getpid()), strconv.FormatUint(st.StartTicks, 10)
	stale := "pool-" + strconv.Itoa(dead.Process.Pid) + "-" + start + "-1-1"
	reused := "pool-" + pid + "-" + strconv.FormatUint(st.StartTicks+1, 10) + "-1-1"
	live := "pool-" + pid + "-" + start + "-999999-1"
	dirs := droverDirs(t)
	for _, dir := range dirs {
		for _, n := range []string{stale, reused, live} {
			if err := os.Mkdir(filepath.Join(dir, n), 0o755); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Remove(filepath.Join(dir, n)) })
		}
	}
	execdriver.New("exec")
	for _, dir := range dirs {
		if exists(filepath.Join(dir, stale)) {
			t.Errorf("%s: %s, a dead process's pooled cgroup, is still there", dir, stale)
		}
		if exists(filepath.Join(dir, reused)) {
			t.Errorf("%s: %s, a pooled cgroup of an earlier process with this pid, is still there", dir, reused)
		}
		if !exists(filepath.Join(dir, live)) {
			t.Errorf("%s: %s, a running process's pooled cgroup, was removed", dir, live)
		}
	}
}

// Starts from many goroutines at once, as an agent's alloc runners make
// them: each task, reading /proc/self/cgroup as it starts, is in its own
// cgroup in every hierarchy, never in another task's (on v1 each is forked
// by a thread moved into its cgroups and back), with the pool on and
// emptied along the way.
func TestConcurrentStartsAreEachBornInTheirCgroup(t *testing.T) {
	d := isolatingDriver(t)
	controllers := []string{"memory", "cpu", "cpuacct"}
	if d.Isolation() == execdriver.IsolationV2 {
		controllers = []string{""}
	}
	const workers, each = 12, 4
	errs := make(chan string, workers*each)
	done := make(chan struct{})
	for w := range workers {
		go func() {
			defer func() { done <- struct{}{} }()
			for range each {
				id := driver.TaskID{AllocID: uuid.NewString(), Task: "web" + strconv.Itoa(w)}
				var out syncBuffer
				h, err := d.Start(context.Background(), driver.Task{Command: "cat", Args: []string{"/proc/self/cgroup"}, Env: []string{testPATH},
					Dir: t.TempDir(), ID: id, Resources: spec.Resources{CPU: 100, MemoryMB: 64}, Stdout: &out})
				if err != nil {
					errs <- "Start: " + err.Error()
					continue
				}
				select {
				case e := <-h.Wait():
					if !e.Successful() {
						errs <- "cat: " + e.String()
						continue
					}
				case <-time.After(20 * time.Second):
					errs <- "cat did not exit within 20s"
					continue
				}
				want := "/drover/" + id.AllocID + "-" + id.Task
				for _, c := range controllers {
					if got := cgroupLine(out.String(), c); !strings.HasSuffix(got, want) {
						errs <- "in " + c + " cgroup " + got + " at its start, want one ending in " + want
					}
				}
			}
		}()
	}
	for range workers {
		<-done
	}
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestCloseRemovesThePool: the driver's Close (an agent that stops)
// removes every cgroup its pool holds ready, in every hierarchy, and
// leaves the cgroup of a task that runs.
func TestCloseRemovesThePool(t *testing.T) {
	d := v1Driver(t)
	if !execdriver.FillCgroupPool(d, 8, 30*time.Second) {
		t.Fatal("the cgroup pool did not fill to 8 within 30s")
	}
	prefix := execdriver.CgroupPoolPrefix(d)
	id := driver.TaskID{AllocID: uuid.NewString(), Task: "web"}
	h, err := d.Start(context.Background(), driver.Task{Command: "sleep", Args: []string{"30"}, Env: []string{testPATH},
		Dir: t.TempDir(), ID: id, Resources: spec.Resources{CPU: 100, MemoryMB: 48}})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { syscall.Kill(-h.PID(), syscall.SIGKILL); waitExit(t, h, 10*time.Second) })
	dirs := droverDirs(t)
	for _, dir := range dirs {
		if n := len(inodes(t, dir, prefix)); n == 0 {
			t.Fatalf("%s holds no pooled cgroup before Close", dir)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	for _, dir := range dirs {
		if left := inodes(t, dir, prefix); len(left) > 0 {
			t.Errorf("%s holds %d pooled cgroups after Close: %v", dir, len(left), left)
		}
		if _, err := os.Stat(filepath.Join(dir, id.AllocID+"-web")); err != nil {
			t.Errorf("the running task's cgroup after Close: %v", err)
		}
	}
}

// The pool makes its cgroups with the limits the last start asked for,
// so that the next start asking the same (a burst of one job's
// instances) writes none: read from the kernel's files, the cgroups it
// made after a start hold that start's memory limit and CPU shares. A
// start asking other limits than its pooled cgroup holds gets its own,
// the kernel's defaults where it asks none: every start here, whether its
// cgroup was pooled before the first start (no limits) or after (the
// first start's), ends with its own limits.
func TestPooledCgroupsHoldTheLastStartsLimits(t *testing.T) {
	d := v1Driver(t)
	if !execdriver.FillCgroupPool(d, 16, 30*time.Second) {
		t.Fatal("the cgroup pool did not fill to 16 within 30s")
	}
	prefix := execdriver.CgroupPoolPrefix(d)
	dirs := droverDirs(t)
	before := inodes(t, dirs[0], prefix)
	startTask(t, d, spec.Resources{CPU: 300, MemoryMB: 48}, "sleep", "30")
	if !execdriver.FillCgroupPool(d, len(before)+8, 30*time.Second) {
		t.Fatalf("the cgroup pool did not fill to %d within 30s", len(before)+8)
	}
	read := func(dir, name, file string) string {
		b, err := os.ReadFile(filepath.Join(dir, name, file))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	swap := exists(filepath.Join(dirs[0], "memory.memsw.limit_in_bytes"))
	made := 0
	for ino, name := range inodes(t, dirs[0], prefix) {
		if _, ok := before[ino]; ok {
			continue
		}
		made++
		if got := read(dirs[0], name, "memory.limit_in_bytes"); got != strconv.Itoa(48<<20) {
			t.Errorf("pooled cgroup %s made after the start: memory.limit_in_bytes = %s, want %d", name, got, 48<<20)
		}
		if got := read(dirs[0], name, "memory.memsw.limit_in_bytes"); swap && got != strconv.Itoa(48<<20) {
			t.Errorf("pooled cgroup %s made after the start: memory.memsw.limit_in_bytes = %s, want %d", name, got, 48<<20)
		}
		if got := read(dirs[1], name, "cpu.shares"); got != "300" {
			t.Errorf("pooled cgroup %s made after the start: cpu.shares = %s, want 300", name, got)
		}
	}
	if made < 8 {
		t.Fatalf("the pool made %d cgroups after the start, want at least 8", made)
	}
	// Other limits, no CPU: each takes a pooled cgroup, old or new.
	unlimited := read(dirs[0], "", "memory.limit_in_bytes") // the kernel's "no limit", as it reads back
	for i := range len(before) + 8 {
		h, id := startTask(t, d, spec.Resources{MemoryMB: 32, MemoryMaxMB: 96}, "sleep", "30")
		name := id.AllocID + "-web"
		want := map[string]string{"memory.limit_in_bytes": strconv.Itoa(96 << 20), "memory.soft_limit_in_bytes": strconv.Itoa(32 << 20)}
		if swap {
			want["memory.memsw.limit_in_bytes"] = strconv.Itoa(96 << 20)
		}
		for f, v := range want {
			if got := read(dirs[0], name, f); got != v {
				t.Errorf("start %d (pid %d): %s = %s, want %s", i, h.PID(), f, got, v)
			}
		}
		if got := read(dirs[1], name, "cpu.shares"); got != "1024" {
			t.Errorf("start %d (pid %d): cpu.shares = %s, want the default 1024", i, h.PID(), got)
		}
	}
	// And unlimited again: the pool's cgroups now hold the 96 MB limit.
	h, id := startTask(t, d, spec.Resources{CPU: 100}, "sleep", "30")
	if got := read(dirs[0], id.AllocID+"-web", "memory.limit_in_bytes"); got != unlimited {
		t.Errorf("start without memory (pid %d): memory.limit_in_bytes = %s, want no limit (%s)", h.PID(), got, unlimited)
	}
}
