package scheduler

import (
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/drover-org/drover/internal/spec"
)

func draining(n *spec.Node) *spec.Node {
	n.Drain = &spec.DrainStrategy{StartedAt: time.Unix(100, 0)}
	return n
}

func ineligible(n *spec.Node) *spec.Node {
	n.Ineligible = true
	return n
}

// TestPlaceSkipsNodesOutOfScheduling: a draining or ineligible node takes
// no new instance, pinned or not, even when it is the best by score, and
// the failure says why.
func TestPlaceSkipsNodesOutOfScheduling(t *testing.T) {
	nodes := []*spec.Node{
		draining(node("n1", 4000, 8192, "exec")),
		ineligible(node("n2", 4000, 8192, "exec")),
		down(node("n3", 4000, 8192, "exec")),
		node("n4", 1000, 1024, "exec"),
	}
	web := job("web", 50, group("api", 600, 512, "exec"))
	webReqs := reqs(web, web.Groups[0], 0, 1)
	sys := job("agent", 50, group("g", 100, 64, "exec"))
	sys.Type = spec.JobSystem
	var pins []Request
	for i, n := range nodes {
		pins = append(pins, Request{Job: sys, Group: sys.Groups[0], Index: i, Node: n.ID})
	}
	tests := []struct {
		name     string
		in       Input
		want     Result
		wantText []string
	}{
		{
			name: "unpinned: only the small eligible node, then a failure with reasons",
			in:   Input{Nodes: nodes, Requests: webReqs},
			want: Result{
				Placements: []Placement{placed(webReqs[0], nodes[3])},
				Failures: []Failure{{Job: "web", Requests: webReqs[1:], PlacementFailure: spec.PlacementFailure{
					Group: "api", Missing: 1, NodesEvaluated: 4, Dimensions: []spec.DimensionFailure{
						{Dimension: "status", Nodes: 1},
						{Dimension: spec.DimensionDraining, Nodes: 1},
						{Dimension: spec.DimensionIneligible, Nodes: 1},
						{Dimension: "cpu", Nodes: 1, Need: 600, MostFree: 400, Unit: "MHz"},
					}, Hints: []string{"fits on 1 node if cpu <= 400 MHz"}}}},
			},
			wantText: []string{"0/4 nodes fit: not ready on 1; draining on 1; ineligible on 1; cpu exhausted on 1 (need 600 MHz, most free 400 MHz); hint: fits on 1 node if cpu <= 400 MHz"},
		},
		{
			name: "pinned: each node out of scheduling says why",
			in:   Input{Nodes: nodes, Requests: pins},
			want: Result{
				Placements: []Placement{placed(pins[3], nodes[3])},
				Failures: []Failure{{Job: "agent", Requests: pins[:3], PlacementFailure: spec.PlacementFailure{
					Group: "g", Missing: 3, NodesEvaluated: 3, Dimensions: []spec.DimensionFailure{
						{Dimension: "status", Nodes: 1},
						{Dimension: spec.DimensionDraining, Nodes: 1},
						{Dimension: spec.DimensionIneligible, Nodes: 1},
					}}}},
			},
			wantText: []string{"0/3 nodes fit: not ready on 1; draining on 1; ineligible on 1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Place(tt.in)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("Place (-want +got):\n%s", diff)
			}
			var text []string
			for _, f := range got.Failures {
				text = append(text, f.PlacementFailure.String())
			}
			if diff := cmp.Diff(tt.wantText, text); diff != "" {
				t.Fatalf("failure text (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCacheKeepsNodesAcrossUsageReports: a node value that differs only
// in its usage report keeps the cached index (the same node states, now
// holding the new value); one whose eligibility changed does not.
func TestCacheKeepsNodesAcrossUsageReports(t *testing.T) {
	nodes := []*spec.Node{node("n1", 4000, 8192, "exec"), node("n2", 4000, 8192, "exec")}
	j := job("web", 50, group("api", 100, 128, "exec"))
	c := NewCache()
	first := Place(Input{Nodes: nodes, Requests: reqs(j, j.Groups[0], 0), Cache: c})
	if len(first.Placements) != 1 || first.Placements[0].NodeID != "n1" {
		t.Fatalf("first call: %+v", first)
	}
	s := c.s
	reported := *nodes[0]
	reported.Usage = &spec.NodeUsage{Tasks: spec.Usage{CPU: 3000, MemoryMB: 7000}}
	reported.ModifyIndex = 42
	next := []*spec.Node{&reported, nodes[1]}
	Place(Input{Nodes: next, Requests: reqs(j, j.Groups[0], 1), Cache: c})
	if c.s != s || c.s.all[0].node != &reported || c.nodes[0] != &reported {
		t.Fatal("a usage report made the cache build its index again, or kept the old node value")
	}
	drained := reported
	drained.Drain = &spec.DrainStrategy{}
	got := Place(Input{Nodes: []*spec.Node{&drained, nodes[1]}, Requests: reqs(j, j.Groups[0], 2), Cache: c})
	if c.s == s {
		t.Fatal("a drain kept the cached index")
	}
	if len(got.Placements) != 1 || got.Placements[0].NodeID != "n2" {
		t.Fatalf("with n1 draining: %+v, want n2", got)
	}
}

// TestSamePlacementSeesEveryField: changing any field of spec.Node but
// Usage and ModifyIndex makes a different node for placement, so a field
// added to spec.Node cannot be missed by the cache.
func TestSamePlacementSeesEveryField(t *testing.T) {
	base := spec.Node{
		ID: "n1", Name: "one", Address: "http://a:1", Attributes: map[string]string{"os": "linux"},
		Meta: map[string]string{"rack": "r1"}, Resources: spec.Resources{CPU: 1, MemoryMB: 1, DiskMB: 1},
		Drivers: []string{"exec"}, Status: spec.NodeReady, RegisterTime: time.Unix(5, 0),
		Drain: &spec.DrainStrategy{StartedAt: time.Unix(6, 0)},
	}
	ignored := map[string]bool{"Usage": true, "ModifyIndex": true}
	typ := reflect.TypeOf(base)
	for i := range typ.NumField() {
		f := typ.Field(i)
		other := base
		v := reflect.ValueOf(&other).Elem().Field(i)
		switch v.Kind() {
		case reflect.String:
			v.SetString(v.String() + "x")
		case reflect.Bool:
			v.SetBool(!v.Bool())
		case reflect.Int, reflect.Int64:
			v.SetInt(v.Int() + 1)
		case reflect.Map:
			v.Set(reflect.ValueOf(map[string]string{"other": "x"}))
		case reflect.Slice:
			switch f.Type {
			case reflect.TypeOf([]spec.HostVolume{}):
				v.Set(reflect.ValueOf([]spec.HostVolume{{Name: "data"}}))
			default:
				v.Set(reflect.ValueOf([]string{"docker"}))
			}
		case reflect.Pointer:
			v.Set(reflect.Zero(f.Type))
		case reflect.Struct:
			switch f.Type {
			case reflect.TypeOf(time.Time{}):
				v.Set(reflect.ValueOf(time.Unix(9, 0)))
			case reflect.TypeOf(spec.Resources{}):
				v.Set(reflect.ValueOf(spec.Resources{CPU: 2}))
			default:
				t.Fatalf("field %s of type %s: teach this test to change it", f.Name, f.Type)
			}
		default:
			t.Fatalf("field %s of kind %s: teach this test to change it", f.Name, v.Kind())
		}
		if got := samePlacement(&base, &other); got != ignored[f.Name] {
			t.Errorf("changing %s: samePlacement = %v, want %v", f.Name, got, ignored[f.Name])
		}
	}
	// A drain's strategy counts, not only whether there is one.
	other := base
	other.Drain = &spec.DrainStrategy{StartedAt: time.Unix(6, 0), Deadline: time.Unix(60, 0)}
	if samePlacement(&base, &other) {
		t.Error("a changed drain deadline is the same node for placement")
	}
}
