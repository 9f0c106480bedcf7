package scheduler

import (
	"fmt"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/drover-org/drover/internal/spec"
)

// Cases a review of the cold path found or asked for. Each holds a call
// with a Cache (cold picks, kept orders and heaps) to the same call
// without one (heaps built afresh), which the package promises are the
// same.
func placeBothWays(in Input) (fresh, cached Result) {
	fresh = Place(in)
	c := in
	c.Cache = NewCache()
	return fresh, Place(c)
}

// Preemption frees room on a node that an earlier pick of the call found
// full: the heaps had dropped such a node for the rest of the call, where
// the cold walk saw the room; now the heaps take it back. Crowded nodes of
// low-priority work, groups that may preempt, avoided nodes, per_alloc
// volumes, distinct_hosts; and the low-priority group placing after the
// evictions, with a spread over racks that must not count its evicted
// instances (a Cache counts them per value as they live, and takes the
// evicted ones off for the call).
func TestPreemptionSameWithAndWithoutCache(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var in Input
		nNodes := rapid.IntRange(1, 8).Draw(t, "nodes")
		for i := range nNodes {
			n := node(fmt.Sprintf("n%02d", i), 2000, 2000, "exec")
			for v := range 3 {
				if rapid.Bool().Draw(t, "vol") {
					n.HostVolumes = append(n.HostVolumes, spec.HostVolume{Name: fmt.Sprintf("data[%d]", v)})
				}
			}
			if rack := rapid.SampledFrom([]string{"", "r0", "r1", "r2"}).Draw(t, "rack"); rack != "" {
				n.Meta = map[string]string{"rack": rack}
			}
			in.Nodes = append(in.Nodes, n)
		}
		in.Jobs = map[string]*spec.Job{"low": job("low", 0)}
		size := rapid.SampledFrom([]int{250, 500, 1000, 1500, 2000})
		for i := range rapid.IntRange(0, 16).Draw(t, "allocs") {
			a := alloc(fmt.Sprintf("a%02d", i), fmt.Sprintf("n%02d", rapid.IntRange(0, nNodes-1).Draw(t, "allocNode")), size.Draw(t, "cpu"), 100, spec.ClientRunning)
			a.Job, a.Group = "low", "g"
			in.Allocs = append(in.Allocs, a)
		}
		yes := true
		for ji := range rapid.IntRange(1, 2).Draw(t, "jobs") {
			g := group("g", size.Draw(t, "need"), 100, "exec")
			if rapid.IntRange(0, 3).Draw(t, "perAlloc") == 0 {
				g.Volumes = []*spec.VolumeRequest{{Name: "d", Type: spec.VolumeHost, Source: "data", PerAlloc: true}}
			}
			if rapid.IntRange(0, 3).Draw(t, "distinct") == 0 {
				g.Constraints = []*spec.Constraint{{Operator: spec.OpDistinctHosts}}
			}
			g.Count = rapid.IntRange(1, 6).Draw(t, "count")
			j := job(fmt.Sprintf("j%d", ji), 50, g)
			j.Scoring = rapid.SampledFrom([]spec.Scoring{spec.ScoreBinpack, spec.ScoreLeastLoaded}).Draw(t, "scoring")
			j.Preempt = &yes
			in.Jobs[j.Name] = j
			for idx := range g.Count {
				r := Request{Job: j, Group: g, Index: idx}
				if rapid.Bool().Draw(t, "avoid") {
					r.AvoidNode = fmt.Sprintf("n%02d", rapid.IntRange(0, nNodes-1).Draw(t, "avoidNode"))
				}
				in.Requests = append(in.Requests, r)
			}
		}
		if rapid.Bool().Draw(t, "lowPlaces") {
			g := group("g", size.Draw(t, "lowNeed"), 100, "exec")
			g.Spreads = []*spec.Spread{rapid.SampledFrom(spreadPool[:3]).Draw(t, "lowSpread")}
			g.Count = rapid.IntRange(1, 4).Draw(t, "lowCount")
			low := job("low", 0, g)
			in.Jobs["low"] = low
			for idx := range g.Count {
				in.Requests = append(in.Requests, Request{Job: low, Group: g, Index: 100 + idx})
			}
		}
		fresh, cached := placeBothWays(in)
		if diff := gocmp.Diff(fresh, cached); diff != "" {
			t.Fatalf("with a Cache the result differs (-without +with):\n%s", diff)
		}
	})
}

// Two nodes whose capacities differ only in memory_max share a use order:
// a change of the second one's use found no tree for it (a nil
// dereference in the leader's pass).
func TestNodesDifferingOnlyInMemoryMax(t *testing.T) {
	a, b := node("a", 1000, 1000, "exec"), node("b", 1000, 1000, "exec")
	b.Resources.MemoryMaxMB = 2000
	g := group("g", 100, 100, "exec")
	j := job("j", 50, g)
	in := Input{Nodes: []*spec.Node{a, b}, Requests: reqs(j, g, 0), Cache: NewCache()}
	Place(in)
	in.Allocs = []*spec.Alloc{alloc("x", "b", 100, 100, spec.ClientRunning)}
	if res := Place(in); len(res.Placements) != 1 {
		t.Fatalf("placed %d of 1: %v", len(res.Placements), res.Failures)
	}
}

// A cold pick leaves the call to the heaps when most nodes fail the
// group's constraint (it would check them one by one at every pick of
// every call) or when the nodes come in many capacities (it would walk
// every one's order): the result is the same, and a seen shape's next
// call finds its heaps in the Cache.
func TestColdPickLeavesHardCasesToTheHeaps(t *testing.T) {
	for _, c := range []struct {
		name     string
		capacity func(i int) int
		rare     bool
	}{
		{"a constraint few nodes meet", func(int) int { return 4000 }, true},
		{"many capacities", func(i int) int { return 2000 + 10*i }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var nodes []*spec.Node
			for i := range 300 {
				n := node(fmt.Sprintf("n%03d", i), c.capacity(i), c.capacity(i), "exec")
				n.Attributes = map[string]string{"rack": "r0"}
				if i >= 295 {
					n.Attributes["rack"] = "r1"
				}
				nodes = append(nodes, n)
			}
			g := group("g", 100, 100, "exec")
			if c.rare {
				g.Constraints = []*spec.Constraint{{Attribute: "${attr.rack}", Operator: "=", Value: "r1"}}
			}
			j := job("j", 50, g)
			j.Scoring = spec.ScoreBinpack
			cache := NewCache()
			var allocs []*spec.Alloc
			for call := range 3 {
				in := Input{Nodes: nodes, Allocs: allocs, Requests: reqs(j, g, call)}
				fresh := Place(in)
				in.Cache = cache
				got := Place(in)
				if diff := gocmp.Diff(fresh, got); diff != "" {
					t.Fatalf("call %d: with a Cache the result differs (-without +with):\n%s", call, diff)
				}
				if len(got.Placements) != 1 {
					t.Fatalf("call %d: placed %d of 1: %v", call, len(got.Placements), got.Failures)
				}
				p := got.Placements[0]
				allocs = append(allocs, &spec.Alloc{ID: fmt.Sprintf("a%d", call), NodeID: p.NodeID, Job: "j", Group: "g", Index: call,
					Resources: spec.Resources{CPU: 100, MemoryMB: 100}, DesiredStatus: spec.DesiredRun, Status: &spec.AllocStatus{ClientStatus: spec.ClientRunning}})
			}
		})
	}
}
