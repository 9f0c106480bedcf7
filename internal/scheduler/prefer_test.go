package scheduler

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/drover-org/drover/internal/spec"
)

// racks returns n nodes of 4000 MHz / 8192 MB, node i in rack r<i mod k>.
func racks(n, k int) []*spec.Node {
	var out []*spec.Node
	for i := range n {
		nd := node(fmt.Sprintf("n%02d", i), 4000, 8192, "exec")
		nd.Meta = map[string]string{"rack": fmt.Sprintf("r%d", i%k)}
		out = append(out, nd)
	}
	return out
}

// perValue counts the placements per value of a node meta key.
func perValue(in Input, res Result, key string) map[string]int {
	byID := map[string]*spec.Node{}
	for _, n := range in.Nodes {
		byID[n.ID] = n
	}
	out := map[string]int{}
	for _, p := range res.Placements {
		out[byID[p.NodeID].Meta[key]]++
	}
	return out
}

func placeAll(j *spec.Job, nodes []*spec.Node, allocs ...*spec.Alloc) (Input, Result) {
	in := Input{Nodes: nodes, Allocs: allocs}
	for _, g := range j.Groups {
		in.Requests = append(in.Requests, reqs(j, g, seq(g.Count)...)...)
	}
	return in, Place(in)
}

func TestSpread(t *testing.T) {
	for _, tt := range []struct {
		name    string
		spread  spec.Spread
		count   int
		nodes   []*spec.Node
		binpack bool
		want    map[string]int
	}{
		{"even over three racks, against binpack", spec.Spread{Attribute: "${meta.rack}"}, 9, racks(6, 3), true,
			map[string]int{"r0": 3, "r1": 3, "r2": 3}},
		{"70/30", spec.Spread{Attribute: "${meta.rack}", Targets: []spec.SpreadTarget{{Value: "r0", Percent: 70}, {Value: "r1", Percent: 30}}}, 10, racks(6, 2), true,
			map[string]int{"r0": 7, "r1": 3}},
		{"a named target, the rest shared", spec.Spread{Attribute: "${meta.rack}", Targets: []spec.SpreadTarget{{Value: "r0", Percent: 50}}}, 8, racks(6, 3), false,
			map[string]int{"r0": 4, "r1": 2, "r2": 2}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			j := job("web", 50, group("api", 100, 128, "exec"))
			if tt.binpack {
				j.Scoring = spec.ScoreBinpack
			}
			j.Groups[0].Count = tt.count
			s := tt.spread
			j.Groups[0].Spreads = []*spec.Spread{&s}
			in, res := placeAll(j, tt.nodes)
			if len(res.Failures) > 0 {
				t.Fatalf("failures: %v", res.Failures)
			}
			if diff := cmp.Diff(tt.want, perValue(in, res, "rack")); diff != "" {
				t.Errorf("instances per rack (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSpreadCountsLiveInstances(t *testing.T) {
	j := job("web", 50, group("api", 100, 128, "exec"))
	j.Groups[0].Count = 4
	j.Groups[0].Spreads = []*spec.Spread{{Attribute: "${meta.rack}"}}
	nodes := racks(4, 2)
	// Two instances already run in r0: the next two go to r1.
	live := []*spec.Alloc{groupAlloc("x1", "n00"), groupAlloc("x2", "n02")}
	in := Input{Nodes: nodes, Allocs: live, Requests: reqs(j, j.Groups[0], 2, 3)}
	if got := perValue(in, Place(in), "rack"); !cmp.Equal(got, map[string]int{"r1": 2}) {
		t.Errorf("new instances per rack = %v, want both in r1", got)
	}
}

func TestAffinity(t *testing.T) {
	nodes := racks(4, 2)
	for _, tt := range []struct {
		name string
		aff  []*spec.Affinity
		want string // rack of every instance
	}{
		{"pulls to the rack", []*spec.Affinity{{Attribute: "${meta.rack}", Operator: "=", Value: "r1", Weight: 50}}, "r1"},
		{"negative pushes away", []*spec.Affinity{{Attribute: "${meta.rack}", Operator: "=", Value: "r0", Weight: -50}}, "r1"},
		{"the heavier wins", []*spec.Affinity{
			{Attribute: "${meta.rack}", Operator: "=", Value: "r0", Weight: 20},
			{Attribute: "${meta.rack}", Operator: "=", Value: "r1", Weight: 80},
		}, "r1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			j := job("web", 50, group("api", 100, 128, "exec"))
			j.Groups[0].Count = 3
			j.Groups[0].Affinities = tt.aff
			in, res := placeAll(j, nodes)
			if got := perValue(in, res, "rack"); !cmp.Equal(got, map[string]int{tt.want: 3}) {
				t.Errorf("instances per rack = %v, want all 3 in %s", got, tt.want)
			}
		})
	}
}

// TestScoring places one instance on nodes of different fullness: binpack
// takes the fullest that fits, least_loaded the emptiest by the mean of
// cpu and memory, and E-PVM the one whose exponential cost grows least. b
// is emptiest by the mean but its cpu is busy; E-PVM's convex cost weighs
// that, and it picks the evenly used c.
func TestScoring(t *testing.T) {
	nodes := []*spec.Node{node("a", 4000, 4000, "exec"), node("b", 4000, 4000, "exec"), node("c", 4000, 4000, "exec")}
	allocs := []*spec.Alloc{
		alloc("x1", "a", 3000, 3000, spec.ClientRunning), // fullest
		alloc("x2", "b", 2300, 0, spec.ClientRunning),    // cpu busy, memory free
		alloc("x3", "c", 1000, 1400, spec.ClientRunning), // emptiest by the mean
	}
	for scoring, want := range map[spec.Scoring]string{spec.ScoreBinpack: "a", spec.ScoreLeastLoaded: "b", spec.ScoreEPVM: "c"} {
		j := job("web", 50, group("api", 500, 500, "exec"))
		j.Scoring = scoring
		_, res := placeAll(j, nodes, allocs...)
		if len(res.Placements) != 1 || res.Placements[0].NodeID != want {
			t.Errorf("%s: placed %+v, want on %s", scoring, res.Placements, want)
		}
	}
}
