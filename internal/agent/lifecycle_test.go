package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/spec"
)

func hook(t *spec.Task, h spec.LifecycleHook, sidecar bool) *spec.Task {
	t.Lifecycle = &spec.Lifecycle{Hook: h, Sidecar: sidecar}
	return t
}

// TestLifecycleHooksRunInOrder: a prestart task runs to its end before the
// main task starts, a prestart sidecar runs beside it, a poststart task
// starts once the main task runs, and a poststop task once every other
// task has ended after a stop. Each hook's script checks from inside what
// should have happened before it (exit 7, 8, 9 otherwise), and the task
// states' times say the same from the agent's side.
func TestLifecycleHooksRunInOrder(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startAgent(t.TempDir(), true)
	dir := t.TempDir()
	f := func(name string) string { return filepath.Join(dir, name) }
	noRestart := restart(0, time.Minute, 100*time.Millisecond, spec.RestartFail)
	tasks := []*spec.Task{
		hook(shTask("init", "sleep 0.3; echo done > "+f("init")), spec.HookPrestart, false),
		hook(shTask("side", "echo up > "+f("side")+"; exec sleep 1000"), spec.HookPrestart, true),
		shTask("main", "test -f "+f("init")+" || exit 7; test -f "+f("side")+" || exit 7; echo up > "+f("main")+"; exec sleep 1000"),
		// main's process may not have written its file yet when post starts
		// (poststart follows the main task's start, not its first line):
		// post waits up to 5 s for it; the order itself is checked below
		// on the agent's start times.
		hook(shTask("post", "for i in $(seq 50); do test -f "+f("main")+" && break; sleep 0.1; done; test -f "+f("main")+" || exit 8; echo done > "+f("post")), spec.HookPoststart, false),
		hook(shTask("cleanup", "test -f "+f("main")+" || exit 9; kill -0 $(cat "+f("mainpid")+") 2>/dev/null && exit 9; echo done > "+f("cleanup")), spec.HookPoststop, false),
	}
	for _, tk := range tasks {
		tk.Restart = noRestart
	}
	c.submit(job("hooks", spec.JobService, tasks...))

	a := c.alloc("hooks", 15*time.Second, "main and side running, init and post done", func(a *spec.Alloc) bool {
		return a.ClientStatusOr() == spec.ClientRunning && taskState(a, "side").State == spec.TaskRunning &&
			taskState(a, "main").State == spec.TaskRunning && taskState(a, "init").State == spec.TaskDead &&
			taskState(a, "post").State == spec.TaskDead
	})
	for _, name := range []string{"init", "post"} {
		if ts := taskState(a, name); ts.Failed || ts.ExitCode == nil || *ts.ExitCode != 0 || ts.Restarts != 0 {
			t.Errorf("%s: failed=%v exit=%v restarts=%d, want a clean single run\n%s", name, ts.Failed, ts.ExitCode, ts.Restarts, describe(a))
		}
	}
	if ts := taskState(a, "cleanup"); ts.State != spec.TaskPending || len(events(ts, spec.EventStarted)) != 0 {
		t.Errorf("cleanup = %s, started while the main task runs\n%s", ts.State, describe(a))
	}
	initTS, mainTS, postTS := taskState(a, "init"), taskState(a, "main"), taskState(a, "post")
	if mainTS.StartedAt.Before(initTS.FinishedAt) {
		t.Errorf("main started at %s, before init finished at %s", mainTS.StartedAt, initTS.FinishedAt)
	}
	if postTS.StartedAt.Before(mainTS.StartedAt) {
		t.Errorf("post started at %s, before main at %s", postTS.StartedAt, mainTS.StartedAt)
	}
	if err := os.WriteFile(f("mainpid"), []byte(strconv.Itoa(mainTS.PID)), 0o644); err != nil {
		t.Fatal(err)
	}

	if _, err := c.client.StopJob(context.Background(), "hooks", false); err != nil {
		t.Fatal(err)
	}
	a = c.alloc("hooks", 15*time.Second, "alloc complete", clientStatus(spec.ClientComplete))
	cl := taskState(a, "cleanup")
	if cl.State != spec.TaskDead || cl.Failed || cl.ExitCode == nil || *cl.ExitCode != 0 {
		t.Fatalf("cleanup = %s failed=%v exit=%v, want run to exit 0 after the stop\n%s", cl.State, cl.Failed, cl.ExitCode, describe(a))
	}
	for _, name := range []string{"main", "side"} {
		if ts := taskState(a, name); cl.StartedAt.Before(ts.FinishedAt) {
			t.Errorf("cleanup started at %s, before %s finished at %s", cl.StartedAt, name, ts.FinishedAt)
		}
	}
	if _, err := os.Stat(f("cleanup")); err != nil {
		t.Errorf("cleanup's file: %v", err)
	}
}

// TestLifecycleBatchStopsSidecarsThenPoststop: once a batch job's main task
// has ended, its prestart sidecar is stopped, the poststop task runs, and
// the alloc completes.
func TestLifecycleBatchStopsSidecarsThenPoststop(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startAgent(t.TempDir(), true)
	dir := t.TempDir()
	side := hook(shTask("side", "exec sleep 1000"), spec.HookPrestart, true)
	post := hook(shTask("post", "echo done > "+filepath.Join(dir, "post")), spec.HookPoststop, false)
	c.submit(job("batchhooks", spec.JobBatch, side, shTask("main", "sleep 0.3"), post))

	a := c.alloc("batchhooks", 15*time.Second, "alloc complete", clientStatus(spec.ClientComplete))
	st := taskState(a, "side")
	if st.State != spec.TaskDead || st.Failed || len(events(st, spec.EventKilled)) != 1 {
		t.Errorf("side = %s failed=%v, want stopped (one Killed event)\n%s", st.State, st.Failed, describe(a))
	}
	pt := taskState(a, "post")
	if pt.ExitCode == nil || *pt.ExitCode != 0 || pt.StartedAt.Before(st.FinishedAt) {
		t.Errorf("post exit=%v started %s, side finished %s: want exit 0 after the sidecar ended\n%s", pt.ExitCode, pt.StartedAt, st.FinishedAt, describe(a))
	}
	if a.Status.Description != "all tasks finished" {
		t.Errorf("description %q, want all tasks finished", a.Status.Description)
	}
}

// TestLifecyclePrestartFailureKeepsMainFromStarting: a prestart task that
// fails fails the alloc; the main task never starts, and the poststop task
// still runs.
func TestLifecyclePrestartFailureKeepsMainFromStarting(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startAgent(t.TempDir(), true)
	noRestart := restart(0, time.Minute, 100*time.Millisecond, spec.RestartFail)
	init := hook(shTask("init", "exit 3"), spec.HookPrestart, false)
	main := shTask("main", "exec sleep 1000")
	post := hook(shTask("post", "true"), spec.HookPoststop, false)
	for _, tk := range []*spec.Task{init, main, post} {
		tk.Restart = noRestart
	}
	c.submit(job("badinit", spec.JobService, init, main, post))

	a := c.alloc("badinit", 15*time.Second, "alloc failed, every task dead", func(a *spec.Alloc) bool {
		return a.ClientStatusOr() == spec.ClientFailed && taskState(a, "post").State == spec.TaskDead
	})
	mt := taskState(a, "main")
	if len(events(mt, spec.EventStarted)) != 0 || mt.Failed {
		t.Errorf("main started or failed:\n%s", describe(a))
	}
	if k := events(mt, spec.EventKilled); len(k) != 1 || k[0].Message != "stopped before start" {
		t.Errorf("main's Killed events %+v, want stopped before start", k)
	}
	if pt := taskState(a, "post"); pt.ExitCode == nil || *pt.ExitCode != 0 {
		t.Errorf("post did not run to exit 0:\n%s", describe(a))
	}
	if !strings.Contains(a.Status.Description, "task init failed") {
		t.Errorf("description %q does not name init", a.Status.Description)
	}
}

// TestAgentShutdownStopsPoststopTasks: an agent that stops its tasks on
// exit does not wait for a poststop task that would run for 1000 s: it is
// stopped with the others, and no process of the alloc is left.
func TestAgentShutdownStopsPoststopTasks(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	ra := c.startAgent(t.TempDir(), true)
	post := hook(shTask("post", "exec sleep 1000"), spec.HookPoststop, false)
	c.submit(job("slowpost", spec.JobService, shTask("main", "exec sleep 1000"), post))
	a := c.alloc("slowpost", 10*time.Second, "main running", running("main"))
	begin := time.Now()
	ra.stop(t)
	if d := time.Since(begin); d > 10*time.Second {
		t.Errorf("agent took %s to stop", d)
	}
	if left := allocProcs(a.ID); len(left) != 0 {
		t.Errorf("processes of the alloc left after the agent stopped: %v", left)
	}
}
