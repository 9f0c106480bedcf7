package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestNomadDriverNoNodeHas: a Nomad job whose task uses a driver drover
// does not have, with a vault block, is accepted with a warning for each
// and never placed: run exits 2 with "no node has driver podman", and
// status shows the same reason.
func TestNomadDriverNoNodeHas(t *testing.T) {
	dir := t.TempDir()
	d := startDev(t, dir+"/data")
	out, errOut, code := d.cli("", "run", writeJob(t, dir, "pod.nomad", `
job "pod" {
  vault { policies = ["app"] }
  group "g" {
    task "web" {
      driver = "podman"
      config {
        image = "docker.io/library/redis:7"
        ports = ["db"]
      }
      resources {
        cpu    = 10
        memory = 8
      }
    }
  }
}
`))
	if code != 2 || !strings.Contains(out, "0/1 nodes fit: no node has driver podman") || !strings.Contains(out, "No current node could ever run it") {
		t.Fatalf("drover run of a podman job: exit %d, want 2 with the reason\n%s\n%s", code, out, errOut)
	}
	for _, w := range []string{`pod.nomad:3:3: vault block in job "pod": drover has no Vault`, `pod.nomad:6:16: task "web": drover has no podman driver`} {
		if !strings.Contains(errOut, w) {
			t.Errorf("run's warnings lack %q:\n%s", w, errOut)
		}
	}
	if table, _, _ := d.cli("", "status", "pod"); !strings.Contains(table, "no node has driver podman") {
		t.Errorf("drover status does not say why the job is pending:\n%s", table)
	}
}

// TestNomadGroupService: a Nomad job whose service is written at group
// level, its script check naming the task it runs in and its port a
// label, is registered in drover's catalog and turns healthy once the
// check passes in that task.
func TestNomadGroupService(t *testing.T) {
	dir := t.TempDir()
	d := startDev(t, dir+"/data")
	out, errOut, code := d.cli("", "run", writeJob(t, dir, "gsvc.nomad", `
job "gsvc" {
  group "g" {
    network {
      port "http" {}
    }
    service {
      name = "gsvc-web"
      port = "http"
      tags = ["nomad"]
      check {
        type     = "script"
        task     = "server"
        command  = "/bin/sh"
        args     = ["-c", "test \"$NOMAD_TASK_NAME\" = server"]
        interval = "1s"
      }
    }
    task "sidecar" {
      lifecycle {
        hook    = "prestart"
        sidecar = true
      }
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["1000"]
      }
    }
    task "server" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["1000"]
      }
    }
  }
}
`))
	if code != 0 {
		t.Fatalf("drover run: exit %d\n%s\n%s", code, out, errOut)
	}
	port := d.jobStatus("gsvc").Allocations[0].Ports[0].Value
	var list string
	waitFor(t, 30*time.Second, "gsvc-web healthy in the catalog", func() bool {
		list, _, _ = d.cli("", "services", "gsvc-web", "-o", "json")
		return strings.Contains(list, `"health": "healthy"`)
	})
	for _, w := range []string{`"task": "server"`, `"port": ` + strconv.Itoa(port), `"nomad"`} {
		if !strings.Contains(list, w) {
			t.Errorf("the catalog's instance lacks %s:\n%s", w, list)
		}
	}
}
