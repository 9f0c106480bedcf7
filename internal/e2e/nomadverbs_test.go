package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/drover-org/drover/internal/spec"
)

// TestInspectNodeStatusAndCompletion: job inspect prints the stored job
// as JSON that drover run - takes back unchanged (same version); node
// status NODE lists the instances on the node; the shell completion
// offers the cluster's job, node, instance and namespace names, and
// nothing, silently, when the server cannot be reached.
func TestInspectNodeStatusAndCompletion(t *testing.T) {
	d := startDev(t, t.TempDir())
	if _, stderr, code := d.cli("", "run", writeTemp(t, "hup.hcl", hupJob)); code != 0 {
		t.Fatalf("drover run: %s", stderr)
	}
	st := d.jobStatus("hup")

	inspected, stderr, code := d.cli("", "job", "inspect", "hup")
	var job spec.Job
	if code != 0 || json.Unmarshal([]byte(inspected), &job) != nil || job.Name != "hup" || job.Version != st.Job.Version {
		t.Fatalf("drover job inspect: exit %d: %s%s", code, inspected, stderr)
	}
	out, stderr, code := d.cli(inspected, "run", "--detach", "-")
	if code != 0 || !strings.Contains(out+stderr, "unchanged") && d.jobStatus("hup").Job.Version != st.Job.Version {
		t.Errorf("drover run - of the inspected job: exit %d: %s%s", code, out, stderr)
	}
	if v := d.jobStatus("hup").Job.Version; v != st.Job.Version {
		t.Errorf("running the inspected job back made version %d; want %d, unchanged", v, st.Job.Version)
	}
	// Changed, it is a new version.
	edited := strings.Replace(inspected, `"count": 2`, `"count": 1`, 1)
	if edited == inspected {
		t.Fatalf("no \"count\": 2 in the inspected job:\n%s", inspected)
	}
	if _, stderr, code := d.cli(edited, "run", "--detach", "-"); code != 0 {
		t.Errorf("drover run - of the edited job: exit %d: %s", code, stderr)
	}
	if v := d.jobStatus("hup").Job.Version; v != st.Job.Version+1 {
		t.Errorf("the edited job is version %d; want %d", v, st.Job.Version+1)
	}

	var nodes []spec.Node
	out, _, _ = d.cli("", "nodes", "-o", "json")
	if err := json.Unmarshal([]byte(out), &nodes); err != nil || len(nodes) != 1 {
		t.Fatalf("drover nodes -o json: %v\n%s", err, out)
	}
	node := nodes[0].Name
	out, stderr, code = d.cli("", "node", "status", node)
	if code != 0 || !strings.Contains(out, "Allocations") || !strings.Contains(out, "hup.g[0]") || !strings.Contains(out, "attr.kernel.name") {
		t.Errorf("drover node status %s: exit %d, want its attributes and the instances on it:\n%s%s", node, code, out, stderr)
	}

	a0 := st.Allocations[0]
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"__complete", "status", "h"}, "hup"},
		{[]string{"__complete", "job", "inspect", ""}, "hup"},
		{[]string{"__complete", "logs", ""}, "hup"},
		{[]string{"__complete", "node", "status", ""}, node},
		{[]string{"__complete", "nodes", ""}, node},
		{[]string{"__complete", "alloc", "status", a0.ID[:2]}, a0.ID[:8] + "\t" + a0.Name},
		{[]string{"__complete", "alloc", "signal", a0.ID[:8], "SIGH"}, "SIGHUP"},
		{[]string{"__complete", "status", "--namespace", ""}, "default"},
	} {
		out, stderr, code := d.cli("", c.args...)
		if code != 0 || !strings.Contains(out, c.want+"\n") {
			t.Errorf("drover %s: exit %d, want %q among:\n%s%s", strings.Join(c.args, " "), code, c.want, out, stderr)
		}
	}
	if out, _, _ := d.cli("", "__complete", "status", "zz"); strings.Contains(out, "hup") {
		t.Errorf("completing zz offered hup:\n%s", out)
	}
	out, stderr, code = d.cliWith([]string{"DROVER_ADDR=http://127.0.0.1:1"}, "", "__complete", "status", "")
	if code != 0 || out != ":4\n" || strings.Contains(stderr, "Error") || strings.Contains(stderr, "cannot reach") {
		t.Errorf("completion without a server: exit %d, stdout %q, stderr %q; want no names and no error", code, out, stderr)
	}
}
