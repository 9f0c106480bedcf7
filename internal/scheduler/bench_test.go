package scheduler

import (
	"fmt"
	"strings"
	"testing"

	"github.com/drover-org/drover/internal/spec"
)

// benchInput is n nodes of 4000 MHz / 8192 MB with exec and raw_exec, and
// 1000 requests of 100 MHz / 128 MB.
func benchInput(n int) Input {
	var in Input
	for i := range n {
		in.Nodes = append(in.Nodes, node(fmt.Sprintf("node-%05d", i), 4000, 8192, "exec", "raw_exec"))
	}
	j := job("bench", 50, group("g", 100, 128, "exec"))
	for i := range 1000 {
		in.Requests = append(in.Requests, Request{Job: j, Group: j.Groups[0], Index: i})
	}
	return in
}

func benchPlace(b *testing.B, nodes int) {
	in := benchInput(nodes)
	if res := Place(in); len(res.Placements) != len(in.Requests) {
		b.Fatalf("placed %d of %d", len(res.Placements), len(in.Requests))
	}
	b.ReportAllocs()
	for b.Loop() {
		Place(in)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e3/float64(b.N*len(in.Requests)), "us/placement")
}

func BenchmarkPlace1000On5000Nodes(b *testing.B) { benchPlace(b, 5000) }

func BenchmarkPlace(b *testing.B) {
	for _, n := range []int{500, 5000, 10000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) { benchPlace(b, n) })
	}
}

// constraintInput is n nodes of 4000 MHz / 8192 MB with node meta
// rack = r<i mod 50>, and one job of `instances` instances of 100 MHz /
// 128 MB constrained to half of the racks (r0..r24).
func constraintInput(n, instances int) Input {
	var in Input
	for i := range n {
		nd := node(fmt.Sprintf("node-%05d", i), 4000, 8192, "exec", "raw_exec")
		nd.Meta = map[string]string{"rack": fmt.Sprintf("r%d", i%50)}
		in.Nodes = append(in.Nodes, nd)
	}
	racks := make([]string, 25)
	for i := range racks {
		racks[i] = fmt.Sprintf("r%d", i)
	}
	j := job("bench", 50, group("g", 100, 128, "exec"))
	j.Constraints = []*spec.Constraint{{Attribute: "${meta.rack}", Operator: spec.OpSetContainsAny, Value: strings.Join(racks, ",")}}
	for i := range instances {
		in.Requests = append(in.Requests, Request{Job: j, Group: j.Groups[0], Index: i})
	}
	return in
}

// BenchmarkConstraintMatrix is shaped like Nomad's scheduler benchmark:
// nodes x instances per job, with a constraint that rules out half the
// nodes, without and with a spread over the rack. Each iteration is one
// whole Place call; us/placement divides by the instances placed. Each
// call starts from scratch: see BenchmarkConstraintMatrixCached for the
// leader's steady state.
func BenchmarkConstraintMatrix(b *testing.B) { constraintMatrix(b, false) }

// BenchmarkConstraintMatrixCached is the same with a Cache kept across
// the calls, as the leader keeps one across its passes: each call places
// the same instances on the same cluster, so it pays for its placements
// and not for reading the cluster again.
func BenchmarkConstraintMatrixCached(b *testing.B) { constraintMatrix(b, true) }

func constraintMatrix(b *testing.B, cached bool) {
	for _, spread := range []bool{false, true} {
		for _, n := range []int{500, 1000, 5000, 10000} {
			for _, k := range []int{50, 300, 1200} {
				b.Run(fmt.Sprintf("spread=%v/nodes=%d/instances=%d", spread, n, k), func(b *testing.B) {
					in := constraintInput(n, k)
					if spread {
						j := in.Requests[0].Job
						j.Groups[0].Count = k
						j.Spreads = []*spec.Spread{{Attribute: "${meta.rack}"}}
					}
					if cached {
						in.Cache = NewCache()
					}
					res := Place(in)
					if len(res.Placements) != k {
						b.Fatalf("placed %d of %d: %v", len(res.Placements), k, res.Failures)
					}
					perRack := map[int]int{}
					for _, p := range res.Placements {
						var i int
						fmt.Sscanf(p.NodeID, "node-%d", &i)
						if i%50 >= 25 {
							b.Fatalf("placed on %s, rack r%d", p.NodeID, i%50)
						}
						perRack[i%50]++
					}
					if spread && k >= 50 {
						for r := range 25 {
							if want := k / 25; perRack[r] < want || perRack[r] > want+1 {
								b.Fatalf("rack r%d holds %d of %d instances, want %d or %d", r, perRack[r], k, want, want+1)
							}
						}
					}
					b.ReportAllocs()
					for b.Loop() {
						Place(in)
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e3/float64(b.N*k), "us/placement")
				})
			}
		}
	}
}

// BenchmarkLeaderPasses is the leader's pattern: each pass places a new
// job of 50 instances on the cluster the earlier passes filled, whose
// placements are now allocs; every 20 passes the cluster is emptied. With
// a Cache (as the leader keeps) a pass pays for the allocs it reads and
// the nodes whose use changed; without one it reads the whole cluster.
func BenchmarkLeaderPasses(b *testing.B) {
	for _, cached := range []bool{false, true} {
		for _, n := range []int{500, 10000} {
			b.Run(fmt.Sprintf("cached=%v/nodes=%d", cached, n), func(b *testing.B) {
				base := constraintInput(n, 1)
				var cache *Cache
				if cached {
					cache = NewCache()
				}
				var allocs []*spec.Alloc
				placed := 0
				pass := 0
				for b.Loop() {
					if pass%20 == 0 {
						allocs = nil
					}
					j := job(fmt.Sprintf("job-%d", pass), 50, group("g", 100, 128, "exec"))
					j.Scoring = spec.ScoreBinpack
					j.Constraints = base.Requests[0].Job.Constraints
					in := Input{Nodes: base.Nodes, Allocs: allocs, Requests: reqs(j, j.Groups[0], seq(50)...), Cache: cache}
					res := Place(in)
					for i, p := range res.Placements {
						a := alloc(fmt.Sprintf("%d-%d", pass, i), p.NodeID, 100, 128, spec.ClientRunning)
						a.Job, a.Group = j.Name, "g"
						allocs = append(allocs, a)
					}
					placed += len(res.Placements)
					pass++
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e3/float64(placed), "us/placement")
			})
		}
	}
}

// BenchmarkPlaceNewShape is a call of the leader's, with its Cache warm
// (node index built), for one instance of a job whose group shape the
// Cache has not seen (its memory differs from the previous 4,095 calls'),
// so the call walks the Cache's use order (coldPick) where it used to
// build the group's heaps: the scheduler's share of a cold placement, as
// the node count grows from 500 to 10,000. shape=seen is
// the same call for a shape the Cache holds. The placements are not
// kept: every call sees the same cluster.
func BenchmarkPlaceNewShape(b *testing.B) {
	for _, n := range []int{500, 10000} {
		for _, shape := range []string{"new", "seen"} {
			b.Run(fmt.Sprintf("nodes=%d/shape=%s", n, shape), func(b *testing.B) {
				nodes := benchInput(n).Nodes
				cache := NewCache()
				call := func(i, mem int) {
					j := job(fmt.Sprintf("job-%d", i), 50, group("g", 100, mem, "exec"))
					j.Scoring = spec.ScoreBinpack
					if res := Place(Input{Nodes: nodes, Requests: reqs(j, j.Groups[0], 0), Cache: cache}); len(res.Placements) != 1 {
						b.Fatalf("placed %d of 1: %v", len(res.Placements), res.Failures)
					}
				}
				call(0, 128)
				b.ReportAllocs()
				for i := 1; b.Loop(); i++ {
					mem := 128
					if shape == "new" {
						mem += i % 4096
					}
					call(i, mem)
				}
			})
		}
	}
}

// BenchmarkPlaceNewShapePreferences is BenchmarkPlaceNewShape for a
// group with a spread over the nodes' racks (4 of them) or an affinity
// for one rack: with a Cache, its first placements walk the use order
// too, bounding the affinity and spread terms, where they used to score
// every node.
func BenchmarkPlaceNewShapePreferences(b *testing.B) {
	for _, n := range []int{500, 10000} {
		for _, pref := range []string{"spread", "affinity"} {
			b.Run(fmt.Sprintf("nodes=%d/%s", n, pref), func(b *testing.B) {
				nodes := benchInput(n).Nodes
				for i, nd := range nodes {
					nd.Meta = map[string]string{"rack": fmt.Sprintf("r%d", i%4)}
				}
				cache := NewCache()
				call := func(i, mem int) {
					j := job(fmt.Sprintf("job-%d", i), 50, group("g", 100, mem, "exec"))
					j.Scoring = spec.ScoreBinpack
					if pref == "spread" {
						j.Spreads = []*spec.Spread{{Attribute: "${meta.rack}"}}
					} else {
						j.Affinities = []*spec.Affinity{{Attribute: "${meta.rack}", Value: "r1", Weight: 50}}
					}
					if res := Place(Input{Nodes: nodes, Requests: reqs(j, j.Groups[0], 0), Cache: cache}); len(res.Placements) != 1 {
						b.Fatalf("placed %d of 1: %v", len(res.Placements), res.Failures)
					}
				}
				call(0, 128)
				b.ReportAllocs()
				for i := 1; b.Loop(); i++ {
					call(i, 128+i%4096)
				}
			})
		}
	}
}

// BenchmarkPlaceNewShapeLiveAllocs is BenchmarkPlaceNewShapePreferences
// on a cluster at work: 10,000 nodes in 4 racks holding 50,000 live
// allocs, 100 instances of each of 500 jobs. Each call is the leader's
// with nothing changed since its previous one (Input.Changed), for one
// instance of one of those jobs in a shape the Cache has not seen (its
// memory differs from the previous 4,095 calls'): without preferences,
// with an affinity for one rack, or with a spread over the racks, where
// the group's 100 live instances are what the spread counts. Each job
// is placed once before the timing starts: a Cache counts a group's
// instances per value on the group's first spread placement (O(the
// group's allocs)), then keeps the counts as allocs change.
func BenchmarkPlaceNewShapeLiveAllocs(b *testing.B) {
	const nodes, jobs, instances = 10_000, 500, 100
	for _, pref := range []string{"none", "affinity", "spread"} {
		b.Run(fmt.Sprintf("allocs=%d/%s", jobs*instances, pref), func(b *testing.B) {
			in := benchInput(nodes)
			for i, nd := range in.Nodes {
				nd.Meta = map[string]string{"rack": fmt.Sprintf("r%d", i%4)}
			}
			var allocs []*spec.Alloc
			for k := range jobs * instances {
				a := alloc(fmt.Sprintf("alloc-%06d", k), in.Nodes[k%nodes].ID, 100, 128, spec.ClientRunning)
				a.Job, a.Group = fmt.Sprintf("job-%03d", k%jobs), "g"
				allocs = append(allocs, a)
			}
			cache := NewCache()
			call := func(i, mem int) {
				j := job(fmt.Sprintf("job-%03d", i%jobs), 50, group("g", 100, mem, "exec"))
				j.Scoring = spec.ScoreBinpack
				switch pref {
				case "spread":
					j.Spreads = []*spec.Spread{{Attribute: "${meta.rack}"}}
				case "affinity":
					j.Affinities = []*spec.Affinity{{Attribute: "${meta.rack}", Value: "r1", Weight: 50}}
				}
				place := Input{Nodes: in.Nodes, Requests: reqs(j, j.Groups[0], instances), Cache: cache, Changed: &Changes{}}
				if !cache.Warm() {
					place.Allocs, place.Changed = allocs, nil
				}
				if res := Place(place); len(res.Placements) != 1 {
					b.Fatalf("placed %d of 1: %v", len(res.Placements), res.Failures)
				}
			}
			for i := range jobs {
				call(i, 128)
			}
			b.ReportAllocs()
			for i := 1; b.Loop(); i++ {
				call(i, 128+i%4096)
			}
		})
	}
}

// BenchmarkIndexAfterAJoin is the node index built when one node joins a
// cluster of 10,000 whose node list is not in ID order (the store lists
// nodes by name): from the previous index (prev=yes: only the new node is
// sorted in) and from scratch (prev=no: every node sorted by ID).
func BenchmarkIndexAfterAJoin(b *testing.B) {
	nodes := make([]*spec.Node, 10_001)
	for i := range nodes {
		// IDs in another order than the list's.
		nodes[i] = &spec.Node{ID: fmt.Sprintf("%08x", uint32(i)*2654435761), Name: fmt.Sprintf("n%05d", i), Status: spec.NodeReady, Drivers: []string{"exec"}}
	}
	before := newIndex(nodes[:10_000], nil)
	for _, prev := range []string{"yes", "no"} {
		b.Run("prev="+prev, func(b *testing.B) {
			for b.Loop() {
				if prev == "yes" {
					newIndex(nodes, before)
				} else {
					newIndex(nodes, nil)
				}
			}
		})
	}
}

// BenchmarkPassesWhileNodesJoin is the leader's call when one node has
// joined a cluster of 10,000 since its previous pass and nothing is to
// be placed: the calls of a control plane that agents are registering
// with. Every thousandth call places one instance (a job arrives).
func BenchmarkPassesWhileNodesJoin(b *testing.B) {
	const size = 10_000
	var nodes []*spec.Node
	for i := range size + 200_000 {
		nodes = append(nodes, node(fmt.Sprintf("%08x", uint32(i)*2654435761), 4000, 8192, "exec"))
	}
	cache := NewCache()
	j := job("arrives", 1, group("g", 100, 128, "exec"))
	place := reqs(j, j.Groups[0], 0)
	Place(Input{Nodes: nodes[:size], Requests: place, Cache: cache})
	n := size
	for b.Loop() {
		n++
		in := Input{Nodes: nodes[:n], Cache: cache}
		if n%1000 == 0 {
			in.Requests = place
		}
		Place(in)
	}
}
