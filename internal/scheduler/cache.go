package scheduler

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/drover-org/drover/internal/spec"
)

// Cache lets Place carry work over from one call to the next: the node
// index (order by ID, driver classes, constraint results), the live
// allocs and the use they make of each node, each group's live allocs
// and their count per value of its spreads' attributes, and the heaps of
// the groups it placed. A call pays for what changed since the previous one, not for
// the whole cluster: with the same nodes (the same *spec.Node values in
// the same order, as the server's state store hands them out), a call
// costs O(placements * log nodes) plus, for each alloc that appeared,
// changed or went away, a rescore of its node in the cached heaps. A node
// whose new value differs only in what placement does not read (its usage
// report, which comes every few seconds, and ModifyIndex) counts as the
// same node.
//
// The caller says what changed in one of two ways: every alloc (Allocs,
// which the Cache compares with what it holds, O(allocs)), or, once the
// Cache is Warm, only the allocs that changed since its previous call
// (Input.Changed), which costs only those.
//
// The result of Place is the same with or without a Cache (the property
// tests hold it to that). A Cache must not be used by two calls at once,
// and the values it is given (nodes, allocs, jobs) must be replaced, not
// modified, between calls: it tells what changed by their pointers.
type Cache struct {
	nodes []*spec.Node
	s     *state
	// live holds the allocs the Cache counts, by ID: every alloc that is
	// not terminal, whether or not its node is known.
	live map[string]*spec.Alloc
	// byGroup holds the same allocs by (job, group), then ID: a group's
	// instances cost what the group holds, not every alloc.
	byGroup map[groupKey]map[string]*spec.Alloc
	// spread counts, per (job, group) and spread attribute, the group's
	// live allocs on known nodes per value of the attribute on their
	// node: built on a spread's first call for the group (from byGroup),
	// kept as allocs change (apply), dropped with the node index. Only
	// groups with live allocs have counts.
	spread map[groupKey]map[string]*liveCounts
	groups map[string]*groupRun
	// rules holds each job's conflicts and replaces rules, read again
	// only when the job's value changes (see ruleJobs).
	rules map[string]cachedRules
}

// liveCounts is a group's live allocs per value of one attribute (the
// one read reads) of their nodes.
type liveCounts struct {
	read   *spec.ConstraintCheck
	counts map[string]int
}

type cachedRules struct {
	job   *spec.Job
	rules []spec.Constraint
}

// NewCache returns an empty cache.
func NewCache() *Cache { return &Cache{} }

// Warm reports whether the Cache holds the allocs of a previous call, so
// that the next may give only what changed since (Input.Changed).
func (c *Cache) Warm() bool { return c.live != nil }

// maxCachedGroups bounds the heaps kept: each holds O(nodes) memory.
const maxCachedGroups = 64

// state returns the state for a call with in: the cached one brought up to
// date, or a new one when the nodes changed.
func (c *Cache) state(in Input) *state {
	if c.s != nil {
		c.s.freed = nil // the previous call's
	}
	changed, gone := c.changes(in)
	switch {
	case c.s == nil:
		c.apply(nil, changed, gone)
		s := newIndex(in.Nodes, nil)
		for _, a := range c.live {
			s.charge(a)
		}
		c.nodes, c.s, c.groups = slices.Clone(in.Nodes), s, map[string]*groupRun{}
		s.cache = c
	case !c.sameNodes(in.Nodes):
		c.apply(c.s, changed, gone)
		c.reindex(in.Nodes)
	default:
		moved := c.apply(c.s, changed, gone)
		// Rescore in the cached heaps only the nodes whose use changed: a
		// pass of the leader sees new alloc values for every status
		// report, but most of them do not move any node's use.
		for _, gr := range c.groups {
			for idx := range moved {
				gr.rescore(c.s.all[idx])
			}
		}
	}
	s := c.s
	s.jobs = in.Jobs
	s.byGroup, s.jobNodes, s.evicted, s.ruled = nil, nil, nil, nil
	s.journal = map[int32]nodeDyn{}
	s.freed = in.Freed
	for id := range in.Freed {
		if a := c.live[id]; a != nil {
			s.release(a)
		}
	}
	return s
}

// changes is what in's allocs change from the ones the Cache holds.
func (c *Cache) changes(in Input) (changed []*spec.Alloc, gone []string) {
	if in.Changed != nil && c.live != nil {
		return in.Changed.Allocs, in.Changed.Gone
	}
	return c.diff(in.Allocs)
}

// note is state for a call that places nothing: the Cache takes in's
// allocs, and its index and heaps the use they change, but a changed
// node list is not indexed now. The next call that places indexes it,
// once, however many calls came between: ten thousand nodes joining
// while nothing is placed cost one index, not one per pass.
func (c *Cache) note(in Input) {
	changed, gone := c.changes(in)
	if c.s == nil {
		c.apply(nil, changed, gone) // state's first call charges them all
		return
	}
	c.s.freed = nil
	if !c.sameNodes(in.Nodes) {
		// The index keeps the use of the nodes it has, which reindex
		// carries over to the new one; its heaps are dropped then.
		c.apply(c.s, changed, gone)
		return
	}
	moved := c.apply(c.s, changed, gone)
	for _, gr := range c.groups {
		for idx := range moved {
			gr.rescore(c.s.all[idx])
		}
	}
}

// ruleJobs is state.ruleJobs for jobs, reading the rules of only the
// jobs whose value changed since the previous call: the jobs are the
// store's, replaced (never modified) when they change.
func (c *Cache) ruleJobs(jobs map[string]*spec.Job) map[string][]spec.Constraint {
	if c.rules == nil {
		c.rules = map[string]cachedRules{}
	}
	for name := range c.rules {
		if jobs[name] == nil {
			delete(c.rules, name)
		}
	}
	ruled := map[string][]spec.Constraint{}
	for name, j := range jobs {
		cr, ok := c.rules[name]
		if !ok || cr.job != j {
			cr = cachedRules{job: j, rules: jobRules(j)}
			c.rules[name] = cr
		}
		if len(cr.rules) > 0 {
			ruled[name] = cr.rules
		}
	}
	return ruled
}

// reindex builds the node index afresh for nodes that differ from the
// cached ones for placement (a node came, went, or changed its status,
// drivers, attributes, resources or eligibility), keeping what the
// allocs hold on each node that stays: only the allocs on nodes the
// index did not have are charged, not every alloc. The groups' heaps,
// built over the old index, are dropped.
func (c *Cache) reindex(nodes []*spec.Node) {
	old := c.s
	s := newIndex(nodes, old)
	same := sameIDs(old.all, s.all) // then a node's old state is at its index
	var added map[string]bool
	for i, ns := range s.all {
		var o *nodeState
		if same {
			o = old.all[i]
		} else {
			o = old.node(ns.node.ID)
		}
		if o == nil {
			if added == nil {
				added = map[string]bool{}
			}
			added[ns.node.ID] = true
			continue
		}
		ns.used, ns.allocs = o.used, o.allocs
		for p := range o.ports {
			ns.usePort(p) // the dynamic range may have changed
		}
	}
	if added != nil {
		for _, a := range c.live {
			if added[a.NodeID] {
				s.charge(a)
			}
		}
	}
	c.nodes, c.s, c.groups = slices.Clone(nodes), s, map[string]*groupRun{}
	c.spread = nil // a node's values may have changed, or its allocs become known
	s.cache = c
}

// diff compares allocs, every alloc, with what the Cache holds: the ones
// that changed or are new, and the IDs of the ones gone.
func (c *Cache) diff(allocs []*spec.Alloc) (changed []*spec.Alloc, gone []string) {
	seen := make(map[string]bool, len(allocs))
	for _, a := range allocs {
		seen[a.ID] = true
		if c.live[a.ID] != a {
			changed = append(changed, a)
		}
	}
	for id := range c.live {
		if !seen[id] {
			gone = append(gone, id)
		}
	}
	return changed, gone
}

// apply brings live and byGroup, and the nodes' use in s and the spread
// counts when s is not nil, up to date with the allocs changed and gone;
// it returns the nodes whose use changed.
func (c *Cache) apply(s *state, changed []*spec.Alloc, gone []string) map[int32]bool {
	if c.live == nil {
		c.live = map[string]*spec.Alloc{}
		c.byGroup = map[groupKey]map[string]*spec.Alloc{}
	}
	moved := map[int32]bool{}
	drop := func(id string) {
		old := c.live[id]
		if old == nil {
			return
		}
		delete(c.live, id)
		c.ungroup(s, old)
		if s != nil {
			if ns := s.uncharge(old); ns != nil {
				moved[ns.idx] = true
			}
		}
	}
	for _, id := range gone {
		drop(id)
	}
	for _, a := range changed {
		old := c.live[a.ID]
		if old == a {
			continue
		}
		if old != nil && !a.Terminal() && sameUse(old, a) {
			// A status report: the same room, ports and job.
			c.live[a.ID] = a
			c.byGroup[groupKey{a.Job, a.Group}][a.ID] = a
			if s != nil {
				s.replace(old, a)
			}
			continue
		}
		drop(a.ID)
		if a.Terminal() {
			continue
		}
		c.live[a.ID] = a
		c.group(s, a)
		if s != nil {
			if ns := s.charge(a); ns != nil {
				moved[ns.idx] = true
			}
		}
	}
	return moved
}

// group adds a live alloc to byGroup and, when s is not nil, to its
// group's spread counts.
func (c *Cache) group(s *state, a *spec.Alloc) {
	key := groupKey{a.Job, a.Group}
	m := c.byGroup[key]
	if m == nil {
		m = map[string]*spec.Alloc{}
		c.byGroup[key] = m
	}
	m[a.ID] = a
	if s != nil {
		c.count(s, key, a, 1)
	}
}

// ungroup takes back what group added. A group left without live
// allocs loses its counts: they are all zero.
func (c *Cache) ungroup(s *state, a *spec.Alloc) {
	key := groupKey{a.Job, a.Group}
	m := c.byGroup[key]
	delete(m, a.ID)
	if len(m) == 0 {
		delete(c.byGroup, key)
		delete(c.spread, key)
		return
	}
	if s != nil {
		c.count(s, key, a, -1)
	}
}

// count adds delta at the values of a's node to its group's spread
// counts, if the group has any and the node is known.
func (c *Cache) count(s *state, key groupKey, a *spec.Alloc, delta int) {
	byAttr := c.spread[key]
	if byAttr == nil {
		return
	}
	n := s.node(a.NodeID)
	if n == nil {
		return
	}
	for _, lc := range byAttr {
		if v, ok := lc.read.Property(n.node); ok {
			if lc.counts[v] += delta; lc.counts[v] == 0 {
				delete(lc.counts, v)
			}
		}
	}
}

// keepSpreads drops the group's counts for attributes its spreads no
// longer read (its job changed or dropped a spread while older instances
// still run), which every alloc change of the group would keep counting.
func (c *Cache) keepSpreads(key groupKey, spreads []*spreadRule) {
	byAttr := c.spread[key]
	for attr := range byAttr {
		if !slices.ContainsFunc(spreads, func(sr *spreadRule) bool { return sr.target.Attribute == attr }) {
			delete(byAttr, attr)
		}
	}
	if byAttr != nil && len(byAttr) == 0 {
		delete(c.spread, key)
	}
}

// liveSpread is the group's live allocs on known nodes (freed or not)
// per value of sr's attribute, counted from byGroup on the first call
// that asks and kept up to date from then on. The map is the Cache's:
// the caller must not modify it. nil for a group without live allocs.
func (c *Cache) liveSpread(s *state, key groupKey, sr *spreadRule) map[string]int {
	allocs := c.byGroup[key]
	if len(allocs) == 0 {
		return nil
	}
	byAttr := c.spread[key]
	if lc := byAttr[sr.target.Attribute]; lc != nil {
		return lc.counts
	}
	lc := &liveCounts{read: sr.read, counts: map[string]int{}}
	for _, a := range allocs {
		if n := s.node(a.NodeID); n != nil {
			if v, ok := sr.read.Property(n.node); ok {
				lc.counts[v]++
			}
		}
	}
	if byAttr == nil {
		if c.spread == nil {
			c.spread = map[groupKey]map[string]*liveCounts{}
		}
		byAttr = map[string]*liveCounts{}
		c.spread[key] = byAttr
	}
	byAttr[sr.target.Attribute] = lc
	return lc.counts
}

// sameUse reports whether two values of an alloc hold the same room on the
// same node for the same job's group.
func sameUse(a, b *spec.Alloc) bool {
	return a.NodeID == b.NodeID && a.Job == b.Job && a.Group == b.Group && a.Resources == b.Resources && slices.Equal(a.Ports, b.Ports)
}

// sameNodes reports whether nodes are the cached ones for placement:
// the same values, or values that differ only in what placement does not
// read (samePlacement). The node states then take the new values.
func (c *Cache) sameNodes(nodes []*spec.Node) bool {
	if slices.Equal(c.nodes, nodes) {
		return true
	}
	if len(c.nodes) != len(nodes) {
		return false
	}
	for i, n := range nodes {
		if c.nodes[i] != n && !samePlacement(c.nodes[i], n) {
			return false
		}
	}
	for i, n := range nodes {
		if c.nodes[i] != n {
			c.nodes[i], c.s.all[i].node = n, n
		}
	}
	return true
}

// samePlacement reports whether a and b are the same node as far as
// placement goes: equal but for Usage and ModifyIndex. Only the nodes
// whose value changed are compared. TestSamePlacementSeesEveryField
// fails when spec.Node gains a field this does not compare.
func samePlacement(a, b *spec.Node) bool {
	return a.ID == b.ID && a.Name == b.Name && a.Address == b.Address &&
		a.Datacenter == b.Datacenter && a.NodeClass == b.NodeClass && a.NodePool == b.NodePool &&
		maps.Equal(a.Attributes, b.Attributes) && maps.Equal(a.Meta, b.Meta) &&
		a.Resources == b.Resources && slices.Equal(a.Drivers, b.Drivers) && slices.Equal(a.HostVolumes, b.HostVolumes) &&
		a.Status == b.Status && a.RegisterTime.Equal(b.RegisterTime) &&
		a.Ineligible == b.Ineligible && sameDrain(a.Drain, b.Drain) &&
		a.MinDynamicPort == b.MinDynamicPort && a.MaxDynamicPort == b.MaxDynamicPort
}

func sameDrain(a, b *spec.DrainStrategy) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.StartedAt.Equal(b.StartedAt) && a.Deadline.Equal(b.Deadline)
}

// nodeDyn is what a call changes on a node, saved before the first change
// so that the call can be undone (see rollback).
type nodeDyn struct {
	used             spec.Resources
	ports            map[int]bool
	dynUsed, nextDyn int
}

// touch saves n's use before a call changes it, when a cache is kept.
func (s *state) touch(n *nodeState) {
	if s.journal == nil {
		return
	}
	if _, ok := s.journal[n.idx]; !ok {
		s.journal[n.idx] = nodeDyn{n.used, maps.Clone(n.ports), n.dynUsed, n.nextDyn}
	}
}

// rollback undoes the call's placements and evictions on the nodes, and
// brings the heaps of the groups it used back in line: the cache holds
// the cluster as the allocs make it, and the next call starts from there.
func (s *state) rollback(used []*groupRun) {
	for idx, d := range s.journal {
		n := s.all[idx]
		n.used, n.ports, n.dynUsed, n.nextDyn = d.used, d.ports, d.dynUsed, d.nextDyn
		s.moved(n)
	}
	for _, gr := range used {
		for _, idx := range gr.removed {
			n := s.all[idx]
			gr.score[idx] = gr.rank(n)
			if gr.pos[idx] < 0 {
				gr.heapOf(n).push(idx)
			}
		}
		gr.removed = gr.removed[:0]
		for idx := range s.journal {
			gr.rescore(s.all[idx])
		}
	}
	s.journal = nil
}

// cacheKey says which groups can share heaps: the same scoring, needs,
// drivers, datacenters and node pool, constraints that look at the node
// alone, affinities, ports and spreads (with the count they share). It is "" for a group whose
// feasibility depends on where other instances are (distinct_*, job
// rules): such a group is built afresh.
func (gr *groupRun) cacheKey() string {
	if len(gr.distinct) > 0 || len(gr.colocate) > 0 ||
		len(gr.replaces) > 0 || len(gr.conflictNodes) > 0 || len(gr.replaceNodes) > 0 || gr.impossible {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s|%d,%d,%d|%s|%d|%q|%q|", gr.scoring, gr.need.CPU, gr.need.MemoryMB, gr.need.DiskMB, strings.Join(gr.drivers, ","),
		gr.net, gr.job.Datacenters, gr.job.NodePool)
	for _, r := range gr.static {
		b.WriteString(r.c.String())
		b.WriteByte(0)
	}
	b.WriteByte('|')
	for _, a := range gr.job.AffinitiesOf(gr.g) {
		fmt.Fprintf(&b, "%s %d\x00", a.Constraint().String(), a.Weight)
	}
	fmt.Fprintf(&b, "|%v|%d|%d|%v", gr.static0, gr.dynamic, gr.g.Count, gr.volumes)
	for _, sr := range gr.spreads {
		fmt.Fprintf(&b, "|%s %v %v", sr.target.Attribute, sr.weight, sr.target.Targets)
	}
	return b.String()
}

// reuse takes over the heaps a cached run of the same key built, so that
// this run starts where the previous call (or an earlier group of this
// call) left them. Nodes this call has changed already, by placing other
// groups or evicting, are scored afresh, and nodes an earlier group of
// the call dropped go back in: a heap that holds a node that cannot fit
// is only slower, since pick checks every node it takes.
func (gr *groupRun) reuse(cached *groupRun) {
	gr.score, gr.pos, gr.heaps, gr.affinity, gr.built = cached.score, cached.pos, cached.heaps, cached.affinity, cached.built
	gr.slots, gr.parts = cached.slots, cached.parts
	gr.part, gr.partValues, gr.values = cached.part, cached.partValues, cached.values
	for _, h := range gr.heaps {
		h.run = gr
	}
	s := gr.s
	if gr.built {
		gr.countSpreads() // where this call finds the group's instances
	}
	for _, idx := range cached.removed {
		gr.score[idx] = gr.rank(s.all[idx])
		if gr.pos[idx] < 0 {
			gr.heapOf(s.all[idx]).push(idx)
		}
	}
	for idx := range s.journal {
		gr.rescore(s.all[idx])
	}
}

// heapOf is the heap that holds (or held) n: the one of its class and
// spread partition.
func (gr *groupRun) heapOf(n *nodeState) *nodeHeap {
	p := 0
	if gr.part != nil {
		p = int(gr.part[n.idx])
	}
	for i, c := range gr.classes {
		if c == n.cls {
			return gr.slots[i*gr.parts+p]
		}
	}
	panic("scheduler: node of a class the group does not use")
}

// keep stores the call's cacheable group runs and undoes the call on the
// nodes and in those runs' heaps.
func (c *Cache) keep(s *state) {
	var used []*groupRun
	for key, gr := range s.runs {
		if len(c.groups) >= maxCachedGroups && c.groups[key] == nil {
			clear(c.groups)
		}
		c.groups[key] = gr
		used = append(used, gr)
	}
	s.runs = nil
	s.rollback(used)
}
