package spec

import "testing"

func TestNeverFits(t *testing.T) {
	tooBig := DimensionFailure{Dimension: "cpu", Nodes: 2, Need: 5000, MostFree: 100, Largest: 4000, Unit: "MHz"}
	busy := DimensionFailure{Dimension: "cpu", Nodes: 2, Need: 500, MostFree: 100, Unit: "MHz"}
	for _, tc := range []struct {
		name string
		f    PlacementFailure
		want bool
	}{
		{"every node too small", PlacementFailure{NodesEvaluated: 2, Dimensions: []DimensionFailure{tooBig}}, true},
		{"too small or without the driver", PlacementFailure{NodesEvaluated: 3, Dimensions: []DimensionFailure{{Dimension: DriverDimension("podman"), Nodes: 1}, tooBig}}, true},
		{"outside the datacenters", PlacementFailure{NodesEvaluated: 1, Dimensions: []DimensionFailure{{Dimension: DimensionDatacenter + "dc9", Nodes: 1}}}, true},
		{"full, not small", PlacementFailure{NodesEvaluated: 2, Dimensions: []DimensionFailure{busy}}, false},
		{"one node only full", PlacementFailure{NodesEvaluated: 4, Dimensions: []DimensionFailure{tooBig, busy}}, false},
		{"a node down may come back", PlacementFailure{NodesEvaluated: 3, Dimensions: []DimensionFailure{{Dimension: DimensionNotReady, Nodes: 1}, tooBig}}, false},
		{"constraints depend", PlacementFailure{NodesEvaluated: 1, Dimensions: []DimensionFailure{{Dimension: "constraint distinct_hosts", Nodes: 1}}}, false},
		{"no nodes at all", PlacementFailure{}, false},
	} {
		if got := tc.f.Never(); got != tc.want {
			t.Errorf("%s: Never() = %v, want %v (%s)", tc.name, got, tc.want, tc.f)
		}
	}
	if got := tooBig.String(); got != "cpu too small on 2 (need 5000 MHz, the largest has 4000 MHz in all)" {
		t.Errorf("too small reads %q", got)
	}
	if got := busy.String(); got != "cpu exhausted on 2 (need 500 MHz, most free 100 MHz)" {
		t.Errorf("exhausted reads %q", got)
	}
}
