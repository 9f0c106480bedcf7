package scheduler

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/drover-org/drover/internal/spec"
)

// Cache lets Place carry work over from one call to the next: the node
// index (order by ID, driver classes, constraint results), the use of the
// live allocs, and the heaps of the groups it placed. A call pays for
// what changed since the previous one, not for the whole cluster: with
// the same nodes (the same *spec.Node values in the same order, as the
// registry's decode cache hands them out) and the same allocs, a call
// costs O(placements * log nodes); each alloc that appeared or went away
// costs a rescore of its node in the cached heaps. A node whose new value
// differs only in what placement does not read (its usage report, which
// comes every few seconds, and ModifyIndex) counts as the same node.
//
// The result of Place is the same with or without a Cache (the property
// tests hold it to that). A Cache must not be used by two calls at once.
type Cache struct {
	nodes  []*spec.Node
	allocs []*spec.Alloc
	freed  map[string]bool
	s      *state
	used   []int32 // nodes with live allocs
	groups map[string]*groupRun
}

// NewCache returns an empty cache.
func NewCache() *Cache { return &Cache{} }

// maxCachedGroups bounds the heaps kept: each holds O(nodes) memory.
const maxCachedGroups = 64

// state returns the state for a call with in: the cached one brought up to
// date, or a new one when the nodes changed.
func (c *Cache) state(in Input) *state {
	if c.s == nil || !c.sameNodes(in.Nodes) {
		s := newIndex(in.Nodes)
		s.jobs = in.Jobs
		*c = Cache{nodes: slices.Clone(in.Nodes), allocs: slices.Clone(in.Allocs), freed: maps.Clone(in.Freed),
			s: s, groups: map[string]*groupRun{}, used: s.useAllocs(in.Allocs, in.Freed)}
		s.cache = c
		s.journal = map[int32]nodeDyn{}
		return s
	}
	s := c.s
	s.jobs = in.Jobs
	s.byGroup, s.jobNodes, s.evicted, s.ruled = nil, nil, nil, nil
	s.journal = map[int32]nodeDyn{}
	if !slices.Equal(c.allocs, in.Allocs) || !maps.Equal(c.freed, in.Freed) {
		// Recount the use of every node that held or holds allocs, and
		// rescore in the cached heaps only those whose use changed: a
		// pass of the leader sees new alloc values for every status
		// report, but most of them do not move any node's use.
		before := make(map[int32]nodeDyn, len(c.used))
		for _, idx := range c.used {
			n := s.all[idx]
			before[idx] = nodeDyn{used: n.used, ports: n.ports}
			n.used, n.ports, n.dynUsed, n.nextDyn, n.allocs = spec.Resources{}, nil, 0, n.dynMin, nil
		}
		s.allocs = nil
		c.used = s.useAllocs(in.Allocs, in.Freed)
		var changed []int32
		for _, idx := range c.used {
			n := s.all[idx]
			if d, ok := before[idx]; !ok || d.used != n.used || !maps.Equal(d.ports, n.ports) {
				changed = append(changed, idx)
			}
			delete(before, idx)
		}
		for idx := range before { // held allocs, holds none now
			changed = append(changed, idx)
		}
		for _, gr := range c.groups {
			for _, idx := range changed {
				gr.rescore(s.all[idx])
			}
		}
		c.allocs, c.freed = slices.Clone(in.Allocs), maps.Clone(in.Freed)
	}
	return s
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
		maps.Equal(a.Attributes, b.Attributes) && maps.Equal(a.Meta, b.Meta) &&
		a.Resources == b.Resources && slices.Equal(a.Drivers, b.Drivers) &&
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
	}
	for _, gr := range used {
		for _, idx := range gr.removed {
			n := s.all[idx]
			gr.score[idx] = gr.rank(n)
			gr.heapOf(n).push(idx)
		}
		gr.removed = gr.removed[:0]
		for idx := range s.journal {
			gr.rescore(s.all[idx])
		}
	}
	s.journal = nil
}

// cacheKey says which groups can share heaps: the same scoring, needs,
// drivers, constraints that look at the node alone, affinities, ports and
// spreads (with the count they share). It is "" for a group whose
// feasibility depends on where other instances are (distinct_*, job
// rules): such a group is built afresh.
func (gr *groupRun) cacheKey() string {
	if len(gr.distinct) > 0 || len(gr.colocate) > 0 ||
		len(gr.replaces) > 0 || len(gr.conflictNodes) > 0 || len(gr.replaceNodes) > 0 || gr.impossible {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s|%d,%d,%d|%s|", gr.scoring, gr.need.CPU, gr.need.MemoryMB, gr.need.DiskMB, strings.Join(gr.drivers, ","))
	for _, r := range gr.static {
		b.WriteString(r.c.String())
		b.WriteByte(0)
	}
	b.WriteByte('|')
	for _, a := range gr.job.AffinitiesOf(gr.g) {
		fmt.Fprintf(&b, "%s %d\x00", a.Constraint().String(), a.Weight)
	}
	fmt.Fprintf(&b, "|%v|%d|%d", gr.static0, gr.dynamic, gr.g.Count)
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
		gr.heapOf(s.all[idx]).push(idx)
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
