package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/spec"
)

// markerJob is a job of the given type whose one task appends a line to
// marker, with extra lines at job level and task level.
func markerJob(name, typ, marker, jobExtra, taskExtra string) string {
	return fmt.Sprintf(`
job %q {
  type = %q
%s
  group "work" {
    task "step" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo ran >> %s"]
      }
%s
      resources {
        cpu    = 10
        memory = 8
      }
    }
  }
}
`, name, typ, jobExtra, marker, taskExtra)
}

func lines(t *testing.T, p string) int {
	t.Helper()
	b, err := os.ReadFile(p)
	if os.IsNotExist(err) {
		return 0
	} else if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// TestSysBatchRunsOncePerNode: a sysbatch job runs once on the dev node,
// `drover run` reports it completed, and it is not run again.
func TestSysBatchRunsOncePerNode(t *testing.T) {
	dir := t.TempDir()
	d := startDev(t, dir+"/data")
	marker := filepath.Join(dir, "ran")
	out, errOut, code := d.cli("", "run", writeJob(t, dir, "sweep.hcl", markerJob("sweep", "sysbatch", marker, "", "")))
	if code != 0 || !strings.Contains(out, "1/1 instances completed") {
		t.Fatalf("drover run: exit %d\n%s\n%s", code, out, errOut)
	}
	if n := lines(t, marker); n != 1 {
		t.Fatalf("the task ran %d times; want 1", n)
	}
	// Past the leader's full pass (5 s): a completed instance stays done.
	deadline := time.Now().Add(7 * time.Second)
	for time.Now().Before(deadline) {
		st := d.jobStatus("sweep")
		if st.Summary.State != spec.JobComplete || len(st.Allocations) != 1 {
			t.Fatalf("sweep: state %s with %d allocations; want complete with 1", st.Summary.State, len(st.Allocations))
		}
		time.Sleep(500 * time.Millisecond)
	}
	if n := lines(t, marker); n != 1 {
		t.Fatalf("the task ran %d times; want 1 (a completed sysbatch instance is not run again)", n)
	}
}

// children lists the child jobs of parent that drover status shows.
func children(t *testing.T, d *devProc, parent string) []string {
	t.Helper()
	return d.jobStatus(parent).Children
}

// TestPeriodicLaunches: a periodic job ticking every 2 s launches child
// jobs named parent@periodic-<unix> that run; status shows the next
// launch; a disabled one launches nothing until forced.
func TestPeriodicLaunches(t *testing.T) {
	dir := t.TempDir()
	d := startDev(t, dir+"/data")
	marker := filepath.Join(dir, "ticks")
	out, errOut, code := d.cli("", "run", writeJob(t, dir, "tick.hcl", markerJob("tick", "batch", marker, `  periodic {
    crons            = ["*/2 * * * * *"]
    prohibit_overlap = true
  }`, "")))
	if code != 0 || !strings.Contains(out, "Periodic job") {
		t.Fatalf("drover run: exit %d\n%s\n%s", code, out, errOut)
	}
	waitFor(t, 30*time.Second, "two periodic launches to run", func() bool { return lines(t, marker) >= 2 })
	kids := children(t, d, "tick")
	if len(kids) < 2 || !regexp.MustCompile(`^tick@periodic-\d{10}$`).MatchString(kids[0]) {
		t.Fatalf("children %q; want at least 2 named tick@periodic-<unix>", kids)
	}
	st := d.jobStatus("tick")
	if st.NextLaunch.IsZero() || time.Until(st.NextLaunch) > 3*time.Second {
		t.Errorf("next launch %s; want within 2 s from now", st.NextLaunch)
	}
	if len(st.Allocations) != 0 {
		t.Errorf("the periodic job itself has %d instances; want none (its children run)", len(st.Allocations))
	}
	human, _, _ := d.cli("", "status", "tick")
	if !strings.Contains(human, "Next ") || !strings.Contains(human, "Children ") {
		t.Errorf("drover status tick shows no next launch or children:\n%s", human)
	}
	// A child is a job of its own that completed.
	if c := d.jobStatus(kids[0]); c.Job.ParentID != "tick" || c.Summary.State != spec.JobComplete {
		t.Errorf("child %s: parent %q, state %s; want tick, complete", kids[0], c.Job.ParentID, c.Summary.State)
	}

	// Disabled: nothing launches, until forced (drover job periodic force).
	off := filepath.Join(dir, "off")
	if out, errOut, code := d.cli("", "run", writeJob(t, dir, "off.hcl", markerJob("off", "batch", off, `  periodic {
    cron    = "*/1 * * * * *"
    enabled = false
  }`, ""))); code != 0 {
		t.Fatalf("drover run off: exit %d\n%s\n%s", code, out, errOut)
	}
	time.Sleep(3 * time.Second) // three ticks of a schedule that must not launch
	if n, kids := lines(t, off), children(t, d, "off"); n != 0 || len(kids) != 0 {
		t.Fatalf("a disabled periodic job ran %d times, children %q; want none", n, kids)
	}
	out, errOut, code = d.cli("", "job", "periodic", "force", "off")
	if code != 0 || !strings.Contains(out, `"off@periodic-`) {
		t.Fatalf("drover job periodic force off: exit %d\n%s\n%s", code, out, errOut)
	}
	waitFor(t, 30*time.Second, "the forced launch to run", func() bool { return lines(t, off) == 1 })
	if _, errOut, code := d.cli("", "periodic", "force", "sweepless"); code == 0 || !strings.Contains(errOut, "no job named") {
		t.Errorf("forcing an unknown job: exit %d, %s; want a refusal naming it", code, errOut)
	}
}

// TestDispatch: a parameterized job runs only when dispatched; the
// payload reaches the task's local/ directory and the meta its
// environment; missing required meta is refused.
func TestDispatch(t *testing.T) {
	dir := t.TempDir()
	d := startDev(t, dir+"/data")
	marker := filepath.Join(dir, "got")
	job := fmt.Sprintf(`
job "enc" {
  type = "batch"
  parameterized {
    payload       = "required"
    meta_required = ["who"]
    meta_optional = ["why"]
  }
  group "g" {
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "cat local/in/payload.txt >> %s; echo \" $NOMAD_META_who\" >> %s"]
      }
      dispatch_payload {
        file = "in/payload.txt"
      }
      resources {
        cpu    = 10
        memory = 8
      }
    }
  }
}
`, marker, marker)
	out, errOut, code := d.cli("", "run", writeJob(t, dir, "enc.hcl", job))
	if code != 0 || !strings.Contains(out, "Parameterized job") {
		t.Fatalf("drover run: exit %d\n%s\n%s", code, out, errOut)
	}
	if _, errOut, code := d.cli("hello", "job", "dispatch", "enc", "-"); code == 0 || !strings.Contains(errOut, `requires meta ["who"]`) {
		t.Errorf("dispatch without required meta: exit %d, %s; want a refusal naming who", code, errOut)
	}
	if _, errOut, code := d.cli("", "dispatch", "-meta", "who=ann", "enc"); code == 0 || !strings.Contains(errOut, "requires a payload") {
		t.Errorf("dispatch without a payload: exit %d, %s; want a refusal", code, errOut)
	}
	if _, errOut, code := d.cli("x", "dispatch", "-meta", "who=ann", "-meta", "colour=red", "enc", "-"); code == 0 || !strings.Contains(errOut, `takes no meta "colour"`) {
		t.Errorf("dispatch with unknown meta: exit %d, %s; want a refusal", code, errOut)
	}
	out, errOut, code = d.cli("hello", "job", "dispatch", "-meta", "who=ann", "enc", "-")
	if code != 0 || !regexp.MustCompile(`"enc@dispatch-\d{10}-[0-9a-f]{8}"`).MatchString(out) {
		t.Fatalf("drover job dispatch: exit %d\n%s\n%s", code, out, errOut)
	}
	waitFor(t, 30*time.Second, "the dispatched job to run", func() bool { return lines(t, marker) >= 1 })
	if b, _ := os.ReadFile(marker); string(b) != "hello ann\n" {
		t.Errorf("the task saw %q; want the payload and the meta, \"hello ann\\n\"", b)
	}
	if st := d.jobStatus("enc"); len(st.Allocations) != 0 || len(st.Children) != 1 {
		t.Errorf("enc: %d instances, children %q; want none and one", len(st.Allocations), st.Children)
	}
}
