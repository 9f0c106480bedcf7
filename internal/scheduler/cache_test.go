package scheduler

import (
	"fmt"
	"slices"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/drover-org/drover/internal/spec"
)

// TestCacheMatchesFresh runs a sequence of calls on a cluster that
// changes between them (placements become allocs, allocs end, requests
// change, sometimes a node changes), each call once with a Cache kept
// across the sequence and once without: the results must be the same.
func TestCacheMatchesFresh(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := genInput(t)
		if rapid.Bool().Draw(t, "plain") {
			// Groups without distinct_* have their heaps kept across
			// calls: make them common.
			noSpread := rapid.Bool().Draw(t, "noSpread")
			for _, r := range in.Requests {
				r.Job.Constraints = withoutDistinct(r.Job.Constraints)
				r.Group.Constraints = withoutDistinct(r.Group.Constraints)
				if noSpread {
					r.Group.Spreads = nil
				}
				for _, tk := range r.Group.Tasks {
					tk.Constraints = withoutDistinct(tk.Constraints)
				}
			}
		}
		cache, told := NewCache(), NewCache()
		reqs := in.Requests
		var prev []*spec.Alloc // what told's previous call had
		for step := range rapid.IntRange(1, 6).Draw(t, "steps") {
			fresh := Place(in)
			cached := in
			cached.Cache = cache
			got := Place(cached)
			if diff := gocmp.Diff(fresh, got); diff != "" {
				t.Fatalf("step %d: cached result differs (-fresh +cached):\n%s", step, diff)
			}
			// The same with a Cache told only what changed.
			delta := in
			delta.Cache = told
			if told.Warm() {
				delta.Allocs, delta.Changed = nil, changesOf(prev, in.Allocs)
			}
			got = Place(delta)
			if diff := gocmp.Diff(fresh, got); diff != "" {
				t.Fatalf("step %d: result with changes only differs (-fresh +cached):\n%s", step, diff)
			}
			prev = in.Allocs
			// The placements run now; some allocs end, some report a new
			// status (a new value), some finish; the plan frees others.
			next := in
			next.Allocs = nil
			for _, a := range in.Allocs {
				switch rapid.IntRange(0, 6).Draw(t, "ends") {
				case 0:
				case 1:
					c := *a
					c.Status = &spec.AllocStatus{ClientStatus: spec.ClientRunning}
					next.Allocs = append(next.Allocs, &c)
				case 2:
					c := *a
					c.Status = &spec.AllocStatus{ClientStatus: spec.ClientComplete}
					next.Allocs = append(next.Allocs, &c)
				default:
					next.Allocs = append(next.Allocs, a)
				}
			}
			next.Freed = map[string]bool{}
			for _, a := range next.Allocs {
				if rapid.IntRange(0, 5).Draw(t, "freed") == 0 {
					next.Freed[a.ID] = true
				}
			}
			for i, p := range fresh.Placements {
				a := alloc(fmt.Sprintf("s%d-%d", step, i), p.NodeID, 0, 0, spec.ClientRunning)
				a.Job, a.Group, a.Resources, a.Ports = p.Request.Job.Name, p.Request.Group.Name, p.Request.Group.Resources(), p.Ports
				next.Allocs = append(next.Allocs, a)
			}
			next.Requests = reqs[:rapid.IntRange(0, len(reqs)).Draw(t, "requests")]
			if len(in.Nodes) > 0 && rapid.IntRange(0, 2).Draw(t, "nodeChange") == 0 {
				next.Nodes = slices.Clone(in.Nodes)
				k := rapid.IntRange(0, len(next.Nodes)-1).Draw(t, "changed")
				n := *next.Nodes[k]
				switch rapid.IntRange(0, 8).Draw(t, "how") {
				case 0:
					n.Resources.CPU += 500
				case 1: // a usage report: the same node for placement
					n.Usage = &spec.NodeUsage{Tasks: spec.Usage{CPU: step + 1}}
					n.ModifyIndex++
				case 2:
					n.Ineligible = !n.Ineligible
				case 3:
					if n.Drain == nil {
						n.Drain = &spec.DrainStrategy{}
					} else {
						n.Drain = nil
					}
				case 4:
					n.Status = map[spec.NodeStatus]spec.NodeStatus{spec.NodeReady: spec.NodeDown, spec.NodeDown: spec.NodeReady}[n.Status]
				case 5:
					n.Meta = map[string]string{"rack": rapid.SampledFrom([]string{"r0", "r1", "r2"}).Draw(t, "newRack")}
				case 6:
					n.Drivers = genDrivers(t, "newDrivers", 0)
				case 7: // the node goes away; its allocs stay until the leader replaces them
					next.Nodes = slices.Delete(next.Nodes, k, k+1)
				case 8: // a node joins (or comes back), anywhere in the list
					id := fmt.Sprintf("n%02d", rapid.IntRange(0, 14).Draw(t, "joinID"))
					var homeless []string // the nodes of allocs, not in the list
					for _, a := range next.Allocs {
						if !slices.ContainsFunc(next.Nodes, func(x *spec.Node) bool { return x.ID == a.NodeID }) {
							homeless = append(homeless, a.NodeID)
						}
					}
					if len(homeless) > 0 && rapid.Bool().Draw(t, "comesBack") {
						id = rapid.SampledFrom(homeless).Draw(t, "backID")
					}
					n = *node(id, 2000, 2000, genDrivers(t, "joinDrivers", 0)...)
					if slices.ContainsFunc(next.Nodes, func(x *spec.Node) bool { return x.ID == n.ID }) {
						break
					}
					next.Nodes = slices.Insert(next.Nodes, k, &n)
				}
				if i := slices.IndexFunc(next.Nodes, func(x *spec.Node) bool { return x.ID == n.ID }); i >= 0 {
					next.Nodes[i] = &n
				}
			}
			in = next
		}
	})
}

// changesOf is what differs between two lists of allocs.
func changesOf(prev, next []*spec.Alloc) *Changes {
	c := &Changes{}
	was := map[string]*spec.Alloc{}
	for _, a := range prev {
		was[a.ID] = a
	}
	for _, a := range next {
		if was[a.ID] != a {
			c.Allocs = append(c.Allocs, a)
		}
		delete(was, a.ID)
	}
	for id := range was {
		c.Gone = append(c.Gone, id)
	}
	return c
}

func withoutDistinct(cs []*spec.Constraint) []*spec.Constraint {
	return slices.DeleteFunc(cs, func(c *spec.Constraint) bool { return c.Distinct() })
}

// TestCacheSeesNewAllocs: what a call placed, once it comes back as an
// alloc, weighs on the next call's choice as it would without a cache.
func TestCacheSeesNewAllocs(t *testing.T) {
	nodes := []*spec.Node{node("n1", 4000, 8192, "exec"), node("n2", 4000, 8192, "exec")}
	j := job("web", 50, group("api", 1000, 1024, "exec")) // least_loaded
	cache := NewCache()
	in := Input{Nodes: nodes, Requests: reqs(j, j.Groups[0], 0), Cache: cache}
	first := Place(in)
	if got := nodesOf(first); !slices.Equal(got, []string{"n1"}) {
		t.Fatalf("first call placed on %v, want n1", got)
	}
	a := alloc("a0", "n1", 1000, 1024, spec.ClientRunning)
	a.Job, a.Group = "web", "api"
	in.Allocs = []*spec.Alloc{a}
	in.Requests = reqs(j, j.Groups[0], 1)
	if got := nodesOf(Place(in)); !slices.Equal(got, []string{"n2"}) {
		t.Fatalf("second call placed on %v, want n2 (n1 holds the first instance)", got)
	}
	// And once it ends, n1 is the emptiest again (ties go to the smaller ID).
	in.Allocs = nil
	if got := nodesOf(Place(in)); !slices.Equal(got, []string{"n1"}) {
		t.Fatalf("third call placed on %v, want n1", got)
	}
}

// TestCacheKeepsTheUseOfNodesAcrossNodeChanges: when the nodes change
// (one goes down, one joins), the cache keeps each remaining node's use
// without recounting every alloc, and counts the allocs already on a
// node that joins (one that comes back after it was gone).
func TestCacheKeepsTheUseOfNodesAcrossNodeChanges(t *testing.T) {
	n1, n2 := node("n1", 4000, 8192, "exec"), node("n2", 4000, 8192, "exec")
	j := job("web", 50, group("api", 3000, 1024, "exec"))
	on1 := alloc("a1", "n1", 3000, 1024, spec.ClientRunning)
	on2 := alloc("a2", "n2", 3000, 1024, spec.ClientRunning)
	cache := NewCache()
	in := Input{Nodes: []*spec.Node{n1}, Allocs: []*spec.Alloc{on1, on2}, Requests: reqs(j, j.Groups[0], 0), Cache: cache}
	if got := Place(in); len(got.Placements) != 0 {
		t.Fatalf("n1 is full, n2 unknown: placed on %v", nodesOf(got))
	}
	// n2 comes back, holding a2: still no room.
	in.Nodes = []*spec.Node{n1, n2}
	if got := Place(in); len(got.Placements) != 0 {
		t.Fatalf("n1 and n2 are full: placed on %v", nodesOf(got))
	}
	// n1 goes down, and comes back: its use is kept.
	down := *n1
	down.Status = spec.NodeDown
	in.Nodes = []*spec.Node{&down, n2}
	if got := Place(in); len(got.Placements) != 0 {
		t.Fatalf("n1 down, n2 full: placed on %v", nodesOf(got))
	}
	in.Nodes = []*spec.Node{n1, n2}
	if got := Place(in); len(got.Placements) != 0 {
		t.Fatalf("n1 back and full, n2 full: placed on %v", nodesOf(got))
	}
	// a2 ends: n2 has room.
	in.Allocs = []*spec.Alloc{on1}
	if got := nodesOf(Place(in)); !slices.Equal(got, []string{"n2"}) {
		t.Fatalf("after a2 ended: placed on %v, want n2", got)
	}
}

// TestCacheSeesAJobsNewRules: the cache reads a job's conflicts rules
// again when the job's value changes, and forgets a job that is gone.
func TestCacheSeesAJobsNewRules(t *testing.T) {
	nodes := []*spec.Node{node("n1", 4000, 8192, "exec"), node("n2", 4000, 8192, "exec")}
	db := job("db", 50, group("g", 1000, 1024, "exec"))
	onN1 := alloc("db-0", "n1", 1000, 1024, spec.ClientRunning)
	onN1.Job, onN1.Group = "db", "g"
	web := job("web", 50, group("api", 100, 128, "exec"))
	web.Scoring = "" // binpack: next to db
	cache := NewCache()
	in := Input{Nodes: nodes, Allocs: []*spec.Alloc{onN1}, Jobs: map[string]*spec.Job{"db": db}, Requests: reqs(web, web.Groups[0], 0), Cache: cache}
	if got := nodesOf(Place(in)); !slices.Equal(got, []string{"n1"}) {
		t.Fatalf("binpack without rules: placed on %v, want n1", got)
	}
	// db, as submitted again, conflicts with web: web keeps off n1.
	strict := *db
	strict.Constraints = []*spec.Constraint{{Operator: spec.OpConflicts, Value: "web"}}
	in.Jobs = map[string]*spec.Job{"db": &strict}
	if got := nodesOf(Place(in)); !slices.Equal(got, []string{"n2"}) {
		t.Fatalf("db conflicts with web: placed on %v, want n2", got)
	}
	// db is gone (its alloc too): n1 is free of rules again.
	in.Jobs, in.Allocs = map[string]*spec.Job{}, nil
	if got := nodesOf(Place(in)); !slices.Equal(got, []string{"n1"}) {
		t.Fatalf("db gone: placed on %v, want n1", got)
	}
}

// TestRankAfterMatchesASort: a node index built from the previous one
// (nodes joining, leaving, both, in any input order) ranks its nodes by
// ID exactly as sorting them all does.
func TestRankAfterMatchesASort(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ids := rapid.SliceOfNDistinct(rapid.StringMatching(`[a-f0-9]{1,4}`), 0, 40, rapid.ID[string]).Draw(t, "before")
		mk := func(ids []string) []*spec.Node {
			out := make([]*spec.Node, len(ids))
			for i, id := range ids {
				out[i] = &spec.Node{ID: id, Status: spec.NodeReady}
			}
			return out
		}
		prev := newIndex(mk(ids), nil)
		// Some stay, in a new order, and some join.
		kept := rapid.Permutation(ids).Draw(t, "order")
		kept = kept[:rapid.IntRange(0, len(kept)).Draw(t, "keep")]
		joined := rapid.SliceOfNDistinct(rapid.StringMatching(`[g-k0-9]{1,4}`), 0, 10, rapid.ID[string]).Draw(t, "joined")
		next := append(slices.Clone(kept), joined...)
		next = rapid.Permutation(next).Draw(t, "input order")

		got := newIndex(mk(next), prev)
		want := newIndex(mk(next), nil)
		if !slices.Equal(got.rank, want.rank) {
			t.Fatalf("ranks from the previous index %v, from a sort %v (nodes %v, before %v)", got.rank, want.rank, next, ids)
		}
	})
}
