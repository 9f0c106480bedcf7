package e2e

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/spec"
)

// The README's first command, `drover dev examples/hello.hcl`, and the
// other examples, run as a newcomer would run them.
func TestExamplesRun(t *testing.T) {
	d := startDev(t, t.TempDir(), "../../examples/hello.hcl")
	waitFor(t, 30*time.Second, "examples/hello.hcl running 3/3", func() bool {
		_, _, code := d.cli("", "status", "hello")
		return code == 0 && d.jobStatus("hello").Summary.Running == 3
	})
	if n := len(taskProcs("hello", d.dataDir)); n != 3 {
		t.Fatalf("examples/hello.hcl: want 3 processes, found %d", n)
	}
	// The same job written as JSON and as YAML is the same spec: applying
	// them changes nothing.
	for _, f := range []string{"../../examples/hello.json", "../../examples/hello.yaml"} {
		out, errOut, code := d.cli("", "run", "--detach", f)
		if code != 0 || !strings.Contains(out, "unchanged") {
			t.Errorf("%s: exit %d, want \"unchanged\"\n%s%s", f, code, out, errOut)
		}
	}
	out, errOut, code := d.cli("", "run", "../../examples/batch.hcl")
	if code != 0 || !strings.Contains(out, "2/2 instances completed") {
		t.Fatalf("examples/batch.hcl: exit %d\n%s%s", code, out, errOut)
	}
	if s := d.jobStatus("report").Summary.State; s != spec.JobComplete {
		t.Fatalf("report job state %s, want complete", s)
	}
	logs, _, _ := d.cli("", "logs", "hello/greeter", "--tail", "1")
	if !strings.Contains(logs, "[hello.hello[0]/greeter] hello from hello.hello[0]") {
		t.Fatalf("logs of examples/hello.hcl:\n%s", logs)
	}
	// Ctrl-C (SIGINT) stops the tasks and exits cleanly within seconds.
	start := time.Now()
	d.cmd.Process.Signal(interrupt)
	select {
	case err := <-d.done:
		d.done <- err
		if err != nil {
			t.Fatalf("drover dev exited with %v after SIGINT\n%s", err, d.out)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("drover dev did not exit within 15s of SIGINT")
	}
	if n := len(taskProcs("hello", d.dataDir)); n != 0 {
		t.Fatalf("after SIGINT, %d hello processes remain", n)
	}
	t.Logf("drover dev stopped %s after SIGINT", time.Since(start).Round(time.Millisecond))
}

var interrupt = os.Interrupt
