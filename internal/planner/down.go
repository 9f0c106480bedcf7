package planner

import "github.com/drover-org/drover/internal/spec"

// MarkDown flags the allocs of the pass's jobs whose node is down or
// unknown (as MarkNodeDown does), and the ones the node rules read from
// then on (NodeAllocs).
func (in *Input) MarkDown() {
	in.marked = true
	for i, a := range in.Allocs {
		if !in.ready(a.NodeID) {
			in.Allocs[i] = downCopy(a)
		}
	}
}

// downCopy is a copy of a flagged NodeDown: the store's values are shared.
func downCopy(a *spec.Alloc) *spec.Alloc {
	c := *a
	c.NodeDown = true
	return &c
}

func (in *Input) ready(id string) bool {
	n := in.Node(id)
	return n != nil && n.Status == spec.NodeReady
}

// nodeAllocs returns every alloc on a node, marked as MarkDown marks.
func (in *Input) nodeAllocs(id string) []*spec.Alloc {
	as := in.NodeAllocs(id)
	if !in.marked || in.ready(id) {
		return as
	}
	marked := make([]*spec.Alloc, len(as))
	for i, a := range as {
		marked[i] = downCopy(a)
	}
	return marked
}

// MarkNodeDown flags the allocs whose node is down or unknown, replacing
// each in allocs with a marked copy: the values are the store's, which
// never hold the flag. The API's reads use it to show allocs as a pass
// sees them.
func MarkNodeDown(allocs []*spec.Alloc, nodes []*spec.Node) {
	up := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		up[n.ID] = n.Status == spec.NodeReady
	}
	for i, a := range allocs {
		if !up[a.NodeID] && !a.NodeDown {
			allocs[i] = downCopy(a)
		}
	}
}
