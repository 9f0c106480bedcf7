package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/spec"
)

// hupJob's task prints a line for each SIGHUP it gets, and its PID at
// each start.
const hupJob = `job "hup" {
  group "g" {
    count = 2
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo started-$$; trap 'echo got-hup' HUP; while true; do sleep 0.2; done"]
      }
      resources {
        cpu    = 10
        memory = 10
      }
    }
  }
}
`

// twoTaskJob is one instance of two sleeping tasks.
const twoTaskJob = `job "two" {
  group "g" {
    task "a" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["300"]
      }
      resources {
        cpu    = 10
        memory = 10
      }
    }
    task "b" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["300"]
      }
      resources {
        cpu    = 10
        memory = 10
      }
    }
  }
}
`

// TestAllocVerbs drives Nomad's alloc verbs on one instance of a real
// task, through the CLI, the server and the agent: signal reaches the
// task's process, restart starts it again in place (a new process, the
// same alloc, not counted as a policy restart), stop replaces the
// instance (a new alloc of the same name, the job keeps its count), and
// status shows the tasks with their events.
func TestAllocVerbs(t *testing.T) {
	d := startDev(t, t.TempDir())
	if _, stderr, code := d.cli("", "run", writeTemp(t, "hup.hcl", hupJob)); code != 0 {
		t.Fatalf("drover run: %s", stderr)
	}
	var a0 *spec.Alloc
	for _, a := range d.jobStatus("hup").Allocations {
		if a.Index == 0 {
			a0 = a
		}
	}
	id := a0.ID
	pid := func() int {
		a := anyAlloc(t, d, "hup", 20*time.Second, "instance 0 runs", func(a *spec.Alloc) bool {
			return a.ID == id && a.Status != nil && a.Status.Tasks["t"] != nil && a.Status.Tasks["t"].PID > 0 && a.Status.Tasks["t"].State == spec.TaskRunning
		})
		return a.Status.Tasks["t"].PID
	}
	firstPID := pid()
	waitFor(t, 10*time.Second, "the task's first line", func() bool {
		out, _, _ := d.cli("", "logs", "--alloc", id)
		return strings.Contains(out, "started-")
	})

	// signal: the task's trap runs, and only instance 0's.
	out, stderr, code := d.cli("", "alloc", "signal", id[:8], "hup")
	if code != 0 || !strings.Contains(out, "sent SIGHUP") {
		t.Fatalf("drover alloc signal: exit %d: %s%s", code, out, stderr)
	}
	waitFor(t, 10*time.Second, "the task printed got-hup", func() bool {
		out, _, _ := d.cli("", "logs", "--alloc", id)
		return strings.Contains(out, "got-hup")
	})
	if out, _, _ := d.cli("", "logs", "hup[1]"); strings.Contains(out, "got-hup") {
		t.Errorf("instance 1 got the signal too:\n%s", out)
	}
	if _, stderr, code := d.cli("", "alloc", "signal", id, "SIGNOPE"); code != 1 || !strings.Contains(stderr, `unknown signal "SIGNOPE"`) {
		t.Errorf("a bad signal: exit %d: %s", code, stderr)
	}

	// restart: the same alloc runs a new process, and the policy's count
	// is untouched.
	out, stderr, code = d.cli("", "alloc", "restart", id[:8])
	if code != 0 || !strings.Contains(out, "restart requested") {
		t.Fatalf("drover alloc restart: exit %d: %s%s", code, out, stderr)
	}
	a := anyAlloc(t, d, "hup", 30*time.Second, "instance 0 runs a new process", func(a *spec.Alloc) bool {
		ts := a.Status.Tasks["t"]
		return a.ID == id && ts != nil && ts.State == spec.TaskRunning && ts.PID > 0 && ts.PID != firstPID
	})
	if r := a.Status.Tasks["t"].Restarts; r != 0 {
		t.Errorf("an operator's restart counted as a policy restart: restarts %d", r)
	}

	// status: the detail, with the task's events.
	out, stderr, code = d.cli("", "alloc", "status", id[:8])
	for _, want := range []string{"Instance     hup.g[0]", "Resources    cpu 10 MHz, memory 10 MB", "TASK", "raw_exec", "Events of task t", "Signaled", "sent SIGHUP on an operator's request", "Restart Requested"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("drover alloc status: exit %d, no %q in:\n%s%s", code, want, out, stderr)
		}
	}

	// stop: instance 0 is replaced by a new alloc; instance 1 stays.
	var other string
	for _, a := range d.jobStatus("hup").Allocations {
		if a.Index == 1 {
			other = a.ID
		}
	}
	out, stderr, code = d.cli("", "alloc", "stop", id[:8])
	if code != 0 || !strings.Contains(out, "stop requested") {
		t.Fatalf("drover alloc stop: exit %d: %s%s", code, out, stderr)
	}
	anyAlloc(t, d, "hup", 30*time.Second, "a replacement of instance 0 runs", func(a *spec.Alloc) bool {
		return a.Index == 0 && a.ID != id && a.DesiredStatus == spec.DesiredRun && a.ClientStatusOr() == spec.ClientRunning
	})
	st := d.jobStatus("hup")
	for _, a := range st.Allocations {
		switch {
		case a.ID == id && (a.DesiredStatus != spec.DesiredStop || a.DesiredCause != spec.CauseAllocStop):
			t.Errorf("the stopped alloc: desired %s (%s), want stop (alloc-stop)", a.DesiredStatus, a.DesiredCause)
		case a.ID == other && a.DesiredStatus != spec.DesiredRun:
			t.Errorf("instance 1 was stopped too: %s", a.DesiredReason)
		}
	}
	if st.Summary.Running != 2 {
		t.Errorf("after alloc stop, %d running; want the job's count, 2", st.Summary.Running)
	}
	if _, stderr, code := d.cli("", "alloc", "stop", id); code != 1 || !strings.Contains(stderr, "nothing to stop") {
		t.Errorf("stopping a stopped alloc: exit %d: %s", code, stderr)
	}

	// A restart without --task restarts every running task; a signal
	// without one, when there are two, names them.
	if _, stderr, code := d.cli("", "run", writeTemp(t, "two.hcl", twoTaskJob)); code != 0 {
		t.Fatalf("drover run two: %s", stderr)
	}
	two := anyAlloc(t, d, "two", 20*time.Second, "both tasks run", func(a *spec.Alloc) bool {
		return a.Status.Tasks["a"] != nil && a.Status.Tasks["a"].PID > 0 && a.Status.Tasks["b"] != nil && a.Status.Tasks["b"].PID > 0
	})
	pa, pb := two.Status.Tasks["a"].PID, two.Status.Tasks["b"].PID
	if out, stderr, code := d.cli("", "alloc", "restart", two.ID); code != 0 || !strings.Contains(out, "Tasks a, b of allocation") {
		t.Fatalf("drover alloc restart of a two-task instance: exit %d: %s%s", code, out, stderr)
	}
	anyAlloc(t, d, "two", 30*time.Second, "both tasks run new processes", func(a *spec.Alloc) bool {
		ta, tb := a.Status.Tasks["a"], a.Status.Tasks["b"]
		return a.ID == two.ID && ta != nil && tb != nil && ta.State == spec.TaskRunning && tb.State == spec.TaskRunning &&
			ta.PID > 0 && tb.PID > 0 && ta.PID != pa && tb.PID != pb
	})
	if _, stderr, code := d.cli("", "alloc", "signal", two.ID, "HUP"); code != 1 || !strings.Contains(stderr, "has 2 tasks; name one") {
		t.Errorf("drover alloc signal of a two-task instance without --task: exit %d: %s", code, stderr)
	}

	// The verbs need submit: a read-only token is refused before anything.
	d.cli("", "acl", "policy", "apply", "ro", writeTemp(t, "ro.hcl", `namespace "default" { capabilities = ["read", "logs"] }`))
	out, _, _ = d.cli("", "acl", "token", "create", "--name", "ro", "--policy", "ro", "-o", "json")
	var tok spec.ACLToken
	json.Unmarshal([]byte(out), &tok)
	for _, args := range [][]string{{"alloc", "signal", other, "HUP"}, {"alloc", "restart", other}, {"alloc", "stop", other}} {
		if _, stderr, code := d.cliWith([]string{"DROVER_TOKEN=" + tok.SecretID}, "", args...); code != 1 || !strings.Contains(stderr, "submit") {
			t.Errorf("drover %s with a read-only token: exit %d: %s", strings.Join(args, " "), code, stderr)
		}
	}
}

// anyAlloc polls the job's status (the CLI's JSON) until one of its
// allocs with a status satisfies cond.
func anyAlloc(t *testing.T, d *devProc, job string, within time.Duration, what string, cond func(*spec.Alloc) bool) *spec.Alloc {
	t.Helper()
	var last []*spec.Alloc
	deadline := time.Now().Add(within)
	for {
		last = d.jobStatus(job).Allocations
		for _, a := range last {
			if a.Status != nil && cond(a) {
				return a
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s: timed out after %s waiting for %s; allocs:\n%s", job, within, what, allocsLine(last))
		}
		time.Sleep(200 * time.Millisecond)
	}
}
