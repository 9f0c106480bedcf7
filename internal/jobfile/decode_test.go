package jobfile

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/drover-org/drover/internal/spec"
)

func goodFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("testdata/good/*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no good files: %v", err)
	}
	return files
}

// decodeTestFile decodes a test file under its base name, so that positions
// in messages do not depend on where the repository is.
func decodeTestFile(t *testing.T, path string) (*spec.Job, error) {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return Decode(filepath.Base(path), src)
}

func TestGoodFilesRoundTrip(t *testing.T) {
	for _, path := range goodFiles(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			job, err := decodeTestFile(t, path)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			b, err := json.MarshalIndent(job, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			again, err := Decode("roundtrip.json", b)
			if err != nil {
				t.Fatalf("decoding the job's own JSON: %v\n%s", err, b)
			}
			if diff := cmp.Diff(job, again); diff != "" {
				t.Errorf("JSON round trip changed the job (-first +second):\n%s", diff)
			}
			// The same JSON through the API's decoder, and inside the
			// wrapper `drover status -o json` prints.
			body, err := DecodeJSONBody(b)
			if err != nil {
				t.Fatalf("DecodeJSONBody: %v", err)
			}
			if diff := cmp.Diff(job, body); diff != "" {
				t.Errorf("DecodeJSONBody differs (-Decode +DecodeJSONBody):\n%s", diff)
			}
			status, _ := json.Marshal(spec.JobStatus{Job: job, Summary: spec.JobSummary{State: spec.JobRunning}})
			wrapped, err := DecodeJSONBody(status)
			if err != nil {
				t.Fatalf("DecodeJSONBody(JobStatus): %v", err)
			}
			if diff := cmp.Diff(job, wrapped); diff != "" {
				t.Errorf("JobStatus wrapper differs (-job +wrapped):\n%s", diff)
			}
		})
	}
}

func TestFormatsAgree(t *testing.T) {
	var jobs []*spec.Job
	for _, name := range []string{"web.hcl", "web.json", "web.yaml"} {
		job, err := decodeTestFile(t, filepath.Join("testdata/good", name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		jobs = append(jobs, job)
	}
	for i, name := range []string{"web.json", "web.yaml"} {
		if diff := cmp.Diff(jobs[0], jobs[i+1]); diff != "" {
			t.Errorf("web.hcl and %s differ (-hcl +%s):\n%s", name, name, diff)
		}
	}
}

func TestSniffing(t *testing.T) {
	want, err := decodeTestFile(t, "testdata/good/web.hcl")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"web.hcl", "web.json", "web.yaml"} {
		src, err := os.ReadFile(filepath.Join("testdata/good", name))
		if err != nil {
			t.Fatal(err)
		}
		for _, as := range []string{"-", "<stdin>", "jobfile"} {
			got, err := Decode(as, src)
			if err != nil {
				t.Errorf("%s as %q: %v", name, as, err)
				continue
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s as %q differs (-want +got):\n%s", name, as, diff)
			}
		}
	}
	// A broken HCL file on stdin is still reported as HCL, not as YAML.
	_, err = Decode("-", []byte("job \"x\" {\n  group \"g\" {\n"))
	if err == nil || !strings.Contains(err.Error(), "<stdin>:") || strings.Contains(err.Error(), "YAML") {
		t.Errorf("broken HCL on stdin: got %v", err)
	}
}

func TestExamples(t *testing.T) {
	for name, src := range map[string]string{"Example": Example, "ExampleShort": ExampleShort} {
		job, err := Decode("example.hcl", []byte(src))
		if err != nil {
			t.Errorf("%s does not decode:\n%v", name, err)
			continue
		}
		if job.Name != "example" || len(job.Groups) == 0 {
			t.Errorf("%s decoded to %+v", name, job)
		}
	}
}

// TestRepoExamples decodes every job file in the repository's examples/.
func TestRepoExamples(t *testing.T) {
	files, err := filepath.Glob("../../examples/*")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, path := range files {
		switch filepath.Ext(path) {
		case ".hcl", ".json", ".yaml":
		default:
			continue
		}
		n++
		if _, err := DecodeFile(path); err != nil {
			t.Errorf("%s:\n%v", path, err)
		}
	}
	if n < 4 {
		t.Errorf("found %d example job files in ../../examples, want at least 4", n)
	}
	// hello in its three formats is one job.
	var jobs []*spec.Job
	for _, name := range []string{"hello.hcl", "hello.json", "hello.yaml"} {
		job, err := DecodeFile(filepath.Join("../../examples", name))
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, job)
	}
	for i := 1; i < len(jobs); i++ {
		if diff := cmp.Diff(jobs[0], jobs[i]); diff != "" {
			t.Errorf("examples/hello.hcl and its equivalent %d differ:\n%s", i, diff)
		}
	}
}

func TestDecodeFileNamesUnreadablePath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing.hcl")
	_, err := DecodeFile(path)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("got %v, want an error naming %s", err, path)
	}
}

func TestErrorsAreProblems(t *testing.T) {
	for _, src := range []string{"", "{", "job {", "name: [", `{"name": 1}`, `job "x" {}`} {
		for _, name := range []string{"f.hcl", "f.json", "f.yaml", "-"} {
			_, err := Decode(name, []byte(src))
			var ps spec.Problems
			if !errors.As(err, &ps) || len(ps) == 0 {
				t.Errorf("Decode(%q, %q) = %v, want spec.Problems", name, src, err)
			}
		}
	}
}

func TestDecodeJSONBody(t *testing.T) {
	_, err := DecodeJSONBody([]byte(`{"job": {"name": "x", "groups": [{"name": "g", "tasks": [{"name": "t", "driver": "exec", "config": {"command": "c"}, "colour": 1}]}]}, "extra": 1}`))
	want := spec.Problems{
		{Field: "extra", Pos: "1:136", Message: `unknown field "extra" in job status; expected one of: allocations, children, job, next_launch, placement_failures, summary`},
		{Field: "groups[0].tasks[0].colour", Pos: "1:118", Message: `unknown field "colour" in task; expected one of: affinities, artifacts, config, constraints, dispatch_payload, driver, env, kill_signal, kill_timeout, leader, lifecycle, logs, meta, name, resources, restart, services, shutdown_delay, templates, user, volume_mounts`},
	}
	slices.SortFunc(want, func(a, b spec.Problem) int { return strings.Compare(a.Pos, b.Pos) })
	var got spec.Problems
	if !errors.As(err, &got) {
		t.Fatalf("got %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

// TestRescheduleFromFile checks how the reschedule blocks of web.hcl combine:
// the group's fields over the job's over the service defaults, and writing
// attempts without unlimited sets a limit.
func TestRescheduleFromFile(t *testing.T) {
	job, err := decodeTestFile(t, "testdata/good/web.hcl")
	if err != nil {
		t.Fatal(err)
	}
	n3, n0, yes, no := 3, 0, true, false
	wantJob := &spec.ReschedulePolicy{Attempts: &n0, Interval: 0, Delay: spec.Duration(10 * time.Second),
		DelayFunction: spec.DelayExponential, MaxDelay: spec.Duration(10 * time.Minute), Unlimited: &yes}
	wantGroup := &spec.ReschedulePolicy{Attempts: &n3, Interval: spec.Duration(time.Hour), Delay: spec.Duration(10 * time.Second),
		DelayFunction: spec.DelayConstant, MaxDelay: spec.Duration(10 * time.Minute), Unlimited: &no}
	if diff := cmp.Diff(wantJob, job.Reschedule); diff != "" {
		t.Errorf("job policy (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantGroup, job.Groups[0].Reschedule); diff != "" {
		t.Errorf("group policy (-want +got):\n%s", diff)
	}

	// Without any block, batch groups get Nomad's batch defaults.
	b, err := Decode("b.hcl", []byte(`job "b" {
  type = "batch"
  group "g" {
    task "t" {
      driver = "exec"
      config { command = "/bin/true" }
    }
  }
}`))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(spec.DefaultReschedule(spec.JobBatch), b.Groups[0].Reschedule); diff != "" {
		t.Errorf("batch default (-want +got):\n%s", diff)
	}
	if b.Reschedule != nil {
		t.Errorf("job policy set without a block: %+v", b.Reschedule)
	}
}

// TestConstraintsFromFile checks that constraint blocks at every level
// decode as written, "${...}" targets kept as text, in HCL and YAML alike.
func TestConstraintsFromFile(t *testing.T) {
	hclJob, err := decodeTestFile(t, "testdata/good/constraints.hcl")
	if err != nil {
		t.Fatal(err)
	}
	yamlJob, err := decodeTestFile(t, "testdata/good/constraints.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(hclJob, yamlJob); diff != "" {
		t.Errorf("HCL and YAML differ (-hcl +yaml):\n%s", diff)
	}
	g := hclJob.Groups[0]
	want := []spec.Constraint{
		{Attribute: "${attr.os}", Operator: "=", Value: "linux"},
		{Attribute: "${attr.kernel}", Operator: "version", Value: ">= 5.10, < 7"},
		{Attribute: "${meta.rack}", Operator: "set_contains_any", Value: "r1,r2"},
		{Operator: "distinct_hosts"},
		{Attribute: "${meta.zone}", Operator: "distinct_property", Value: "2"},
		{Attribute: "${attr.cpu.count}", Operator: ">=", Value: "4"},
		{Attribute: "${node.name}", Operator: "regexp", Value: "^web-"},
		{Attribute: "${meta.gpu}", Operator: "is_not_set"},
	}
	if diff := cmp.Diff(want, hclJob.ConstraintsOf(g)); diff != "" {
		t.Errorf("constraints (-want +got):\n%s", diff)
	}
	if len(hclJob.Constraints) != 2 || len(g.Constraints) != 3 || len(g.Tasks[0].Constraints) != 3 {
		t.Errorf("constraints at the wrong level: job %d, group %d, task %d", len(hclJob.Constraints), len(g.Constraints), len(g.Tasks[0].Constraints))
	}
}

// TestRuntimeRefsKeptAsWritten: Nomad's ${NOMAD_*}, ${attr.*}, ${node.*},
// ${meta.*} and ${env.*} in strings are neither refused nor expanded by
// the decoder: the agent interpolates them when the task starts.
func TestRuntimeRefsKeptAsWritten(t *testing.T) {
	job, err := decodeTestFile(t, "testdata/good/runtime-vars.hcl")
	if err != nil {
		t.Fatal(err)
	}
	task := job.Groups[0].Tasks[0]
	if got, want := task.Config.Command, "${NOMAD_TASK_DIR}/server"; got != want {
		t.Errorf("command = %q, want %q", got, want)
	}
	wantArgs := []string{"--listen", "${NOMAD_IP_http}:${NOMAD_PORT_http}", "--id=${NOMAD_ALLOC_ID}",
		"--ip", "${attr.unique.network.ip-address}", "--rack", "${meta.rack}"}
	if diff := cmp.Diff(wantArgs, task.Config.Args); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"-p", "${NOMAD_ALLOC_DIR}/data/${NOMAD_ALLOC_INDEX}"}, task.Config.Prestart[0].Args); diff != "" {
		t.Errorf("prestart args (-want +got):\n%s", diff)
	}
	wantEnv := map[string]string{
		"DC": "Running on datacenter ${node.datacenter}", "VERSION": "Version ${NOMAD_META_version}",
		"HOME2": "${env.HOME}/x", "LITERAL": "${NOMAD_ALLOC_ID}",
	}
	if diff := cmp.Diff(wantEnv, task.Env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	svc := task.Services[0]
	if svc.Name != "api-${NOMAD_ALLOC_INDEX}" || !slices.Equal(svc.Tags, []string{"alloc-${NOMAD_ALLOC_ID}", "${node.unique.name}"}) {
		t.Errorf("service name %q, tags %q", svc.Name, svc.Tags)
	}
}

// TestPlacementFromFile decodes the job that uses every placement field
// (scoring, preempt, affinity, spread, network ports, disk, job
// constraints, work_dir, user, prestart, stop) in each format, and compares
// the whole job with the one it must mean.
func TestPlacementFromFile(t *testing.T) {
	yes := true
	want := &spec.Job{
		Name: "shop", Namespace: spec.DefaultNamespace, Type: spec.JobService, Priority: spec.DefaultPriority,
		Scoring: spec.ScoreEPVM, Preempt: &yes,
		Constraints: []*spec.Constraint{{Operator: spec.OpConflicts, Value: "legacy-*"}},
		Affinities:  []*spec.Affinity{{Attribute: "${attr.arch}", Value: "amd64", Weight: 30}},
		Spreads: []*spec.Spread{{Attribute: "${meta.zone}", Weight: 80, Targets: []spec.SpreadTarget{
			{Value: "us-east", Percent: 60}, {Value: "us-west", Percent: 40},
		}}},
		Groups: []*spec.Group{
			{
				Name: "web", Count: 4, Reschedule: spec.DefaultReschedule(spec.JobService),
				Constraints: []*spec.Constraint{{Operator: spec.OpColocate, Value: "cache"}},
				Affinities:  []*spec.Affinity{{Attribute: "${meta.rack}", Operator: "set_contains_any", Value: "r1,r2", Weight: -40}},
				Spreads:     []*spec.Spread{{Attribute: "${node.name}"}},
				Network:     &spec.Network{Ports: []spec.Port{{Label: "http", Static: 8080}, {Label: "metrics"}}},
				Tasks: []*spec.Task{{
					Name: "server", Driver: "exec",
					Config: spec.TaskConfig{
						Command: "/usr/local/bin/shop", Args: []string{"--listen", ":8080"},
						WorkDir: "/srv/shop", User: "shop",
						Prestart: []spec.Command{
							{Command: "/bin/mkdir", Args: []string{"-p", "/srv/shop/cache"}},
							{Command: "/usr/local/bin/shop-migrate"},
						},
						Stop: &spec.Command{Command: "/usr/local/bin/shop", Args: []string{"drain"}},
					},
					Resources:   spec.Resources{CPU: 500, MemoryMB: 256, DiskMB: 300},
					Restart:     spec.DefaultRestart(spec.JobService),
					KillTimeout: spec.DefaultKillTimeout,
					Affinities:  []*spec.Affinity{{Attribute: "${attr.kernel}", Operator: "version", Value: ">= 6"}},
				}},
			},
			{
				Name: "janitor", Count: 1, Reschedule: spec.DefaultReschedule(spec.JobService),
				Constraints: []*spec.Constraint{{Operator: spec.OpReplaces, Value: "old-janitor*"}},
				Tasks: []*spec.Task{{
					Name: "sweep", Driver: "raw_exec",
					Config:      spec.TaskConfig{Command: "/usr/local/bin/sweep"},
					Resources:   spec.Resources{CPU: spec.DefaultCPU, MemoryMB: spec.DefaultMemoryMB},
					Restart:     spec.DefaultRestart(spec.JobService),
					KillTimeout: spec.DefaultKillTimeout,
				}},
			},
		},
	}
	for _, name := range []string{"placement.hcl", "placement.json", "placement.yaml"} {
		got, err := decodeTestFile(t, filepath.Join("testdata/good", name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}

// TestSystemJobFromFile checks that type = "system" is accepted and that
// such a job preempts unless it says otherwise.
func TestSystemJobFromFile(t *testing.T) {
	job, err := decodeTestFile(t, "testdata/good/system.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if job.Type != spec.JobSystem || !job.PreemptOf() || job.Preempt != nil {
		t.Errorf("type %q, preempt %v (PreemptOf %v); want system, unset, true", job.Type, job.Preempt, job.PreemptOf())
	}
	if diff := cmp.Diff([]spec.Port{{Label: "metrics", Static: 9100}}, job.Groups[0].Ports()); diff != "" {
		t.Errorf("ports (-want +got):\n%s", diff)
	}
}

// TestUpdateFromFile checks how the update blocks of update.hcl combine, in
// each format: the group's fields over the job's over DefaultUpdate, the
// job's strategy kept whole for groups without a block of their own.
func TestUpdateFromFile(t *testing.T) {
	n1, n2, n0, yes, no := 1, 2, 0, true, false
	sec := func(n int) spec.Duration { return spec.Duration(time.Duration(n) * time.Second) }
	job := &spec.UpdateStrategy{
		MaxParallel: &n2, HealthCheck: spec.HealthChecks, MinHealthyTime: sec(5), HealthyDeadline: sec(60),
		ProgressDeadline: new(sec(600)), AutoRevert: &yes, Canary: &n0, AutoPromote: &no,
	}
	worker := *job
	worker.MaxParallel = &n1
	api := *job
	api.Canary, api.AutoPromote, api.HealthCheck, api.ProgressDeadline = &n2, &yes, spec.HealthTaskStates, new(sec(900))
	want := map[string]*spec.UpdateStrategy{"": job, "web": job, "worker": &worker, "api": &api}
	for _, name := range []string{"update.hcl", "update.json", "update.yaml"} {
		j, err := decodeTestFile(t, filepath.Join("testdata/good", name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		got := map[string]*spec.UpdateStrategy{"": j.Update}
		for _, g := range j.Groups {
			got[g.Name] = g.Update
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: strategies by group, \"\" the job's (-want +got):\n%s", name, diff)
		}
	}

	// Without any block, no group deploys: changed instances are replaced
	// at once, as before update blocks existed.
	j, err := decodeTestFile(t, "testdata/good/web.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if j.Update != nil || j.Groups[0].Update != nil {
		t.Errorf("update strategy without a block: job %+v, group %+v", j.Update, j.Groups[0].Update)
	}
}

// TestRebalanceFromFile checks that rebalance = true reaches the group in
// each format, and that a group without it stays off.
func TestRebalanceFromFile(t *testing.T) {
	want := map[string]bool{"cache": true, "pinned": false}
	for _, name := range []string{"rebalance.hcl", "rebalance.json", "rebalance.yaml"} {
		j, err := decodeTestFile(t, filepath.Join("testdata/good", name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		got := map[string]bool{}
		for _, g := range j.Groups {
			got[g.Name] = g.Rebalance
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: rebalance by group (-want +got):\n%s", name, diff)
		}
	}
}

// TestServerOwnedFieldsKept checks that the server-owned fields of a job
// read back from the API (drover status -o json) decode as they were: the
// registry drops them on submit (spec.Job.SpecOnly), not the decoder.
func TestServerOwnedFieldsKept(t *testing.T) {
	j, err := decodeTestFile(t, "testdata/good/status.json")
	if err != nil {
		t.Fatal(err)
	}
	want := time.Date(2025, 1, 2, 4, 0, 0, 0, time.UTC)
	if !j.RestartRequested.Equal(want) || j.Version != 3 || j.ModifyIndex != 42 {
		t.Errorf("restart_requested %v, version %d, modify_index %d; want %v, 3, 42", j.RestartRequested, j.Version, j.ModifyIndex, want)
	}
	if !j.SpecOnly().RestartRequested.IsZero() {
		t.Errorf("SpecOnly kept restart_requested")
	}
}

// TestPartialRestartKeepsDefaults: a restart block that sets some fields
// keeps the others from the block around it (the task's from its group's,
// the group's from the job type's defaults), in HCL and JSON alike; an
// explicit attempts = 0 stays 0.
func TestPartialRestartKeepsDefaults(t *testing.T) {
	sec := func(n int) spec.Duration { return spec.Duration(time.Duration(n) * time.Second) }
	hclSrc := `job "r" {
  type = "batch"
  group "g" {
    restart { attempts = 5 }
    task "a" {
      driver = "exec"
      config { command = "/bin/true" }
    }
    task "b" {
      driver = "exec"
      config { command = "/bin/true" }
      restart {
        delay    = "2s"
        attempts = 0
      }
    }
  }
}`
	jsonSrc := `{"name": "r", "type": "batch", "groups": [{"name": "g", "restart": {"attempts": 5}, "tasks": [
  {"name": "a", "driver": "exec", "config": {"command": "/bin/true"}},
  {"name": "b", "driver": "exec", "config": {"command": "/bin/true"}, "restart": {"delay": "2s", "attempts": 0}}]}]}`
	five, zero := 5, 0
	wantA := &spec.RestartPolicy{Attempts: &five, Interval: spec.Duration(24 * time.Hour), Delay: sec(15), Mode: spec.RestartFail}
	wantB := &spec.RestartPolicy{Attempts: &zero, Interval: spec.Duration(24 * time.Hour), Delay: sec(2), Mode: spec.RestartFail}
	for name, src := range map[string]string{"r.hcl": hclSrc, "r.json": jsonSrc} {
		j, err := Decode(name, []byte(src))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if diff := cmp.Diff(wantA, j.Groups[0].Tasks[0].Restart); diff != "" {
			t.Errorf("%s: task a (-want +got):\n%s", name, diff)
		}
		if diff := cmp.Diff(wantB, j.Groups[0].Tasks[1].Restart); diff != "" {
			t.Errorf("%s: task b (-want +got):\n%s", name, diff)
		}
	}
}

// TestDatacentersAndNodePool checks that a Nomad file's datacenters and
// node_pool are read, in HCL and JSON alike, an empty list meaning every
// datacenter, and that an empty datacenter is reported where it is.
func TestDatacentersAndNodePool(t *testing.T) {
	const body = `
  group "g" {
    task "t" {
      driver = "exec"
      config { command = "/bin/true" }
    }
  }
}`
	h, err := Decode("dc.hcl", []byte(`job "dc" {
  datacenters = ["dc1", "us-*"]
  node_pool   = "gpu"`+body))
	if err != nil {
		t.Fatal(err)
	}
	j, err := Decode("dc.json", []byte(`{"name": "dc", "datacenters": ["dc1", "us-*"], "node_pool": "gpu",
  "groups": [{"name": "g", "tasks": [{"name": "t", "driver": "exec", "config": {"command": "/bin/true"}}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(h.Datacenters, []string{"dc1", "us-*"}) || h.NodePool != "gpu" {
		t.Errorf("HCL: datacenters %q, node_pool %q", h.Datacenters, h.NodePool)
	}
	if diff := cmp.Diff(h, j); diff != "" {
		t.Errorf("HCL and JSON differ (-hcl +json):\n%s", diff)
	}
	all, err := Decode("all.hcl", []byte(`job "all" {
  datacenters = []`+body))
	if err != nil || all.Datacenters != nil {
		t.Errorf("datacenters = []: %v, %q; want every datacenter (none listed)", err, all.Datacenters)
	}
	_, err = Decode("bad.hcl", []byte(`job "bad" {
  datacenters = ["dc1", " "]
  node_pool   = "a/b"`+body))
	for _, want := range []string{`bad.hcl:2:25: datacenters[1]: a datacenter must not be empty`, `bad.hcl:3:17: node_pool: node pool "a/b" contains '/'`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
}

// A progress_deadline written as 0 is kept as 0 (the first unhealthy
// instance fails the deployment), not taken for unset and given the job's
// or Nomad's 10m; it passes validation although it is below
// healthy_deadline. Each format says it its own way.
func TestProgressDeadlineZeroIsWritten(t *testing.T) {
	files := map[string]string{
		"zero.hcl": `job "web" {
  update { progress_deadline = "15m" }
  group "strict" {
    update { progress_deadline = "0s" }
    task "main" {
      driver = "exec"
      config { command = "/bin/true" }
    }
  }
  group "inherits" {
    task "main" {
      driver = "exec"
      config { command = "/bin/true" }
    }
  }
}`,
		"zero.json": `{"name": "web", "update": {"progress_deadline": "15m"}, "groups": [
  {"name": "strict", "update": {"progress_deadline": "0s"}, "tasks": [{"name": "main", "driver": "exec", "config": {"command": "/bin/true"}}]},
  {"name": "inherits", "tasks": [{"name": "main", "driver": "exec", "config": {"command": "/bin/true"}}]}]}`,
	}
	for name, src := range files {
		j, err := Decode(name, []byte(src))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := j.UpdateOf(j.Group("strict")).Progress(); got != 0 {
			t.Errorf("%s: group strict's progress_deadline %s, want 0 as written", name, got)
		}
		if got := j.UpdateOf(j.Group("inherits")).Progress(); got != spec.Duration(15*time.Minute) {
			t.Errorf("%s: group inherits' progress_deadline %s, want the job's 15m", name, got)
		}
	}
}
