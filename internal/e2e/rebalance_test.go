package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/server"
	"github.com/drover-org/drover/internal/spec"
	"github.com/drover-org/drover/internal/testbin"
)

// rebalanceJob is four sleeping processes that spread out over the nodes
// as nodes join (rebalance = true), one at a time.
const rebalanceJob = `
job "e2erebal" {
  group "sleepers" {
    count     = 4
    rebalance = true
    update {
      max_parallel     = 1
      min_healthy_time = "500ms"
      healthy_deadline = "10s"
      health_check     = "task_states"
    }
    task "sleep" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "exec sleep 1000"]
      }
      kill_timeout = "2s"
      resources {
        cpu    = 20
        memory = 16
      }
    }
  }
}
`

// A node joins a cluster of one: a group with rebalance = true moves
// instances onto it, one at a time, until the two nodes run as many each.
func TestRebalanceSpreadsOntoAJoiningNode(t *testing.T) {
	dir := t.TempDir()
	// Runs after the agent is killed (cleanups run last registered first).
	t.Cleanup(func() { testbin.KillTasks(t, "e2erebal", dir) })
	d := startDev(t, dir+"/data")

	out, errOut, code := d.cli("", "run", "--timeout", "1m", writeJob(t, dir, "rebal.hcl", rebalanceJob))
	if code != 0 {
		t.Fatalf("drover run: exit %d\n%s%s", code, out, errOut)
	}
	st := d.jobStatus("e2erebal")
	node1 := ""
	for _, a := range st.Allocations {
		if a.DesiredStatus == spec.DesiredRun {
			node1 = a.NodeName
		}
	}
	if st.Summary.Running != 4 || len(st.Allocations) != 4 {
		t.Fatalf("want 4 instances running on the dev node, got %+v", st.Summary)
	}

	joined := time.Now()
	startAgent(t, d, "rebal2", dir+"/agent2")
	// Two moves, each waiting for the previous one's verdict (500ms of
	// running): a few seconds; 30s leaves room for a slow machine.
	perNode := map[string]int{}
	waitFor(t, 30*time.Second, "2 instances running on each node", func() bool {
		st = d.jobStatus("e2erebal")
		clear(perNode)
		for _, a := range st.Allocations {
			if a.DesiredStatus == spec.DesiredRun && a.ClientStatusOr() == spec.ClientRunning {
				perNode[a.NodeName]++
			}
		}
		return perNode[node1] == 2 && perNode["rebal2"] == 2 && st.Summary.Running == 4
	})
	t.Logf("node joined -> 2 instances on each node: %s", time.Since(joined).Round(10*time.Millisecond))

	// Exactly two moved, off the dev node, each saying why, the second
	// only after the first's replacement got its verdict.
	var stops []time.Time
	for _, a := range st.Allocations {
		if a.DesiredStatus != spec.DesiredStop {
			continue
		}
		stops = append(stops, a.ModifyTime)
		if a.NodeName != node1 || !strings.HasPrefix(a.DesiredReason, "rebalance: node "+node1+" runs ") {
			t.Errorf("%s stopped on %s: reason %q, want a rebalance off %s", a.Name, a.NodeName, a.DesiredReason, node1)
		}
		t.Logf("%s moved: %s", a.Name, a.DesiredReason)
	}
	if len(stops) != 2 {
		t.Fatalf("%d instances moved, want 2", len(stops))
	}
	slices.SortFunc(stops, time.Time.Compare)
	gap := stops[1].Sub(stops[0])
	t.Logf("the second move came %s after the first", gap.Round(10*time.Millisecond))
	if gap < 500*time.Millisecond {
		t.Errorf("the two moves were %s apart; want the second after the first replacement's 500ms verdict", gap)
	}

	// Even: nothing more moves, also at the leader's next periodic pass
	// (server.DefaultResync).
	time.Sleep(server.DefaultResync + time.Second)
	if st := d.jobStatus("e2erebal"); len(st.Allocations) != 6 {
		t.Errorf("%d allocs after the counts evened out, want 6 (4 running, 2 moved)", len(st.Allocations))
	}
}
