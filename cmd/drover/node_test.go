package main

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/drover-org/drover/internal/spec"
)

func TestNodeStatus(t *testing.T) {
	drain := &spec.DrainStrategy{StartedAt: time.Unix(1, 0)}
	for _, c := range []struct {
		n    spec.Node
		want string
	}{
		{spec.Node{Status: spec.NodeReady}, "ready"},
		{spec.Node{Status: spec.NodeReady, Ineligible: true}, "ready, ineligible"},
		{spec.Node{Status: spec.NodeReady, Drain: drain}, "ready, draining"},
		{spec.Node{Status: spec.NodeReady, Drain: drain, Ineligible: true}, "ready, draining"},
		{spec.Node{Status: spec.NodeDown}, "down"},
		{spec.Node{Status: spec.NodeDown, Drain: drain}, "down, draining"},
	} {
		if got := nodeStatus(&c.n); got != c.want {
			t.Errorf("nodeStatus(%+v) = %q, want %q", c.n, got, c.want)
		}
	}
}

func TestNodeControlLines(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	n := &spec.Node{ID: "aaaaaaaa-1111", Name: "node-a", Status: spec.NodeReady}
	got := []string{eligibilityLine(n)}
	n.Ineligible = true
	got = append(got, eligibilityLine(n))
	n.Drain = &spec.DrainStrategy{StartedAt: start}
	got = append(got, eligibilityLine(n), drainStartLine(n, start))
	n.Drain.Deadline = start.Add(time.Hour)
	got = append(got, drainStartLine(n, start.Add(10*time.Minute)))
	want := []string{
		"Node node-a (aaaaaaaa) is eligible: the scheduler may place new work on it.",
		"Node node-a (aaaaaaaa) is ineligible: no new work is placed on it; what runs there keeps running.",
		"Node node-a (aaaaaaaa) is draining: it takes no new work, and its work is moving elsewhere.",
		"Node node-a (aaaaaaaa) is draining since 2026-01-02T03:04:05Z; no deadline.",
		"Node node-a (aaaaaaaa) is draining since 2026-01-02T03:04:05Z; deadline 2026-01-02T04:04:05Z (in 50m0s).",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("lines (-want +got):\n%s", d)
	}
}

// TestDrainWatch follows a drain through the looks a follower gets: the
// node's allocs, and the jobs' allocs elsewhere, and compares every line.
func TestDrainWatch(t *testing.T) {
	node := &spec.Node{ID: "na", Name: "node-a"}
	mk := func(id, name, nodeID string, create int64, typ spec.JobType, desired spec.DesiredStatus, cs spec.ClientStatus) *spec.Alloc {
		a := &spec.Alloc{ID: id, Name: "web.api[" + name + "]", Job: "web", NodeID: nodeID, NodeName: map[string]string{"na": "node-a", "nb": "node-b"}[nodeID],
			JobType: typ, DesiredStatus: desired, CreateIndex: create}
		if typ == spec.JobSystem {
			a.Name, a.Job = "agent.g["+name+"]", "agent"
		}
		if desired == spec.DesiredStop {
			a.DesiredReason = "node node-a is draining"
		}
		if cs != "" {
			a.Status = &spec.AllocStatus{ClientStatus: cs}
		}
		return a
	}
	svc, sys := spec.JobService, spec.JobSystem
	run, stop := spec.DesiredRun, spec.DesiredStop
	w := newDrainWatch(node)
	steps := []struct {
		name      string
		onNode    []*spec.Alloc
		elsewhere []*spec.Alloc
		following []string
		want      []string
		done      bool
	}{
		{
			name: "first look: what there is to move; an old stopped instance is not news",
			onNode: []*spec.Alloc{
				mk("a0", "0", "na", 10, svc, run, spec.ClientRunning),
				mk("a1", "1", "na", 11, svc, run, spec.ClientRunning),
				mk("s0", "0", "na", 12, sys, run, spec.ClientRunning),
				mk("old", "2", "na", 1, svc, stop, spec.ClientComplete),
			},
			want: []string{"node-a: 2 instances to move; 1 instance of system jobs stop last"},
		},
		{
			name:      "the first is told to stop; its replacement is placed",
			onNode:    []*spec.Alloc{mk("a0", "0", "na", 10, svc, stop, spec.ClientRunning), mk("a1", "1", "na", 11, svc, run, spec.ClientRunning), mk("s0", "0", "na", 12, sys, run, spec.ClientRunning)},
			following: []string{"web"},
			elsewhere: []*spec.Alloc{mk("b0", "0", "nb", 20, svc, run, spec.ClientPending), mk("x", "5", "nb", 3, svc, run, spec.ClientRunning)},
			want:      []string{"web.api[0] stopping on node-a: node node-a is draining", "web.api[0] placed on node-b"},
		},
		{
			name:      "the replacement runs, the first stops; the same look again says nothing",
			onNode:    []*spec.Alloc{mk("a0", "0", "na", 10, svc, stop, spec.ClientComplete), mk("a1", "1", "na", 11, svc, run, spec.ClientRunning), mk("s0", "0", "na", 12, sys, run, spec.ClientRunning)},
			following: []string{"web"},
			elsewhere: []*spec.Alloc{mk("b0", "0", "nb", 20, svc, run, spec.ClientRunning)},
			want:      []string{"web.api[0] stopped on node-a: node node-a is draining", "web.api[0] running on node-b"},
		},
		{
			name:   "the second goes; only the system instance is left: done",
			onNode: []*spec.Alloc{mk("a0", "0", "na", 10, svc, stop, spec.ClientComplete), mk("a1", "1", "na", 11, svc, stop, spec.ClientComplete), mk("s0", "0", "na", 12, sys, run, spec.ClientRunning)},
			// web.api[0]'s replacement runs: only web.api[1]'s is looked for.
			following: []string{"web"},
			elsewhere: []*spec.Alloc{mk("b0", "0", "nb", 20, svc, run, spec.ClientRunning), mk("b1", "1", "nb", 21, svc, run, spec.ClientFailed)},
			want:      []string{"web.api[1] stopped on node-a: node node-a is draining", "web.api[1] failed on node-b"},
			done:      true,
		},
	}
	for _, s := range steps {
		got, done := w.onNode(s.onNode)
		if diff := cmp.Diff(s.following, w.following()); diff != "" {
			t.Fatalf("%s: following (-want +got):\n%s", s.name, diff)
		}
		got = append(got, w.elsewhere(s.elsewhere)...)
		if diff := cmp.Diff(s.want, got); diff != "" {
			t.Fatalf("%s: lines (-want +got):\n%s", s.name, diff)
		}
		if done != s.done {
			t.Fatalf("%s: done = %v, want %v", s.name, done, s.done)
		}
	}
	// web.api[1]'s replacement failed: the drain is complete, and says so.
	if got, want := w.doneLine(), "✓ drain of node-a complete: 2 instances moved; 1 replacement not running elsewhere (drover ps)"; got != want {
		t.Errorf("done line %q, want %q", got, want)
	}
	if got, want := w.progress(), "2 instances moved, 0 instances left"; got != want {
		t.Errorf("progress %q, want %q", got, want)
	}
	// Nothing to move at all: done at the first look.
	w = newDrainWatch(node)
	lines, done := w.onNode([]*spec.Alloc{mk("s0", "0", "na", 12, sys, run, spec.ClientRunning)})
	if !done || len(lines) != 1 || lines[0] != "node-a: 0 instances to move; 1 instance of system jobs stop last" {
		t.Fatalf("a node with only system work: %q, done %v", lines, done)
	}
}

// TestPrintNode shows a node's place, host volumes, capacity, attributes
// (the drivers' among them) and meta, under the names constraints read
// them by.
func TestPrintNode(t *testing.T) {
	n := &spec.Node{ID: "aaaaaaaa-1111", Name: "node-a", Status: spec.NodeReady, Datacenter: "eu-1", NodePool: "gpu",
		Address: "https://10.0.0.5:4647", Drivers: []string{"exec"},
		HostVolumes: []spec.HostVolume{{Name: "certs", ReadOnly: true}, {Name: "shared"}},
		Resources:   spec.Resources{CPU: 8000, MemoryMB: 16000, DiskMB: 50000},
		Attributes:  map[string]string{spec.AttrKernelName: "linux", spec.AttrCPUArch: "amd64"}}
	var b strings.Builder
	printNode(&b, n)
	want := `ID          aaaaaaaa-1111
Name        node-a
Status      ready
Datacenter  eu-1
Class       -
Pool        gpu
Address     https://10.0.0.5:4647
Drivers     exec
Volumes     certs (read-only), shared
CPU         8000 MHz
Memory      16000 MB
Disk        50000 MB

Attributes
  attr.cpu.arch     amd64
  attr.driver.exec  1
  attr.kernel.name  linux

Meta
  (none)
`
	if d := cmp.Diff(want, b.String()); d != "" {
		t.Errorf("printNode (-want +got):\n%s", d)
	}

	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	run := &spec.Alloc{ID: "bbbbbbbb-2222", Name: "web.api[0]", Job: "web", NodeName: "node-a", DesiredStatus: spec.DesiredRun,
		JobVersion: 3, CreateTime: now.Add(-5 * time.Minute), Status: &spec.AllocStatus{ClientStatus: spec.ClientRunning}}
	done := &spec.Alloc{ID: "cccccccc-3333", Name: "web.api[1]", Job: "web", NodeName: "node-a", DesiredStatus: spec.DesiredStop,
		Status: &spec.AllocStatus{ClientStatus: spec.ClientComplete}}
	b.Reset()
	printNodeAllocs(&b, []*spec.Alloc{run, done}, now)
	want = `
Allocations
ID        INSTANCE    NODE    STATE    DESIRED  RESTARTS  VERSION  AGE
bbbbbbbb  web.api[0]  node-a  running  run      0         3        5m
(and 1 finished; drover ps --all lists them)
`
	if d := cmp.Diff(want, b.String()); d != "" {
		t.Errorf("printNodeAllocs (-want +got):\n%s", d)
	}
	b.Reset()
	printNodeAllocs(&b, []*spec.Alloc{done}, now)
	if got := b.String(); got != "\nAllocations: none running\n(and 1 finished; drover ps --all lists them)\n" {
		t.Errorf("printNodeAllocs with nothing running: %q", got)
	}
}
