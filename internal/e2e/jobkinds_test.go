package e2e

import (
	"fmt"
	"os"
	"path/filepath"
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
