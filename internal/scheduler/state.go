package scheduler

import (
	"slices"

	"github.com/drover-org/drover/internal/spec"
)

// state is what one call of Place knows and updates: every node's use, and
// the ready nodes in min-heaps by (load, ID).
//
// Ready nodes are split into classes by the set of drivers they have, one
// heap per class. A request looks only at the classes that have all of its
// drivers and takes the smallest top among them, so nodes missing a driver
// are never popped. Nodes that are popped because they lack room are pushed
// back after the choice. In the usual case the least loaded node fits and a
// placement costs one heap fix per class plus a comparison per class,
// O(classes + log n), whatever the number of nodes.
type state struct {
	all     []*nodeState // every input node, in input order
	classes map[string]*class
	groups  map[*spec.Group]*groupInfo
	skipped []*nodeState // scratch for pick
}

type nodeState struct {
	node *spec.Node
	used spec.Resources
	load float64
	pos  int    // position in its class's heap
	cls  *class // nil for a node that is not ready
}

func (n *nodeState) fits(need spec.Resources) bool {
	return n.node.Resources.Sub(n.used).Fits(need)
}

// before orders nodes by load, then ID: the one to choose comes first.
func (n *nodeState) before(o *nodeState) bool {
	if n.load != o.load {
		return n.load < o.load
	}
	return n.node.ID < o.node.ID
}

// class is the ready nodes that have exactly the same set of drivers.
type class struct {
	drivers map[string]bool
	heap    nodeHeap
}

// groupInfo is what a group needs, computed once per call.
type groupInfo struct {
	need    spec.Resources
	drivers []string // sorted
	classes []*class // the classes that have every driver in drivers
}

func newState(in Input) *state {
	s := &state{
		all:     make([]*nodeState, len(in.Nodes)),
		classes: map[string]*class{},
		groups:  map[*spec.Group]*groupInfo{},
	}
	states := make([]nodeState, len(in.Nodes)) // one allocation for all
	byID := make(map[string]*nodeState, len(in.Nodes))
	for i, n := range in.Nodes {
		states[i].node = n
		s.all[i] = &states[i]
		byID[n.ID] = &states[i]
	}
	for _, a := range in.Allocs {
		if a.Terminal() || in.Freed[a.ID] {
			continue
		}
		if ns := byID[a.NodeID]; ns != nil {
			ns.used = ns.used.Add(a.Resources)
		}
	}
	var key []byte
	for _, ns := range s.all {
		if ns.node.Status != spec.NodeReady {
			continue
		}
		ns.load = loadOf(ns.node.Resources, ns.used)
		drivers := ns.node.Drivers
		if !sortedUnique(drivers) {
			drivers = slices.Compact(slices.Sorted(slices.Values(drivers)))
		}
		key = key[:0]
		for _, d := range drivers {
			key = append(append(key, d...), 0)
		}
		c := s.classes[string(key)] // no allocation for the lookup
		if c == nil {
			c = &class{drivers: map[string]bool{}}
			for _, d := range drivers {
				c.drivers[d] = true
			}
			s.classes[string(key)] = c
		}
		ns.cls = c
		c.heap = append(c.heap, ns)
	}
	for _, c := range s.classes {
		c.heap.init()
	}
	return s
}

// group returns the cached groupInfo for g.
func (s *state) group(g *spec.Group) *groupInfo {
	if gi := s.groups[g]; gi != nil {
		return gi
	}
	gi := &groupInfo{need: g.Resources(), drivers: g.Drivers()}
	for _, c := range s.classes {
		ok := true
		for _, d := range gi.drivers {
			ok = ok && c.drivers[d]
		}
		if ok {
			gi.classes = append(gi.classes, c)
		}
	}
	s.groups[g] = gi
	return gi
}

// pick chooses the least loaded node that can take one instance of g,
// other than the node whose ID is avoid unless no other can, charges the
// instance to it, and returns it; or returns nil when no node can.
func (s *state) pick(g *groupInfo, avoid string) *nodeState {
	defer s.pushBack()
	var fallback *nodeState // the avoided node, when it fits
	for {
		var best *class
		for _, c := range g.classes {
			if len(c.heap) > 0 && (best == nil || c.heap[0].before(best.heap[0])) {
				best = c
			}
		}
		if best == nil {
			if fallback != nil {
				// Popped, so pushBack puts it back with its new load.
				fallback.used = fallback.used.Add(g.need)
				fallback.load = loadOf(fallback.node.Resources, fallback.used)
			}
			return fallback
		}
		n := best.heap[0]
		fits := n.fits(g.need)
		if fits && (avoid == "" || n.node.ID != avoid) {
			n.used = n.used.Add(g.need)
			n.load = loadOf(n.node.Resources, n.used)
			best.heap.fix(0)
			return n
		}
		if fits {
			fallback = n
		}
		best.heap.pop()
		s.skipped = append(s.skipped, n)
	}
}

// pushBack returns the nodes that pick skipped to their heaps.
func (s *state) pushBack() {
	for _, n := range s.skipped {
		n.cls.heap.push(n)
	}
	clear(s.skipped)
	s.skipped = s.skipped[:0]
}

func sortedUnique(s []string) bool {
	for i := 1; i < len(s); i++ {
		if s[i-1] >= s[i] {
			return false
		}
	}
	return true
}
