package scheduler

import (
	"fmt"
	"slices"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/drover-org/drover/internal/spec"
)

// TestColdPickMatchesReference drives the use order (coldPick) where it
// is hard: up to 40 nodes in a few capacity classes, many of them with
// the same use (ties, one bucket), the fullest ones often without room or
// failing a constraint (infeasible heads), avoided nodes, and the use
// changing between calls of a Cache kept across them (placements become
// allocs, allocs end). Every call must place exactly as the obvious
// placer does, and the Cache's use order must hold every eligible node
// in the bucket of its use. Groups have affinities and spreads (the
// group's own instances among the allocs, so spreads start uneven).
func TestColdPickMatchesReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		capacities := []spec.Resources{{CPU: 1000, MemoryMB: 1000}, {CPU: 2000, MemoryMB: 1000, DiskMB: 500}, {CPU: 4000, MemoryMB: 8000, DiskMB: 0}, {CPU: 0, MemoryMB: 2000}}
		capacities = capacities[:rapid.IntRange(1, len(capacities)).Draw(t, "classes")]
		var in Input
		nNodes := rapid.IntRange(1, 40).Draw(t, "nodes")
		for _, i := range rapid.Permutation(seq(nNodes)).Draw(t, "nodeOrder") {
			n := node(fmt.Sprintf("n%02d", i), 0, 0, "exec")
			n.Resources = rapid.SampledFrom(capacities).Draw(t, "capacity")
			if rapid.IntRange(0, 3).Draw(t, "linux") > 0 {
				n.Attributes = map[string]string{"os": "linux"}
			}
			if rack := rapid.SampledFrom([]string{"", "r0", "r1", "r2"}).Draw(t, "rack"); rack != "" {
				n.Meta = map[string]string{"rack": rack}
			}
			if rapid.IntRange(0, 9).Draw(t, "docker") == 0 {
				n.Drivers = []string{"docker"}
			}
			in.Nodes = append(in.Nodes, n)
		}
		use := rapid.SampledFrom([]int{0, 100, 250, 500, 1000})
		for i := range rapid.IntRange(0, 30).Draw(t, "allocs") {
			a := alloc(fmt.Sprintf("a%02d", i), fmt.Sprintf("n%02d", rapid.IntRange(0, nNodes-1).Draw(t, "allocNode")), use.Draw(t, "allocCPU"), use.Draw(t, "allocMem"), spec.ClientRunning)
			a.Resources.DiskMB = use.Draw(t, "allocDisk")
			a.Job, a.Group = "other", "g"
			if rapid.IntRange(0, 3).Draw(t, "ours") == 0 {
				a.Job = rapid.SampledFrom([]string{"j0", "j1", "j2"}).Draw(t, "allocJob") // a step's group: its spreads count it
			}
			in.Allocs = append(in.Allocs, a)
		}
		cache := NewCache()
		for step := range rapid.IntRange(1, 5).Draw(t, "steps") {
			j := job(fmt.Sprintf("j%d", step), 50)
			j.Scoring = rapid.SampledFrom([]spec.Scoring{spec.ScoreBinpack, spec.ScoreLeastLoaded}).Draw(t, "scoring")
			g := group("g", use.Draw(t, "needCPU"), use.Draw(t, "needMem"), "exec")
			g.Tasks[0].Resources.DiskMB = use.Draw(t, "needDisk")
			if rapid.Bool().Draw(t, "constrained") {
				g.Constraints = []*spec.Constraint{{Attribute: "${attr.os}", Operator: "=", Value: "linux"}}
			}
			// Affinities and spreads: cold picks bound their terms and
			// score the nodes they meet exactly.
			g.Affinities = genAffinities(t, "affinities")
			if rapid.Bool().Draw(t, "spread") {
				g.Spreads = []*spec.Spread{rapid.SampledFrom(spreadPool).Draw(t, "spreads")}
				if rapid.Bool().Draw(t, "spread2") {
					g.Spreads = append(g.Spreads, rapid.SampledFrom(spreadPool).Draw(t, "spreads2"))
				}
			}
			if rapid.Bool().Draw(t, "port") {
				g.Network = &spec.Network{Ports: []spec.Port{{Label: "p", Static: 8080}}}
			}
			g.Count = rapid.IntRange(1, coldPicks+2).Draw(t, "count")
			j.Groups = []*spec.Group{g}
			in.Requests = nil
			for idx := range g.Count {
				r := Request{Job: j, Group: g, Index: idx, Reason: "new instance"}
				if rapid.IntRange(0, 3).Draw(t, "avoid") == 0 {
					r.AvoidNode = fmt.Sprintf("n%02d", rapid.IntRange(0, nNodes-1).Draw(t, "avoidNode"))
				}
				in.Requests = append(in.Requests, r)
			}
			in.Jobs = map[string]*spec.Job{j.Name: j}
			want, _ := referencePlace(in)
			cached := in
			cached.Cache = cache
			got := Place(cached)
			if diff := gocmp.Diff(want, got.Placements); diff != "" {
				t.Fatalf("step %d: placements differ from the reference (-want +got):\n%s", step, diff)
			}
			checkUseOrder(t, cache.s)
			// The placements run; some allocs end.
			var next []*spec.Alloc
			for _, a := range in.Allocs {
				if rapid.IntRange(0, 4).Draw(t, "ends") > 0 {
					next = append(next, a)
				}
			}
			for i, p := range got.Placements {
				a := alloc(fmt.Sprintf("s%d-%d", step, i), p.NodeID, 0, 0, spec.ClientRunning)
				a.Job, a.Group, a.Resources, a.Ports = p.Request.Job.Name, p.Request.Group.Name, p.Request.Group.Resources(), p.Ports
				next = append(next, a)
			}
			in.Allocs = next
		}
	})
}

// checkUseOrder fails unless s's use order, when built, holds each
// eligible node once, in the bucket of its use, by ID, and every tree's
// summaries are those of its buckets.
func checkUseOrder(t *rapid.T, s *state) {
	if s == nil || s.order == nil {
		return
	}
	o := s.order
	for _, n := range s.all {
		b := o.at[n.idx]
		if n.cls == nil {
			if b != nil {
				t.Fatalf("node %s is in no class but in the use order", n.node.ID)
			}
			continue
		}
		if b == nil || b.used != useKeyOf(n.used) || !slices.Contains(b.nodes, n.idx) {
			t.Fatalf("node %s (use %+v) is not in the bucket of its use", n.node.ID, n.used)
		}
	}
	for _, trees := range o.byClass {
		for _, tr := range trees {
			for i, b := range tr.slots {
				if b == nil {
					continue
				}
				if tr.buckets[b.used] != b || int(b.slot) != i || len(b.nodes) == 0 {
					t.Fatalf("bucket %+v at slot %d: not the tree's", b.used, i)
				}
				if !slices.IsSortedFunc(b.nodes, func(x, y int32) int { return int(s.rank[x]) - int(s.rank[y]) }) {
					t.Fatalf("bucket %+v: nodes not by ID", b.used)
				}
				for _, idx := range b.nodes {
					if o.at[idx] != b {
						t.Fatalf("node %s listed in a bucket it is not at", s.all[idx].node.ID)
					}
				}
			}
			for p := len(tr.slots) - 1; p >= 1; p-- {
				if want := join(tr.agg[2*p], tr.agg[2*p+1]); tr.agg[p] != want {
					t.Fatalf("summary %d is %+v, its children make %+v", p, tr.agg[p], want)
				}
			}
		}
	}
}
