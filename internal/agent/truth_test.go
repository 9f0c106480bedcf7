package agent_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/spec"
)

// From the moment a task dies, its state says it is waiting to start
// again, when, and which attempt: `drover status` shows that rather than
// "running" for the whole restart delay. The fields are cleared when it
// starts again.
func TestDeadTaskSaysWhenItRestarts(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startAgent(t.TempDir(), true)
	task := shTask("t", "sleep 0.5; exit 4")
	task.Restart = restart(2, time.Minute, 3*time.Second, spec.RestartFail)
	c.submit(job("dies", spec.JobService, task))

	a := c.alloc("dies", 15*time.Second, "waiting to restart", func(a *spec.Alloc) bool {
		ts := taskState(a, "t")
		return ts != nil && ts.State == spec.TaskPending && !ts.RestartAt.IsZero()
	})
	ts := taskState(a, "t")
	died := ts.FinishedAt
	if d := ts.RestartAt.Sub(died); d < 2900*time.Millisecond || d > 3100*time.Millisecond {
		t.Errorf("restart at %s, %s after the exit at %s; want the 3s delay\n%s", ts.RestartAt, d, died, describe(a))
	}
	if ts.RestartAttempt != 1 || ts.RestartAttempts != 2 {
		t.Errorf("attempt %d of %d, want 1 of 2\n%s", ts.RestartAttempt, ts.RestartAttempts, describe(a))
	}
	a = c.alloc("dies", 15*time.Second, "started again", func(a *spec.Alloc) bool {
		ts := taskState(a, "t")
		return ts != nil && ts.State == spec.TaskRunning && ts.Restarts == 1
	})
	if ts := taskState(a, "t"); !ts.RestartAt.IsZero() || ts.RestartAttempt != 0 {
		t.Errorf("running again, but restart_at %s attempt %d left set\n%s", ts.RestartAt, ts.RestartAttempt, describe(a))
	}
}

// A command that does not exist fails the task at once, with the cause,
// instead of going through the restart policy's delays: starting again
// cannot succeed.
func TestMissingCommandFailsAtOnce(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startAgent(t.TempDir(), true)
	for _, tc := range []struct{ name, command, want string }{
		{"nocmd", "/nonexistent/drover-test-cmd", "does not exist on this node"},
		{"notexec", notExecutable(t), "is not executable"},
		{"notprogram", notAProgram(t), "exec format error"},
		{"nopath", "drover-no-such-command", "not found in PATH"},
	} {
		task := &spec.Task{Name: "t", Driver: "raw_exec", Config: spec.TaskConfig{Command: tc.command},
			Resources: spec.Resources{CPU: 10, MemoryMB: 10}}
		task.Restart = restart(2, time.Minute, 5*time.Second, spec.RestartFail)
		begin := time.Now()
		c.submit(job(tc.name, spec.JobBatch, task))
		a := c.alloc(tc.name, 4*time.Second, "failed without waiting for a restart", clientStatus(spec.ClientFailed))
		if d := time.Since(begin); d > 4*time.Second {
			t.Errorf("%s: failed after %s", tc.name, d)
		}
		ts := taskState(a, "t")
		if ts.Restarts != 0 || len(events(ts, spec.EventRestarting)) != 0 {
			t.Errorf("%s: restarted %d times\n%s", tc.name, ts.Restarts, describe(a))
		}
		if !strings.Contains(a.Status.Description, tc.want) || !strings.Contains(a.Status.Description, tc.command) {
			t.Errorf("%s: description %q does not say %q of %s", tc.name, a.Status.Description, tc.want, tc.command)
		}
	}
}

// notExecutable is a file without any execute bit.
func notExecutable(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(p, []byte("not a program\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// notAProgram is an executable file the kernel cannot run: text without #!.
func notAProgram(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "text")
	if err := os.WriteFile(p, []byte("\x00\x01not a program\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}
