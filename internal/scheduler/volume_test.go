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
