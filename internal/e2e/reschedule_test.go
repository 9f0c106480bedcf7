package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-org/drover/internal/proc"
	"github.com/drover-org/drover/internal/testbin"
)

// firstFailsJob: each instance's first alloc writes its NOMAD_ALLOC_ID to
// a file named by its index and exits 1; with no restart in place, the
// reschedule policy places a replacement 1 s later, which finds the file
// and runs on. It is the shape of Nomad's e2e rescheduling_success job
// (which fails or runs by a checksum of the alloc ID), made certain.
const firstFailsJob = `
job "e2efirstfails" {
  group "g" {
    count = 2
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "f=%s/$NOMAD_ALLOC_INDEX; if [ -e $f ]; then exec sleep 300; fi; echo $NOMAD_ALLOC_ID > $f; exit 1"]
      }
      resources {
        cpu    = 20
        memory = 16
      }
    }
    restart {
      attempts = 0
      mode     = "fail"
    }
    reschedule {
      delay          = "1s"
      delay_function = "constant"
      unlimited      = true
    }
  }
}
`

// TestRunFollowsAReplacedInstance: an instance that fails and is replaced
// by its reschedule policy is its replacement's from then on: drover run
// follows the replacements to running and exits 0, as a Nomad job whose
// failed allocs are rescheduled ends up running, instead of giving the
// verdict at the replaced alloc's failure. Each replacement is a new alloc
// with a new ID: the running processes' NOMAD_ALLOC_ID, read from /proc,
// differ from the IDs the failed ones wrote.
func TestRunFollowsAReplacedInstance(t *testing.T) {
	dir := t.TempDir()
	marks := filepath.Join(dir, "marks")
	if err := os.Mkdir(marks, 0o755); err != nil {
		t.Fatal(err)
	}
	d := startDev(t, dir+"/data")
	t.Cleanup(func() { testbin.KillTasks(t, "e2efirstfails", dir) })
	out, errOut, code := d.cli("", "run", "--timeout", "60s", "--min-healthy-time", "1s",
		writeJob(t, dir, "firstfails.hcl", fmt.Sprintf(firstFailsJob, marks)))
	if code != 0 {
		t.Fatalf("drover run: exit %d, want 0 once the replacements run\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, "2/2 instances running") || !strings.Contains(out, "its reschedule policy replaces it in") {
		t.Errorf("drover run printed:\n%s\nwant the failure's coming replacement said, then 2/2 running", out)
	}

	failedIDs := map[string]bool{}
	for _, i := range []string{"0", "1"} {
		b, err := os.ReadFile(filepath.Join(marks, i))
		if err != nil {
			t.Fatalf("instance %s's first alloc left no mark: %v", i, err)
		}
		failedIDs[strings.TrimSpace(string(b))] = true
	}
	pids := taskProcs("e2efirstfails", dir)
	if len(pids) != 2 {
		t.Fatalf("%d live task processes of the job (%v), want 2", len(pids), pids)
	}
	for _, pid := range pids {
		env, err := proc.Environ(pid)
		if err != nil {
			t.Fatal(err)
		}
		id, _ := proc.Getenv(env, "NOMAD_ALLOC_ID")
		if id == "" || failedIDs[id] {
			t.Errorf("pid %d runs with NOMAD_ALLOC_ID %q; want a new alloc's ID, not one of the failed ones %v", pid, id, failedIDs)
		}
	}
}
