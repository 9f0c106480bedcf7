package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// scaleJob has no count: its scaling block's min sets it, as in Nomad.
const scaleJob = `job "sc" {
  group "g" {
    scaling {
      enabled = true
      min     = 1
      max     = 3
      policy {
        cooldown = "1m"
      }
    }
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["1000.314159"]
      }
      resources {
        cpu    = 10
        memory = 10
      }
    }
  }
}
`

// sleepers counts the processes on this machine whose command line is
// the scale job's task, from the process table.
func sleepers(t *testing.T) int {
	t.Helper()
	want := []byte("/bin/sleep\x001000.314159\x00")
	paths, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil && bytes.Equal(b, want) {
			n++
		}
	}
	return n
}

func waitSleepers(t *testing.T, want int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		n := sleepers(t)
		if n == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d processes of the job after %s, want %d", n, within, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestScaleHoldsToScalingBounds: a group with a scaling block and no
// count starts min instances; drover scale and drover job scale change
// the count as a new version, counted in the process table; a count
// outside min..max is refused and changes nothing; the Submitted event
// says who scaled what.
func TestScaleHoldsToScalingBounds(t *testing.T) {
	if n := sleepers(t); n != 0 {
		t.Fatalf("%d processes of the test's job already run on this machine", n)
	}
	d := startDev(t, t.TempDir())
	out, stderr, code := d.cli("", "run", writeTemp(t, "sc.hcl", scaleJob))
	if code != 0 || !strings.Contains(stderr, "policy in the scaling block") {
		t.Fatalf("drover run: exit %d, want 0 and a warning of the policy: %s%s", code, out, stderr)
	}
	waitSleepers(t, 1, 10*time.Second)

	if out, stderr, code := d.cli("", "scale", "sc", "3"); code != 0 || !strings.Contains(out, `Job "sc" scaled to 3: now version 2.`) {
		t.Fatalf("drover scale sc 3: exit %d: %s%s", code, out, stderr)
	}
	waitSleepers(t, 3, 10*time.Second)

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"scale", "sc", "4"}, `count 4 is above group "g"'s scaling max 3`},
		{[]string{"job", "scale", "sc", "g", "0"}, `count 0 is below group "g"'s scaling min 1`},
		{[]string{"scale", "sc", "nope", "2"}, `job "sc" has no group "nope"; its groups are g`},
		{[]string{"scale", "nojob", "2"}, `no job named "nojob"`},
	} {
		if out, stderr, code := d.cli("", c.args...); code != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("drover %s: exit %d, want 1 and %q:\n%s%s", strings.Join(c.args, " "), code, c.want, out, stderr)
		}
	}
	if v := d.jobStatus("sc").Job.Version; v != 2 {
		t.Errorf("after the refused requests the job is version %d, want 2", v)
	}

	if out, stderr, code := d.cli("", "job", "scale", "sc", "g", "1", "--message", "quiet hours"); code != 0 {
		t.Fatalf("drover job scale sc g 1: exit %d: %s%s", code, out, stderr)
	}
	waitSleepers(t, 1, 15*time.Second)
	if out, _, _ := d.cli("", "scale", "sc", "1", "--detach"); !strings.Contains(out, "unchanged") {
		t.Errorf("scaling to the current count: %s, want unchanged", out)
	}
	out, _, _ = d.cli("", "events", "--job", "sc", "--topic", "job")
	if !strings.Contains(out, "version 3 submitted") || !strings.Contains(out, "(scale g from 3 to 1: quiet hours)") {
		t.Errorf("drover events --job sc does not say who scaled what:\n%s", out)
	}
	if _, stderr, code := d.cli("", "stop", "--purge", "sc"); code != 0 {
		t.Fatalf("drover stop: %s", stderr)
	}
	waitSleepers(t, 0, 15*time.Second)
}
