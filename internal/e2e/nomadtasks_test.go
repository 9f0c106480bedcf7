package e2e

import (
	"strings"
	"testing"
)

// lifecycleJob is a Nomad batch job whose hooks write, in the alloc's
// shared directory, what ran; its poststop task prints it all.
const lifecycleJob = `
job "hooks" {
  type = "batch"
  group "g" {
    task "init" {
      driver = "raw_exec"
      lifecycle {
        hook = "prestart"
      }
      config {
        command = "/bin/sh"
        args    = ["-c", "echo init >> \"$NOMAD_ALLOC_DIR/order\""]
      }
    }
    task "side" {
      driver = "raw_exec"
      lifecycle {
        hook    = "prestart"
        sidecar = true
      }
      config {
        command = "/bin/sleep"
        args    = ["1000"]
      }
    }
    task "main" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo main >> \"$NOMAD_ALLOC_DIR/order\"; sleep 1"]
      }
    }
    task "after" {
      driver = "raw_exec"
      lifecycle {
        hook = "poststart"
      }
      config {
        command = "/bin/sh"
        args    = ["-c", "echo poststart > \"$NOMAD_ALLOC_DIR/post\""]
      }
    }
    task "report" {
      driver = "raw_exec"
      lifecycle {
        hook = "poststop"
      }
      config {
        command = "/bin/sh"
        args    = ["-c", "cat \"$NOMAD_ALLOC_DIR/order\" \"$NOMAD_ALLOC_DIR/post\""]
      }
    }
  }
}
`

// TestDevLifecycleHooks runs a Nomad job with prestart, sidecar,
// poststart and poststop tasks through drover dev: it completes (the
// sidecar stopped once the main task ended), and the poststop task saw
// the others' work in order.
func TestDevLifecycleHooks(t *testing.T) {
	dir := t.TempDir()
	d := startDev(t, dir+"/data")
	out, errOut, code := d.cli("", "run", writeJob(t, dir, "hooks.hcl", lifecycleJob))
	if code != 0 || !strings.Contains(out, "1/1 instances completed") {
		t.Fatalf("drover run hooks: exit %d\n%s\n%s", code, out, errOut)
	}
	logs, errOut, code := d.cli("", "logs", "hooks/report")
	if code != 0 || logs != "init\nmain\npoststart\n" {
		t.Errorf("the poststop task printed %q (exit %d, %s), want init, main, poststart", logs, code, errOut)
	}
}
