package scheduler

import (
	"fmt"
	"testing"

	"github.com/drover-org/drover/internal/spec"
)

// TestCacheDropsCountsOfSpreadsNoLongerRead: a job that changes its
// spread's attribute, then drops its spread, while older instances still
// run, leaves no counts in the Cache for attributes it no longer reads
// (they were kept, and counted on every alloc change of the group, for as
// long as the group had a live alloc and the nodes did not change).
func TestCacheDropsCountsOfSpreadsNoLongerRead(t *testing.T) {
	var nodes []*spec.Node
	for i := range 8 {
		n := node(fmt.Sprintf("n%d", i), 4000, 4000, "exec")
		n.Meta = map[string]string{"rack": fmt.Sprintf("r%d", i%4), "zone": fmt.Sprintf("z%d", i%2), "a": fmt.Sprintf("%d", i), "b": fmt.Sprintf("%d", i)}
		nodes = append(nodes, n)
	}
	c := NewCache()
	var allocs []*spec.Alloc
	attrs := []string{"${meta.rack}", "${meta.zone}", "${meta.a}", "${meta.b}"}
	for v, attr := range attrs { // four versions of the job, each spreading over another attribute
		g := group("g", 100, 100, "exec")
		g.Count = 3
		g.Spreads = []*spec.Spread{{Attribute: attr}}
		j := job("web", 50, g)
		j.Version = uint64(v + 1)
		res := Place(Input{Nodes: nodes, Allocs: allocs, Requests: reqs(j, g, 0, 1, 2), Cache: c})
		// A rolling update: the new version's instances come while the
		// old ones still run (here, one of them is left each time).
		if len(allocs) > 0 {
			allocs = allocs[len(allocs)-1:]
		}
		for i, p := range res.Placements {
			a := alloc(fmt.Sprintf("v%d-%d", v, i), p.NodeID, 100, 100, spec.ClientRunning)
			a.Job, a.Group = "web", "g"
			allocs = append(allocs, a)
		}
	}
	g := group("g", 100, 100, "exec")
	j := job("web", 50, g)
	Place(Input{Nodes: nodes, Allocs: allocs, Requests: reqs(j, g, 9), Cache: c}) // no spread now
	kept := c.spread[groupKey{"web", "g"}]
	var names []string
	for a, lc := range kept {
		names = append(names, fmt.Sprintf("%s=%v", a, lc.counts))
	}
	if len(kept) > 0 {
		t.Fatalf("the Cache keeps and maintains counts for %d attributes of a group that spreads over none now: %v", len(kept), names)
	}
}
