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

// Pooled cgroups an agent no longer running left (named by its pid) are
// removed when the next driver is made; those of a running process stay.
func TestCgroupPoolsOfDeadAgentsAreRemoved(t *testing.T) {
	v1Driver(t)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stale := "pool-" + strconv.Itoa(dead.Process.Pid) + "-1-1"
	live := "pool-" + strconv.Itoa(os.Getpid()) + "-999999-1"
	dirs := droverDirs(t)
	for _, dir := range dirs {
		for _, n := range []string{stale, live} {
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
		if !exists(filepath.Join(dir, live)) {
			t.Errorf("%s: %s, a running process's pooled cgroup, was removed", dir, live)
		}
	}
}

// The thread that forks tasks stays in the last task's cgroups (the next
// start moves it from there), leaves them before they are removed, and
// goes back to the agent's when no start came for a while: then every
// thread of the process is in the process's own cgroups again, and the
// task's cgroup holds the task alone.
func TestForkerLeavesTaskCgroups(t *testing.T) {
	d := v1Driver(t)
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	h, _ := startTask(t, d, spec.Resources{CPU: 100, MemoryMB: 64}, "sleep", "30")
	dir := taskCgroupDirs(t, h.PID())[0]
	poll(t, execdriver.ForkerIdle+10*time.Second, "every thread of the process back in its own cgroups", func() bool {
		threads, _ := filepath.Glob("/proc/self/task/*/cgroup")
		for _, f := range threads {
			if b, err := os.ReadFile(f); err == nil && string(b) != string(own) {
				return false
			}
		}
		return true
	})
	b, err := os.ReadFile(filepath.Join(dir, "tasks"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(string(b)); len(got) != 1 || got[0] != strconv.Itoa(h.PID()) {
		t.Errorf("%s/tasks = %v, want the task's pid %d alone", dir, got, h.PID())
	}
	// A task that ends at once: its cgroup is removed while the thread
	// that forked it may still be in it. The thread leaves at once (a
	// removal that waited for it to go back by itself would take
	// ForkerIdle each).
	t0 := time.Now()
	for range 5 {
		id := driver.TaskID{AllocID: uuid.NewString(), Task: "web"}
		h, err := d.Start(context.Background(), driver.Task{Command: "true", Env: []string{testPATH}, Dir: t.TempDir(),
			ID: id, Resources: spec.Resources{MemoryMB: 64}})
		if err != nil {
			t.Fatal(err)
		}
		cg := filepath.Join(droverDirs(t)[0], id.AllocID+"-web")
		if e := waitExit(t, h, 10*time.Second); !e.Successful() {
			t.Fatalf("true: %s", e)
		}
		if exists(cg) {
			t.Errorf("%s is still there after its task ended", cg)
		}
	}
	if took := time.Since(t0); took > 5*execdriver.ForkerIdle/2 {
		t.Errorf("5 tasks of true took %s from start to exit, their cgroups removed: the forker did not leave them when asked", took)
	}
}

// Starts from many goroutines at once, as an agent's alloc runners make
// them: each task, reading /proc/self/cgroup as it starts, is in its own
// cgroup in every hierarchy, never in another task's (on v1 one thread
// forks them all, moving from cgroup to cgroup), with the pool on and
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
