package execdriver_test

import (
	"bytes"
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/driver"
	"github.com/drover-org/drover/internal/driver/execdriver"
	"github.com/drover-org/drover/internal/proc"
)

// manyTasks is how many tasks TestManyTasksCostNoThreads runs at once: far
// more than the threads a Go process has on its own, so that a thread per
// task cannot hide.
const manyTasks = 200

// spareThreads is how many OS threads the test allows the process to gain
// while it runs manyTasks tasks, twice over: the runtime may start a few
// for its own work (a P handed off during a fork, a GC worker), never one
// per task.
const spareThreads = 8

// osThreads reads this process's thread count from /proc/self/status: what
// the kernel counts, not what the driver or the Go runtime says.
func osThreads(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatalf("/proc/self/status: Threads: %v", err)
			}
			return n
		}
	}
	t.Fatal("/proc/self/status has no Threads line")
	return 0
}

// parkedWaiters counts the goroutines running fn (a wait loop of the
// driver) that are parked, on the poller or in a system call, rather than
// runnable: once all are, a wait that holds a thread holds it.
func parkedWaiters(fn string) int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	parked := 0
	for g := range bytes.SplitSeq(buf, []byte("\n\n")) {
		header, _, _ := bytes.Cut(g, []byte("\n"))
		if bytes.Contains(g, []byte(fn)) && !bytes.Contains(header, []byte("[runnable")) && !bytes.Contains(header, []byte("[running")) {
			parked++
		}
	}
	return parked
}

// TestManyTasksCostNoThreads starts manyTasks real processes, then adopts
// them all again as a restarted agent would, and checks with the kernel's
// own count that waiting for their exits holds no thread per task. Not
// parallel: other tests' processes would move the count.
func TestManyTasksCostNoThreads(t *testing.T) {
	d := execdriver.New("raw_exec")
	before := osThreads(t)
	started := make([]driver.Handle, manyTasks)
	for i := range started {
		h, err := d.Start(context.Background(), driver.Task{Command: "sleep", Args: []string{"1000"}, Env: []string{testPATH}, Dir: t.TempDir()})
		if err != nil {
			t.Fatalf("Start %d: %v", i, err)
		}
		pgid := h.PID()
		t.Cleanup(func() { syscall.Kill(-pgid, syscall.SIGKILL) })
		started[i] = h
	}
	poll(t, 10*time.Second, "every started task's wait to park", func() bool {
		return parkedWaiters("execdriver.(*handle).waitLoop") >= manyTasks
	})
	if got := osThreads(t); got > before+spareThreads {
		t.Fatalf("%d OS threads with %d tasks running, %d before: a thread per task", got, manyTasks, before)
	}

	// An agent restart: the next agent adopts every task and waits for it
	// the same way (here the first handles wait too, as this process is
	// still the tasks' parent).
	adopted := make([]driver.Handle, manyTasks)
	for i, h := range started {
		h.(driver.Detacher).Detach()
		st, err := proc.ReadStat(h.PID())
		if err != nil {
			t.Fatal(err)
		}
		if adopted[i], err = d.Adopt(context.Background(), driver.Process{PID: h.PID(), StartTicks: st.StartTicks}, nil, nil); err != nil {
			t.Fatalf("Adopt %d: %v", i, err)
		}
	}
	poll(t, 10*time.Second, "every adopted task's wait to park", func() bool {
		return parkedWaiters("execdriver.(*adoptedHandle).waitLoop") >= manyTasks
	})
	if got := osThreads(t); got > before+spareThreads {
		t.Fatalf("%d OS threads with %d tasks started and adopted, %d before: a thread per task", got, manyTasks, before)
	}

	// Exits are still seen, and how: a task killed from outside.
	syscall.Kill(started[0].PID(), syscall.SIGKILL)
	if e := waitExit(t, started[0], 10*time.Second); e.Code != -1 || e.Signal != "SIGKILL" {
		t.Errorf("started task killed with SIGKILL: exit %v, want killed by SIGKILL", e)
	}
	if e := waitExit(t, adopted[0], 10*time.Second); !e.Unknown && e.Signal != "SIGKILL" {
		t.Errorf("adopted task killed with SIGKILL: exit %v, want killed by SIGKILL or unknown", e)
	}
	syscall.Kill(adopted[1].PID(), syscall.SIGTERM)
	if e := waitExit(t, started[1], 10*time.Second); e.Code != -1 || e.Signal != "SIGTERM" {
		t.Errorf("task killed with SIGTERM: exit %v, want killed by SIGTERM", e)
	}
}
