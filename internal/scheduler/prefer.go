package scheduler

import (
	"slices"

	"github.com/drover-org/drover/internal/spec"
)

// weightedRule is one affinity of a group, compiled, with its weight.
type weightedRule struct {
	r *rule
	w float64
}

// affinityRules compiles the affinities that apply to the group. It does
// not look at the nodes. affMax is the highest affinity score a node can
// have: the positive weights over all the absolute weights (the weights
// are whole numbers, so every node's sum is at most theirs exactly).
func (gr *groupRun) affinityRules() {
	var positive float64
	for _, a := range gr.job.AffinitiesOf(gr.g) {
		w := a.Weight
		if w == 0 {
			w = spec.DefaultAffinityWeight
		}
		gr.affs = append(gr.affs, weightedRule{gr.s.rule(a.Constraint()), float64(w)})
		gr.affTotal += float64(max(w, -w))
		positive += float64(max(w, 0))
	}
	if len(gr.affs) > 0 {
		gr.affMax = positive / gr.affTotal
	}
}

// affinityOf is n's affinity score for the group: the sum of the weights
// of the affinities it matches, over the sum of all their absolute
// weights, so in [-1, 1]. An affinity that does not compile matches
// nothing.
func (gr *groupRun) affinityOf(n *nodeState) float64 {
	var sum float64
	for _, w := range gr.affs {
		if w.r.match(n.node) {
			sum += w.w
		}
	}
	return sum / gr.affTotal
}

// prepareAffinity scores every ready node of the group's classes by the
// affinities that apply to the group (affinityOf).
func (gr *groupRun) prepareAffinity() {
	if len(gr.affs) == 0 {
		return
	}
	s := gr.s
	gr.affinity = make([]float64, len(s.all))
	for _, c := range gr.classes {
		for _, idx := range c.nodes {
			gr.affinity[idx] = gr.affinityOf(s.all[idx])
		}
	}
}

// spreadRule is one spread of the group: where its instances are, per
// value of the attribute, and how many each value should hold.
type spreadRule struct {
	target spec.Spread
	read   *spec.ConstraintCheck // reads the attribute
	weight float64
	// The group's instances at value v are live[v] + counts[v]: live is
	// the Cache's count of its live allocs (nil without a Cache; not to
	// be modified), counts the rest: without a Cache every instance, with
	// one the call's placements less the live allocs it frees or evicts.
	live    map[string]int
	counts  map[string]int
	percent map[string]int // the targets, by value
	// rest is the percent left to each value without a target.
	rest  float64
	total int // the group's desired count
}

// want is how many instances value v should hold.
func (sr *spreadRule) want(v string) float64 {
	if p, ok := sr.percent[v]; ok {
		return float64(p) * float64(sr.total) / 100
	}
	return sr.rest * float64(sr.total) / 100
}

// boost is the spread's score for a node with value v (ok false: the node
// lacks the attribute): how far v is below what it should hold, relative
// to that, in [-1, 1]. A value that should hold nothing, and a node
// without the attribute, score -1.
func (sr *spreadRule) boost(v string, ok bool) float64 {
	if !ok {
		return -1
	}
	want := sr.want(v)
	if want <= 0 {
		return -1
	}
	return max(-1, min(1, (want-float64(sr.have(v)))/want))
}

// have is how many of the group's instances value v holds.
func (sr *spreadRule) have(v string) int { return sr.live[v] + sr.counts[v] }

// spreadRules compiles the spreads that apply to the group (the reader
// of each attribute once per state: see state.rule). It does not look
// at the nodes.
func (gr *groupRun) spreadRules() {
	ss := gr.job.SpreadsOf(gr.g)
	var weights float64
	for _, sp := range ss {
		k := gr.s.rule(spec.Constraint{Attribute: sp.Attribute, Operator: spec.OpIsSet}).check
		if k == nil {
			continue // Validate refuses it; nothing to spread over
		}
		w := sp.Weight
		if w == 0 {
			w = spec.DefaultSpreadWeight
		}
		sr := &spreadRule{target: sp, read: k, weight: float64(w), counts: map[string]int{}, percent: map[string]int{}, total: gr.g.Count}
		for _, t := range sp.Targets {
			sr.percent[t.Value] = t.Percent
		}
		gr.spreads = append(gr.spreads, sr)
		weights += float64(w)
	}
	for _, sr := range gr.spreads {
		sr.weight /= weights
	}
}

// partition sorts the ready nodes of the group's classes into partitions,
// one per combination of the spreads' values, and notes the values of the
// nodes that could hold the group: even spreads (no targets) share the
// count among them, which means evaluating the constraints on every node.
// It returns the number of partitions. What it computes depends on the
// nodes alone, so a cached run keeps it.
func (gr *groupRun) partition() int {
	if len(gr.spreads) == 0 {
		return 1
	}
	s := gr.s
	gr.part = make([]int32, len(s.all))
	partOf := map[string]int32{}
	gr.values = make([]map[string]bool, len(gr.spreads))
	for i := range gr.values {
		gr.values[i] = map[string]bool{}
	}
	var key []byte
	vs := make([]string, len(gr.spreads))
	for _, c := range gr.classes {
		for _, idx := range c.nodes {
			n := s.all[idx]
			key = key[:0]
			for i, sr := range gr.spreads {
				v, ok := sr.read.Property(n.node)
				if !ok {
					v = "\x00" // no value: a partition of its own
				} else if gr.meetsStatic(n) {
					gr.values[i][v] = true
				}
				vs[i] = v
				key = append(append(key, v...), 0)
			}
			p, ok := partOf[string(key)] // no allocation for the lookup
			if !ok {
				p = int32(len(gr.partValues))
				partOf[string(key)] = p
				gr.partValues = append(gr.partValues, slices.Clone(vs))
			}
			gr.part[idx] = p
		}
	}
	return len(gr.partValues)
}

// countSpreads works out each value's due share and counts the group's
// live instances per value (unless cold picks did, see coldSpreads), then
// scores the partitions. It runs once per call.
func (gr *groupRun) countSpreads() {
	if len(gr.spreads) == 0 {
		return
	}
	gr.shares()
	gr.countLive()
	gr.boost = make([]float64, len(gr.partValues))
	gr.updateBoost()
}

// shares works out, per spread, the share of the values without a target,
// from the values the nodes that could hold the group have (gr.values).
func (gr *groupRun) shares() {
	for i, sr := range gr.spreads {
		named, sum := 0, 0
		for v, p := range sr.percent {
			sum += p
			if gr.values[i][v] {
				named++
			}
		}
		if others := len(gr.values[i]) - named; others > 0 {
			left := 100 - sum
			if len(sr.percent) == 0 {
				left = 100
			}
			sr.rest = float64(left) / float64(others)
		}
	}
}

// countLive counts the group's live instances per value, once per call:
// the placements of the call are counted as they are made (charge).
// With a Cache, which keeps the counts as allocs change (liveSpread),
// it costs the spreads plus the group's allocs that the call frees or
// has evicted, not the group's allocs, nor every alloc.
func (gr *groupRun) countLive() {
	if gr.counted {
		return
	}
	gr.counted = true
	s := gr.s
	if s.cache == nil {
		for _, a := range s.groupAllocs(gr.key) {
			if n := s.node(a.NodeID); n != nil && !s.evicted[a.ID] {
				gr.countSpread(n, 1)
			}
		}
		return
	}
	for _, sr := range gr.spreads {
		sr.live = s.cache.liveSpread(s, gr.key, sr)
	}
	group := s.cache.byGroup[gr.key]
	uncount := func(a *spec.Alloc) {
		if n := s.node(a.NodeID); n != nil {
			gr.countSpread(n, -1)
		}
	}
	if len(s.freed) < len(group) {
		for id := range s.freed {
			if a := group[id]; a != nil {
				uncount(a)
			}
		}
	} else {
		for id, a := range group {
			if s.freed[id] {
				uncount(a)
			}
		}
	}
	for id := range s.evicted {
		if a := group[id]; a != nil {
			uncount(a)
		}
	}
}

// spreadOf is n's spread score for the group, as updateBoost gives it to
// n's partition.
func (gr *groupRun) spreadOf(n *nodeState) float64 {
	var b float64
	for _, sr := range gr.spreads {
		v, ok := sr.read.Property(n.node)
		b += sr.weight * sr.boost(v, ok && v != "\x00")
	}
	return b
}

// spreadMax is the highest spread score a node that could hold the group
// may have now: per spread the best term of its values (and of a node
// without the attribute), summed in the order spreadOf sums them, so
// that no node's spreadOf exceeds it (rounding is monotone).
func (gr *groupRun) spreadMax() float64 {
	var b float64
	for i, sr := range gr.spreads {
		m := sr.weight * sr.boost("", false)
		for v := range gr.values[i] {
			m = max(m, sr.weight*sr.boost(v, true))
		}
		b += m
	}
	return b
}

// countSpread adds delta instances at n's values.
func (gr *groupRun) countSpread(n *nodeState, delta int) {
	for _, sr := range gr.spreads {
		if v, ok := sr.read.Property(n.node); ok {
			sr.counts[v] += delta
		}
	}
	if gr.boost != nil {
		gr.updateBoost()
	}
}

// updateBoost recomputes every partition's spread score: the spreads'
// boosts, weighted.
func (gr *groupRun) updateBoost() {
	for p, vs := range gr.partValues {
		var b float64
		for i, sr := range gr.spreads {
			v := vs[i]
			b += sr.weight * sr.boost(v, v != "\x00")
		}
		gr.boost[p] = b
	}
}
