package agent_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/spec"
)

// TestMaxRunDurationStopsTheAlloc: a batch instance whose task would sleep
// for ever is stopped by its agent once it has run for its group's
// max_run_duration: the task's process is gone from /proc, the alloc is
// complete (not failed) with the cause max-run-duration, the Killing event
// says why, and its poststop task never starts (its file is never
// written). A task that ends before the bound completes as usual.
func TestMaxRunDurationStopsTheAlloc(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startAgent(t.TempDir(), true)
	mark := filepath.Join(t.TempDir(), "poststop-ran")
	noRestart := restart(0, time.Minute, 100*time.Millisecond, spec.RestartFail)
	main := shTask("main", "exec sleep 1000")
	post := hook(shTask("post", "echo ran > "+mark), spec.HookPoststop, false)
	main.Restart, post.Restart = noRestart, noRestart
	j := job("bounded", spec.JobBatch, main, post)
	j.Groups[0].MaxRunDuration = spec.Duration(2 * time.Second)
	c.submit(j)

	a := c.alloc("bounded", 15*time.Second, "main running", running("main"))
	pid, began := taskState(a, "main").PID, taskState(a, "main").StartedAt
	if !alive(pid) {
		t.Fatalf("main's pid %d is not in /proc while the agent says it runs", pid)
	}
	a = c.alloc("bounded", 20*time.Second, "alloc complete", clientStatus(spec.ClientComplete))
	ended := time.Now()
	waitFor(t, 5*time.Second, "main's process gone from /proc", func() bool { return !alive(pid) })
	if ran := ended.Sub(began); ran < 2*time.Second {
		t.Errorf("the alloc was complete %s after main started, before its max_run_duration of 2s", ran)
	}
	if a.Status.EndCause != spec.EndMaxRunDuration || !strings.Contains(a.Status.Description, "max_run_duration of 2s") {
		t.Errorf("end cause %q, description %q; want %q and a description naming max_run_duration\n%s",
			a.Status.EndCause, a.Status.Description, spec.EndMaxRunDuration, describe(a))
	}
	m := taskState(a, "main")
	killing := events(m, spec.EventKilling)
	if m.Failed || len(killing) == 0 || !strings.Contains(killing[len(killing)-1].Message, "max_run_duration") {
		t.Errorf("main: failed=%v, Killing events %v; want not failed, killed for its max_run_duration\n%s", m.Failed, killing, describe(a))
	}
	p := taskState(a, "post")
	if p.State != spec.TaskDead || len(events(p, spec.EventStarted)) != 0 {
		t.Errorf("poststop task: %s with %d Started events; want never started\n%s", p.State, len(events(p, spec.EventStarted)), describe(a))
	}
	if _, err := os.Stat(mark); !os.IsNotExist(err) {
		t.Errorf("the poststop task ran (%s: %v)", mark, err)
	}

	// Bounded but quicker than its bound: complete as any batch task.
	quick := shTask("quick", "true")
	quick.Restart = noRestart
	j = job("quick", spec.JobBatch, quick)
	j.Groups[0].MaxRunDuration = spec.Duration(30 * time.Second)
	c.submit(j)
	a = c.alloc("quick", 15*time.Second, "alloc complete", clientStatus(spec.ClientComplete))
	if a.Status.EndCause != "" || a.Status.Description != "all tasks finished" {
		t.Errorf("quick: end cause %q, description %q; want none and \"all tasks finished\"", a.Status.EndCause, a.Status.Description)
	}
}

// max_run_duration counts from when the alloc began on the node, across a
// restart of its task and a restart of its agent: the status records when
// it began (Began) and the next agent keeps it, where each task restart
// moves a task's StartedAt. Here the task fails once and runs again, the
// agent restarts, and the alloc still ends when its bound from the
// beginning says.
func TestMaxRunDurationCountsFromTheAllocsBeginning(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	dir := t.TempDir()
	ag := c.startAgent(dir, false)
	mark := filepath.Join(t.TempDir(), "failed-once")
	main := shTask("main", "if [ -f "+mark+" ]; then exec sleep 1000; fi; touch "+mark+"; exit 1")
	main.Restart = restart(1, time.Minute, 1500*time.Millisecond, spec.RestartFail)
	j := job("bounded-restart", spec.JobBatch, main)
	j.Groups[0].MaxRunDuration = spec.Duration(5 * time.Second)
	c.submit(j)

	a := c.alloc("bounded-restart", 15*time.Second, "main running after one restart", func(a *spec.Alloc) bool {
		ts := taskState(a, "main")
		return ts != nil && ts.State == spec.TaskRunning && ts.Restarts == 1
	})
	began, restarted := a.Status.Began, taskState(a, "main").StartedAt
	if began.IsZero() || !began.Before(restarted) {
		t.Fatalf("the alloc began %v, its task last started %v: want a beginning before the restart", began, restarted)
	}
	ag.stop(t)
	c.startAgent(dir, false)
	a = c.alloc("bounded-restart", 20*time.Second, "alloc complete", clientStatus(spec.ClientComplete))
	if !a.Status.Began.Equal(began) {
		t.Errorf("the alloc began %v before its agent restarted, %v after", began, a.Status.Began)
	}
	if a.Status.EndCause != spec.EndMaxRunDuration {
		t.Fatalf("end cause %q, want %q\n%s", a.Status.EndCause, spec.EndMaxRunDuration, describe(a))
	}
	// Stopped at began + 5s, not at the task's restart + 5s: the Killing
	// event's time, the agent's clock.
	killing := events(taskState(a, "main"), spec.EventKilling)
	if len(killing) == 0 {
		t.Fatalf("no Killing event\n%s", describe(a))
	}
	at := killing[len(killing)-1].Time
	if at.Before(began.Add(5*time.Second)) || !at.Before(restarted.Add(5*time.Second)) {
		t.Errorf("killed %v after the alloc began, %v after its task restarted (%v later): want its bound counted from the beginning (5s)",
			at.Sub(began), at.Sub(restarted), restarted.Sub(began))
	}
}
