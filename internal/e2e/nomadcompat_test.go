package e2e

import (
	"strings"
	"testing"
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
