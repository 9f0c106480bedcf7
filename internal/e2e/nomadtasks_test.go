package e2e

import (
	"strconv"
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

const apiJob = `
job "api" {
  group "g" {
    network {
      port "http" {}
    }
    task "server" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["1000"]
      }
      service {
        name = "api"
        port = "http"
      }
    }
  }
}
`

const readerJob = `
job "reader" {
  type = "batch"
  group "g" {
    task "read" {
      driver = "raw_exec"
      template {
        data        = <<EOT
{{ env "NOMAD_JOB_NAME" }} {{ env "attr.kernel.name" }}{{ range service "api" }} {{ .Address }}:{{ .Port }}{{ end }}
EOT
        destination = "local/upstream"
      }
      config {
        command = "/bin/cat"
        args    = ["local/upstream"]
      }
    }
  }
}
`

// TestDevTemplateReadsTheCatalog: through drover dev, a Nomad template
// renders the runtime variables, a node attribute and the address of a
// service another job registered.
func TestDevTemplateReadsTheCatalog(t *testing.T) {
	dir := t.TempDir()
	d := startDev(t, dir+"/data")
	if out, errOut, code := d.cli("", "run", writeJob(t, dir, "api.hcl", apiJob)); code != 0 {
		t.Fatalf("drover run api: exit %d\n%s\n%s", code, out, errOut)
	}
	allocs := d.jobStatus("api").Allocations
	if len(allocs) != 1 || len(allocs[0].Ports) != 1 {
		t.Fatalf("api allocs: %s", allocsLine(allocs))
	}
	port := allocs[0].Ports[0].Value
	out, errOut, code := d.cli("", "run", writeJob(t, dir, "reader.hcl", readerJob))
	if code != 0 || !strings.Contains(out, "1/1 instances completed") {
		t.Fatalf("drover run reader: exit %d\n%s\n%s", code, out, errOut)
	}
	logs, _, _ := d.cli("", "logs", "reader")
	if want := "reader linux 127.0.0.1:" + strconv.Itoa(port) + "\n"; logs != want {
		t.Errorf("the template rendered %q, want %q", logs, want)
	}
}
