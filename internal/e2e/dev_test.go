package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/spec"
)

// A service of 3 real long-running processes, from submit to stop, across
// a crash of one instance and a restart of drover dev on the same data dir.
const webJob = `
job "e2eweb" {
  group "web" {
    count = 3
    restart {
      attempts = 3
      interval = "1m"
      delay    = "500ms"
      mode     = "fail"
    }
    task "server" {
      driver = "exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo started $DROVER_ALLOC_NAME; exec sleep 1000"]
      }
      resources {
        cpu    = 20
        memory = 16
      }
      kill_timeout = "2s"
    }
  }
}
`

func TestDevServiceLifecycle(t *testing.T) {
	dir := t.TempDir()
	jobFile := writeJob(t, dir, "web.hcl", webJob)
	d := startDev(t, dir+"/data")

	// drover run follows until every instance runs, then exits 0.
	out, errOut, code := d.cli("", "run", jobFile)
	if code != 0 {
		t.Fatalf("drover run: exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(out, `3/3 instances running`) {
		t.Fatalf("drover run did not report 3/3 running:\n%s", out)
	}
	pids := taskProcs("e2eweb", d.dataDir)
	if len(pids) != 3 {
		t.Fatalf("want 3 task processes, found %d: %v", len(pids), pids)
	}
	st := d.jobStatus("e2eweb")
	if st.Summary.State != spec.JobRunning || st.Summary.Running != 3 {
		t.Fatalf("status: want running 3, got %+v", st.Summary)
	}
	allocIDs := map[string]bool{}
	for _, a := range st.Allocations {
		allocIDs[a.ID] = true
		if a.NodeName == "" {
			t.Errorf("alloc %s has no node name", a.Name)
		}
	}

	// Applying the same file again changes nothing.
	out, _, code = d.cli("", "run", "--detach", jobFile)
	if code != 0 || !strings.Contains(out, "unchanged") {
		t.Fatalf("re-run of the same spec: exit %d, want \"unchanged\":\n%s", code, out)
	}

	// SIGKILL one instance: the restart policy brings it back on the same
	// alloc, and drover status shows the restart.
	victim := st.Allocations[0]
	victimPID := victim.Status.Tasks["server"].PID
	if !slices.Contains(pids, victimPID) {
		t.Fatalf("status pid %d of %s is not among the task processes %v", victimPID, victim.Name, pids)
	}
	if err := syscall.Kill(victimPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, victim.Name+" restarted", func() bool {
		for _, a := range d.jobStatus("e2eweb").Allocations {
			if a.ID == victim.ID && a.Restarts() == 1 && a.ClientStatusOr() == spec.ClientRunning &&
				a.Status.Tasks["server"].PID != victimPID && a.Status.Tasks["server"].State == spec.TaskRunning {
				return true
			}
		}
		return false
	})
	if n := len(taskProcs("e2eweb", d.dataDir)); n != 3 {
		t.Fatalf("after the restart want 3 task processes, found %d", n)
	}
	table, _, _ := d.cli("", "status", "e2eweb")
	if !strings.Contains(table, "killed by SIGKILL") || !strings.Contains(table, "Restarting") {
		t.Fatalf("drover status does not show the kill and restart:\n%s", table)
	}

	// Logs by job name, one prefix per instance.
	logs, errOut, code := d.cli("", "logs", "e2eweb")
	if code != 0 {
		t.Fatalf("drover logs: exit %d: %s", code, errOut)
	}
	for _, a := range st.Allocations {
		if !strings.Contains(logs, "["+a.Name+"/server] started "+a.Name) {
			t.Errorf("drover logs lacks output of %s:\n%s", a.Name, logs)
		}
	}

	// Restart drover dev on the same data dir: the job and its allocations
	// are still there, and each instance runs exactly once.
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}
	if n := len(taskProcs("e2eweb", d.dataDir)); n != 0 {
		t.Fatalf("drover dev exited but %d task processes remain", n)
	}
	d = startDev(t, dir+"/data")
	waitFor(t, 30*time.Second, "3 instances running again after the restart", func() bool {
		st := d.jobStatus("e2eweb")
		return st.Summary.Running == 3 && len(taskProcs("e2eweb", d.dataDir)) == 3
	})
	st = d.jobStatus("e2eweb")
	if len(st.Allocations) != 3 {
		t.Fatalf("after restart want the same 3 allocations, got %d", len(st.Allocations))
	}
	for _, a := range st.Allocations {
		if !allocIDs[a.ID] {
			t.Errorf("alloc %s (%s) is new after the restart; want the original ones kept", a.ID, a.Name)
		}
	}
	time.Sleep(time.Second) // a duplicate would show up here
	if n := len(taskProcs("e2eweb", d.dataDir)); n != 3 {
		t.Fatalf("after restart want exactly 3 task processes, found %d", n)
	}

	// drover stop leaves no process behind.
	out, errOut, code = d.cli("", "stop", "e2eweb")
	if code != 0 {
		t.Fatalf("drover stop: exit %d\n%s%s", code, out, errOut)
	}
	if n := len(taskProcs("e2eweb", d.dataDir)); n != 0 {
		t.Fatalf("after drover stop, %d task processes remain", n)
	}
	if s := d.jobStatus("e2eweb").Summary.State; s != spec.JobStopped {
		t.Fatalf("after stop, state %s, want stopped", s)
	}
}

const batchJob = `
job "e2ebatch" {
  type = "batch"
  group "work" {
    count = 2
    task "step" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo done $DROVER_ALLOC_INDEX"]
      }
      resources {
        cpu    = 10
        memory = 8
      }
    }
  }
}
`

func TestDevBatchCompletesAndRoundTrips(t *testing.T) {
	dir := t.TempDir()
	d := startDev(t, dir+"/data")
	out, errOut, code := d.cli("", "run", writeJob(t, dir, "batch.hcl", batchJob))
	if code != 0 || !strings.Contains(out, "2/2 instances completed") {
		t.Fatalf("drover run batch: exit %d\n%s\n%s", code, out, errOut)
	}
	st := d.jobStatus("e2ebatch")
	if st.Summary.State != spec.JobComplete || st.Summary.Complete != 2 {
		t.Fatalf("batch summary %+v, want complete 2", st.Summary)
	}
	logs, _, _ := d.cli("", "logs", "e2ebatch")
	if !strings.Contains(logs, "done 0") || !strings.Contains(logs, "done 1") {
		t.Fatalf("batch logs:\n%s", logs)
	}

	// drover status JOB -o json | drover run - round-trips: same spec, no change.
	js, _, _ := d.cli("", "status", "e2ebatch", "-o", "json")
	out, errOut, code = d.cli(js, "run", "--detach", "-")
	if code != 0 || !strings.Contains(out, "unchanged") {
		t.Fatalf("status -o json | run - did not round-trip: exit %d\n%s\n%s", code, out, errOut)
	}
	if v := d.jobStatus("e2ebatch").Job.Version; v != 1 {
		t.Fatalf("round trip changed the version to %d", v)
	}
}

func TestDevUnplaceableExitsTwoWithReason(t *testing.T) {
	dir := t.TempDir()
	d := startDev(t, dir+"/data")
	huge := strings.Replace(strings.Replace(batchJob, "e2ebatch", "e2ehuge", 1), "memory = 8", "memory = 900000000", 1)
	out, errOut, code := d.cli("", "run", writeJob(t, dir, "huge.hcl", huge))
	if code != 2 {
		t.Fatalf("drover run of an unplaceable job: exit %d, want 2\n%s\n%s", code, out, errOut)
	}
	// Larger than the node: said so, with the node's size, and not as a
	// wait for room that would never come.
	if !strings.Contains(out, "0/1 nodes fit: memory too small on 1 (need 900000000 MB, the largest has ") ||
		!strings.Contains(out, "No current node could ever run it") || strings.Contains(out, "as soon as a node can take it") {
		t.Fatalf("exit 2 without the reason:\n%s", out)
	}
	table, _, _ := d.cli("", "status", "e2ehuge")
	if !strings.Contains(table, "memory too small") {
		t.Fatalf("drover status does not say why the job is pending:\n%s", table)
	}
	var list []spec.JobListEntry
	js, _, _ := d.cli("", "status", "-o", "json")
	if err := json.Unmarshal([]byte(js), &list); err != nil || len(list) != 1 || list[0].Summary.State != spec.JobPending {
		t.Fatalf("job list: %v %s", err, js)
	}
}

// TestDevSystemJobMatchingNoNodeExitsTwo: a system job whose constraint no
// node meets is not a success with 0 of 0 instances: run exits 2 and says
// which constraint ruled the node out, and status says the same.
func TestDevSystemJobMatchingNoNodeExitsTwo(t *testing.T) {
	dir := t.TempDir()
	d := startDev(t, dir+"/data")
	nowhere := strings.Replace(strings.Replace(batchJob, "e2ebatch", "e2enowhere", 1), `type = "batch"`, `type = "system"
  constraint {
    attribute = "${meta.rack}"
    value     = "nowhere"
  }`, 1)
	out, errOut, code := d.cli("", "run", writeJob(t, dir, "nowhere.hcl", nowhere))
	if code != 2 {
		t.Fatalf("drover run of a system job no node matches: exit %d, want 2\n%s\n%s", code, out, errOut)
	}
	const why = "group work runs on no node: no node matches: 0/1 nodes eligible: constraint ${meta.rack} = nowhere not met on 1"
	if !strings.Contains(out, why) {
		t.Fatalf("exit 2 without the reason %q:\n%s", why, out)
	}
	if table, _, _ := d.cli("", "status", "e2enowhere"); !strings.Contains(table, why) {
		t.Fatalf("drover status does not say why nothing runs:\n%s", table)
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	dir := t.TempDir()
	bad := writeJob(t, dir, "bad.hcl", `
job "x" {
  group "g" {
    count = -1
    task "t" {
      driver = "dockr"
      template {}
    }
  }
}
`)
	cmd := (&devProc{t: t}).cli
	out, errOut, code := cmd("", "validate", bad)
	if code != 1 {
		t.Fatalf("validate of a bad file: exit %d, want 1\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"bad.hcl:4:", "bad.hcl:6:", "bad.hcl:7:", "template", "docker"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("validate output lacks %q:\n%s", want, errOut)
		}
	}
	out, errOut, code = cmd("", "validate", "../../examples/hello.hcl")
	if code != 0 {
		t.Fatalf("validate examples/hello.hcl: exit %d\n%s%s", code, out, errOut)
	}
}

func TestDevRunExitsOneWhenAnInstanceFails(t *testing.T) {
	dir := t.TempDir()
	d := startDev(t, dir+"/data")
	failing := strings.NewReplacer("e2ebatch", "e2efail", `type = "batch"`, `type = "service"`,
		`"echo done $DROVER_ALLOC_INDEX"`, `"echo boom >&2; exit 7"`,
		`group "work" {`, `group "work" {
    restart {
      attempts = 1
      interval = "1m"
      delay    = "100ms"
    }`).Replace(batchJob)
	out, errOut, code := d.cli("", "run", "--timeout", "60s", writeJob(t, dir, "fail.hcl", failing))
	if code != 1 {
		t.Fatalf("drover run of a failing service: exit %d, want 1\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "exit code 7") || !strings.Contains(errOut, "exceeded 1 restarts") {
		t.Fatalf("the failure does not say why:\n%s", errOut)
	}
	logs, _, _ := d.cli("", "logs", "e2efail", "--stderr")
	if !strings.Contains(logs, "boom") {
		t.Fatalf("stderr of the failing task:\n%s", logs)
	}
}

// Every read command speaks -o json (the API's JSON), --address wins over
// $DROVER_ADDR, and an unknown format is refused.
func TestReadCommandsJSONAndAddress(t *testing.T) {
	dir := t.TempDir()
	d := startDev(t, dir+"/data")
	if _, errOut, code := d.cli("", "run", writeJob(t, dir, "batch.hcl", batchJob)); code != 0 {
		t.Fatalf("run: %s", errOut)
	}
	decode := func(args []string, v any) {
		t.Helper()
		out, errOut, code := d.cli("", args...)
		if code != 0 {
			t.Fatalf("drover %v: exit %d: %s", args, code, errOut)
		}
		if err := json.Unmarshal([]byte(out), v); err != nil {
			t.Fatalf("drover %v: not JSON: %v\n%s", args, err, out)
		}
	}
	var jobs []spec.JobListEntry
	decode([]string{"status", "-o", "json"}, &jobs)
	var st spec.JobStatus
	decode([]string{"status", "e2ebatch", "-o", "json"}, &st)
	var allocs []spec.Alloc
	decode([]string{"ps", "--all", "-o", "json"}, &allocs)
	var nodes []spec.Node
	decode([]string{"nodes", "-o", "json"}, &nodes)
	if len(jobs) != 1 || st.Job.Name != "e2ebatch" || len(allocs) != 2 || len(nodes) != 1 {
		t.Fatalf("json outputs: %d jobs, job %q, %d allocs, %d nodes", len(jobs), st.Job.Name, len(allocs), len(nodes))
	}
	if nodes[0].Resources.MemoryMB <= 0 || !slices.Contains(nodes[0].Drivers, "exec") || !slices.Contains(nodes[0].Drivers, "raw_exec") || nodes[0].Attributes[spec.AttrKernelVersion] == "" {
		t.Fatalf("node not fingerprinted: %+v", nodes[0])
	}

	// --address beats a wrong $DROVER_ADDR.
	cmd := exec.Command(droverBin, "status", "--address", d.addr)
	cmd.Env = append(os.Environ(), "DROVER_ADDR=http://127.0.0.1:1")
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "e2ebatch") {
		t.Fatalf("--address did not win over DROVER_ADDR: %v\n%s", err, out)
	}
	// A wrong address says what to do.
	cmd = exec.Command(droverBin, "status", "--address", "http://127.0.0.1:1")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "cannot reach the drover server") || !strings.Contains(string(out), "DROVER_ADDR") {
		t.Fatalf("unreachable server: %v\n%s", err, out)
	}
	if _, errOut, code := d.cli("", "ps", "-o", "xml"); code != 1 || !strings.Contains(errOut, "unknown output format") {
		t.Fatalf("-o xml: exit %d: %s", code, errOut)
	}
}

func TestInitWritesAValidExampleAndNeverOverwrites(t *testing.T) {
	dir := t.TempDir()
	cli := (&devProc{t: t}).cli
	for _, args := range [][]string{{"init", dir + "/a.hcl"}, {"init", "--short", dir + "/b.hcl"}} {
		if out, errOut, code := cli("", args...); code != 0 {
			t.Fatalf("drover %v: exit %d\n%s%s", args, code, out, errOut)
		}
	}
	if out, errOut, code := cli("", "validate", dir+"/a.hcl", dir+"/b.hcl"); code != 0 {
		t.Fatalf("the examples drover init writes do not validate:\n%s%s", out, errOut)
	}
	before, _ := os.ReadFile(dir + "/a.hcl")
	_, errOut, code := cli("", "init", dir+"/a.hcl")
	after, _ := os.ReadFile(dir + "/a.hcl")
	if code != 1 || !strings.Contains(errOut, "already exists") || string(before) != string(after) {
		t.Fatalf("init over an existing file: exit %d: %s", code, errOut)
	}
}
