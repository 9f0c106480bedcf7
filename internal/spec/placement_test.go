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

// TestShownFailure: the words the API adds for the web UI are the ones
// drover status prints, and the failure they are made from is unchanged.
func TestShownFailure(t *testing.T) {
	tooBig := DimensionFailure{Dimension: "memory", Nodes: 2, Need: 9000, MostFree: 100, Largest: 4000, Unit: "MB"}
	busy := DimensionFailure{Dimension: "cpu", Nodes: 1, Need: 500, MostFree: 100, Unit: "MHz"}
	f := PlacementFailure{Group: "g", Missing: 2, NodesEvaluated: 3, Dimensions: []DimensionFailure{tooBig, busy}, Hints: []string{"fits on 1 node if cpu <= 100 MHz"}}
	s := f.Shown()
	if s.Text != "0/3 nodes fit: memory too small on 2 (need 9000 MB, the largest has 4000 MB in all); cpu exhausted on 1 (need 500 MHz, most free 100 MHz)" {
		t.Errorf("Text = %q", s.Text)
	}
	if s.NeverFits || len(s.Hints) != 1 || !s.Dimensions[0].TooSmall || s.Dimensions[1].TooSmall ||
		s.Dimensions[0].Text != tooBig.String() || s.Dimensions[1].Text != busy.String() {
		t.Errorf("Shown = %+v", s)
	}
	if f.Text != "" || f.Dimensions[0].Text != "" || f.Dimensions[0].TooSmall {
		t.Errorf("Shown changed the failure it was made from: %+v", f)
	}
	if never := (PlacementFailure{NodesEvaluated: 2, Dimensions: []DimensionFailure{tooBig}}).Shown(); !never.NeverFits {
		t.Errorf("every node too small: NeverFits = false")
	}
	if ShownFailures(nil) != nil {
		t.Errorf("ShownFailures(nil) is not nil")
	}
}
