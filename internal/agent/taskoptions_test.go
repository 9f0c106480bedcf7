package agent_test

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/agent"
	"github.com/drover-org/drover/internal/spec"
)

// TestKillSignalAfterShutdownDelay: a stopped task keeps running for its
// shutdown_delay, then gets its kill_signal (SIGINT here, which its trap
// turns into exit 0; SIGTERM would exit 1) rather than SIGTERM.
func TestKillSignalAfterShutdownDelay(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startAgent(t.TempDir(), true)
	task := shTask("t", `trap 'echo got INT; exit 0' INT; trap 'echo got TERM; exit 1' TERM; echo up; while :; do sleep 0.05; done`)
	task.KillSignal = "SIGINT"
	task.ShutdownDelay = spec.Duration(time.Second)
	task.KillTimeout = spec.Duration(5 * time.Second)
	c.submit(job("sigint", spec.JobService, task))
	a := c.alloc("sigint", 10*time.Second, "task running", running("t"))
	waitFor(t, 5*time.Second, "the trap to be set", func() bool { return strings.Contains(logs(t, c.client, a.ID, "t", false), "up") })

	if _, err := c.client.StopJob(context.Background(), "sigint", false); err != nil {
		t.Fatal(err)
	}
	a = c.alloc("sigint", 10*time.Second, "alloc complete", clientStatus(spec.ClientComplete))
	ts := taskState(a, "t")
	killing := events(ts, spec.EventKilling)
	killed := events(ts, spec.EventKilled)
	if len(killing) != 2 || len(killed) != 1 {
		t.Fatalf("want 2 Killing events and 1 Killed:\n%s", describe(a))
	}
	if !strings.Contains(killing[0].Message, "waiting shutdown_delay 1s before sending SIGINT") || !strings.Contains(killing[1].Message, "sent SIGINT, SIGKILL after 5s") {
		t.Errorf("Killing events %q, %q: want the shutdown_delay, then SIGINT", killing[0].Message, killing[1].Message)
	}
	if d := killing[1].Time.Sub(killing[0].Time); d < 900*time.Millisecond {
		t.Errorf("signal sent %s after the stop, before the 1s shutdown_delay", d)
	}
	if killed[0].Message != "exit code 0" {
		t.Errorf("Killed %q, want exit code 0 (the SIGINT trap's)", killed[0].Message)
	}
	if out := logs(t, c.client, a.ID, "t", false); !strings.Contains(out, "got INT") || strings.Contains(out, "got TERM") {
		t.Errorf("task output %q, want got INT only", out)
	}
}

// TestLeaderEndStopsTheOthers: when the leader task of a batch job ends,
// its sibling, which would run for 1000 s, is stopped, saying why.
func TestLeaderEndStopsTheOthers(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startAgent(t.TempDir(), true)
	lead := shTask("lead", "sleep 0.3")
	lead.Leader = true
	c.submit(job("leader", spec.JobBatch, lead, shTask("follow", "exec sleep 1000")))
	a := c.alloc("leader", 15*time.Second, "alloc complete", clientStatus(spec.ClientComplete))
	ft := taskState(a, "follow")
	if ft.Failed || len(events(ft, spec.EventKilled)) != 1 {
		t.Fatalf("follow not stopped:\n%s", describe(a))
	}
	if k := events(ft, spec.EventKilling); len(k) != 1 || !strings.HasPrefix(k[0].Message, "leader task lead ended: ") {
		t.Errorf("follow's Killing events %+v, want one saying the leader ended", k)
	}
	if lt := taskState(a, "lead"); lt.ExitCode == nil || *lt.ExitCode != 0 {
		t.Errorf("lead exit %v, want 0", lt.ExitCode)
	}
}

// TestTaskUser: a task's user (Nomad's task-level user) runs its process
// as that user; a user the node does not have fails the task at once, as
// a task event, without restarts.
func TestTaskUser(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	// The task's user must be able to pass through every directory above
	// its task directory: the test's temporary directories are 0700 (and
	// so is CI's TMPDIR); below os.TempDir they are the test's to open.
	data := t.TempDir()
	for d := data; ; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if d == filepath.Clean(os.TempDir()) || d == filepath.Dir(d) {
			break
		}
	}
	c.startAgent(data, true)
	missing := shTask("t", "true")
	missing.User = "drover-no-such-user"
	missing.Restart = restart(3, time.Minute, 100*time.Millisecond, spec.RestartFail)
	c.submit(job("nouser", spec.JobService, missing))
	a := c.alloc("nouser", 10*time.Second, "alloc failed", clientStatus(spec.ClientFailed))
	ts := taskState(a, "t")
	fail := events(ts, spec.EventDriverFail)
	if len(fail) != 1 || !strings.Contains(fail[0].Message, `user "drover-no-such-user" does not exist on this node`) || ts.Restarts != 0 {
		t.Errorf("want one Driver Failure naming the user and no restarts:\n%s", describe(a))
	}

	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI runs the tests as root, but this run is not root")
		}
		t.Skip("needs root to run a task as another user")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("this machine has no user nobody: %v", err)
	}
	if err := agent.CanPass(filepath.Dir(data), nobody, -1); err != nil {
		t.Skipf("user nobody cannot reach this test's directories (%v); run with TMPDIR=/tmp", err)
	}
	as := shTask("t", "id -u && echo hello >local/out && echo hush >secrets/s && cat local/out")
	as.Driver = "exec"
	as.User = "nobody"
	c.submit(job("asnobody", spec.JobBatch, as))
	a = c.alloc("asnobody", 10*time.Second, "alloc complete", clientStatus(spec.ClientComplete))
	if out := logs(t, c.client, a.ID, "t", false); out != nobody.Uid+"\nhello\n" {
		t.Errorf("task printed %q, want nobody's uid %s, then what it wrote in local/", out, nobody.Uid)
	}

	// An agent whose data directory nobody may not pass through says so.
	closed := t.TempDir()
	if err := os.Chmod(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	c2 := newCluster(t)
	c2.startAgent(filepath.Join(closed, "data"), true)
	blocked := shTask("t", "true")
	blocked.Driver = "exec"
	blocked.User = "nobody"
	blocked.Restart = restart(0, time.Minute, 100*time.Millisecond, spec.RestartFail)
	c2.submit(job("blocked", spec.JobBatch, blocked))
	a = c2.alloc("blocked", 10*time.Second, "alloc failed", clientStatus(spec.ClientFailed))
	// closed, or the data directory in it when the umask made that 0700.
	want := fmt.Sprintf(`user "nobody" cannot enter %s`, closed)
	if fail := events(taskState(a, "t"), spec.EventDriverFail); len(fail) == 0 || !strings.Contains(fail[0].Message, want) {
		t.Errorf("want a Driver Failure saying %q:\n%s", want, describe(a))
	}
}
