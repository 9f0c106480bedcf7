package scheduler

import (
	"slices"

	"github.com/drover-org/drover/internal/spec"
)

// coldPicks is how many placements of a group, in one call, come from the
// use order (see coldPick) before the group's heaps are built: a shape's
// first placements cost O(log) of the cluster, and a group that places
// many instances pays for its heaps once, as before.
const coldPicks = 4

// coldBudget bounds the nodes one cold pick checks for feasibility, and
// coldMaxTrees the capacities it walks, before it leaves the pick to the
// heaps (coldPick).
const (
	coldBudget   = 64
	coldMaxTrees = 64
)

// coldSlack is how far below the best score found a subtree's bound must
// fall before the walk stops: the bounds are sums of the same fractions
// as the scores, added in another order, so they differ from them by a
// few units in the last place. A node within the slack is scored exactly.
const coldSlack = 1e-9

// useOrder keeps the eligible nodes ordered by their use, independently
// of any group's shape. For binpack (mean_r u_r after the placement) and
// least_loaded (its mirror), nodes with the same capacity (the same
// totals) rank in the same order for every ask: the ask adds the same
// need_r/total_r to each of them. So the nodes of each driver class are
// held per capacity (a useTree) in buckets of the same use, and a
// segment tree over the buckets gives, for any subtree, the highest and
// lowest sum of the use fractions and the most free room in each
// dimension. A group whose heaps are not built yet walks the trees of
// its classes best-first (coldPick) and stops at the first feasible
// node it cannot beat: exact best fit without scoring every node.
//
// It is built on the first cold pick of a state and kept up to date, per
// node, whenever a node's use changes (state.moved), so a Cache carries
// it from call to call like its heaps.
type useOrder struct {
	byClass  [][]*useTree // by class id
	at       []*useBucket // per node idx; nil for a node in no class
	frontier []coldItem   // coldPick's, kept to reuse its memory
}

type useKey struct{ cpu, mem, disk int }

func useKeyOf(r spec.Resources) useKey { return useKey{r.CPU, r.MemoryMB, r.DiskMB} }

// useTree holds the nodes of one driver class and one capacity.
type useTree struct {
	total   spec.Resources
	buckets map[useKey]*useBucket
	slots   []*useBucket // the segment tree's leaves; nil for a free slot
	free    []int32      // free slots
	agg     []useAgg     // 1-based segment tree, 2*len(slots)
	// c is the constant part of the scores of the ask being placed (the
	// sum of need_r/total_r, and 1 for each dimension the nodes have none
	// of), set by coldPick.
	c float64
}

// useBucket is the nodes of a tree that have the same use.
type useBucket struct {
	tree  *useTree
	slot  int32
	used  useKey
	key   [2]float64 // sum of u_r over cpu and memory, and with disk
	room  useKey     // total - used
	nodes []int32    // node indexes, by ID (rank)
}

// useAgg summarizes a subtree of buckets.
type useAgg struct {
	any    bool
	hi, lo [2]float64
	room   useKey // the most free room of any bucket, per dimension
}

func (a *useAgg) fits(need useKey) bool {
	return a.any && need.cpu <= a.room.cpu && need.mem <= a.room.mem && need.disk <= a.room.disk
}

// useFraction is a node's use of one resource in its key: a resource it
// has none of counts as full in every score, so it is left out of the
// key and counted in the tree's constant.
func useFraction(used, total int) float64 {
	if total <= 0 {
		return 0
	}
	return min(float64(used)/float64(total), 1)
}

// useOrder returns the state's use order, built on first use.
func (s *state) useOrder() *useOrder {
	if s.order != nil {
		return s.order
	}
	o := &useOrder{byClass: make([][]*useTree, len(s.classes)), at: make([]*useBucket, len(s.all))}
	for _, c := range s.classes {
		trees := map[useKey]*useTree{}
		for _, idx := range c.nodes {
			n := s.all[idx]
			tk := useKeyOf(n.total)
			t := trees[tk]
			if t == nil {
				t = &useTree{total: n.total, buckets: map[useKey]*useBucket{}}
				trees[tk] = t
				o.byClass[c.id] = append(o.byClass[c.id], t)
			}
			b := t.buckets[useKeyOf(n.used)]
			if b == nil {
				b = t.newBucket(n.used)
				t.buckets[b.used] = b
				t.slots = append(t.slots, b)
				b.slot = int32(len(t.slots) - 1)
			}
			b.nodes = append(b.nodes, idx) // sorted below
			o.at[idx] = b
		}
		for _, t := range o.byClass[c.id] {
			for _, b := range t.slots {
				slices.SortFunc(b.nodes, func(x, y int32) int { return int(s.rank[x]) - int(s.rank[y]) })
			}
			t.grow(len(t.slots))
		}
	}
	s.order = o
	return o
}

func (t *useTree) newBucket(used spec.Resources) *useBucket {
	u := useKeyOf(used)
	k := useFraction(u.cpu, t.total.CPU) + useFraction(u.mem, t.total.MemoryMB)
	return &useBucket{
		tree: t,
		used: u,
		key:  [2]float64{k, k + useFraction(u.disk, t.total.DiskMB)},
		room: useKey{t.total.CPU - u.cpu, t.total.MemoryMB - u.mem, t.total.DiskMB - u.disk},
	}
}

// grow makes room for at least n slots (a power of two) and rebuilds
// the segment tree.
func (t *useTree) grow(n int) {
	size := 1
	for size < n {
		size *= 2
	}
	if old := len(t.slots); size > old {
		t.slots = append(t.slots, make([]*useBucket, size-old)...)
		for i := size - 1; i >= old; i-- {
			t.free = append(t.free, int32(i))
		}
	}
	t.agg = make([]useAgg, 2*len(t.slots))
	for i, b := range t.slots {
		t.agg[len(t.slots)+i] = b.agg()
	}
	for i := len(t.slots) - 1; i >= 1; i-- {
		t.agg[i] = join(t.agg[2*i], t.agg[2*i+1])
	}
}

func (b *useBucket) agg() useAgg {
	if b == nil {
		return useAgg{}
	}
	return useAgg{any: true, hi: b.key, lo: b.key, room: b.room}
}

func join(a, b useAgg) useAgg {
	switch {
	case !a.any:
		return b
	case !b.any:
		return a
	}
	return useAgg{
		any: true,
		hi:  [2]float64{max(a.hi[0], b.hi[0]), max(a.hi[1], b.hi[1])},
		lo:  [2]float64{min(a.lo[0], b.lo[0]), min(a.lo[1], b.lo[1])},
		room: useKey{max(a.room.cpu, b.room.cpu), max(a.room.mem, b.room.mem),
			max(a.room.disk, b.room.disk)},
	}
}

// set puts b (nil: none) in slot i and updates the subtrees above it.
func (t *useTree) set(i int32, b *useBucket) {
	t.slots[i] = b
	p := len(t.slots) + int(i)
	t.agg[p] = b.agg()
	for p /= 2; p >= 1; p /= 2 {
		t.agg[p] = join(t.agg[2*p], t.agg[2*p+1])
	}
}

// moved brings n's place in the use order in line with its use, after a
// change of n.used.
func (s *state) moved(n *nodeState) {
	if s.order == nil {
		return
	}
	b := s.order.at[n.idx]
	if b == nil || b.used == useKeyOf(n.used) {
		return
	}
	t := b.tree
	byRank := func(x, y int32) int { return int(s.rank[x]) - int(s.rank[y]) }
	if i, ok := slices.BinarySearchFunc(b.nodes, n.idx, byRank); ok {
		b.nodes = slices.Delete(b.nodes, i, i+1)
	}
	if len(b.nodes) == 0 {
		delete(t.buckets, b.used)
		t.set(b.slot, nil)
		t.free = append(t.free, b.slot)
	}
	nb := t.buckets[useKeyOf(n.used)]
	if nb == nil {
		nb = t.newBucket(n.used)
		t.buckets[nb.used] = nb
		if len(t.free) == 0 {
			t.grow(len(t.slots) + 1)
		}
		nb.slot = t.free[len(t.free)-1]
		t.free = t.free[:len(t.free)-1]
		t.set(nb.slot, nb)
	}
	i, _ := slices.BinarySearchFunc(nb.nodes, n.idx, byRank)
	nb.nodes = slices.Insert(nb.nodes, i, n.idx)
	s.order.at[n.idx] = nb
}

// coldItem is a subtree on coldPick's frontier, with the highest score a
// node in it may have.
type coldItem struct {
	t     *useTree
	pos   int
	bound float64
}

// cold reports whether the group's next pick comes from the use order:
// the state lives in a Cache (without one, the state and so the order
// would be built afresh for the call, costing what the heaps cost), the
// group's heaps are not built, it has picked fewer than coldPicks times
// in this call, and its base score ranks nodes of one capacity by their
// use alone (binpack or least_loaded). E-PVM's cost depends on the ask in
// each dimension apart, so its order changes with the shape. Affinities
// and spreads add a term that depends on the node's attributes (and, for
// a spread, on where the group's instances are): coldPick bounds it by
// the highest such term and scores the nodes it meets exactly.
func (gr *groupRun) cold() bool {
	return gr.s.cache != nil && !gr.built && gr.colds < coldPicks &&
		(gr.scoring == spec.ScoreBinpack || gr.scoring == spec.ScoreLeastLoaded)
}

// coldMaxValues bounds the values of a spread's attribute a cold pick
// handles: a spread over, say, each node's name is left to the heaps.
const coldMaxValues = 64

// attrValues is the state's index of one attribute: per class id, the
// values the class's nodes have, each with its nodes by ID. Nodes without
// the attribute are left out. It depends on the nodes alone, so a Cache
// keeps it with the state.
type attrValues [][]attrValue

type attrValue struct {
	v     string
	nodes []int32
}

// attrIndex returns the index of the attribute sr reads, built on first
// use: O(nodes) once per attribute and node list.
func (s *state) attrIndex(sr *spreadRule) attrValues {
	key := sr.target.Attribute
	if ix, ok := s.attrs[key]; ok {
		return ix
	}
	ix := make(attrValues, len(s.classes))
	for _, c := range s.classes {
		at := map[string]int{}
		for _, idx := range c.nodes { // by ID
			v, ok := sr.read.Property(s.all[idx].node)
			if !ok {
				continue
			}
			i, seen := at[v]
			if !seen {
				i = len(ix[c.id])
				at[v] = i
				ix[c.id] = append(ix[c.id], attrValue{v: v})
			}
			ix[c.id][i].nodes = append(ix[c.id][i].nodes, idx)
		}
	}
	if s.attrs == nil {
		s.attrs = map[string]attrValues{}
	}
	s.attrs[key] = ix
	return ix
}

// coldSpreads readies the group's spreads for cold picks, once per call:
// the values of the nodes that could hold the group (what partition
// finds by reading every node), from the state's attribute index, and
// the group's live instances per value. It reports false, and the group
// builds its heaps, when an attribute has more than coldMaxValues values
// in the group's classes, or when finding which values a node that
// could hold the group has takes more than coldBudget checks (most
// nodes of some value fail the group's constraints).
func (gr *groupRun) coldSpreads() bool {
	if len(gr.spreads) == 0 || gr.counted {
		return true
	}
	if gr.values == nil {
		values := make([]map[string]bool, len(gr.spreads))
		checked := 0
		for i, sr := range gr.spreads {
			values[i] = map[string]bool{}
			ix := gr.s.attrIndex(sr)
			n := 0
			for _, c := range gr.classes {
				n += len(ix[c.id])
			}
			if n > coldMaxValues {
				return false
			}
			for _, c := range gr.classes {
				for _, av := range ix[c.id] {
					if values[i][av.v] {
						continue
					}
					for _, idx := range av.nodes {
						if checked++; checked > coldBudget {
							return false
						}
						if gr.meetsStatic(gr.s.all[idx]) {
							values[i][av.v] = true
							break
						}
					}
				}
			}
		}
		gr.values = values
	}
	gr.shares()
	gr.countLive()
	return true
}

// coldPick is pick for a group whose heaps are not built: the same node,
// found by walking the use order best-first. A subtree's bound is the
// score of its best use (its highest key for binpack, its lowest for
// least_loaded) with the ask's constant, plus the highest affinity and
// spread terms the group can give now; subtrees without a bucket with
// room for the ask are not entered. A bucket's nodes all have the same
// base: they are scored exactly (exact) in ID order, and the bucket ends
// at the first node that no later one can beat (without affinities and
// spreads, the first feasible one). The walk ends when no subtree left
// may hold a node that beats the best candidate (beats: a higher score;
// on a tie, a higher score before the spread term, then a smaller ID).
//
// The walk gives up (ok false), and the group builds its heaps as before,
// when the group's classes hold more than coldMaxTrees capacities (each
// pick would push every tree's root), when it has met coldBudget nodes
// without a pick (a constraint most nodes fail, or an affinity few nodes
// of the best buckets match: the heaps drop failing nodes once for the
// call, and the Cache keeps them dropped), or when its spreads are not
// ready (coldSpreads).
func (gr *groupRun) coldPick(avoid string) (picked *nodeState, ok bool) {
	gr.colds++
	s := gr.s
	if !gr.coldSpreads() {
		return nil, false
	}
	// extra bounds the affinity and spread terms of any node.
	var affMax, sprMax float64
	if gr.affs != nil {
		affMax = gr.affMax
	}
	if gr.spreads != nil {
		sprMax = gr.spreadMax()
	}
	extra := affMax + sprMax
	o := s.useOrder()
	trees := 0
	for _, c := range gr.classes {
		trees += len(o.byClass[c.id])
	}
	if trees > coldMaxTrees {
		return nil, false
	}
	checked := 0
	ki, k := 0, 2.0
	if gr.need.DiskMB > 0 {
		ki, k = 1, 3
	}
	least := gr.scoring == spec.ScoreLeastLoaded
	need := useKeyOf(gr.need)
	fr := o.frontier[:0]
	push := func(t *useTree, pos int) {
		a := &t.agg[pos]
		if !a.fits(need) {
			return
		}
		b := (a.hi[ki]+t.c)/k + extra
		if least {
			b = 1 - (a.lo[ki]+t.c)/k + extra
		}
		fr = append(fr, coldItem{t, pos, b})
		for i := len(fr) - 1; i > 0; {
			p := (i - 1) / 2
			if fr[p].bound >= fr[i].bound {
				break
			}
			fr[p], fr[i] = fr[i], fr[p]
			i = p
		}
	}
	pop := func() coldItem {
		top := fr[0]
		last := len(fr) - 1
		fr[0] = fr[last]
		fr = fr[:last]
		for i := 0; ; {
			l, m := 2*i+1, i
			if l < len(fr) && fr[l].bound > fr[m].bound {
				m = l
			}
			if r := l + 1; r < len(fr) && fr[r].bound > fr[m].bound {
				m = r
			}
			if m == i {
				break
			}
			fr[m], fr[i] = fr[i], fr[m]
			i = m
		}
		return top
	}
	for _, c := range gr.classes {
		for _, t := range o.byClass[c.id] {
			t.c = 0
			dims := [3][2]int{{need.cpu, t.total.CPU}, {need.mem, t.total.MemoryMB}, {need.disk, t.total.DiskMB}}
			for _, d := range dims[:int(k)] {
				if d[1] <= 0 {
					t.c++
				} else {
					t.c += float64(d[0]) / float64(d[1])
				}
			}
			push(t, 1)
		}
	}
	var best, fallback *nodeState
	var bestScore, bestPre float64
	for len(fr) > 0 {
		it := pop()
		if best != nil && it.bound < bestScore-coldSlack {
			break
		}
		t := it.t
		if it.pos < len(t.slots) {
			push(t, 2*it.pos)
			push(t, 2*it.pos+1)
			continue
		}
		b := t.slots[it.pos-len(t.slots)]
		// The bucket's nodes share their base; top is the highest score
		// one of them may have, and topPre the highest score before the
		// spread term, summed as exact sums them (rounding is monotone).
		base := gr.base(s.all[b.nodes[0]])
		topPre := base
		if gr.affs != nil {
			topPre += affMax
		}
		top := topPre
		if gr.spreads != nil {
			top += sprMax
		}
		for _, idx := range b.nodes {
			if best != nil && !beats(top, topPre, s.rank[idx], bestScore, bestPre, s.rank[best.idx]) {
				break // no node left in the bucket beats best
			}
			if checked++; checked > coldBudget {
				o.frontier = fr[:0]
				return nil, false
			}
			n := s.all[idx]
			sc, pre := gr.exact(n, base)
			if best != nil && !beats(sc, pre, s.rank[idx], bestScore, bestPre, s.rank[best.idx]) {
				continue
			}
			if !gr.ownVolumes(n) || !gr.feasible(n) {
				continue
			}
			if avoid != "" && n.node.ID == avoid {
				if fallback == nil {
					fallback = n
				}
				continue
			}
			best, bestScore, bestPre = n, sc, pre
		}
	}
	o.frontier = fr[:0]
	if best != nil {
		return best, true
	}
	return fallback, true
}

// exact is n's score for the group, given its base, and its score
// before the spread term: what the heaps rank it by (rank, plus its
// partition's boost), added in the same order (see beats).
func (gr *groupRun) exact(n *nodeState, base float64) (sc, pre float64) {
	pre = base
	if gr.affs != nil {
		pre += gr.affinityOf(n)
	}
	sc = pre
	if gr.spreads != nil {
		sc += gr.spreadOf(n)
	}
	return sc, pre
}
