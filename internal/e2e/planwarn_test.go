package e2e

import (
	"strings"
	"testing"
)

// TestPlanWarnsOfTargetsNoCurrentNodeHas: drover plan reads the cluster's
// nodes before it decodes the job, and warns, at the file:line:col that
// names it, of a meta key the job targets that none of them has; validate,
// which knows no nodes, does not (a node may have it). Once a node with
// that key joins, plan is silent about it too.
func TestPlanWarnsOfTargetsNoCurrentNodeHas(t *testing.T) {
	dir := t.TempDir()
	d := startDev(t, dir+"/data")
	path := writeJob(t, dir, "rack.hcl", `job "rack" {
  group "g" {
    constraint {
      attribute = "${meta.rack}"
      value     = "r1"
    }
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["1000"]
      }
    }
  }
}
`)
	want := path + ":4:19: groups[0].constraints[0].attribute: ${meta.rack} is on no current node"
	out, errOut, code := d.cli("", "plan", path)
	if !strings.Contains(errOut+out, want) {
		t.Errorf("drover plan with no node having meta.rack: exit %d, printed:\n%s%s\nwant a warning starting %q", code, out, errOut, want)
	}
	out, errOut, code = d.cli("", "validate", path)
	if code != 0 || strings.Contains(out+errOut, "meta.rack") {
		t.Errorf("drover validate: exit %d, printed:\n%s%s\nwant exit 0 and no warning about meta.rack", code, out, errOut)
	}

	startAgent(t, d, "racked", dir+"/agent2", "--meta", "rack=r1")
	out, errOut, code = d.cli("", "plan", path)
	if code != 0 || strings.Contains(out+errOut, "meta.rack") {
		t.Errorf("drover plan with node racked having meta.rack: exit %d, printed:\n%s%s\nwant exit 0 and no warning about meta.rack", code, out, errOut)
	}
}
