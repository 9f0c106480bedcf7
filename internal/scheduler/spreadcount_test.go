package scheduler

import (
	"fmt"
	"slices"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/drover-org/drover/internal/spec"
)

// TestSpreadTiesAndChurnMatchReference holds groups with spreads to the
// obvious placer where two paths could part: exact ties, and a Cache's
// counts of the groups' live instances as allocs come and go.
//
// Ties: the nodes have capacities of 1000 and uses in tenths of them, so
// many base scores are sums like 0.1 + 0.2 (0.30000000000000004) against
// 0.3 + 0, which differ in the last place and become equal once a
// spread's term (such as +1) is added. The heaps order a spread
// partition by the score before that term; the order (beats, and the
// reference) must be the same on every path.
//
// Churn: a sequence of calls with one Cache told every alloc and one
// told only what changed: between calls the placements become allocs,
// allocs of the same groups appear on other nodes, end (removed, or a
// terminal value), report a new status, or are freed by the plan, and a
// node may change its rack. Each call, with either Cache and without
// one, must place exactly as the reference does.
func TestSpreadTiesAndChurnMatchReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		capacities := []spec.Resources{{CPU: 1000, MemoryMB: 1000}, {CPU: 1000, MemoryMB: 1000, DiskMB: 1000}, {CPU: 2000, MemoryMB: 1000}}
		capacities = capacities[:rapid.IntRange(1, len(capacities)).Draw(t, "capacities")]
		var in Input
		nNodes := rapid.IntRange(2, 24).Draw(t, "nodes")
		ids := func(label string) string { return fmt.Sprintf("n%02d", rapid.IntRange(0, nNodes-1).Draw(t, label)) }
		for _, i := range rapid.Permutation(seq(nNodes)).Draw(t, "nodeOrder") {
			n := node(fmt.Sprintf("n%02d", i), 0, 0, "exec")
			n.Resources = rapid.SampledFrom(capacities).Draw(t, "capacity")
			if rack := rapid.SampledFrom([]string{"", "r0", "r1", "r2"}).Draw(t, "rack"); rack != "" {
				n.Meta = map[string]string{"rack": rack}
			}
			if rapid.IntRange(0, 3).Draw(t, "linux") > 0 {
				n.Attributes = map[string]string{"os": "linux"}
			}
			in.Nodes = append(in.Nodes, n)
		}
		tenth := rapid.SampledFrom([]int{0, 100, 200, 300, 400})
		jobs := []string{"j0", "j1"}
		newAlloc := func(id, nodeID string) *spec.Alloc {
			a := alloc(id, nodeID, tenth.Draw(t, "allocCPU"), tenth.Draw(t, "allocMem"), spec.ClientRunning)
			a.Job, a.Group = "other", "g"
			if rapid.Bool().Draw(t, "ours") {
				a.Job = rapid.SampledFrom(jobs).Draw(t, "allocJob") // counted by the spreads
			}
			return a
		}
		// Use of the same total split differently between cpu and memory:
		// equal scores in exact arithmetic, not always in floats.
		level := rapid.IntRange(1, 6).Draw(t, "level")
		for i, n := range in.Nodes {
			if rapid.IntRange(0, 3).Draw(t, "split") > 0 {
				cpu := 100 * rapid.IntRange(0, level).Draw(t, "splitCPU")
				a := alloc(fmt.Sprintf("l%02d", i), n.ID, cpu, 100*level-cpu, spec.ClientRunning)
				a.Job, a.Group = "other", "g"
				in.Allocs = append(in.Allocs, a)
			}
		}
		for i := range rapid.IntRange(0, 20).Draw(t, "allocs") {
			in.Allocs = append(in.Allocs, newAlloc(fmt.Sprintf("a%02d", i), ids("allocNode")))
		}
		cache, told := NewCache(), NewCache()
		var prev []*spec.Alloc // what told's previous call had
		for step := range rapid.IntRange(1, 6).Draw(t, "steps") {
			// The same groups step after step (their live instances are
			// the Cache's counts), each time with another shape.
			j := job(rapid.SampledFrom(jobs).Draw(t, "job"), 50)
			j.Scoring = rapid.SampledFrom([]spec.Scoring{spec.ScoreBinpack, spec.ScoreLeastLoaded}).Draw(t, "scoring")
			g := group("g", tenth.Draw(t, "needCPU"), tenth.Draw(t, "needMem"), "exec")
			if rapid.IntRange(0, 3).Draw(t, "disk") == 0 {
				g.Tasks[0].Resources.DiskMB = tenth.Draw(t, "needDisk")
			}
			g.Affinities = genAffinities(t, "affinities")
			g.Spreads = []*spec.Spread{rapid.SampledFrom(spreadPool).Draw(t, "spreads")}
			if rapid.Bool().Draw(t, "spread2") {
				g.Spreads = append(g.Spreads, rapid.SampledFrom(spreadPool).Draw(t, "spreads2"))
			}
			g.Count = rapid.IntRange(1, coldPicks+3).Draw(t, "count")
			j.Groups = []*spec.Group{g}
			in.Requests = nil
			for idx := range g.Count {
				r := Request{Job: j, Group: g, Index: idx, Reason: "new instance"}
				if rapid.IntRange(0, 5).Draw(t, "avoid") == 0 {
					r.AvoidNode = ids("avoidNode")
				}
				in.Requests = append(in.Requests, r)
			}
			in.Jobs = map[string]*spec.Job{j.Name: j}
			in.Freed = map[string]bool{}
			for _, a := range in.Allocs {
				if rapid.IntRange(0, 7).Draw(t, "freed") == 0 {
					in.Freed[a.ID] = true
				}
			}

			want, _ := referencePlace(in)
			fresh := Place(in)
			if diff := gocmp.Diff(want, fresh.Placements); diff != "" {
				t.Fatalf("step %d, no Cache: placements differ from the reference (-want +got):\n%s", step, diff)
			}
			cached := in
			cached.Cache = cache
			if diff := gocmp.Diff(want, Place(cached).Placements); diff != "" {
				t.Fatalf("step %d, a Cache: placements differ from the reference (-want +got):\n%s", step, diff)
			}
			checkUseOrder(t, cache.s)
			delta := in
			delta.Cache = told
			if told.Warm() {
				delta.Allocs, delta.Changed = nil, changesOf(prev, in.Allocs)
			}
			if diff := gocmp.Diff(want, Place(delta).Placements); diff != "" {
				t.Fatalf("step %d, a Cache told what changed: placements differ from the reference (-want +got):\n%s", step, diff)
			}
			prev = in.Allocs

			// Churn.
			var next []*spec.Alloc
			for _, a := range in.Allocs {
				switch rapid.IntRange(0, 6).Draw(t, "churn") {
				case 0: // gone
				case 1: // ended: a terminal value
					c := *a
					c.Status = &spec.AllocStatus{ClientStatus: spec.ClientComplete}
					next = append(next, &c)
				case 2: // a status report: a new value, the same use
					c := *a
					c.Status = &spec.AllocStatus{ClientStatus: spec.ClientRunning}
					next = append(next, &c)
				default:
					next = append(next, a)
				}
			}
			for i, p := range want {
				a := alloc(fmt.Sprintf("s%d-%d", step, i), p.NodeID, 0, 0, spec.ClientRunning)
				a.Job, a.Group, a.Resources = p.Request.Job.Name, p.Request.Group.Name, p.Request.Group.Resources()
				next = append(next, a)
			}
			for i := range rapid.IntRange(0, 4).Draw(t, "added") {
				next = append(next, newAlloc(fmt.Sprintf("b%d-%d", step, i), ids("addedNode")))
			}
			in.Allocs = next
			if rapid.IntRange(0, 3).Draw(t, "rackChange") == 0 {
				in.Nodes = slices.Clone(in.Nodes)
				k := rapid.IntRange(0, nNodes-1).Draw(t, "changed")
				n := *in.Nodes[k]
				n.Meta = map[string]string{"rack": rapid.SampledFrom([]string{"r0", "r1", "r2", "r3"}).Draw(t, "newRack")}
				in.Nodes[k] = &n
			}
		}
	})
}
