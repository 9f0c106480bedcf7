package scheduler

import (
	"strings"
	"testing"

	"github.com/drover-org/drover/internal/spec"
)

// A group in bridge mode goes only to a node whose agent says it can make
// the instance's network (attribute network.bridge); with none, the
// failure names the mode, as a missing driver is named.
func TestNetworkModePlacement(t *testing.T) {
	plain := node("n1", 4000, 8192, "raw_exec")
	bridged := node("n2", 1000, 1024, "raw_exec")
	bridged.Attributes = map[string]string{spec.NetworkModeAttribute(spec.NetworkBridge): "true"}

	g := group("web", 100, 64, "raw_exec")
	g.Network = &spec.Network{Mode: spec.NetworkBridge, Ports: []spec.Port{{Label: "http", To: 8080}}}
	j := job("web", 50, g)

	// n1 is bigger and emptier, so it would win on score: only n2 may.
	res := Place(Input{Nodes: []*spec.Node{plain, bridged}, Requests: reqs(j, g, 0)})
	if len(res.Failures) != 0 || len(res.Placements) != 1 || res.Placements[0].NodeID != "n2" {
		t.Fatalf("bridge group placed %+v, failures %+v; want it on n2 only", res.Placements, res.Failures)
	}

	res = Place(Input{Nodes: []*spec.Node{plain}, Requests: reqs(j, g, 0)})
	if len(res.Failures) != 1 {
		t.Fatalf("want one failure, got placements %+v failures %+v", res.Placements, res.Failures)
	}
	f := res.Failures[0].PlacementFailure
	if got, want := f.String(), "0/1 nodes fit: no node supports network mode bridge"; got != want {
		t.Errorf("failure %q, want %q", got, want)
	}
	if !f.Never() {
		t.Errorf("a missing network mode is permanent (Never), as a missing driver: %+v", f)
	}

	// Among two nodes, one lacking the mode: counted, not "no node".
	full := node("n3", 1000, 1024, "raw_exec")
	full.Attributes = map[string]string{spec.NetworkModeAttribute(spec.NetworkBridge): "true"}
	big := group("web", 4000, 64, "raw_exec")
	big.Network = g.Network
	bj := job("web", 50, big)
	res = Place(Input{Nodes: []*spec.Node{plain, full}, Requests: reqs(bj, big, 0)})
	if len(res.Failures) != 1 {
		t.Fatalf("want one failure, got %+v", res.Placements)
	}
	if got, want := res.Failures[0].PlacementFailure.String(), "missing network mode bridge on 1"; !strings.Contains(got, want) {
		t.Errorf("failure %q lacks %q", got, want)
	}

	// Host mode (the default) needs no attribute.
	h := group("web", 100, 64, "raw_exec")
	hj := job("web", 50, h)
	if res := Place(Input{Nodes: []*spec.Node{plain}, Requests: reqs(hj, h, 0)}); len(res.Placements) != 1 {
		t.Errorf("host-mode group not placed: %+v", res.Failures)
	}
}
