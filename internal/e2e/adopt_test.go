package e2e

import (
	"context"
	"io"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/spec"
)

const tickJob = `
job "e2eadopt" {
  scoring = "least_loaded" # instances on both nodes, not binpack's one
  group "tick" {
    count = 4
    task "ticker" {
      driver = "exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "i=0; while :; do i=$((i+1)); echo tick $i; sleep 0.1; done"]
      }
      resources {
        cpu    = 20
        memory = 16
      }
      kill_timeout = "2s"
    }
  }
}
`

// An agent that dies (SIGKILL) with running tasks, started again on the
// same data dir, takes them over: the same processes keep running, none
// restarts, none runs twice, and no output is lost.
func TestAgentRestartAdoptsTasks(t *testing.T) {
	dir := t.TempDir()
	d := startDev(t, dir+"/data")
	agent := startAgent(t, d, "keeper", dir+"/agent2")
	t.Cleanup(func() {
		for _, pid := range taskProcs("e2eadopt") {
			syscall.Kill(-pid, syscall.SIGKILL)
		}
	})
	out, errOut, code := d.cli("", "run", "--min-healthy-time", "1s", writeJob(t, dir, "tick.hcl", tickJob))
	if code != 0 {
		t.Fatalf("drover run: exit %d\n%s%s", code, out, errOut)
	}
	pids := map[string]int{}
	for _, a := range d.jobStatus("e2eadopt").Allocations {
		if a.NodeName == "keeper" {
			pids[a.ID] = a.Status.Tasks["ticker"].PID
		}
	}
	if len(pids) == 0 {
		t.Fatal("nothing was placed on the standalone agent")
	}

	agent.Process.Kill()
	agent.Wait()
	time.Sleep(time.Second) // the tasks write on with no agent reading
	for id, pid := range pids {
		if zombie(pid) {
			t.Fatalf("task pid %d of %s died with its agent", pid, id)
		}
	}
	startAgent(t, d, "keeper", dir+"/agent2")

	waitFor(t, 20*time.Second, "the tasks adopted", func() bool {
		for _, a := range d.jobStatus("e2eadopt").Allocations {
			if _, ok := pids[a.ID]; !ok {
				continue
			}
			ts := a.Status.Tasks["ticker"]
			adopted := false
			for _, e := range ts.Events {
				adopted = adopted || e.Type == spec.EventAdopted
			}
			if !adopted || ts.State != spec.TaskRunning {
				return false
			}
		}
		return true
	})
	st := d.jobStatus("e2eadopt")
	for _, a := range st.Allocations {
		ts := a.Status.Tasks["ticker"]
		if ts.Restarts != 0 {
			t.Errorf("%s restarted %d times", a.Name, ts.Restarts)
		}
		if pid, ok := pids[a.ID]; ok && (ts.PID != pid || zombie(pid)) {
			t.Errorf("%s: pid %d after the agent restart, want the same live pid %d", a.Name, ts.PID, pid)
		}
	}
	if got := taskProcs("e2eadopt"); len(got) != 4 {
		t.Errorf("%d task processes %v, want 4: none restarted, none twice", len(got), got)
	}
	c := d.client()
	for id := range pids {
		waitFor(t, 10*time.Second, "output after the restart", func() bool {
			return ticks(t, c, id) >= 40 // 4 s of output, a second of it with no agent
		})
	}

	// Stopping the job stops the adopted processes too.
	if out, errOut, code := d.cli("", "stop", "e2eadopt"); code != 0 {
		t.Fatalf("drover stop: exit %d\n%s%s", code, out, errOut)
	}
	waitFor(t, 10*time.Second, "no task process left", func() bool { return len(taskProcs("e2eadopt")) == 0 })
}

// ticks reads a ticker's whole output and checks that it counts 1, 2, 3,
// ... with nothing lost or repeated; it returns the last count.
func ticks(t *testing.T, c *client.Client, allocID string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rc, err := c.Logs(ctx, allocID, client.LogOptions{Task: "ticker", Tail: -1})
	if err != nil {
		t.Fatalf("logs of %s: %v", allocID, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	last := 0
	for l := range strings.Lines(string(b)) {
		n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(l, "tick ")))
		if err != nil || n != last+1 {
			t.Fatalf("output of %s: after tick %d comes %q: lost or repeated", allocID, last, l)
		}
		last = n
	}
	return last
}

const diedDownJob = `
job "e2edieddown" {
  group "g" {
    constraint {
      attribute = "${node.name}"
      value     = "keeper"
    }
    task "sleeper" {
      driver = "exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "exec sleep 1000"]
      }
      resources {
        cpu    = 20
        memory = 16
      }
      restart {
        attempts = 2
        interval = "1m"
        delay    = "100ms"
        mode     = "fail"
      }
    }
  }
}
`

// A task that dies while its agent is down (agent SIGKILL, then the task's)
// is a death like any other once the agent is back: a Terminated event
// that says so, then the restart policy, counted.
func TestTaskDeadWhileAgentDownIsRestartedAndCounted(t *testing.T) {
	dir := t.TempDir()
	d := startDev(t, dir+"/data")
	agent := startAgent(t, d, "keeper", dir+"/agent2")
	t.Cleanup(func() {
		for _, pid := range taskProcs("e2edieddown") {
			syscall.Kill(-pid, syscall.SIGKILL)
		}
	})
	out, errOut, code := d.cli("", "run", "--min-healthy-time", "1s", writeJob(t, dir, "died.hcl", diedDownJob))
	if code != 0 {
		t.Fatalf("drover run: exit %d\n%s%s", code, out, errOut)
	}
	allocs := d.jobStatus("e2edieddown").Allocations
	if len(allocs) != 1 || allocs[0].NodeName != "keeper" {
		t.Fatalf("want one instance on keeper, got %+v", allocs)
	}
	id, pid := allocs[0].ID, allocs[0].Status.Tasks["sleeper"].PID

	agent.Process.Kill()
	agent.Wait()
	syscall.Kill(-pid, syscall.SIGKILL)
	waitFor(t, 5*time.Second, "the task to die", func() bool { return zombie(pid) })
	startAgent(t, d, "keeper", dir+"/agent2")

	var ts *spec.TaskState
	waitFor(t, 20*time.Second, "the task running again with a new pid", func() bool {
		for _, a := range d.jobStatus("e2edieddown").Allocations {
			if a.ID == id {
				ts = a.Status.Tasks["sleeper"]
			}
		}
		return ts != nil && ts.State == spec.TaskRunning && ts.PID != pid && ts.PID > 0
	})
	var b strings.Builder
	for _, e := range ts.Events {
		b.WriteString("  " + string(e.Type) + ": " + e.Message + "\n")
	}
	if ts.Restarts != 1 {
		t.Errorf("restarts = %d, want 1\n%s", ts.Restarts, b.String())
	}
	var term, restarting []spec.TaskEvent
	for _, e := range ts.Events {
		switch e.Type {
		case spec.EventTerminated:
			term = append(term, e)
		case spec.EventRestarting:
			restarting = append(restarting, e)
		}
	}
	if len(term) != 1 || term[0].Message != "exit status unknown: the task died while the agent was down" {
		t.Errorf("want one Terminated event saying the task died while the agent was down\n%s", b.String())
	}
	if len(restarting) != 1 || !strings.Contains(restarting[0].Message, "restart 1 of 2") {
		t.Errorf("want one Restarting event counting restart 1 of 2\n%s", b.String())
	}
	if got := taskProcs("e2edieddown"); len(got) != 1 || got[0] != ts.PID {
		t.Errorf("task processes %v, want only the restarted %d", got, ts.PID)
	}
}
