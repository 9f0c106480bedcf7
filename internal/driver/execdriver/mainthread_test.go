package execdriver_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sys/unix"

	"github.com/drover-org/drover/internal/driver"
	"github.com/drover-org/drover/internal/driver/execdriver"
	"github.com/drover-org/drover/internal/spec"
)

// mainThreadEnv set to 1 makes this test binary a child of
// TestForkingThreadIsNotTheMainThread: its main goroutine stays on the
// process's main thread (locked in init, as the runtime keeps it) and asks
// for a forking thread from there.
const mainThreadEnv = "DROVER_EXECDRIVER_TEST_MAIN_THREAD"

func init() {
	if os.Getenv(mainThreadEnv) == "1" {
		runtime.LockOSThread()
	}
}

func TestMain(m *testing.M) {
	if os.Getenv(mainThreadEnv) == "1" {
		os.Exit(forkingThreadsFromMainThread())
	}
	os.Exit(m.Run())
}

// forkingThreadsFromMainThread prints, 50 times, the process's pid, the
// thread the main goroutine is on and the thread a start run from there
// forks on.
func forkingThreadsFromMainThread() int {
	for range 50 {
		before := unix.Gettid()
		forking, after := execdriver.ForkingThread()
		fmt.Printf("pid %d caller %d forking %d after %d\n", os.Getpid(), before, forking, after)
	}
	return 0
}

// A start run from the process's main thread forks on another thread, and
// the main thread is still the caller's afterwards: on cgroup v1 the
// thread that forks a task is moved into the task's cgroups, and the main
// thread's memory cgroup is the whole process's. Checked in a child
// process whose main goroutine is on the main thread, by thread IDs the
// kernel gave (gettid), against the pid.
func TestForkingThreadIsNotTheMainThread(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), mainThreadEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 50 {
		t.Fatalf("child printed %d lines, want 50:\n%s", len(lines), out)
	}
	for _, l := range lines {
		var pid, caller, forking, after int
		if _, err := fmt.Sscanf(l, "pid %d caller %d forking %d after %d", &pid, &caller, &forking, &after); err != nil {
			t.Fatalf("child line %q: %v", l, err)
		}
		if caller != pid {
			t.Fatalf("the child's main goroutine ran on thread %d, not the main thread %d: the test proves nothing", caller, pid)
		}
		if forking == pid {
			t.Errorf("a start from the main thread forked on the main thread %d", pid)
		}
		if after != pid {
			t.Errorf("after the start the caller is on thread %d, not the main thread %d (its lock was lost)", after, pid)
		}
	}
}

// While exec tasks start from many goroutines, the agent's main thread
// (the thread group's leader, whose memory cgroup v1 charges the whole
// process's memory to) is never in a task's cgroup: its
// /proc/self/task/<pid>/cgroup, sampled all along, names no drover
// directory.
func TestMainThreadNeverInATaskCgroup(t *testing.T) {
	d := v1Driver(t)
	file := "/proc/self/task/" + strconv.Itoa(os.Getpid()) + "/cgroup"
	var stop atomic.Bool
	var samples int
	var bad []string
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for !stop.Load() {
			b, err := os.ReadFile(file)
			if err != nil {
				bad = append(bad, err.Error())
				return
			}
			samples++
			if strings.Contains(string(b), "/drover/") && len(bad) < 5 {
				bad = append(bad, string(b))
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				h, err := d.Start(context.Background(), driver.Task{Command: "true", Env: []string{testPATH}, Dir: t.TempDir(),
					ID: driver.TaskID{AllocID: uuid.NewString(), Task: "web"}, Resources: spec.Resources{CPU: 2, MemoryMB: 64}})
				if err != nil {
					errs <- err
					continue
				}
				select {
				case <-h.Wait():
				case <-time.After(20 * time.Second):
					errs <- fmt.Errorf("true did not exit within 20s")
				}
			}
		}()
	}
	wg.Wait()
	stop.Store(true)
	<-sampled
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(bad) > 0 {
		t.Errorf("the main thread was seen in a task's cgroup (%d samples):\n%s", samples, strings.Join(bad, "\n"))
	}
	t.Logf("%d samples of the main thread's cgroups over 100 starts", samples)
}
