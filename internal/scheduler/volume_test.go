package scheduler

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/drover-org/drover/internal/spec"
)

func withVolumes(n *spec.Node, vols ...spec.HostVolume) *spec.Node {
	n.HostVolumes = vols
	return n
}

func volumeGroup(readOnly bool) *spec.Group {
	g := group("api", 100, 100, "exec")
	g.Volumes = []*spec.VolumeRequest{{Name: "d", Type: spec.VolumeHost, Source: "data", ReadOnly: readOnly}}
	return g
}

// TestHostVolumePlacement: a group that asks for host volume data goes
// only to a node that has it, writable when the group writes it; when no
// node does, the failure says why in typed dimensions that read "no node
// has host volume data" and "host volume data is read-only on 2 nodes".
func TestHostVolumePlacement(t *testing.T) {
	nodes := func() []*spec.Node {
		return []*spec.Node{
			node("n1", 4000, 4096, "exec"),
			withVolumes(node("n2", 1000, 1024, "exec"), spec.HostVolume{Name: "data", ReadOnly: true}),
			withVolumes(node("n3", 1000, 1024, "exec"), spec.HostVolume{Name: "data"}, spec.HostVolume{Name: "logs"}),
		}
	}
	rw := volumeGroup(false)
	j := job("web", 50, rw)
	got := Place(Input{Nodes: nodes(), Requests: reqs(j, rw, 0, 1, 2)})
	if len(got.Failures) != 0 || len(got.Placements) != 3 {
		t.Fatalf("read-write: %+v", got)
	}
	for _, p := range got.Placements {
		if p.NodeID != "n3" {
			t.Errorf("an instance on %s, want n3 (the only node with data writable)", p.NodeID)
		}
	}

	ro := volumeGroup(true)
	j = job("web", 50, ro)
	got = Place(Input{Nodes: nodes(), Requests: reqs(j, ro, 0, 1)})
	if len(got.Failures) != 0 {
		t.Fatalf("read-only: %+v", got.Failures)
	}
	for _, p := range got.Placements {
		if p.NodeID == "n1" {
			t.Error("an instance on n1, which has no host volume data")
		}
	}

	// None has it writable: one lacks it, two have it read-only.
	onlyRO := []*spec.Node{
		node("n1", 4000, 4096, "exec"),
		withVolumes(node("n2", 4000, 4096, "exec"), spec.HostVolume{Name: "data", ReadOnly: true}),
		withVolumes(node("n3", 4000, 4096, "exec"), spec.HostVolume{Name: "data", ReadOnly: true}),
	}
	j = job("web", 50, rw)
	r := reqs(j, rw, 0)
	got = Place(Input{Nodes: onlyRO, Requests: r})
	want := spec.PlacementFailure{Group: "api", Missing: 1, NodesEvaluated: 3, Dimensions: []spec.DimensionFailure{
		{Dimension: spec.HostVolumeDimension("data"), Nodes: 1},
		{Dimension: spec.HostVolumeReadOnlyDimension("data"), Nodes: 2},
	}}
	if len(got.Failures) != 1 {
		t.Fatalf("want one failure, got %+v", got)
	}
	if d := cmp.Diff(want, got.Failures[0].PlacementFailure); d != "" {
		t.Errorf("failure (-want +got):\n%s", d)
	}
	if s, w := got.Failures[0].String(), "0/3 nodes fit: missing host volume data on 1; host volume data is read-only on 2 nodes"; s != w {
		t.Errorf("failure reads %q, want %q", s, w)
	}
	if !got.Failures[0].Never() {
		t.Error("a failure for host volumes alone is not permanent")
	}

	// No node has it at all.
	got = Place(Input{Nodes: []*spec.Node{node("n1", 4000, 4096, "exec"), node("n2", 4000, 4096, "exec")}, Requests: r})
	if len(got.Failures) != 1 || got.Failures[0].String() != "0/2 nodes fit: no node has host volume data" {
		t.Errorf("got %+v, want \"0/2 nodes fit: no node has host volume data\"", got.Failures)
	}
}

// TestHostVolumeCacheSeesNodeChange: a warm cache that placed nothing for
// lack of a host volume places the group once a node gains it.
func TestHostVolumeCacheSeesNodeChange(t *testing.T) {
	c := NewCache()
	g := volumeGroup(false)
	j := job("web", 50, g)
	n := node("n1", 4000, 4096, "exec")
	got := Place(Input{Nodes: []*spec.Node{n}, Requests: reqs(j, g, 0), Cache: c})
	if len(got.Failures) != 1 {
		t.Fatalf("placed without the volume: %+v", got)
	}
	gained := *n
	gained.HostVolumes = []spec.HostVolume{{Name: "data"}}
	got = Place(Input{Nodes: []*spec.Node{&gained}, Requests: reqs(j, g, 0), Cache: c})
	if len(got.Placements) != 1 || got.Placements[0].NodeID != "n1" {
		t.Fatalf("not placed once n1 has the volume: %+v", got)
	}
}

func perAllocGroup() *spec.Group {
	g := group("db", 100, 100, "exec")
	g.Count = 3
	g.Volumes = []*spec.VolumeRequest{{Name: "d", Type: spec.VolumeHost, Source: "data", PerAlloc: true}}
	return g
}

// TestPerAllocHostVolumePlacement: with per_alloc, instance N goes only to
// a node that has host volume data[N] writable, whatever else would score
// better; an instance that moves (AvoidNode) keeps its index and so goes
// back where its volume is; an instance no node has the volume of fails
// with "no node has host volume data[2]" while its siblings are placed,
// and each failing index is named once over the same nodes. A warm Cache
// gives the same answer.
func TestPerAllocHostVolumePlacement(t *testing.T) {
	nodes := func() []*spec.Node {
		return []*spec.Node{
			withVolumes(node("n1", 1000, 1024, "exec"), spec.HostVolume{Name: "data[1]"}),
			withVolumes(node("n2", 1000, 1024, "exec"), spec.HostVolume{Name: "data[0]"}, spec.HostVolume{Name: "data[2]", ReadOnly: true}),
			// The emptiest node, with the shared volume: where a
			// group without per_alloc would go.
			withVolumes(node("n3", 8000, 8192, "exec"), spec.HostVolume{Name: "data"}, spec.HostVolume{Name: "data[2]"}),
			node("n4", 8000, 8192, "exec"),
		}
	}
	g := perAllocGroup()
	j := job("db", 50, g)
	want := map[int]string{0: "n2", 1: "n1", 2: "n3"}
	c := NewCache()
	for _, cache := range []*Cache{nil, c, c} {
		got := Place(Input{Nodes: nodes(), Requests: reqs(j, g, 0, 1, 2), Cache: cache})
		if len(got.Failures) != 0 || len(got.Placements) != 3 {
			t.Fatalf("cache %v: %+v", cache != nil, got)
		}
		for _, p := range got.Placements {
			if p.NodeID != want[p.Request.Index] {
				t.Errorf("cache %v: instance %d on %s, want %s (the node with data[%d] writable)", cache != nil, p.Request.Index, p.NodeID, want[p.Request.Index], p.Request.Index)
			}
		}
	}

	// Instance 1 failed on n1 and moves: its volume is only there.
	r := reqs(j, g, 1)
	r[0].AvoidNode = "n1"
	got := Place(Input{Nodes: nodes(), Requests: r})
	if len(got.Placements) != 1 || got.Placements[0].NodeID != "n1" {
		t.Errorf("a moved instance 1: %+v, want it back on n1, which alone has data[1]", got)
	}

	// No node has data[2] or data[3]: those two fail, 0 and 1 are placed.
	few := []*spec.Node{
		withVolumes(node("n1", 1000, 1024, "exec"), spec.HostVolume{Name: "data[1]"}),
		withVolumes(node("n2", 1000, 1024, "exec"), spec.HostVolume{Name: "data[0]"}),
		withVolumes(node("n3", 8000, 8192, "exec"), spec.HostVolume{Name: "data"}),
	}
	g.Count = 4
	got = Place(Input{Nodes: few, Requests: reqs(j, g, 0, 1, 2, 3)})
	if len(got.Placements) != 2 || len(got.Failures) != 1 {
		t.Fatalf("want 2 placements and one failure, got %+v", got)
	}
	for _, p := range got.Placements {
		if p.NodeID != want[p.Request.Index] {
			t.Errorf("instance %d on %s, want %s", p.Request.Index, p.NodeID, want[p.Request.Index])
		}
	}
	f := got.Failures[0]
	if len(f.Requests) != 2 || f.Requests[0].Index != 2 || f.Requests[1].Index != 3 || f.Missing != 2 {
		t.Errorf("failed requests %+v, want indexes 2 and 3", f.Requests)
	}
	if s, w := f.String(), "0/3 nodes fit: no node has host volume data[2]; no node has host volume data[3]"; s != w {
		t.Errorf("failure reads %q, want %q", s, w)
	}
	if !f.Never() {
		t.Error("a failure for a missing per_alloc volume is not permanent")
	}

	// Pinned requests (a system job's) are explained each for its own
	// index: instance 1 pinned to n2 lacks data[1], instance 2 pinned to
	// n1 lacks data[2]; instance 0 on n2 is placed.
	pin := reqs(j, g, 0, 1, 2)
	for i, id := range []string{"n2", "n2", "n1"} {
		pin[i].Node = id
	}
	got = Place(Input{Nodes: few, Requests: pin})
	if len(got.Placements) != 1 || got.Placements[0].Request.Index != 0 || got.Placements[0].NodeID != "n2" || len(got.Failures) != 1 {
		t.Fatalf("pinned: want instance 0 on n2 and one failure, got %+v", got)
	}
	if s, w := got.Failures[0].String(), "0/2 nodes fit: missing host volume data[1] on 1; missing host volume data[2] on 1"; s != w {
		t.Errorf("pinned failure reads %q, want %q", s, w)
	}

	// Read-only where the group writes counts as not there.
	got = Place(Input{Nodes: nodes()[1:2], Requests: reqs(j, g, 2)})
	if len(got.Failures) != 1 || got.Failures[0].String() != "0/1 nodes fit: host volume data[2] is read-only on 1 node" {
		t.Errorf("got %+v, want data[2] read-only on n2", got.Failures)
	}
}
