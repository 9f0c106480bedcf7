package clustertest

import (
	"context"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/spec"
)

// systemNodes returns the node IDs of the job's running instances on live
// nodes, sorted.
func (c *cluster) systemNodes(name string) []string {
	st, err := c.jobStatus(name)
	if err != nil {
		return nil
	}
	var out []string
	for _, a := range liveAllocs(st) {
		if a.Status != nil && a.Status.ClientStatus == spec.ClientRunning && !a.NodeDown {
			out = append(out, a.NodeID)
		}
	}
	slices.Sort(out)
	return out
}

func (c *cluster) ids(names ...string) []string {
	var out []string
	for _, n := range names {
		out = append(out, c.nodeIDs[n])
	}
	slices.Sort(out)
	return out
}

// TestSystemJobFollowsNodes runs a system job constrained to edge nodes on
// a cluster of two edge agents and one other: it runs once on each edge
// node, on a third edge agent as soon as it joins, and on none of the
// others; when an edge agent is SIGKILLed its instance is not moved
// elsewhere.
func TestSystemJobFollowsNodes(t *testing.T) {
	c := startCluster(t, 0)
	c.startAgentWith("a1", 1, "--meta", "role=edge")
	c.startAgentWith("a2", 2, "--meta", "role=edge")
	c.startAgentWith("a3", 0)
	c.waitNodes(30 * time.Second)

	job := sleepJob("logs", 1)
	job.Type = spec.JobSystem
	job.Constraints = []*spec.Constraint{{Attribute: "${meta.role}", Operator: "=", Value: "edge"}}
	job.Canonicalize()
	c.submit(job)
	want := c.ids("a1", "a2")
	waitFor(t, 30*time.Second, "logs on a1 and a2", func() bool { return slices.Equal(c.systemNodes("logs"), want) })

	c.startAgentWith("a4", 1, "--meta", "role=edge")
	c.waitNodes(30 * time.Second)
	want = c.ids("a1", "a2", "a4")
	waitFor(t, 30*time.Second, "logs on the new edge node a4 too", func() bool { return slices.Equal(c.systemNodes("logs"), want) })

	a2 := c.agents[1]
	a2.signal(syscall.SIGKILL)
	_ = a2.wait(10 * time.Second)
	want = c.ids("a1", "a4")
	waitFor(t, 30*time.Second, "logs lost with a2 and not moved", func() bool {
		st, err := c.jobStatus("logs")
		if err != nil || !slices.Equal(c.systemNodes("logs"), want) {
			return false
		}
		for _, a := range liveAllocs(st) {
			if a.NodeID == c.nodeIDs["a2"] && a.DesiredStatus != spec.DesiredStop {
				return false // not yet stopped as lost
			}
		}
		return len(liveAllocs(st)) == 3 // two running, the lost one
	})
	// Nothing was placed on the non-edge node, ever.
	st, err := c.jobStatus("logs")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range st.Allocations {
		if a.NodeID == c.nodeIDs["a3"] {
			t.Errorf("system job placed on the ineligible node a3: %s", a.Name)
		}
	}
}

// TestPreemptionEvictsLowerPriority fills both agents with a low-priority
// job that reserves most of a node's memory, then submits a high-priority
// job with preempt = true: one low instance is evicted with a reason that
// names the new work, the high job runs, and the evicted instance waits
// with its reasons until room appears again, when it is placed.
func TestPreemptionEvictsLowerPriority(t *testing.T) {
	c := startCluster(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nodes, _, err := c.api().Nodes(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	mem := nodes[0].Resources.MemoryMB
	for _, n := range nodes {
		mem = min(mem, n.Resources.MemoryMB)
	}
	big := mem * 6 / 10 // one per node

	low := sleepJob("batchy", 2)
	low.Priority = 20
	low.Groups[0].Tasks[0].Resources.MemoryMB = big
	low.Canonicalize()
	c.submit(low)
	c.waitRunning("batchy", 2, 30*time.Second)

	high := sleepJob("urgent", 1)
	high.Priority = 80
	yes := true
	high.Preempt = &yes
	high.Groups[0].Tasks[0].Resources.MemoryMB = big
	high.Canonicalize()
	c.submit(high)
	c.waitRunning("urgent", 1, 30*time.Second)

	var evicted *spec.Alloc
	waitFor(t, 30*time.Second, "one batchy instance evicted and waiting", func() bool {
		st, err := c.jobStatus("batchy")
		if err != nil {
			return false
		}
		evicted = nil
		for _, a := range st.Allocations {
			if a.Evicted() {
				evicted = a
			}
		}
		return evicted != nil && len(runningAllocs(st)) == 1 && len(st.Failures) == 1
	})
	if !strings.HasPrefix(evicted.DesiredReason, "preempted by urgent.g[0] (priority 80") {
		t.Errorf("eviction reason %q", evicted.DesiredReason)
	}
	st, _ := c.jobStatus("batchy")
	if f := st.Failures[0].String(); !strings.Contains(f, "memory exhausted on 2") {
		t.Errorf("waiting instance's reason %q, want memory exhausted on both nodes", f)
	}

	// Stopping the urgent job makes room: the evicted instance comes back.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	if _, err := c.api().StopJob(ctx2, "urgent", false); err != nil {
		t.Fatal(err)
	}
	c.waitRunning("batchy", 2, 30*time.Second)
}
