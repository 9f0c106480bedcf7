package e2e

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// nomadBatch is a Nomad-style batch job with extra lines at job level.
func nomadBatch(name, extra string) string {
	return fmt.Sprintf(`
job %q {
  type = "batch"
%s
  group "work" {
    task "step" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
      resources {
        cpu    = 10
        memory = 8
      }
    }
  }
}
`, name, extra)
}

// TestNomadNodeAttributes runs, on a real dev node, Nomad jobs that
// constrain on ${attr.kernel.name} and name their datacenters: they
// place; a job in a datacenter no node is in waits with a reason naming
// it; plan warns of an attribute no node has; drover nodes NODE shows
// what constraints read.
func TestNomadNodeAttributes(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the attributes checked are Linux's")
	}
	dir := t.TempDir()
	d := startDev(t, dir+"/data")
	for name, extra := range map[string]string{
		"onlinux": `  constraint {
    attribute = "${attr.kernel.name}"
    value     = "linux"
  }`,
		"indc1":   `  datacenters = ["dc1"]`,
		"inglob":  `  datacenters = ["us-*", "d*"]`,
		"default": `  node_pool = "default"`,
	} {
		out, errOut, code := d.cli("", "run", writeJob(t, dir, name+".hcl", nomadBatch(name, extra)))
		if code != 0 || !strings.Contains(out, "1/1 instances completed") {
			t.Errorf("drover run %s: exit %d\n%s\n%s", name, code, out, errOut)
		}
	}

	out, errOut, code := d.cli("", "run", writeJob(t, dir, "nowhere.hcl", nomadBatch("nowhere", `  datacenters = ["nowhere"]`)))
	if code != 2 || !strings.Contains(out, "0/1 nodes fit: not in datacenter nowhere on 1") {
		t.Errorf("drover run of a job in no node's datacenter: exit %d, want 2 and the reason\n%s\n%s", code, out, errOut)
	}
	if table, _, _ := d.cli("", "status", "nowhere"); !strings.Contains(table, "not in datacenter nowhere") {
		t.Errorf("drover status does not say why the job waits:\n%s", table)
	}

	consul := writeJob(t, dir, "consul.hcl", nomadBatch("needsconsul", `  constraint {
    attribute = "${attr.consul.version}"
    operator  = "is_set"
  }
  constraint {
    attribute = "${attr.cpu.arch}"
    value     = "`+runtime.GOARCH+`"
  }`))
	out, errOut, code = d.cli("", "plan", consul)
	want := "warning: " + consul + ":5:17: constraints[0].attribute: ${attr.consul.version} is Consul's, and drover works without Consul"
	if code != 2 || !strings.Contains(errOut, want) || strings.Contains(errOut, "cpu.arch") {
		t.Errorf("drover plan of a job on an attribute no node has: exit %d, want 2 and one warning %q\n%s\n%s", code, want, out, errOut)
	}

	nodes, _, err := d.client().Nodes(context.Background(), nil)
	if err != nil || len(nodes) != 1 {
		t.Fatalf("nodes: %v, %d", err, len(nodes))
	}
	out, errOut, code = d.cli("", "nodes", nodes[0].Name)
	for _, line := range []string{"Datacenter  dc1", "Pool        default", "attr.kernel.name", "attr.driver.raw_exec", "attr.unique.network.ip-address", "attr.memory.totalbytes"} {
		if code != 0 || !strings.Contains(out, line) {
			t.Errorf("drover nodes NODE: exit %d, lacks %q\n%s\n%s", code, line, out, errOut)
		}
	}
}
