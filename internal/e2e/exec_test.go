package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/drover-org/drover/internal/spec"
)

// TestExecInARunningTask runs commands in a real task of a real dev through
// the CLI, the server and the agent: the task's environment, the exit
// code, input, a terminal, the task's cgroup, and the exec capability.
func TestExecInARunningTask(t *testing.T) {
	d := startDev(t, t.TempDir(), "../../examples/hello.hcl")
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := d.jobStatus("hello")
		if st.Summary.Running == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("hello not running within 30s: %+v", st.Summary)
		}
		time.Sleep(100 * time.Millisecond)
	}

	out, stderr, code := d.cli("", "exec", "hello", "--", "sh", "-c", `echo "$DROVER_ALLOC_NAME"; echo to-stderr >&2; exit 3`)
	if code != 3 || strings.TrimSpace(out) != "hello.hello[0]" || !strings.Contains(stderr, "to-stderr") {
		t.Errorf("exec with exit 3: code %d, stdout %q, stderr %q; want 3, the first instance's name, and the stderr line", code, out, stderr)
	}
	if out, _, code := d.cli("some input\n", "exec", "hello/greeter", "--", "cat"); code != 0 || out != "some input\n" {
		t.Errorf("exec cat with input: code %d, %q", code, out)
	}
	if _, stderr, code := d.cli("", "exec", "hello", "--", "no-such-command"); code == 0 || !strings.Contains(stderr, "not found") {
		t.Errorf("exec of a missing command: code %d, %q", code, stderr)
	}

	// On a terminal, the command gets one of its own.
	cmd := exec.Command(droverBin, "exec", "hello", "--", "sh", "-c", "tty; stty size")
	cmd.Env = append(os.Environ(), "DROVER_ADDR="+d.addr)
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 100, Rows: 30})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	copied := make(chan struct{})
	go func() { io.Copy(&buf, f); close(copied) }()
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err := <-waited:
		if err != nil {
			t.Errorf("drover exec on a terminal: %v", err)
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("drover exec on a terminal did not end within 30s")
	}
	f.Close()
	<-copied
	if got := buf.String(); !strings.Contains(got, "/dev/pts/") || !strings.Contains(got, "30 100") {
		t.Errorf("exec on a terminal printed %q; want a /dev/pts/ terminal sized 30 rows x 100 columns", got)
	}

	// The command runs in the task's cgroup (exec isolates when it can).
	st := d.jobStatus("hello")
	var first *spec.Alloc
	for _, a := range st.Allocations {
		if a.Name == "hello.hello[0]" {
			first = a
		}
	}
	pid := first.Status.Tasks["greeter"].PID
	taskCg, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cgroup"))
	if err == nil && strings.Contains(string(taskCg), first.ID) {
		out, _, code := d.cli("", "exec", "hello", "--", "cat", "/proc/self/cgroup")
		if code != 0 || !strings.Contains(out, first.ID) {
			t.Errorf("exec'd command's cgroups do not name the alloc %s:\n%s\n(the task's:\n%s)", first.ID, out, taskCg)
		}
	} else {
		t.Logf("the task has no cgroup of its own here; not checking the exec'd command's")
	}

	// A token without exec in the namespace is refused before anything runs.
	d.cli("", "acl", "policy", "apply", "readlogs", writeTemp(t, "p.hcl", `namespace "default" { capabilities = ["read", "logs"] }`))
	out, _, _ = d.cli("", "acl", "token", "create", "--name", "reader", "--policy", "readlogs", "-o", "json")
	var tok spec.ACLToken
	json.Unmarshal([]byte(out), &tok)
	_, stderr, code = d.cliWith([]string{"DROVER_TOKEN=" + tok.SecretID}, "", "exec", "hello", "--", "touch", "/tmp/should-not-exist")
	if code == 0 || !strings.Contains(stderr, "may not exec") {
		t.Errorf("exec with a token lacking exec: code %d, %q", code, stderr)
	}
}

// sleepJob writes a job file of one raw_exec task that sleeps, with more
// group-level HCL when given (a restart block), and returns its path.
func sleepJob(t *testing.T, name, groupExtra string) string {
	t.Helper()
	return writeTemp(t, name+".hcl", `job "`+name+`" {
  group "g" {
`+groupExtra+`    task "t" {
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
`)
}

func writeTemp(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLogsSince: drover logs --since keeps the output of the last while
// (to about a second), from a real task's real log files.
func TestLogsSince(t *testing.T) {
	d := startDev(t, t.TempDir())
	file := writeTemp(t, "ticker.hcl", `job "ticker" {
  group "g" {
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "i=0; while true; do echo line-$i; i=$((i+1)); sleep 0.2; done"]
      }
      resources {
        cpu    = 10
        memory = 10
      }
    }
  }
}
`)
	if _, stderr, code := d.cli("", "run", file); code != 0 {
		t.Fatalf("drover run: %s", stderr)
	}
	time.Sleep(4 * time.Second)
	all, _, code := d.cli("", "logs", "ticker")
	recent, stderr, code2 := d.cli("", "logs", "ticker", "--since", "1s")
	if code != 0 || code2 != 0 {
		t.Fatalf("drover logs: %d %d %s", code, code2, stderr)
	}
	nAll, nRecent := strings.Count(all, "\n"), strings.Count(recent, "\n")
	// 1 s of lines every 0.2 s is 5; marks are a second apart, so up to
	// about 10 may come.
	if !strings.Contains(all, "line-0\n") || strings.Contains(recent, "line-0\n") || nRecent == 0 || nRecent > 12 || nRecent >= nAll {
		t.Errorf("logs --since 1s: %d of %d lines:\n%s", nRecent, nAll, recent)
	}
	if _, stderr, code := d.cli("", "logs", "ticker", "--since", "-5m"); code == 0 || !strings.Contains(stderr, "positive") {
		t.Errorf("a negative --since: exit %d, %s", code, stderr)
	}
}
