package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/spec"
	"github.com/drover-org/drover/internal/testbin"
)

// lowprioJob holds %[3]d MB (internal/testapp, %[1]s) once the file %[2]s
// exists: the test opens that gate once a second node is up, so that the
// first move has somewhere to go (a move with nowhere else to go lands
// on the same node again).
const lowprioJob = `
job "lowprio" {
  priority = 20
  group "hog" {
    network {
      port "http" {}
    }
    task "hog" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "while [ ! -e %[2]s ]; do sleep 0.1; done; exec %[1]s -alloc-mb %[3]d"]
      }
      kill_timeout = "2s"
      resources {
        cpu    = 20
        memory = %[4]d
      }
    }
  }
}
`

const highprioJob = `
job "highprio" {
  priority = 80
  group "small" {
    task "small" {
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

// memTotalMB is this machine's memory, as /proc/meminfo says.
func memTotalMB(t *testing.T) int {
	t.Helper()
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		t.Skipf("no /proc/meminfo: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatalf("/proc/meminfo: %q", sc.Text())
			}
			return kb / 1024
		}
	}
	t.Fatal("/proc/meminfo has no MemTotal")
	return 0
}

// A node whose tasks use more than --memory-high-percent of its memory
// sheds its lowest-priority service instance to another node, and then
// waits --memory-move-interval before it sheds another.
func TestHighMemoryMovesLowestPriorityInstance(t *testing.T) {
	dir := t.TempDir()
	// Runs after the agent is killed (cleanups run last registered first).
	t.Cleanup(func() {
		testbin.KillTasks(t, "lowprio", dir)
		testbin.KillTasks(t, "highprio", dir)
	})
	app := buildTestapp(t, dir)

	// The threshold is a whole percent of the node's memory: hold 400 MB,
	// or 2% of the machine where 400 MB is less (on 24 GB, 400 MB is under
	// 2%), and set the threshold one percent below what that holding
	// makes. A sleep process is far below it.
	memMB := memTotalMB(t)
	hold := 400
	if hold*100/memMB < 2 {
		hold = (2*memMB+99)/100 + 32
	}
	high := hold*100/memMB - 1
	const interval = 5 * time.Second
	t.Logf("machine memory %d MB: lowprio holds %d MB (%d%%), --memory-high-percent %d", memMB, hold, hold*100/memMB, high)
	d := startDev(t, dir+"/data", append([]string{"--memory-high-percent", strconv.Itoa(high),
		"--memory-move-interval", interval.String()}, otherPorts...)...)

	// What the node reports is what the leader divides by.
	out, errOut, code := d.cli("", "nodes", "-o", "json")
	var nodes []*spec.Node
	if err := json.Unmarshal([]byte(out), &nodes); code != 0 || err != nil || len(nodes) != 1 {
		t.Fatalf("drover nodes -o json: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	node1, nodeMB := nodes[0].Name, nodes[0].Resources.MemoryMB
	if nodeMB <= 0 || hold*100/nodeMB <= high {
		t.Fatalf("node %s reports %d MB of memory: %d MB is %d%% of it, not over %d%%", node1, nodeMB, hold, hold*100/max(nodeMB, 1), high)
	}

	gate := filepath.Join(dir, "gate")
	for _, job := range []string{fmt.Sprintf(lowprioJob, app, gate, hold, hold+64), highprioJob} {
		name := strings.Fields(job)[1]
		out, errOut, code := d.cli("", "run", "--min-healthy-time", "1s", "--timeout", "1m", writeJob(t, dir, strings.Trim(name, `"`)+".hcl", job))
		if code != 0 {
			t.Fatalf("drover run %s: exit %d\n%s%s", name, code, out, errOut)
		}
	}
	low, highAlloc := only(t, d, "lowprio"), only(t, d, "highprio")
	if low.NodeName != node1 || highAlloc.NodeName != node1 {
		t.Fatalf("lowprio on %s, highprio on %s; want both on %s", low.NodeName, highAlloc.NodeName, node1)
	}

	// Somewhere to move to, then the memory.
	startAgent(t, d, "mem2", dir+"/agent2")
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	opened := time.Now()

	// The agent samples its tasks every 10 s and reports when memory moved
	// by 1% of the node's; a report does not wake the leader, whose
	// periodic pass (every 5 s) acts on it. Within ~15 s of testapp
	// touching its memory, then: 30 s leaves room for a slow machine.
	prefix := "node " + node1 + " uses"
	var moved *spec.Alloc
	waitFor(t, 30*time.Second, "lowprio's instance to move off "+node1, func() bool {
		for _, a := range d.jobStatus("lowprio").Allocations {
			if a.ID == low.ID && a.DesiredStatus == spec.DesiredStop {
				moved = a
				return true
			}
		}
		return false
	})
	t.Logf("memory held -> lowprio moved off %s: %s (%s)", node1, moved.ModifyTime.Sub(opened).Round(10*time.Millisecond), moved.DesiredReason)
	if !strings.HasPrefix(moved.DesiredReason, prefix) || !strings.Contains(moved.DesiredReason, "moving its lowest-priority instance") {
		t.Fatalf("lowprio stopped on %s with reason %q; want %q... moving its lowest-priority instance", node1, moved.DesiredReason, prefix)
	}
	// The instance's own events say why it was killed.
	waitFor(t, 10*time.Second, "a Killing event that says why", func() bool {
		for _, a := range d.jobStatus("lowprio").Allocations {
			if a.ID != moved.ID || a.Status == nil {
				continue
			}
			for _, ts := range a.Status.Tasks {
				for _, e := range ts.Events {
					if e.Type == spec.EventKilling && strings.HasPrefix(e.Message, prefix) {
						return true
					}
				}
			}
		}
		return false
	})

	// Its replacement runs on mem2. It may move again from there once mem2
	// reports the memory (and from wherever it goes then): only the first
	// hop counts here.
	waitFor(t, 20*time.Second, "lowprio's replacement running on mem2", func() bool {
		// The replacement is created with the stop, in the same commit.
		var next *spec.Alloc
		for _, a := range d.jobStatus("lowprio").Allocations {
			if a.ID != moved.ID && a.Index == moved.Index && !a.CreateTime.Before(moved.ModifyTime) && (next == nil || a.CreateIndex < next.CreateIndex) {
				next = a
			}
		}
		if next == nil {
			t.Fatalf("lowprio's instance was stopped on %s and not replaced", node1)
		}
		if next.NodeName != "mem2" {
			t.Fatalf("lowprio's replacement went to %s, want mem2", next.NodeName)
		}
		return next.ClientStatusOr() == spec.ClientRunning || strings.HasPrefix(next.DesiredReason, "node mem2 uses")
	})

	// highprio stays: wait out the interval and one more of node1's usage
	// samples (up to 10 s: the report that saw lowprio's memory may be the
	// latest one when the interval ends), then look at every instance
	// that left node1 for memory.
	time.Sleep(time.Until(moved.ModifyTime.Add(interval + 12*time.Second)))
	var stops []time.Time
	var all []*spec.Alloc
	for _, job := range []string{"lowprio", "highprio"} {
		all = append(all, d.jobStatus(job).Allocations...)
	}
	for _, a := range all {
		if a.NodeName == node1 && a.DesiredStatus == spec.DesiredStop && strings.HasPrefix(a.DesiredReason, prefix) {
			stops = append(stops, a.ModifyTime)
		}
	}
	slices.SortFunc(stops, time.Time.Compare)
	for i := 1; i < len(stops); i++ {
		if gap := stops[i].Sub(stops[i-1]); gap < interval {
			t.Errorf("two instances left %s for memory %s apart; want at most one per %s", node1, gap, interval)
		}
	}
	for _, a := range all {
		if a.ID == highAlloc.ID && (a.DesiredStatus != spec.DesiredRun || a.ClientStatusOr() != spec.ClientRunning) {
			t.Errorf("highprio's instance on %s: desired %s, client %s; want it left running", node1, a.DesiredStatus, a.ClientStatusOr())
		}
	}
	// The moves, in order, to read when something is wrong.
	slices.SortFunc(all, func(a, b *spec.Alloc) int { return a.CreateTime.Compare(b.CreateTime) })
	for _, a := range all {
		t.Logf("%s on %s, created %+.2fs: %s; desired %s at %+.2fs (%s)", a.Name, a.NodeName, a.CreateTime.Sub(moved.ModifyTime).Seconds(),
			a.ClientStatusOr(), a.DesiredStatus, a.ModifyTime.Sub(moved.ModifyTime).Seconds(), a.DesiredReason)
	}
}

// only returns job's one live instance, running.
func only(t *testing.T, d *devProc, job string) *spec.Alloc {
	t.Helper()
	var live []*spec.Alloc
	for _, a := range d.jobStatus(job).Allocations {
		if a.DesiredStatus == spec.DesiredRun {
			live = append(live, a)
		}
	}
	if len(live) != 1 || live[0].ClientStatusOr() != spec.ClientRunning {
		t.Fatalf("%s: want 1 instance running, got %d: %+v", job, len(live), live)
	}
	return live[0]
}
