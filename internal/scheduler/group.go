package scheduler

import (
	"math"
	"strings"

	"github.com/drover-org/drover/internal/spec"
)

// groupRun is what Place builds for one (job, group) when its first
// request comes up, and uses for all of its requests (they are handled
// one after another). It holds the group's needs and rules, and the
// candidate nodes in max-heaps by the group's score, one heap per
// (driver class, spread partition).
type groupRun struct {
	s       *state
	job     *spec.Job
	g       *spec.Group
	key     groupKey
	need    spec.Resources
	drivers []string // sorted
	net     uint8    // the group's network mode (netModeBit)
	classes []*class // the classes that have every driver in drivers, and net
	scoring spec.Scoring
	// volumes are the host volumes the group needs on its node; a
	// per_alloc one names a different volume for each instance (its
	// index is the request's: index), so it is not checked with the rest
	// of meetsStatic, which drops a node for the whole call.
	volumes  []spec.HostVolumeNeed
	perAlloc bool // some need is per_alloc
	index    int  // the index of the request being placed

	rules    []*rule // every constraint, in spec.Job.ConstraintsOf order
	static   []*rule // the ones that look at the node alone
	meets    []uint8 // see state.meets
	distinct []*distinctRule
	colocate []*rule
	// conflictNodes are nodes this group must not use: they run a job its
	// conflicts or replaces rules name, or a job whose rules name it.
	// replaceNodes are the subset that only this group's replaces rules
	// rule out: preemption may take them by evicting those jobs.
	conflictNodes, replaceNodes map[int32]bool
	replaces                    []*rule
	// impossible is set when a constraint does not compile.
	impossible bool

	static0 []int // static ports
	dynamic int   // how many dynamic ports

	affinity []float64 // per node idx; nil without affinities
	spreads  []*spreadRule
	part     []int32   // per node idx: spread partition; nil without spreads
	boost    []float64 // per partition: the spread score
	// partValues are each partition's values, one per spread; values are
	// per spread the values of the nodes that could hold the group.
	partValues [][]string
	values     []map[string]bool

	score []float64 // per node idx, for nodes in a heap
	pos   []int32   // per node idx: position in its heap, or -1
	heaps []*nodeHeap
	// slots are the heaps by class index, then partition (parts of them).
	slots []*nodeHeap
	parts int
	built bool // heaps are built on the first unpinned request
	// removed are the nodes dropped from the heaps for a reason that can
	// pass (use, ports), so that a cached run can put them back.
	removed []int32
	// ckey is the run's Cache key, "" when its heaps are not kept.
	ckey string
	// affs are the group's affinities, affTotal the sum of their absolute
	// weights, affMax the highest affinity score (affinityRules).
	affs             []weightedRule
	affTotal, affMax float64
	// counted is set when the spreads count the group's live instances
	// (countLive); colds counts the call's cold picks (see cold).
	counted bool
	colds   int
}

func (s *state) newGroupRun(r Request) *groupRun {
	g := r.Group
	gr := &groupRun{
		s: s, job: r.Job, g: g, key: groupKey{r.Job.Name, g.Name},
		need: g.Resources(), drivers: g.Drivers(), net: netModeBit(g.NetworkMode()), scoring: r.Job.ScoringOf(),
		volumes: g.HostVolumeNeeds(),
	}
	for _, v := range gr.volumes {
		gr.perAlloc = gr.perAlloc || v.PerAlloc
	}
	for _, c := range s.classes {
		ok := c.net&gr.net == gr.net
		for _, d := range gr.drivers {
			ok = ok && c.drivers[d]
		}
		if ok {
			gr.classes = append(gr.classes, c)
		}
	}
	var setKey strings.Builder
	for _, c := range r.Job.ConstraintsOf(g) {
		ru := s.rule(c)
		gr.rules = append(gr.rules, ru)
		switch {
		case ru.check == nil:
			gr.impossible = true
		case ru.check.Off():
		case c.Distinct():
			gr.distinct = append(gr.distinct, s.distinct(gr.key, ru))
		case c.Operator == spec.OpColocate:
			gr.colocate = append(gr.colocate, ru)
		case c.Operator == spec.OpReplaces:
			gr.replaces = append(gr.replaces, ru)
		case c.JobRule():
		default:
			gr.static = append(gr.static, ru)
			setKey.WriteString(c.Attribute + "\x00" + c.Operator + "\x00" + c.Value + "\x00")
		}
	}
	if len(gr.static) > 0 {
		k := setKey.String()
		if s.meets[k] == nil {
			s.meets[k] = make([]uint8, len(s.all))
		}
		gr.meets = s.meets[k]
	}
	gr.conflicts()
	gr.spreadRules()
	if s.cache != nil {
		s.cache.keepSpreads(gr.key, gr.spreads)
	}
	gr.affinityRules()
	for _, p := range g.Ports() {
		if p.Static > 0 {
			gr.static0 = append(gr.static0, p.Static)
		} else {
			gr.dynamic++
		}
	}
	if s.cache != nil {
		if gr.ckey = gr.cacheKey(); gr.ckey != "" {
			if prev := s.runs[gr.ckey]; prev != nil {
				gr.reuse(prev) // an earlier group of this call
			} else if cached := s.cache.groups[gr.ckey]; cached != nil {
				gr.reuse(cached)
			}
			if s.runs == nil {
				s.runs = map[string]*groupRun{}
			}
			s.runs[gr.ckey] = gr
		}
	}
	return gr
}

// distinct makes a distinct_* rule for group key, counting the group's
// live allocs on known nodes.
func (s *state) distinct(key groupKey, r *rule) *distinctRule {
	d := &distinctRule{rule: r, limit: max(r.check.Limit(), 1), counts: map[string]int{}}
	for _, a := range s.groupAllocs(key) {
		if n := s.node(a.NodeID); n != nil {
			d.add(n.node, 1)
		}
	}
	return d
}

// conflicts finds the nodes the group's job rules, and the other jobs'
// rules about this job, rule out. Nothing is looked up for the usual job
// that has no job rules and whose neighbours have none.
func (gr *groupRun) conflicts() {
	s := gr.s
	var own []*rule
	for _, r := range gr.rules {
		if r.check != nil && (r.c.Operator == spec.OpConflicts || r.c.Operator == spec.OpReplaces) {
			own = append(own, r)
		}
	}
	// Other jobs' rules that name this one.
	var named []string
	for job, rules := range s.ruleJobs() {
		if job == gr.job.Name {
			continue
		}
		for _, c := range rules {
			if c.MatchJob(gr.job.Name) {
				named = append(named, job)
				break
			}
		}
	}
	if len(own) == 0 && len(named) == 0 {
		return
	}
	gr.conflictNodes, gr.replaceNodes = map[int32]bool{}, map[int32]bool{}
	index := s.jobIndex()
	for _, job := range named {
		for n := range index[job] {
			gr.conflictNodes[n] = true
		}
	}
	if len(own) > 0 {
		for job, nodes := range index {
			if job == gr.job.Name {
				continue
			}
			hard, replace := false, false
			for _, r := range own {
				if r.c.MatchJob(job) {
					if r.c.Operator == spec.OpReplaces {
						replace = true
					} else {
						hard = true
					}
				}
			}
			for n := range nodes {
				if hard {
					gr.conflictNodes[n] = true
				} else if replace {
					gr.replaceNodes[n] = true
				}
			}
		}
	}
	for n := range gr.conflictNodes {
		delete(gr.replaceNodes, n)
	}
}

// feasible reports whether n can take one more instance of the group now.
// Every reason but the avoided node is lasting within a call (use and
// counts only grow), so a node that fails is dropped from the heaps.
func (gr *groupRun) feasible(n *nodeState) bool {
	return n.cls != nil && gr.hasClass(n.cls) && gr.meetsStatic(n) && gr.placeable(n) && n.fits(gr.need) && gr.portsFree(n)
}

func (gr *groupRun) hasClass(c *class) bool {
	for _, x := range gr.classes {
		if x == c {
			return true
		}
	}
	return false
}

// meetsStatic checks what depends on the node alone: the job's
// datacenters and node pool, the group's host volumes, and the static
// constraints.
func (gr *groupRun) meetsStatic(n *nodeState) bool {
	if !gr.job.Admits(n.node) {
		return false
	}
	for _, v := range gr.volumes {
		if !v.PerAlloc && volumeLack(n.node, v, 0) != volumeOK {
			return false
		}
	}
	if gr.meets == nil {
		return true
	}
	switch gr.meets[n.idx] {
	case 1:
		return true
	case 2:
		return false
	}
	ok := true
	for _, r := range gr.static {
		if !r.match(n.node) {
			ok = false
			break
		}
	}
	gr.meets[n.idx] = 2
	if ok {
		gr.meets[n.idx] = 1
	}
	return ok
}

// ownVolumes checks the per_alloc host volumes of the instance being
// placed (gr.index): the node must have data[index]. A node without them
// may still take the group's other instances.
func (gr *groupRun) ownVolumes(n *nodeState) bool {
	if !gr.perAlloc {
		return true
	}
	for _, v := range gr.volumes {
		if v.PerAlloc && volumeLack(n.node, v, gr.index) != volumeOK {
			return false
		}
	}
	return true
}

// placeable checks the rules that depend on other instances: distinct_*,
// colocate, conflicts and replaces.
func (gr *groupRun) placeable(n *nodeState) bool {
	for _, d := range gr.distinct {
		if !d.allows(n.node) {
			return false
		}
	}
	if gr.conflictNodes[n.idx] || gr.replaceNodes[n.idx] {
		return false
	}
	return gr.colocated(n)
}

func (gr *groupRun) colocated(n *nodeState) bool {
	for _, r := range gr.colocate {
		if gr.s.jobIndex()[r.c.Value][n.idx] == 0 {
			return false
		}
	}
	return true
}

func (gr *groupRun) portsFree(n *nodeState) bool {
	for _, p := range gr.static0 {
		if n.ports[p] {
			return false
		}
	}
	return gr.dynamic == 0 || n.dynFree() >= gr.dynamic
}

// base is the node's score from its use, by the job's scoring method,
// with the instance placed: see the package documentation for the
// formulas. It is in [0, 1]; higher is better.
func (gr *groupRun) base(n *nodeState) float64 {
	total, used, need := n.total, n.used, gr.need
	dims := [3][3]int{
		{used.CPU, need.CPU, total.CPU},
		{used.MemoryMB, need.MemoryMB, total.MemoryMB},
		{used.DiskMB, need.DiskMB, total.DiskMB},
	}
	k := 2
	if need.DiskMB > 0 {
		k = 3
	}
	switch gr.scoring {
	case spec.ScoreEPVM:
		if gr.s.ready < 2 {
			return 1
		}
		base := float64(gr.s.ready)
		var cost float64
		for _, d := range dims[:k] {
			cost += math.Pow(base, fraction(d[0]+d[1], d[2])) - math.Pow(base, fraction(d[0], d[2]))
		}
		return 1 - cost/(float64(k)*(base-1))
	case spec.ScoreLeastLoaded:
		var sum float64
		for _, d := range dims[:k] {
			sum += fraction(d[0]+d[1], d[2])
		}
		return 1 - sum/float64(k)
	}
	var sum float64
	for _, d := range dims[:k] {
		sum += fraction(d[0]+d[1], d[2])
	}
	return sum / float64(k)
}

// fraction is used/total, at most 1; a dimension with no capacity counts
// as full.
func fraction(used, total int) float64 {
	if total <= 0 {
		return 1
	}
	return min(float64(used)/float64(total), 1)
}

// rank is the node's score for the group, spread aside: base plus
// affinity.
func (gr *groupRun) rank(n *nodeState) float64 {
	r := gr.base(n)
	if gr.affinity != nil {
		r += gr.affinity[n.idx]
	}
	return r
}

// better orders the nodes within one heap: higher score first, then the
// smaller node ID, so that ties never depend on input order. The nodes of
// a heap share their spread term, so this is the order of beats.
func (gr *groupRun) better(a, b int32) bool {
	if sa, sb := gr.score[a], gr.score[b]; sa != sb {
		return sa > sb
	}
	return gr.s.rank[a] < gr.s.rank[b]
}

// beats is the order in which nodes are chosen, the same for the heaps
// and the cold picks: a node scored sc, whose score before the spread
// term (rank: base plus affinity) is pre and whose rank by ID is r, beats
// one scored bsc, bpre, br when its score is higher; on an exact tie,
// when its score before the spread term is higher, then when its ID is
// smaller. The second key makes the order the heaps' (a heap holds nodes
// of one spread partition, ordered by pre, and two pre that differ in
// the last place can round to the same sum once the partition's spread
// term is added) and total, so that any path that finds the best node
// under it finds the same one.
func beats(sc, pre float64, r int32, bsc, bpre float64, br int32) bool {
	if sc != bsc {
		return sc > bsc
	}
	if pre != bpre {
		return pre > bpre
	}
	return r < br
}

// build puts every ready node of the group's classes in its heaps, scored.
// Constraints are not evaluated here but when a node reaches the top, so
// a node far down the order is never evaluated. Spreads need each node's
// value, so with spreads every node is read.
func (gr *groupRun) build() {
	s := gr.s
	gr.built = true
	n := len(s.all)
	gr.score = make([]float64, n)
	gr.pos = make([]int32, n)
	for i := range gr.pos {
		gr.pos[i] = -1
	}
	gr.prepareAffinity()
	parts := gr.partition()
	gr.countSpreads()
	slots := make([]*nodeHeap, len(gr.classes)*parts) // by class, then partition
	gr.slots, gr.parts = slots, parts
	for ci, c := range gr.classes {
		for _, idx := range c.nodes {
			p := 0
			if gr.part != nil {
				p = int(gr.part[idx])
			}
			h := slots[ci*parts+p]
			if h == nil {
				size := len(c.nodes)
				if parts > 1 {
					size = 0 // unknown; let append grow it
				}
				h = &nodeHeap{part: p, run: gr, nodes: make([]int32, 0, size)}
				slots[ci*parts+p] = h
				gr.heaps = append(gr.heaps, h)
			}
			gr.score[idx] = gr.rank(s.all[idx])
			h.nodes = append(h.nodes, idx)
		}
	}
	for _, h := range gr.heaps {
		h.init()
	}
}

// pick chooses the best node that can take one instance of the group,
// other than avoid unless no other can; or returns nil.
func (gr *groupRun) pick(avoid string) *nodeState {
	if gr.impossible {
		return nil
	}
	if gr.cold() {
		if n, ok := gr.coldPick(avoid); ok {
			return n
		}
		gr.colds = coldPicks // the heaps, for the rest of the call
	}
	if !gr.built {
		gr.build()
	}
	var fallback *nodeState // the avoided node, when it fits
	var held *nodeHeap
	// aside are the nodes without this instance's per_alloc volumes, out
	// of their heaps for this pick only.
	type setAside struct {
		h   *nodeHeap
		idx int32
	}
	var aside []setAside
	defer func() {
		if fallback != nil && gr.pos[fallback.idx] < 0 {
			held.push(fallback.idx)
		}
		for _, a := range aside {
			if gr.pos[a.idx] < 0 {
				a.h.push(a.idx)
			}
		}
	}()
	for {
		var best *nodeHeap
		var bestScore, bestPre float64
		for _, h := range gr.heaps {
			if len(h.nodes) == 0 {
				continue
			}
			pre := gr.score[h.nodes[0]]
			sc := pre
			if gr.boost != nil {
				sc += gr.boost[h.part]
			}
			if best == nil || beats(sc, pre, gr.s.rank[h.nodes[0]], bestScore, bestPre, gr.s.rank[best.nodes[0]]) {
				best, bestScore, bestPre = h, sc, pre
			}
		}
		if best == nil {
			return fallback
		}
		n := gr.s.all[best.nodes[0]]
		if !gr.ownVolumes(n) {
			aside = append(aside, setAside{best, best.pop()})
			continue
		}
		if !gr.feasible(n) {
			best.pop() // for the rest of the call: see feasible
			if gr.meetsStatic(n) {
				gr.removed = append(gr.removed, n.idx)
			}
			continue
		}
		if avoid != "" && n.node.ID == avoid {
			fallback, held = n, best
			best.pop()
			continue
		}
		return n
	}
}

// pinned checks the one node a pinned request may use.
func (gr *groupRun) pinned(id string) *nodeState {
	n := gr.s.node(id)
	if gr.impossible || n == nil || !gr.ownVolumes(n) || !gr.feasible(n) {
		return nil
	}
	return n
}

// charge puts one instance of the group on n and returns its ports.
func (gr *groupRun) charge(n *nodeState) []spec.AllocPort {
	s := gr.s
	s.touch(n)
	n.used = n.used.Add(gr.need)
	s.moved(n)
	var ports []spec.AllocPort
	for _, p := range gr.g.Ports() {
		v := p.Static
		if v == 0 {
			v = n.nextDyn
			for n.ports[v] {
				v++
			}
			n.nextDyn = v + 1
		}
		n.usePort(v)
		ports = append(ports, spec.AllocPort{Label: p.Label, Value: v, HostIP: n.hostIP(), To: p.To})
	}
	for _, d := range gr.distinct {
		d.add(n.node, 1)
	}
	if s.jobNodes != nil {
		s.addJob(gr.job.Name, n.idx, 1)
	}
	if gr.spreads != nil {
		gr.countSpread(n, 1)
	}
	gr.rescore(n)
	return ports
}

// rescore updates n's score after its use changed, and its place in the
// heap that holds it, if any.
func (gr *groupRun) rescore(n *nodeState) {
	if !gr.built {
		return
	}
	p := gr.pos[n.idx]
	if p < 0 {
		return
	}
	gr.score[n.idx] = gr.rank(n)
	for _, h := range gr.heaps {
		if int(p) < len(h.nodes) && h.nodes[p] == n.idx {
			h.fix(int(p))
			return
		}
	}
}

// What a node lacks of a host volume a group needs.
type volumeFit int

const (
	volumeOK volumeFit = iota
	volumeMissing
	volumeReadOnly // the node has it read-only; the group writes it
)

// volumeLack says what n lacks of need for instance index (which only a
// per_alloc need looks at).
func volumeLack(n *spec.Node, need spec.HostVolumeNeed, index int) volumeFit {
	v, ok := n.HostVolume(need.For(index))
	switch {
	case !ok:
		return volumeMissing
	case v.ReadOnly && need.Write:
		return volumeReadOnly
	}
	return volumeOK
}
