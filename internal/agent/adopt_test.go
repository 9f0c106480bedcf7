package agent_test

import (
	"context"
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

	"github.com/drover-org/drover/internal/spec"
)

// Re-adoption: a standalone agent that goes away leaves its tasks running,
// and the next agent on the same data dir takes them over without
// restarting them.

// allocsOf waits until job has n allocs that all satisfy cond.
func (c *cluster) allocsOf(job string, n int, within time.Duration, what string, cond func(*spec.Alloc) bool) []*spec.Alloc {
	t := c.t
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		as, _, err := c.client.Allocs(context.Background(), job, "", nil)
		if err != nil {
			t.Fatalf("allocs of %s: %v", job, err)
		}
		ok := len(as) == n
		for _, a := range as {
			ok = ok && cond(a)
		}
		if ok {
			slices.SortFunc(as, func(a, b *spec.Alloc) int { return a.Index - b.Index })
			return as
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			for _, a := range as {
				b.WriteString(describe(a))
			}
			t.Fatalf("timed out after %s waiting for %s; allocs:\n%s", within, what, b.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// tickLines parses "tick N" lines and checks that they count 1, 2, 3, ...
// with nothing lost and nothing repeated; it returns the last N.
func tickLines(t *testing.T, out string) int {
	t.Helper()
	last := 0
	for l := range strings.Lines(out) {
		n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(l, "tick ")))
		if err != nil || n != last+1 {
			t.Fatalf("after tick %d comes %q: output lost or repeated\n%s", last, l, out)
		}
		last = n
	}
	return last
}

const ticker = `i=0; while :; do i=$((i+1)); echo "tick $i"; sleep 0.1; done`

func TestRestartedAgentAdoptsRunningTasks(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	dataDir := t.TempDir()
	first := c.startAgent(dataDir, false)
	task := shTask("t", ticker)
	task.KillTimeout = spec.Duration(2 * time.Second)
	j := job("adopt", spec.JobService, task)
	j.Groups[0].Count = 2
	c.submit(j)

	before := c.allocsOf("adopt", 2, 10*time.Second, "2 instances running", running("t"))
	pids := map[string]int{}
	for _, a := range before {
		pids[a.ID] = taskState(a, "t").PID
	}
	logFile := func(a *spec.Alloc) string {
		b, _ := os.ReadFile(filepath.Join(dataDir, "allocs", a.ID, "alloc", "logs", "t.stdout.log"))
		return string(b)
	}
	waitFor(t, 5*time.Second, "a few lines of output", func() bool {
		return strings.Count(logFile(before[0]), "\n") >= 3 && strings.Count(logFile(before[1]), "\n") >= 3
	})

	// A standalone agent going away leaves its tasks running, and stops
	// reading their output: it waits in the pipe.
	first.stop(t)
	atStop := map[string]int{}
	for _, a := range before {
		atStop[a.ID] = tickLines(t, logFile(a))
	}
	time.Sleep(time.Second)
	for _, a := range before {
		if !alive(pids[a.ID]) {
			t.Fatalf("task pid %d died with the agent; it should outlive it", pids[a.ID])
		}
		if n := tickLines(t, logFile(a)); n > atStop[a.ID]+1 {
			t.Fatalf("log of %s grew from tick %d to %d with no agent running", a.Name, atStop[a.ID], n)
		}
	}

	second := c.startAgent(dataDir, false)
	if second.NodeID() != first.NodeID() {
		t.Fatalf("node ID changed across restart: %s -> %s", first.NodeID(), second.NodeID())
	}
	after := c.allocsOf("adopt", 2, 10*time.Second, "both instances adopted", func(a *spec.Alloc) bool {
		ts := taskState(a, "t")
		return ts != nil && len(events(ts, spec.EventAdopted)) == 1 && ts.State == spec.TaskRunning
	})
	for _, a := range after {
		ts := taskState(a, "t")
		if ts.PID != pids[a.ID] || !alive(ts.PID) {
			t.Errorf("%s: pid %d after the restart, want the same live pid %d\n%s", a.Name, ts.PID, pids[a.ID], describe(a))
		}
		if got := allocProcs(a.ID); !slices.Equal(got, []int{pids[a.ID]}) {
			t.Errorf("%s: processes %v, want only the adopted [%d]", a.Name, got, pids[a.ID])
		}
		if ts.Restarts != 0 || len(events(ts, spec.EventStarted)) != 1 || len(events(ts, spec.EventReceived)) != 1 {
			t.Errorf("%s: restarts=%d, %d Started and %d Received events; want 0 and 1 and 1\n%s",
				a.Name, ts.Restarts, len(events(ts, spec.EventStarted)), len(events(ts, spec.EventReceived)), describe(a))
		}
		if ev := events(ts, spec.EventAdopted); !strings.Contains(ev[0].Message, "pid "+strconv.Itoa(pids[a.ID])) {
			t.Errorf("%s: Adopted event %q does not name pid %d", a.Name, ev[0].Message, pids[a.ID])
		}
		if a.ClientStatusOr() != spec.ClientRunning {
			t.Errorf("%s: client status %s, want running", a.Name, a.ClientStatusOr())
		}
	}
	// Output: what was written while no agent ran, then what comes after,
	// all of it once and in order, through the API.
	for _, a := range after {
		waitFor(t, 5*time.Second, "output after the restart", func() bool {
			return tickLines(t, logs(t, c.client, a.ID, "t", false)) >= atStop[a.ID]+20
		})
	}

	// Stopping the job stops the adopted processes (sh and its sleep) well
	// within the 2s kill timeout.
	begin := time.Now()
	if _, err := c.client.StopJob(context.Background(), "adopt", false); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		waitFor(t, 4*time.Second, "the adopted process group to be gone", func() bool { return len(groupMembers(pid)) == 0 })
	}
	t.Logf("adopted tasks stopped in %s", time.Since(begin).Round(time.Millisecond))
	done := c.allocsOf("adopt", 2, 5*time.Second, "allocs complete", clientStatus(spec.ClientComplete))
	for _, a := range done {
		if len(events(taskState(a, "t"), spec.EventKilled)) != 1 {
			t.Errorf("%s: no Killed event\n%s", a.Name, describe(a))
		}
	}
}

func TestAdoptedTaskExitAppliesRestartPolicy(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	dataDir := t.TempDir()
	first := c.startAgent(dataDir, false)
	// Runs until a file named after its own PID appears in its directory.
	task := shTask("t", `while [ ! -e quit.$$ ]; do sleep 0.05; done; exit 3`)
	task.Restart = restart(1, time.Minute, 100*time.Millisecond, spec.RestartFail)
	c.submit(job("adoptexit", spec.JobService, task))
	a := c.alloc("adoptexit", 10*time.Second, "task running", running("t"))
	pid := taskState(a, "t").PID

	first.stop(t)
	c.startAgent(dataDir, true)
	c.alloc("adoptexit", 10*time.Second, "task adopted", func(a *spec.Alloc) bool {
		ts := taskState(a, "t")
		return ts != nil && len(events(ts, spec.EventAdopted)) == 1
	})
	if err := os.WriteFile(filepath.Join(dataDir, "allocs", a.ID, "t", "quit."+strconv.Itoa(pid)), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	a = c.alloc("adoptexit", 10*time.Second, "task restarted with a new pid", func(a *spec.Alloc) bool {
		ts := taskState(a, "t")
		return ts != nil && ts.State == spec.TaskRunning && ts.PID != pid && ts.Restarts == 1
	})
	t.Logf("after the adopted task exited:\n%s", describe(a))
	ts := taskState(a, "t")
	term := events(ts, spec.EventTerminated)
	// The status is unknown unless the agent saw the exited process before
	// it was reaped (here its reaper is the first agent, in this process).
	if len(term) != 1 || !strings.Contains(term[0].Message, "status unknown") && !strings.Contains(term[0].Message, "exit code 3") {
		t.Errorf("Terminated events %+v, want one saying the status is unknown (or exit code 3)", term)
	}
	if n := len(events(ts, spec.EventRestarting)); n != 1 {
		t.Errorf("%d Restarting events, want 1\n%s", n, describe(a))
	}
	if n := len(events(ts, spec.EventStarted)); n != 2 {
		t.Errorf("%d Started events, want 2 (the first agent's and the restart)\n%s", n, describe(a))
	}
	waitFor(t, 5*time.Second, "exactly one process for the alloc", func() bool {
		return slices.Equal(allocProcs(a.ID), []int{ts.PID})
	})
}

// startStray starts `sleep 1000` in its own process group with the given
// DROVER_* environment, as a task of node would have.
func startStray(t *testing.T, env ...string) int {
	t.Helper()
	cmd := exec.Command("sleep", "1000")
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go cmd.Wait() // reap it when killed
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	return cmd.Process.Pid
}

func TestRestartedAgentKillsOrphansAndAdoptsOneCopy(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	dataDir := t.TempDir()
	first := c.startAgent(dataDir, false)
	node := first.NodeID()
	task := shTask("t", "sleep 1000")
	task.KillTimeout = spec.Duration(time.Second)
	c.submit(job("orphan", spec.JobService, task))
	a := c.alloc("orphan", 10*time.Second, "task running", running("t"))
	pid := taskState(a, "t").PID
	first.stop(t)

	// Processes of this node that no agent of it should keep: one for an
	// alloc the server never heard of, one claiming to be the same task as
	// the real one (started later, so the real one is the one kept), and
	// one for another node, which is none of this agent's business.
	nowhere := startStray(t, "DROVER_NODE_ID="+node, "DROVER_ALLOC_ID="+uuid.NewString(), "DROVER_TASK_NAME=t")
	dup := startStray(t, "DROVER_NODE_ID="+node, "DROVER_ALLOC_ID="+a.ID, "DROVER_TASK_NAME=t")
	other := startStray(t, "DROVER_NODE_ID="+uuid.NewString(), "DROVER_ALLOC_ID="+a.ID, "DROVER_TASK_NAME=t")

	c.startAgent(dataDir, true)
	waitFor(t, 10*time.Second, "the stray processes to be killed", func() bool { return !alive(nowhere) && !alive(dup) })
	a = c.alloc("orphan", 10*time.Second, "task adopted", func(a *spec.Alloc) bool {
		ts := taskState(a, "t")
		return ts != nil && len(events(ts, spec.EventAdopted)) == 1 && ts.State == spec.TaskRunning
	})
	if got := taskState(a, "t").PID; got != pid || !alive(pid) {
		t.Errorf("pid %d after restart, want the original %d alive\n%s", got, pid, describe(a))
	}
	if !alive(other) {
		t.Errorf("a process of another node was killed")
	}
	if got := envProcs("DROVER_NODE_ID", node); !slices.Equal(got, []int{pid}) {
		t.Errorf("processes of this node %v, want only [%d]", got, pid)
	}
}

func TestAllocStoppedWhileAgentDownIsStoppedOnRestart(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	dataDir := t.TempDir()
	first := c.startAgent(dataDir, false)
	task := shTask("t", "sleep 1000")
	task.KillTimeout = spec.Duration(time.Second)
	c.submit(job("stopdown", spec.JobService, task))
	a := c.alloc("stopdown", 10*time.Second, "task running", running("t"))
	pid := taskState(a, "t").PID
	first.stop(t)

	if _, err := c.client.StopJob(context.Background(), "stopdown", false); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if !alive(pid) {
		t.Fatal("the task stopped with no agent running")
	}
	c.startAgent(dataDir, true)
	waitFor(t, 5*time.Second, "the task to be stopped", func() bool { return len(groupMembers(pid)) == 0 })
	a = c.alloc("stopdown", 5*time.Second, "alloc complete", clientStatus(spec.ClientComplete))
	t.Logf("stopped on restart:\n%s", describe(a))
	ts := taskState(a, "t")
	if len(events(ts, spec.EventAdopted)) != 1 || len(events(ts, spec.EventKilled)) != 1 || len(events(ts, spec.EventStarted)) != 1 {
		t.Errorf("want one Adopted, one Killed and one Started event\n%s", describe(a))
	}
}

// An agent that stops its tasks when it exits (drover dev) leaves the
// server believing they run: the next agent starts them again, and does
// not take them for tasks that died while it was down.
func TestTasksStoppedOnExitAreNotCountedAsDied(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	dataDir := t.TempDir()
	first := c.startAgent(dataDir, true)
	c.submit(job("stoppedonexit", spec.JobService, shTask("t", "sleep 1000")))
	pid := taskState(c.alloc("stoppedonexit", 10*time.Second, "task running", running("t")), "t").PID
	first.stop(t)
	if alive(pid) {
		t.Fatalf("task pid %d outlived an agent that stops its tasks on exit", pid)
	}

	c.startAgent(dataDir, true)
	a := c.alloc("stoppedonexit", 10*time.Second, "task running again", func(a *spec.Alloc) bool {
		ts := taskState(a, "t")
		return ts != nil && ts.State == spec.TaskRunning && ts.PID != pid
	})
	ts := taskState(a, "t")
	if ts.Restarts != 0 || len(events(ts, spec.EventTerminated)) != 0 || len(events(ts, spec.EventStarted)) != 2 {
		t.Errorf("want restarts=0, no Terminated and two Started events\n%s", describe(a))
	}
}
