package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/spec"
)

// TestInspectNodeStatusAndCompletion: job inspect prints the stored job
// as JSON that drover run - takes back unchanged (same version); node
// status NODE lists the instances on the node; the shell completion
// offers the cluster's job, node, instance and namespace names, and
// nothing, silently, when the server cannot be reached; system gc purges
// the stopped job once old enough.
func TestInspectNodeStatusCompletionAndGC(t *testing.T) {
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

	// namespace list counts the jobs by namespace; apply needs nothing.
	var nss []struct {
		Name    string `json:"name"`
		Jobs    int    `json:"jobs"`
		Running int    `json:"running"`
	}
	out, _, _ = d.cli("", "namespace", "list", "-o", "json")
	if err := json.Unmarshal([]byte(out), &nss); err != nil || len(nss) != 1 || nss[0].Name != "default" || nss[0].Jobs != 1 || nss[0].Running < 1 {
		t.Errorf("drover namespace list -o json: %v %+v\n%s; want default with 1 job and its running instances", err, nss, out)
	}
	// apply stores nothing and succeeds; delete succeeds for a namespace
	// without jobs and names the jobs of one with some.
	if out, stderr, code := d.cli("", "namespace", "apply", "team-a"); code != 0 || !strings.Contains(out, "needs no registration") {
		t.Errorf("drover namespace apply: exit %d: %s%s", code, out, stderr)
	}
	if _, stderr, code := d.cli("", "namespace", "apply", "Team A"); code != 1 || !strings.Contains(stderr, "namespace name") {
		t.Errorf("drover namespace apply of a bad name: exit %d: %s", code, stderr)
	}
	if _, stderr, code := d.cli("", "run", "--detach", "--namespace", "team-b", writeTemp(t, "nsjob.hcl", strings.Replace(hupJob, `job "hup"`, `job "nsjob"`, 1))); code != 0 {
		t.Fatalf("drover run --namespace team-b: %s", stderr)
	}
	for _, c := range []struct {
		ns, want string
		code     int
	}{
		{"team-a", `Namespace "team-a" has no jobs this token may read: nothing to delete.`, 0},
		{"team-b", `namespace "team-b" has 1 job(s): nsjob; purge them first`, 1},
		{"default", "the default namespace cannot be deleted", 1},
	} {
		if out, stderr, code := d.cli("", "namespace", "delete", c.ns); code != c.code || !strings.Contains(out+stderr, c.want) {
			t.Errorf("drover namespace delete %s: exit %d, want %d and %q: %s%s", c.ns, code, c.code, c.want, out, stderr)
		}
	}
	if _, stderr, code := d.cli("", "stop", "--purge", "nsjob"); code != 0 {
		t.Errorf("drover stop --purge nsjob: %s", stderr)
	}

	// system gc purges a stopped job only past --older-than, and
	// --dry-run purges nothing.
	if _, stderr, code := d.cli("", "stop", "hup"); code != 0 {
		t.Fatalf("drover stop hup: %s", stderr)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"system", "gc"}, "kept hup: stopped, its last instance ended"},
		{[]string{"system", "gc", "--older-than", "0", "--dry-run"}, "would purge hup"},
		{[]string{"system", "gc", "--older-than", "0"}, "purged hup\n1 stopped jobs purged, 0 kept."},
	} {
		out, stderr, code := d.cli("", c.args...)
		if code != 0 || !strings.Contains(out, c.want) {
			t.Errorf("drover %s: exit %d, want %q in:\n%s%s", strings.Join(c.args, " "), code, c.want, out, stderr)
		}
		if _, _, code := d.cli("", "status", "hup"); (code == 0) != !strings.HasPrefix(c.want, "purged") {
			t.Errorf("after drover %s, drover status hup exits %d", strings.Join(c.args, " "), code)
		}
	}
}

// rollJob is a service of 3 instances rolled out one at a time; version
// is in its env, so that changing it makes a new version to deploy.
func rollJob(version string) string {
	return `job "roll" {
  update {
    max_parallel     = 1
    min_healthy_time = "1s"
    healthy_deadline = "10s"
    health_check     = "task_states"
  }
  group "g" {
    count = 3
    task "t" {
      driver = "raw_exec"
      env { V = "` + version + `" }
      config {
        command = "/bin/sleep"
        args    = ["300"]
      }
      resources {
        cpu    = 10
        memory = 10
      }
    }
  }
}
`
}

// TestDeploymentPauseResume: a paused deployment places nothing past the
// batch it had started, for longer than a batch takes; resumed, it
// finishes.
func TestDeploymentPauseResume(t *testing.T) {
	d := startDev(t, t.TempDir())
	if _, stderr, code := d.cli("", "run", writeTemp(t, "v1.hcl", rollJob("1"))); code != 0 {
		t.Fatalf("drover run v1: %s", stderr)
	}
	if _, stderr, code := d.cli("", "run", "--detach", writeTemp(t, "v2.hcl", rollJob("2"))); code != 0 {
		t.Fatalf("drover run v2: %s", stderr)
	}
	out, stderr, code := d.cli("", "deployment", "pause", "roll")
	if code != 0 || !strings.Contains(out, "paused") {
		t.Fatalf("drover deployment pause: exit %d: %s%s", code, out, stderr)
	}
	placed := func() int {
		n := 0
		for _, a := range d.jobStatus("roll").Allocations {
			if a.JobVersion == 2 {
				n++
			}
		}
		return n
	}
	// A batch takes about min_healthy_time (1s): in 5s unpaused, all 3
	// would be placed.
	time.Sleep(5 * time.Second)
	if n := placed(); n > 1 {
		t.Fatalf("paused deployment placed %d instances of version 2; want at most the batch it had started", n)
	}
	out, _, _ = d.cli("", "deployment", "status", "roll")
	if !strings.Contains(out, "Paused") || !strings.Contains(out, "paused by an operator") {
		t.Errorf("deployment status of a paused deployment:\n%s", out)
	}
	if out, stderr, code := d.cli("", "deployment", "resume", "roll"); code != 0 || !strings.Contains(out, "resumed") {
		t.Fatalf("drover deployment resume: exit %d: %s%s", code, out, stderr)
	}
	waitFor(t, 60*time.Second, "the resumed deployment succeeds", func() bool {
		out, _, _ := d.cli("", "deployment", "status", "roll", "-o", "json")
		var dep spec.Deployment
		return json.Unmarshal([]byte(out), &dep) == nil && dep.JobVersion == 2 && dep.Status == spec.DeploymentSuccessful
	})
	if n := placed(); n != 3 {
		t.Errorf("after resume, %d instances of version 2; want 3", n)
	}
	if _, stderr, code := d.cli("", "deployment", "pause", "roll"); code != 1 || !strings.Contains(stderr, "only a running deployment can be paused") {
		t.Errorf("pausing a finished deployment: exit %d: %s", code, stderr)
	}
}

// TestMonitorStreamsTheServersLog: drover monitor prints the server's log
// records at the level asked (debug, below the level dev logs at), as
// they are written; --node streams the node's agent's; a bad level and a
// token that is not a management token are refused.
func TestMonitorStreamsTheServersLog(t *testing.T) {
	d := startDev(t, t.TempDir())
	var nodes []spec.Node
	out, _, _ := d.cli("", "nodes", "-o", "json")
	if err := json.Unmarshal([]byte(out), &nodes); err != nil || len(nodes) != 1 {
		t.Fatalf("drover nodes -o json: %v\n%s", err, out)
	}
	for _, args := range [][]string{{"monitor", "--log-level", "debug", "--duration", "4s"}, {"monitor", "-log-level", "debug", "--duration", "4s", "--node", nodes[0].Name}} {
		done := make(chan struct{})
		var out, stderr string
		var code int
		go func() {
			defer close(done)
			out, stderr, code = d.cli("", args...)
		}()
		// Requests are logged at debug level: make some while monitor runs.
		stop := time.After(3 * time.Second)
	poll:
		for {
			select {
			case <-stop:
				break poll
			case <-time.After(200 * time.Millisecond):
				d.cli("", "status")
			}
		}
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("drover %s did not end after its --duration", strings.Join(args, " "))
		}
		if code != 0 || !strings.Contains(out, "level=DEBUG") || !strings.Contains(out, "/v1/jobs") {
			t.Errorf("drover %s: exit %d, want debug records of the requests made meanwhile:\n%.3000s\n%s", strings.Join(args, " "), code, out, stderr)
		}
	}
	if _, stderr, code := d.cli("", "monitor", "--log-level", "loud"); code != 1 || !strings.Contains(stderr, `unknown --log-level "loud"`) {
		t.Errorf("monitor --log-level loud: exit %d: %s", code, stderr)
	}
	d.cli("", "acl", "policy", "apply", "ro", writeTemp(t, "ro.hcl", `namespace "*" { capabilities = ["read", "logs"] }`))
	out, _, _ = d.cli("", "acl", "token", "create", "--name", "ro", "--policy", "ro", "-o", "json")
	var tok spec.ACLToken
	json.Unmarshal([]byte(out), &tok)
	if _, stderr, code := d.cliWith([]string{"DROVER_TOKEN=" + tok.SecretID}, "", "monitor", "--duration", "2s"); code != 1 || !strings.Contains(stderr, "management token") {
		t.Errorf("monitor with a read token: exit %d: %s", code, stderr)
	}
}
