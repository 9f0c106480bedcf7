package etcdcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/spec"
)

// Killing an etcd follower interrupts no workload and no API request
// beyond the client's retries.
func TestEtcdFollowerKilled(t *testing.T) {
	t.Parallel()
	testMemberLoss(t, false)
}

// Killing etcd's raft leader: the cluster elects another within about a
// second, and still no workload notices.
func TestEtcdLeaderKilled(t *testing.T) {
	t.Parallel()
	testMemberLoss(t, true)
}

// instance is what must not change about a running instance.
type instance struct {
	node     string
	pid      int
	restarts int
}

func testMemberLoss(t *testing.T, killLeader bool) {
	role := "follower"
	if killLeader {
		role = "leader"
	}
	ec := startEtcd(t, 3, nil)
	dc := startDrover(t, ec.endpoints(), 2, 3)

	job, job2 := jobName("etcdloss-"+role), jobName("etcdloss-after-"+role)
	const count = 6
	dc.run(job, serviceJob(job, count))
	before := running(t, dc, job)
	if len(before) != count {
		t.Fatalf("want %d running instances, got %d: %v", count, len(before), before)
	}
	nodes := map[string]bool{}
	for _, in := range before {
		nodes[in.node] = true
	}
	t.Logf("%d instances on %d nodes", count, len(nodes))
	checkProcs(t, job, before)

	victim := ec.pick(killLeader)
	// A write sent at the moment of the kill: written to its file first.
	probe := jobName("etcdloss-probe-" + role)
	probeFile := filepath.Join(t.TempDir(), "probe.hcl")
	if err := os.WriteFile(probeFile, []byte(serviceJob(probe, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	dc.track(probe)

	victim.proc.cmd.Process.Signal(syscall.SIGKILL)
	killed := time.Now()
	t.Logf("SIGKILL etcd %s (%s, %s)", victim.name, role, victim.clientURL)
	type result struct {
		ok  bool
		msg string
	}
	probed := make(chan result, 1)
	go func() {
		out, errOut, code := dc.cli(30*time.Second, "run", "--detach", probeFile)
		took := time.Since(killed).Round(time.Millisecond)
		if code != 0 {
			probed <- result{false, fmt.Sprintf("drover run --detach sent with the kill: exit %d after %s\n%s%s", code, took, out, errOut)}
			return
		}
		probed <- result{true, fmt.Sprintf("drover run --detach sent with the kill: accepted after %s", took)}
	}()

	// The API keeps answering: the first `drover status` after the kill
	// succeeds, within a few seconds (an etcd election takes about one),
	// with only the retries inside the CLI, drover and the etcd client.
	_, errOut, code := dc.cli(30*time.Second, "status")
	took := time.Since(killed)
	if code != 0 {
		t.Fatalf("drover status after the kill: exit %d after %s: %s", code, took.Round(time.Millisecond), errOut)
	}
	if took > 5*time.Second {
		t.Errorf("drover status took %s after the kill; want a few seconds at most", took.Round(time.Millisecond))
	}
	t.Logf("drover status answered %s after the kill", took.Round(time.Millisecond))
	if err := dc.cliJSON(new(spec.JobStatus), "status", job); err != nil {
		t.Fatalf("drover status %s after the kill: %v", job, err)
	}
	checkProcs(t, job, before)
	if r := <-probed; !r.ok {
		t.Fatal(r.msg)
	} else {
		t.Log(r.msg)
	}

	// A job submitted after the kill is placed and runs.
	dc.run(job2, serviceJob(job2, 3))
	if n := len(taskProcs(job2)); n != 3 {
		t.Fatalf("new job: want 3 task processes, found %d", n)
	}

	// Past the leader's TTL, the node TTL and its grace, and a resync:
	// nothing was marked lost, replaced or restarted.
	for time.Since(killed) < 15*time.Second {
		checkProcs(t, job, before)
		time.Sleep(time.Second)
	}
	after := running(t, dc, job)
	for id, b := range before {
		a, ok := after[id]
		switch {
		case !ok:
			t.Errorf("instance %s is no longer running after the etcd %s was killed", id, role)
		case a != b:
			t.Errorf("instance %s changed: before %+v, after %+v", id, b, a)
		}
	}
	if len(after) != len(before) {
		t.Errorf("running instances: %d before the kill, %d after", len(before), len(after))
	}
	checkProcs(t, job, before)
	if n := len(taskProcs(probe)); n != 1 {
		t.Errorf("the job submitted with the kill: want 1 task process, found %d", n)
	}
	if err, done := victim.exited(); !done {
		t.Errorf("etcd %s still running", victim.name)
	} else {
		t.Logf("etcd %s: %v; drover ran on the other two for %s", victim.name, err, time.Since(killed).Round(time.Second))
	}
}

// running returns the job's running instances by alloc ID.
func running(t *testing.T, dc *droverCluster, job string) map[string]instance {
	t.Helper()
	st := dc.jobStatus(job)
	out := map[string]instance{}
	for _, a := range st.Allocations {
		if a.DesiredStatus != spec.DesiredRun || a.ClientStatusOr() != spec.ClientRunning {
			continue
		}
		ts := a.Status.Tasks["t"]
		if ts == nil {
			t.Fatalf("alloc %s: no state for task t: %+v", a.ID, a.Status)
		}
		out[a.ID] = instance{node: a.NodeName, pid: ts.PID, restarts: a.Restarts()}
	}
	return out
}

// checkProcs requires that exactly the instances' task processes run.
func checkProcs(t *testing.T, job string, want map[string]instance) {
	t.Helper()
	var pids []int
	for id, in := range want {
		if in.pid <= 0 {
			t.Fatalf("instance %s has no PID", id)
		}
		if err := syscall.Kill(in.pid, 0); err != nil || zombie(in.pid) {
			t.Fatalf("instance %s: task process %d is gone (%v)", id, in.pid, err)
		}
		pids = append(pids, in.pid)
	}
	got := taskProcs(job)
	slices.Sort(got)
	slices.Sort(pids)
	if !slices.Equal(got, pids) {
		t.Fatalf("task processes of %s: want %v, found %v", job, pids, got)
	}
}
