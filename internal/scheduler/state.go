package scheduler

import (
	"slices"
	"strings"

	"github.com/drover-org/drover/internal/spec"
)

// state is what one call of Place knows and updates: every node's use, and
// the ready nodes in min-heaps by (load, ID).
//
// Ready nodes are split into classes by the set of drivers they have. A
// node set (nodeSet) is the ready nodes that meet one list of static
// constraints (all but distinct_hosts and distinct_property), with one heap
// per class. The base set has no constraints and holds every ready node.
// A request looks only at its group's set, and there only at the classes
// that have all of its drivers, and takes the smallest top among them, so
// nodes missing a driver are never popped.
//
// A constrained set starts as a copy of the base heaps, without looking at
// any node. Its constraints are evaluated lazily, on the node at the top
// of a heap: a node that fails them is dropped from that set for the rest
// of the call (a node does not change within a call), so each node is
// evaluated at most once per set. Nodes that are popped because they lack
// room, or would break a distinct_* rule, are pushed back after the
// choice. In the usual case the least loaded node fits and a placement
// costs one heap fix per set that holds the node plus a comparison per
// class, O(sets * log n + classes), whatever the number of nodes.
type state struct {
	all     []*nodeState // every input node, in input order
	byID    map[string]*nodeState
	classes []*class // by class id
	base    *nodeSet
	sets    []*nodeSet          // base first; every set whose heaps a placement must fix
	setKeys map[string]*nodeSet // by static constraint list
	rules   map[spec.Constraint]*rule
	groups  map[groupKey]*groupInfo
	allocs  []*spec.Alloc // live allocs: not terminal, not freed
	byGroup map[groupKey][]*spec.Alloc
	skipped []skip // scratch for pick
}

type nodeState struct {
	node *spec.Node
	idx  int // in state.all
	used spec.Resources
	load float64
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
	id      int
	drivers map[string]bool
}

// nodeSet is the ready nodes that meet a list of static constraints, one
// heap per class; a heap is made when a group first needs it.
type nodeSet struct {
	rules []*rule
	heaps []*nodeHeap // by class id
	pos   []int32     // shared by heaps: see nodeHeap
	// meets caches, by node idx, whether the node meets every rule: 0
	// not yet evaluated, 1 yes, 2 no.
	meets []uint8
}

func (set *nodeSet) check(n *nodeState) bool {
	switch set.meets[n.idx] {
	case 1:
		return true
	case 2:
		return false
	}
	ok := true
	for _, r := range set.rules {
		if !r.match(n.node) {
			ok = false
			break
		}
	}
	set.meets[n.idx] = 2
	if ok {
		set.meets[n.idx] = 1
	}
	return ok
}

// rule is one constraint compiled for this call; check is nil when the
// constraint does not compile, and then no node meets it.
type rule struct {
	c     spec.Constraint
	check *spec.ConstraintCheck
}

func (r *rule) match(n *spec.Node) bool { return r.check != nil && r.check.Match(n) }

// dimension is how the rule reads in a placement failure.
func (r *rule) dimension() string {
	d := "constraint " + r.c.String()
	if r.check == nil {
		d += " (invalid)"
	}
	return d
}

// distinctRule is a distinct_hosts (check nil) or distinct_property rule
// of one group, with the group's instances counted per node ID or per
// property value.
type distinctRule struct {
	*rule
	limit  int
	counts map[string]int
}

func (d *distinctRule) key(n *spec.Node) (string, bool) {
	if d.c.Operator == spec.OpDistinctHosts {
		return n.ID, true
	}
	return d.check.Property(n)
}

func (d *distinctRule) allows(n *spec.Node) bool {
	k, ok := d.key(n)
	return ok && d.counts[k] < d.limit
}

func (d *distinctRule) add(n *spec.Node) {
	if k, ok := d.key(n); ok {
		d.counts[k]++
	}
}

// groupInfo is what a group needs, computed once per call.
type groupInfo struct {
	need     spec.Resources
	drivers  []string // sorted
	classes  []*class // the classes that have every driver in drivers
	set      *nodeSet
	rules    []*rule // every constraint, in spec.Job.ConstraintsOf order
	distinct []*distinctRule
	// impossible is set when a constraint does not compile.
	impossible bool
}

// allows reports whether placing one more instance of g on n keeps every
// distinct_* rule.
func (g *groupInfo) allows(n *nodeState) bool {
	for _, d := range g.distinct {
		if !d.allows(n.node) {
			return false
		}
	}
	return true
}

type skip struct {
	heap *nodeHeap
	node *nodeState
}

func newState(in Input) *state {
	s := &state{
		all:     make([]*nodeState, len(in.Nodes)),
		byID:    make(map[string]*nodeState, len(in.Nodes)),
		setKeys: map[string]*nodeSet{},
		rules:   map[spec.Constraint]*rule{},
		groups:  map[groupKey]*groupInfo{},
	}
	states := make([]nodeState, len(in.Nodes)) // one allocation for all
	for i, n := range in.Nodes {
		states[i].node = n
		states[i].idx = i
		s.all[i] = &states[i]
		s.byID[n.ID] = &states[i]
	}
	for _, a := range in.Allocs {
		if a.Terminal() || in.Freed[a.ID] {
			continue
		}
		s.allocs = append(s.allocs, a)
		if ns := s.byID[a.NodeID]; ns != nil {
			ns.used = ns.used.Add(a.Resources)
		}
	}
	s.base = s.newSet(nil)
	byKey := map[string]*class{}
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
		c := byKey[string(key)] // no allocation for the lookup
		if c == nil {
			c = &class{id: len(s.classes), drivers: map[string]bool{}}
			for _, d := range drivers {
				c.drivers[d] = true
			}
			byKey[string(key)] = c
			s.classes = append(s.classes, c)
			s.base.heaps = append(s.base.heaps, &nodeHeap{pos: s.base.pos})
		}
		ns.cls = c
		h := s.base.heaps[c.id]
		h.nodes = append(h.nodes, ns)
	}
	for _, h := range s.base.heaps {
		h.init()
	}
	return s
}

func (s *state) newSet(rules []*rule) *nodeSet {
	set := &nodeSet{rules: rules, pos: make([]int32, len(s.all))}
	for i := range set.pos {
		set.pos[i] = -1
	}
	if len(rules) > 0 {
		set.meets = make([]uint8, len(s.all))
		set.heaps = make([]*nodeHeap, len(s.classes))
	}
	s.sets = append(s.sets, set)
	return set
}

// heap returns set's heap for class c, copying the base set's when it is
// the first use. The copy is a valid heap as it is: the base heap holds
// every ready node of the class, and pick has pushed back what it popped.
func (s *state) heap(set *nodeSet, c *class) *nodeHeap {
	if h := set.heaps[c.id]; h != nil {
		return h
	}
	b := s.base.heaps[c.id]
	h := &nodeHeap{nodes: slices.Clone(b.nodes), pos: set.pos}
	for i, n := range h.nodes {
		set.pos[n.idx] = int32(i)
	}
	set.heaps[c.id] = h
	return h
}

// rule returns the compiled rule for c, compiling it on first use, so
// that each regexp and version constraint is parsed once per call.
func (s *state) rule(c spec.Constraint) *rule {
	if r := s.rules[c]; r != nil {
		return r
	}
	r := &rule{c: c}
	if k, err := spec.CompileConstraint(c); err == nil {
		r.check = k
	}
	s.rules[c] = r
	return r
}

// group returns the cached groupInfo for request r's group.
func (s *state) group(r Request) *groupInfo {
	key := groupKey{r.Job.Name, r.Group.Name}
	if gi := s.groups[key]; gi != nil {
		return gi
	}
	g := r.Group
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
	var static []*rule
	var setKey strings.Builder
	for _, c := range r.Job.ConstraintsOf(g) {
		ru := s.rule(c)
		gi.rules = append(gi.rules, ru)
		switch {
		case ru.check == nil:
			gi.impossible = true
		case ru.check.Off():
		case c.Distinct():
			gi.distinct = append(gi.distinct, s.distinct(key, ru))
		default:
			static = append(static, ru)
			setKey.WriteString(c.Attribute + "\x00" + c.Operator + "\x00" + c.Value + "\x00")
		}
	}
	gi.set = s.base
	if len(static) > 0 {
		set := s.setKeys[setKey.String()]
		if set == nil {
			set = s.newSet(static)
			s.setKeys[setKey.String()] = set
		}
		gi.set = set
		for _, c := range gi.classes {
			s.heap(set, c)
		}
	}
	s.groups[key] = gi
	return gi
}

// distinct makes a distinct_* rule for group key, counting the group's
// live allocs on known nodes.
func (s *state) distinct(key groupKey, r *rule) *distinctRule {
	d := &distinctRule{rule: r, limit: max(r.check.Limit(), 1), counts: map[string]int{}}
	if s.byGroup == nil {
		s.byGroup = map[groupKey][]*spec.Alloc{}
		for _, a := range s.allocs {
			k := groupKey{a.Job, a.Group}
			s.byGroup[k] = append(s.byGroup[k], a)
		}
	}
	for _, a := range s.byGroup[key] {
		if n := s.byID[a.NodeID]; n != nil {
			d.add(n.node)
		}
	}
	return d
}

// pick chooses the least loaded node that can take one instance of g,
// other than the node whose ID is avoid unless no other can, charges the
// instance to it, and returns it; or returns nil when no node can.
func (s *state) pick(g *groupInfo, avoid string) *nodeState {
	if g.impossible {
		return nil
	}
	defer s.pushBack()
	set := g.set
	var fallback *nodeState // the avoided node, when it fits
	for {
		var best *nodeHeap
		for _, c := range g.classes {
			if h := set.heaps[c.id]; len(h.nodes) > 0 && (best == nil || h.nodes[0].before(best.nodes[0])) {
				best = h
			}
		}
		if best == nil {
			if fallback != nil {
				// Popped, so pushBack puts it back with its new load.
				s.charge(g, fallback)
			}
			return fallback
		}
		n := best.nodes[0]
		if set != s.base && !set.check(n) {
			best.pop() // for good: the node never meets this set
			continue
		}
		ok := n.fits(g.need) && g.allows(n)
		if ok && (avoid == "" || n.node.ID != avoid) {
			s.charge(g, n)
			return n
		}
		if ok {
			fallback = n
		}
		best.pop()
		s.skipped = append(s.skipped, skip{best, n})
	}
}

// charge puts one instance of g on n: its use, its place in every heap
// that holds it, and g's distinct counts.
func (s *state) charge(g *groupInfo, n *nodeState) {
	n.used = n.used.Add(g.need)
	n.load = loadOf(n.node.Resources, n.used)
	for _, set := range s.sets {
		if p := set.pos[n.idx]; p >= 0 {
			set.heaps[n.cls.id].fix(int(p))
		}
	}
	for _, d := range g.distinct {
		d.add(n.node)
	}
}

// pushBack returns the nodes that pick skipped to their heaps.
func (s *state) pushBack() {
	for _, sk := range s.skipped {
		sk.heap.push(sk.node)
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
