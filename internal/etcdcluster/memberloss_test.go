package etcdcluster

import (
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/spec"
)

// Killing an etcd follower interrupts no workload and no API request
// beyond the client's retries.
func TestEtcdFollowerKilled(t *testing.T) {
	testMemberLoss(t, false)
}

// Killing etcd's raft leader: the cluster elects another within about a
// second, and still no workload notices.
func TestEtcdLeaderKilled(t *testing.T) {
	testMemberLoss(t, true)
}

// instance is what must not change about a running instance.
type instance struct {
	node     string
	pid      int
	restarts int
}

func testMemberLoss(t *testing.T, killLeader bool) {
	ec := startEtcd(t, 3, nil)
	dc := startDrover(t, ec.endpoints(), 2, 3)

	job := "etcdloss"
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
	role := "follower"
	if killLeader {
		role = "leader"
	}
	victim.proc.cmd.Process.Signal(syscall.SIGKILL)
	killed := time.Now()
	t.Logf("SIGKILL etcd %s (%s, %s)", victim.name, role, victim.clientURL)

	// The API keeps answering: `drover status` succeeds within a few
	// seconds (the CLI's and the etcd client's retries included).
	var attempts int
	for {
		attempts++
		_, errOut, code := dc.cli(15*time.Second, "status")
		if code == 0 {
			break
		}
		if time.Since(killed) > 5*time.Second {
			t.Fatalf("drover status still failing %s after the kill (exit %d): %s", time.Since(killed).Round(time.Millisecond), code, errOut)
		}
		t.Logf("drover status after the kill: exit %d: %s", code, errOut)
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("drover status answered %s after the kill (%d attempt(s))", time.Since(killed).Round(time.Millisecond), attempts)
	if err := dc.cliJSON(new(spec.JobStatus), "status", job); err != nil {
		t.Fatalf("drover status %s after the kill: %v", job, err)
	}
	checkProcs(t, job, before)

	// A job submitted after the kill is placed and runs.
	dc.run("etcdloss-after", serviceJob("etcdloss-after", 3))
	if n := len(taskProcs("etcdloss-after")); n != 3 {
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


