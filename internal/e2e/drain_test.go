package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/spec"
	"github.com/drover-org/drover/internal/testbin"
)

// drainJob is four real HTTP servers (internal/testapp, %s) behind a
// health check, moved one at a time.
const drainJob = `
job "e2edrain" {
  update {
    max_parallel     = 1
    min_healthy_time = "1s"
    healthy_deadline = "10s"
  }
  group "web" {
    count = 4
    network {
      port "http" {}
    }
    task "server" {
      driver = "raw_exec"
      config {
        command = "%s"
      }
      service {
        name = "e2edrain"
        port = "http"
        check {
          type     = "http"
          path     = "/health"
          interval = "300ms"
          timeout  = "300ms"
        }
      }
      kill_timeout = "2s"
      resources {
        cpu    = 20
        memory = 32
      }
    }
  }
}
`

// otherPorts is for drover dev when an agent runs beside it on the same
// machine: startDev passes its extra arguments after the package's port
// range, and the later flag wins. The scheduler hands out each node's
// lowest free dynamic port, so the agent (21000 up) and the dev node
// (21500 up) would otherwise give two tasks the same host port.
var otherPorts = []string{"--min-dynamic-port", "21500"}

// A drain moves a node's service instances elsewhere under the update
// gate: `drover node drain` follows it to the end, the service never has
// fewer than count - max_parallel instances passing, and every instance
// that left says why.
func TestDrainMovesWorkUnderTheHealthGate(t *testing.T) {
	dir := t.TempDir()
	// Runs after the agent is killed (cleanups run last registered first).
	t.Cleanup(func() { testbin.KillTasks(t, "e2edrain", dir) })
	app := buildTestapp(t, dir)
	d := startDev(t, dir+"/data", otherPorts...)
	c := d.client()

	// Placed before the second node exists: all four on the dev node.
	out, errOut, code := d.cli("", "run", "--timeout", "1m", writeJob(t, dir, "drain.hcl", fmt.Sprintf(drainJob, app)))
	if code != 0 {
		t.Fatalf("drover run: exit %d\n%s%s", code, out, errOut)
	}
	st := d.jobStatus("e2edrain")
	node1 := ""
	for _, a := range st.Allocations {
		if a.DesiredStatus == spec.DesiredRun {
			node1 = a.NodeName
		}
	}
	if node1 == "" || st.Summary.Running != 4 {
		t.Fatalf("want 4 instances running on the dev node, got %+v", st.Summary)
	}
	startAgent(t, d, "drain2", dir+"/agent2")
	waitFor(t, 10*time.Second, "4 instances passing their checks", func() bool {
		ins, _, err := c.Service(t.Context(), "e2edrain", false, nil)
		return err == nil && len(ins) == 4
	})

	// An unknown node is an error that names it.
	out, errOut, code = d.cli("", "node", "eligibility", "no-such-node", "off")
	if code == 0 || !strings.Contains(out+errOut, "no-such-node") {
		t.Errorf("drover node eligibility no-such-node off: exit %d, want non-zero and a message naming the node\n%s%s", code, out, errOut)
	}
	t.Logf("drover node eligibility no-such-node off: exit %d: %s", code, strings.TrimSpace(out+errOut))

	// Sample the passing count from the service catalog all along.
	var mu sync.Mutex
	minPassing, samples := 4, 0
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			ins, _, err := c.Service(ctx, "e2edrain", false, nil)
			cancel()
			if err != nil {
				continue
			}
			mu.Lock()
			minPassing, samples = min(minPassing, len(ins)), samples+1
			mu.Unlock()
		}
	}()

	start := time.Now()
	out, errOut, code = d.cli("", "node", "drain", node1, "--deadline", "2m")
	took := time.Since(start)
	close(stop)
	<-sampled
	t.Logf("drover node drain %s: exit %d after %s\n%s%s", node1, code, took.Round(10*time.Millisecond), out, errOut)
	if code != 0 {
		t.Fatalf("drover node drain: exit %d, want 0", code)
	}
	// Four moves of one verdict each (min_healthy_time 1s): well under
	// the deadline, which would stop what is left at once.
	if took > time.Minute {
		t.Errorf("the drain took %s", took)
	}
	for _, want := range []string{"4 instances to move", "drain of " + node1 + " complete: 4 instances moved"} {
		if !strings.Contains(out, want) {
			t.Errorf("drover node drain output lacks %q", want)
		}
	}
	// It names each move. It ends once nothing is left on the node, so
	// the last replacement may be only placed by then.
	for i := range 4 {
		name := fmt.Sprintf("e2edrain.web[%d]", i)
		for _, want := range []string{name + " stopped on " + node1 + ": node " + node1 + " is draining", name + " placed on drain2"} {
			if !strings.Contains(out, want) {
				t.Errorf("drover node drain output lacks %q", want)
			}
		}
	}

	mu.Lock()
	t.Logf("passing instances: at least %d of 4 in %d samples during the drain", minPassing, samples)
	if samples < 20 || minPassing < 3 {
		t.Errorf("passing instances dropped to %d (of 4, max_parallel 1) in %d samples; want at least 3", minPassing, samples)
	}
	mu.Unlock()

	waitFor(t, 15*time.Second, "the last replacement running", func() bool {
		return d.jobStatus("e2edrain").Summary.Running == 4
	})
	st = d.jobStatus("e2edrain")
	running := 0
	var stops []time.Time
	for _, a := range st.Allocations {
		if a.NodeName == node1 && a.DesiredStatus == spec.DesiredStop {
			stops = append(stops, a.ModifyTime)
		}
		switch {
		case a.DesiredStatus == spec.DesiredRun && a.NodeName == "drain2" && a.ClientStatusOr() == spec.ClientRunning:
			running++
		case a.DesiredStatus == spec.DesiredRun:
			t.Errorf("%s: desired run on %s (%s), want running on drain2", a.Name, a.NodeName, a.ClientStatusOr())
		case a.NodeName == node1 && a.DesiredReason != "node "+node1+" is draining":
			t.Errorf("%s stopped on %s: reason %q, want %q", a.Name, node1, a.DesiredReason, "node "+node1+" is draining")
		}
	}
	if running != 4 {
		t.Errorf("%d instances running on drain2, want 4", running)
	}
	// One at a time: each move waited for the previous replacement's
	// verdict, which takes min_healthy_time (1s) at least.
	slices.SortFunc(stops, time.Time.Compare)
	if len(stops) != 4 {
		t.Errorf("%d instances stopped on %s, want 4", len(stops), node1)
	}
	for i := 1; i < len(stops); i++ {
		if gap := stops[i].Sub(stops[i-1]); gap < time.Second {
			t.Errorf("moves %d and %d were %s apart; want one at a time, each after its predecessor's 1s verdict", i, i+1, gap)
		}
	}
	nodes, _, _ := d.cli("", "nodes")
	shown := false
	for _, l := range strings.Split(nodes, "\n") {
		if f := strings.Fields(l); len(f) > 2 && f[1] == node1 { // ID NAME STATUS ...
			shown = strings.Contains(l, "draining")
		}
	}
	if !shown {
		t.Errorf("drover nodes does not show %s draining:\n%s", node1, nodes)
	}
}
