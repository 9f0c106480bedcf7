package agent_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/agent"
	"github.com/drover-org/drover/internal/driver"
	"github.com/drover-org/drover/internal/driver/execdriver"
	"github.com/drover-org/drover/internal/spec"
)

// TestAgentReportsNodeUsage: the agent reports its node's usage once it
// runs, not again while nothing moves, and again when a task starts using
// a core; the server merges the report into the node.
func TestAgentReportsNodeUsage(t *testing.T) {
	c := newCluster(t)
	ag, err := agent.New(agent.Config{
		DataDir: t.TempDir(), Name: "node-1", Address: c.url,
		Drivers: []driver.Driver{execdriver.New("raw_exec")},
		Client:  c.client, Logger: testLogger(t, slog.LevelWarn),
	})
	if err != nil {
		t.Fatal(err)
	}
	// Sample often; the minute's report must not be what the test sees.
	agent.SetUsageTiming(ag, 100*time.Millisecond, time.Hour)
	h := ag.Handler()
	c.agentH.Store(&h)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ag.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Error("agent Run did not return within 20s of cancel")
		}
	})

	usage := func() *spec.NodeUsage {
		n, err := c.client.Node(context.Background(), ag.NodeID())
		if err != nil {
			return nil
		}
		return n.Usage
	}
	waitFor(t, 10*time.Second, "the first usage report", func() bool { return usage() != nil })
	first := usage()
	if first.NodeID != ag.NodeID() || first.Tasks != (spec.Usage{}) || first.Allocs != nil {
		t.Fatalf("first report = %+v; want node %s's zero totals, no allocs", first, ag.NodeID())
	}
	// Ten samples with nothing running: no new report (the server stamps
	// each report's time when it takes it).
	time.Sleep(time.Second)
	if u := usage(); !u.Time.Equal(first.Time) {
		t.Fatalf("reported again while nothing moved: %v then %v", first.Time, u.Time)
	}
	// A task busy on one core is 1/cores of the node's CPU: past the 5%
	// step on a machine of up to 20 cores.
	j := job("busy", spec.JobService, shTask("spin", `while :; do :; done`))
	c.submit(j)
	waitFor(t, 15*time.Second, "a report of the busy task's CPU", func() bool {
		u := usage()
		return u != nil && u.Tasks.CPU > 0 && u.Time.After(first.Time)
	})
}
