package scheduler

import (
	"slices"
	"strings"

	"github.com/drover-org/drover/internal/spec"
)

// state is what one call of Place knows and updates: every node's use and
// reserved ports, where each job's instances are, and the allocs evicted so
// far. The per-group structures that choose a node live in groupRun.
type state struct {
	all  []*nodeState          // every input node, in input order
	byID map[string]*nodeState // built on first use: see node
	// rank orders the nodes by ID: rank[i] < rank[j] iff node i's ID is
	// smaller. Ties between scores go to the smaller ID; comparing ranks
	// is cheaper than comparing strings.
	rank    []int32
	classes []*class
	ready   int // how many nodes take new work (Eligible): E-PVM's base
	rules   map[spec.Constraint]*rule
	// meets caches, per list of static constraints, whether each node
	// meets them all: 0 not yet evaluated, 1 yes, 2 no. Groups with the
	// same constraints share it, so each node is evaluated once per list.
	meets   map[string][]uint8
	allocs  []*spec.Alloc // live allocs: not terminal, not freed (without a cache: see eachLive)
	freed   map[string]bool
	byGroup map[groupKey][]*spec.Alloc // without a cache: see groupAllocs
	// jobNodes counts each job's live instances per node index, placements
	// of this call included; built on first use.
	jobNodes map[string]map[int32]int
	jobs     map[string]*spec.Job
	ruled    map[string][]spec.Constraint // see ruleJobs
	evicted  map[string]bool
	// cache is set when the state lives in a Cache; journal then holds each
	// node's use before the call changed it (see rollback).
	cache   *Cache
	journal map[int32]nodeDyn
	runs    map[string]*groupRun // the call's cacheable runs, by key
	// order is the eligible nodes by use, built on a group's first cold
	// pick (see useOrder) and kept up to date by moved.
	order *useOrder
	// attrs are the values of the attributes cold picks spread over, by
	// attribute (see attrIndex).
	attrs map[string]attrValues
}

type nodeState struct {
	node *spec.Node
	idx  int32
	// total is node.Resources, kept beside used: scoring every node for a
	// new kind of group reads both, and the node records lie elsewhere in
	// memory.
	total spec.Resources
	used  spec.Resources
	cls   *class // nil for a node that takes no new work (not Eligible)
	// ports holds the host ports in use; nil while there are none.
	ports map[int]bool
	// dynUsed counts the ports in use inside the dynamic range; nextDyn is
	// where the search for a free dynamic port starts.
	dynUsed, nextDyn int
	// dynMin and dynMax are the node's dynamic port range.
	dynMin, dynMax int
	allocs         []*spec.Alloc // live allocs, for preemption
}

func (n *nodeState) fits(need spec.Resources) bool {
	return n.total.Sub(n.used).Fits(need)
}

// dynamic reports whether port p is in the node's dynamic range.
func (n *nodeState) dynamic(p int) bool { return p >= n.dynMin && p <= n.dynMax }

// dynFree is how many dynamic ports the node has left.
func (n *nodeState) dynFree() int { return n.dynMax - n.dynMin + 1 - n.dynUsed }

func (n *nodeState) usePort(p int) {
	if n.ports == nil {
		n.ports = map[int]bool{}
	}
	if !n.ports[p] && n.dynamic(p) {
		n.dynUsed++
	}
	n.ports[p] = true
}

func (n *nodeState) freePort(p int) {
	if n.ports[p] && n.dynamic(p) {
		n.dynUsed--
		n.nextDyn = min(n.nextDyn, p)
	}
	delete(n.ports, p)
}

// hostIP is the address the node's ports are reserved on.
func (n *nodeState) hostIP() string {
	if ip, _ := n.node.Attribute(spec.NodeIPAttribute); ip != "" {
		return ip
	}
	return "127.0.0.1"
}

// class is the eligible nodes (ready, not ineligible, not draining) that
// have exactly the same set of drivers and of network modes.
type class struct {
	id      int
	drivers map[string]bool
	net     uint8   // the network modes the nodes support (netModeBit)
	nodes   []int32 // eligible nodes of the class, in input order
}

// netModeBit is network mode m's bit in a class's net; 0 for host, which
// every node supports.
func netModeBit(m string) uint8 {
	switch m {
	case spec.NetworkBridge:
		return 1
	case spec.NetworkNone:
		return 2
	}
	return 0
}

// netModes are the network modes node n supports, as class bits.
func netModes(n *spec.Node) uint8 {
	var b uint8
	for _, m := range spec.NetworkModes {
		if n.SupportsNetworkMode(m) {
			b |= netModeBit(m)
		}
	}
	return b
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
	return spec.ConstraintDimension(r.c, r.check != nil)
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

func (d *distinctRule) add(n *spec.Node, delta int) {
	if k, ok := d.key(n); ok {
		d.counts[k] += delta
	}
}

// newState builds the state for one call: the node index, then the use
// of the live allocs.
func newState(in Input) *state {
	s := newIndex(in.Nodes, nil)
	s.jobs, s.freed = in.Jobs, in.Freed
	s.useAllocs(in.Allocs, in.Freed)
	return s
}

// newIndex builds what depends on the nodes alone: their order by ID, and
// the eligible ones (spec.Node.Eligible: ready, neither marked ineligible
// nor draining) by driver class. A node that is not eligible is in no
// class, so no group's heaps, pins or preemption consider it; explain
// says why. prev, when not nil, is an index of the same nodes as far as
// their IDs and order go, or of others: its order by ID is reused when
// it holds.
func newIndex(nodes []*spec.Node, prev *state) *state {
	s := &state{
		all:   make([]*nodeState, len(nodes)),
		rules: map[spec.Constraint]*rule{},
		meets: map[string][]uint8{},
	}
	states := make([]nodeState, len(nodes)) // one allocation for all
	for i, n := range nodes {
		lo, hi := n.DynamicPorts()
		states[i] = nodeState{node: n, idx: int32(i), total: n.Resources, nextDyn: lo, dynMin: lo, dynMax: hi}
		s.all[i] = &states[i]
	}
	switch {
	case prev != nil && sameIDs(prev.all, s.all):
		s.rank = prev.rank
	case prev != nil:
		s.rankAfter(prev)
	default:
		s.rankByID()
	}
	byKey := map[string]*class{}
	var key []byte
	// Nodes tend to come in runs with the same drivers: the previous
	// node's class is tried first, without building a key.
	var last *nodeState
	for _, ns := range s.all {
		if !ns.node.Eligible() {
			continue
		}
		s.ready++
		net := netModes(ns.node)
		if last != nil && slices.Equal(last.node.Drivers, ns.node.Drivers) && last.cls.net == net {
			ns.cls = last.cls
			ns.cls.nodes = append(ns.cls.nodes, ns.idx)
			continue
		}
		last = ns
		drivers := ns.node.Drivers
		if !sortedUnique(drivers) {
			drivers = slices.Compact(slices.Sorted(slices.Values(drivers)))
		}
		key = key[:0]
		for _, d := range drivers {
			key = append(append(key, d...), 0)
		}
		key = append(key, net)
		c := byKey[string(key)] // no allocation for the lookup
		if c == nil {
			c = &class{id: len(s.classes), drivers: map[string]bool{}, net: net}
			for _, d := range drivers {
				c.drivers[d] = true
			}
			byKey[string(key)] = c
			s.classes = append(s.classes, c)
		}
		ns.cls = c
		c.nodes = append(c.nodes, ns.idx)
	}
	return s
}

// useAllocs charges the live allocs (not terminal, not freed) to their
// nodes. A freed alloc's dynamic ports stay taken: its process holds them
// until it has stopped, up to its kill_timeout after this plan, and a
// replacement given the same port would fail to bind it. Its static ports
// are free: a replacement of the same group needs them.
func (s *state) useAllocs(allocs []*spec.Alloc, freed map[string]bool) {
	for _, a := range allocs {
		if a.Terminal() {
			continue
		}
		if freed[a.ID] {
			if ns := s.node(a.NodeID); ns != nil {
				for _, p := range a.Ports {
					if ns.dynamic(p.Value) {
						ns.usePort(p.Value)
					}
				}
			}
			continue
		}
		s.allocs = append(s.allocs, a)
		s.charge(a)
	}
}

// charge adds a live alloc's use to its node, and returns the node (nil
// when it is not known).
func (s *state) charge(a *spec.Alloc) *nodeState {
	ns := s.node(a.NodeID)
	if ns == nil {
		return nil
	}
	ns.used = ns.used.Add(a.Resources)
	s.moved(ns)
	ns.allocs = append(ns.allocs, a)
	for _, p := range a.Ports {
		ns.usePort(p.Value)
	}
	return ns
}

// uncharge takes back what charge added, and returns the node.
func (s *state) uncharge(a *spec.Alloc) *nodeState {
	ns := s.node(a.NodeID)
	if ns == nil {
		return nil
	}
	ns.used = ns.used.Sub(a.Resources)
	s.moved(ns)
	ns.allocs = slices.DeleteFunc(ns.allocs, func(x *spec.Alloc) bool { return x.ID == a.ID })
	for _, p := range a.Ports {
		if !s.held(ns, p.Value) {
			ns.freePort(p.Value)
		}
	}
	return ns
}

// replace puts a new value of a charged alloc in its node's list, where
// it holds the same room and ports (sameUse).
func (s *state) replace(old, a *spec.Alloc) {
	if ns := s.node(a.NodeID); ns != nil {
		if i := slices.Index(ns.allocs, old); i >= 0 {
			ns.allocs[i] = a
		}
	}
}

// release frees, for this call only (see rollback), the room and static
// ports of a live alloc that the call's plan stops; its dynamic ports
// stay taken (see useAllocs).
func (s *state) release(a *spec.Alloc) {
	ns := s.node(a.NodeID)
	if ns == nil {
		return
	}
	s.touch(ns)
	ns.used = ns.used.Sub(a.Resources)
	s.moved(ns)
	for _, p := range a.Ports {
		if !ns.dynamic(p.Value) && !s.held(ns, p.Value) {
			ns.freePort(p.Value)
		}
	}
}

// held reports whether a live alloc on n that this call does not free
// holds port p.
func (s *state) held(n *nodeState, p int) bool {
	for _, a := range n.allocs {
		if s.freed[a.ID] {
			continue
		}
		for _, ap := range a.Ports {
			if ap.Value == p {
				return true
			}
		}
	}
	return false
}

// eachLive calls f with every live alloc that this call's plan does not
// stop.
func (s *state) eachLive(f func(*spec.Alloc)) {
	if s.cache == nil {
		for _, a := range s.allocs {
			f(a)
		}
		return
	}
	for _, a := range s.cache.live {
		if !s.freed[a.ID] {
			f(a)
		}
	}
}

// node returns the node with the given ID, or nil. The index is built on
// the first call: a call of Place with no allocs and no pinned requests
// never needs it.
func (s *state) node(id string) *nodeState {
	if s.byID == nil {
		s.byID = make(map[string]*nodeState, len(s.all))
		for _, n := range s.all {
			s.byID[n.node.ID] = n
		}
	}
	return s.byID[id]
}

// rankByID fills rank. The registry lists nodes in ID order, so the
// usual input is checked in one pass and not sorted.
func (s *state) rankByID() {
	s.rank = make([]int32, len(s.all))
	sorted := true
	for i := range s.all {
		s.rank[i] = int32(i)
		if i > 0 && s.all[i-1].node.ID >= s.all[i].node.ID {
			sorted = false
		}
	}
	if sorted {
		return
	}
	order := make([]int32, len(s.all))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortStableFunc(order, func(a, b int32) int { return strings.Compare(s.all[a].node.ID, s.all[b].node.ID) })
	for r, i := range order {
		s.rank[i] = int32(r)
	}
}

// rankAfter fills rank from prev's: the nodes prev had keep their order,
// and only the new ones are sorted and merged in, so that nodes joining
// a large cluster one by one cost O(nodes) each, not a sort of them all.
// It ranks as rankByID does.
func (s *state) rankAfter(prev *state) {
	// The nodes still here, in prev's order; the new ones apart.
	kept := make([]int32, len(prev.all))
	for i := range kept {
		kept[i] = -1
	}
	var fresh []int32
	for i, ns := range s.all {
		if p := prev.node(ns.node.ID); p != nil && kept[prev.rank[p.idx]] < 0 {
			kept[prev.rank[p.idx]] = int32(i)
		} else {
			fresh = append(fresh, int32(i))
		}
	}
	id := func(i int32) string { return s.all[i].node.ID }
	slices.SortStableFunc(fresh, func(a, b int32) int { return strings.Compare(id(a), id(b)) })
	s.rank = make([]int32, len(s.all))
	r, f := int32(0), 0
	for _, i := range kept {
		if i < 0 {
			continue
		}
		for f < len(fresh) && id(fresh[f]) < id(i) {
			s.rank[fresh[f]] = r
			r, f = r+1, f+1
		}
		s.rank[i] = r
		r++
	}
	for ; f < len(fresh); f++ {
		s.rank[fresh[f]] = r
		r++
	}
}

// sameIDs reports whether a and b are nodes of the same IDs in the same
// order.
func sameIDs(a, b []*nodeState) bool {
	return slices.EqualFunc(a, b, func(x, y *nodeState) bool { return x.node.ID == y.node.ID })
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

// groupAllocs returns the live allocs of a group that this call's plan
// does not stop.
func (s *state) groupAllocs(key groupKey) []*spec.Alloc {
	if s.cache != nil {
		var out []*spec.Alloc
		for _, a := range s.cache.byGroup[key] {
			if !s.freed[a.ID] {
				out = append(out, a)
			}
		}
		return out
	}
	if s.byGroup == nil {
		s.byGroup = map[groupKey][]*spec.Alloc{}
		s.eachLive(func(a *spec.Alloc) {
			k := groupKey{a.Job, a.Group}
			s.byGroup[k] = append(s.byGroup[k], a)
		})
	}
	return s.byGroup[key]
}

// jobIndex returns, per job name, how many of its instances each node
// holds.
func (s *state) jobIndex() map[string]map[int32]int {
	if s.jobNodes == nil {
		s.jobNodes = map[string]map[int32]int{}
		s.eachLive(func(a *spec.Alloc) {
			if n := s.node(a.NodeID); n != nil && !s.evicted[a.ID] {
				s.addJob(a.Job, n.idx, 1)
			}
		})
	}
	return s.jobNodes
}

func (s *state) addJob(job string, n int32, delta int) {
	m := s.jobNodes[job]
	if m == nil {
		m = map[int32]int{}
		s.jobNodes[job] = m
	}
	m[n] += delta
	if m[n] <= 0 {
		delete(m, n)
	}
}

// ruleJobs returns, by name, the jobs of Input.Jobs that have conflicts
// or replaces rules, with those rules; computed once per call, since most
// jobs have none and a group would otherwise look at every job.
func (s *state) ruleJobs() map[string][]spec.Constraint {
	if s.ruled != nil {
		return s.ruled
	}
	if s.cache != nil {
		s.ruled = s.cache.ruleJobs(s.jobs)
		return s.ruled
	}
	s.ruled = map[string][]spec.Constraint{}
	for name, j := range s.jobs {
		if rules := jobRules(j); len(rules) > 0 {
			s.ruled[name] = rules
		}
	}
	return s.ruled
}

// jobRules returns a job's conflicts and replaces rules.
func jobRules(j *spec.Job) []spec.Constraint {
	var rules []spec.Constraint
	for _, g := range j.Groups {
		for _, c := range j.ConstraintsOf(g) {
			if c.Operator == spec.OpConflicts || c.Operator == spec.OpReplaces {
				rules = append(rules, c)
			}
		}
	}
	return rules
}

func sortedUnique(s []string) bool {
	for i := 1; i < len(s); i++ {
		if s[i-1] >= s[i] {
			return false
		}
	}
	return true
}
