package scheduler

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/drover-org/drover/internal/spec"
)

// referencePlace is the obvious placer: for each request in order, look at
// every node. Place must agree with it exactly.
func referencePlace(in Input) (placements []Placement, failed []Request) {
	reqs := slices.Clone(in.Requests)
	sort.SliceStable(reqs, func(i, j int) bool {
		a, b := reqs[i], reqs[j]
		if a.Job.Priority != b.Job.Priority {
			return a.Job.Priority > b.Job.Priority
		}
		if a.Job.Name != b.Job.Name {
			return a.Job.Name < b.Job.Name
		}
		if a.Group.Name != b.Group.Name {
			return a.Group.Name < b.Group.Name
		}
		return a.Index < b.Index
	})
	used := map[string]spec.Resources{}
	ports := map[string]map[int]bool{}
	for _, a := range in.Allocs {
		if a.Terminal() {
			continue
		}
		if !in.Freed[a.ID] {
			used[a.NodeID] = used[a.NodeID].Add(a.Resources)
		}
		for _, p := range a.Ports {
			// A freed alloc's dynamic ports stay taken until it has stopped.
			if in.Freed[a.ID] && (p.Value < spec.DynamicPortMin || p.Value > spec.DynamicPortMax) {
				continue
			}
			if ports[a.NodeID] == nil {
				ports[a.NodeID] = map[int]bool{}
			}
			ports[a.NodeID][p.Value] = true
		}
	}
	gave := map[[2]string]bool{}
	for _, r := range reqs {
		key := [2]string{r.Job.Name, r.Group.Name}
		if gave[key] {
			failed = append(failed, r)
			continue
		}
		need := r.Group.Resources()
		var best, avoided *spec.Node
		var bestScore, bestPre float64
		for _, n := range in.Nodes {
			if !referenceFits(in, placements, r, n, used[n.ID], ports[n.ID]) {
				continue
			}
			if n.ID == r.AvoidNode {
				avoided = n
				continue
			}
			// The highest score; on an exact tie the highest score before
			// the spread term, then the smaller ID (the package's doc).
			score, pre := referenceScore(in, placements, r, n, used[n.ID])
			if best == nil || score > bestScore || score == bestScore && (pre > bestPre || pre == bestPre && n.ID < best.ID) {
				best, bestScore, bestPre = n, score, pre
			}
		}
		if best == nil {
			best = avoided // the only node that fits
		}
		if best == nil {
			gave[key] = true
			failed = append(failed, r)
			continue
		}
		used[best.ID] = used[best.ID].Add(need)
		p := Placement{Request: r, NodeID: best.ID, NodeName: best.Name}
		for _, port := range r.Group.Ports() {
			v := port.Static
			for v == 0 || v < spec.DynamicPortMin && port.Static == 0 {
				v = spec.DynamicPortMin
			}
			if port.Static == 0 {
				for ports[best.ID][v] {
					v++
				}
			}
			if ports[best.ID] == nil {
				ports[best.ID] = map[int]bool{}
			}
			ports[best.ID][v] = true
			ip := best.Attributes[spec.NodeIPAttribute]
			if ip == "" {
				ip = "127.0.0.1"
			}
			p.Ports = append(p.Ports, spec.AllocPort{Label: port.Label, Value: v, HostIP: ip})
		}
		placements = append(placements, p)
	}
	return placements, failed
}

// referenceFits reports whether node n can take one more instance of r's
// group: eligible (ready, not ineligible, not draining), drivers,
// constraints, resources and ports.
func referenceFits(in Input, placements []Placement, r Request, n *spec.Node, u spec.Resources, ports map[int]bool) bool {
	if n.Status != spec.NodeReady || n.Ineligible || n.Drain != nil {
		return false
	}
	for _, t := range r.Group.Tasks {
		if !n.HasDriver(t.Driver) {
			return false
		}
	}
	need := r.Group.Resources()
	if need.CPU > n.Resources.CPU-u.CPU || need.MemoryMB > n.Resources.MemoryMB-u.MemoryMB || need.DiskMB > n.Resources.DiskMB-u.DiskMB {
		return false
	}
	for _, p := range r.Group.Ports() {
		if p.Static > 0 && ports[p.Static] {
			return false
		}
	}
	return referenceMeets(in, placements, r, n)
}

// referenceScore is the node's score for r's group, written from the
// formulas in the package documentation, and its score before the spread
// term is added.
func referenceScore(in Input, placements []Placement, r Request, n *spec.Node, u spec.Resources) (score, pre float64) {
	need := r.Group.Resources()
	frac := func(used, total int) float64 {
		if total <= 0 {
			return 1
		}
		return min(float64(used)/float64(total), 1)
	}
	type dim struct{ before, after float64 }
	dims := []dim{
		{frac(u.CPU, n.Resources.CPU), frac(u.CPU+need.CPU, n.Resources.CPU)},
		{frac(u.MemoryMB, n.Resources.MemoryMB), frac(u.MemoryMB+need.MemoryMB, n.Resources.MemoryMB)},
	}
	if need.DiskMB > 0 {
		dims = append(dims, dim{frac(u.DiskMB, n.Resources.DiskMB), frac(u.DiskMB+need.DiskMB, n.Resources.DiskMB)})
	}
	var sum float64
	for _, d := range dims {
		sum += d.after
	}
	switch r.Job.ScoringOf() {
	case spec.ScoreBinpack:
		score = sum / float64(len(dims))
	case spec.ScoreLeastLoaded:
		score = 1 - sum/float64(len(dims))
	case spec.ScoreEPVM:
		ready := 0
		for _, x := range in.Nodes {
			if x.Status == spec.NodeReady && !x.Ineligible && x.Drain == nil {
				ready++
			}
		}
		score = 1
		if ready >= 2 {
			base := float64(ready)
			var cost float64
			for _, d := range dims {
				cost += math.Pow(base, d.after) - math.Pow(base, d.before)
			}
			score = 1 - cost/(float64(len(dims))*(base-1))
		}
	}
	if as := r.Job.AffinitiesOf(r.Group); len(as) > 0 {
		var match, total float64
		for _, a := range as {
			w := a.Weight
			if w == 0 {
				w = spec.DefaultAffinityWeight
			}
			total += math.Abs(float64(w))
			if k, err := spec.CompileConstraint(a.Constraint()); err == nil && k.Match(n) {
				match += float64(w)
			}
		}
		score += match / total
	}
	pre = score
	if ss := r.Job.SpreadsOf(r.Group); len(ss) > 0 {
		score += referenceSpread(in, placements, r, n, ss)
	}
	return score, pre
}

// referenceSpread is the spread score of node n for r's group: for each
// spread, how far the node's value is below its due share of the group's
// count, weighted.
func referenceSpread(in Input, placements []Placement, r Request, n *spec.Node, ss []spec.Spread) float64 {
	here := referenceHere(in, placements, r)
	var weights float64
	for _, s := range ss {
		w := s.Weight
		if w == 0 {
			w = spec.DefaultSpreadWeight
		}
		weights += float64(w)
	}
	var out float64
	for _, s := range ss {
		w := s.Weight
		if w == 0 {
			w = spec.DefaultSpreadWeight
		}
		read := func(x *spec.Node) (string, bool) {
			k, _ := spec.CompileConstraint(spec.Constraint{Attribute: s.Attribute, Operator: spec.OpIsSet})
			return k.Property(x)
		}
		// The values of the ready nodes that could hold the group, ignoring
		// use and the other instances.
		values := map[string]bool{}
		for _, x := range in.Nodes {
			drivers := x.Status == spec.NodeReady && !x.Ineligible && x.Drain == nil
			for _, t := range r.Group.Tasks {
				drivers = drivers && x.HasDriver(t.Driver)
			}
			if v, ok := read(x); ok && drivers && referenceStatic(r, x) {
				values[v] = true
			}
		}
		percent := map[string]int{}
		sum, named := 0, 0
		for _, t := range s.Targets {
			percent[t.Value] = t.Percent
			sum += t.Percent
			if values[t.Value] {
				named++
			}
		}
		var rest float64
		if others := len(values) - named; others > 0 {
			left := 100 - sum
			if len(s.Targets) == 0 {
				left = 100
			}
			rest = float64(left) / float64(others)
		}
		boost := -1.0
		if v, ok := read(n); ok {
			want := rest * float64(r.Group.Count) / 100
			if p, ok := percent[v]; ok {
				want = float64(p) * float64(r.Group.Count) / 100
			}
			have := 0
			for _, x := range here {
				if hv, ok := read(x); ok && hv == v {
					have++
				}
			}
			if want > 0 {
				boost = max(-1, min(1, (want-float64(have))/want))
			}
		}
		out += float64(w) / weights * boost
	}
	return out
}

// referenceHere returns the nodes of r's group's instances: its live
// allocs on known nodes, and the placements made so far.
func referenceHere(in Input, placements []Placement, r Request) []*spec.Node {
	nodes := map[string]*spec.Node{}
	for _, x := range in.Nodes {
		nodes[x.ID] = x
	}
	var here []*spec.Node
	for _, a := range in.Allocs {
		if !a.Terminal() && !in.Freed[a.ID] && a.Job == r.Job.Name && a.Group == r.Group.Name && nodes[a.NodeID] != nil {
			here = append(here, nodes[a.NodeID])
		}
	}
	for _, p := range placements {
		if p.Request.Job.Name == r.Job.Name && p.Request.Group.Name == r.Group.Name {
			here = append(here, nodes[p.NodeID])
		}
	}
	return here
}

// referenceStatic reports whether n meets r's constraints that look at the
// node alone.
func referenceStatic(r Request, n *spec.Node) bool {
	for _, c := range r.Job.ConstraintsOf(r.Group) {
		if c.Distinct() || c.JobRule() {
			continue
		}
		k, err := spec.CompileConstraint(c)
		if err != nil || !k.Match(n) {
			return false
		}
	}
	return true
}

// referenceMeets reports whether one more instance of r's group may go on
// n, given the placements made so far: every constraint of the job, the
// group and its tasks, compiled afresh, and the distinct ones counted from
// scratch over the live allocs and the placements.
func referenceMeets(in Input, placements []Placement, r Request, n *spec.Node) bool {
	others := referenceHere(in, placements, r)
	var all []*spec.Constraint
	all = append(all, r.Job.Constraints...)
	all = append(all, r.Group.Constraints...)
	for _, t := range r.Group.Tasks {
		all = append(all, t.Constraints...)
	}
	for _, c := range all {
		k, err := spec.CompileConstraint(*c)
		if err != nil || !k.Match(n) {
			return false
		}
		switch {
		case c.Operator == spec.OpDistinctHosts && c.Value != "false":
			for _, o := range others {
				if o.ID == n.ID {
					return false
				}
			}
		case c.Operator == spec.OpDistinctProperty:
			v, ok := k.Property(n)
			if !ok {
				return false
			}
			count := 0
			for _, o := range others {
				if w, ok := k.Property(o); ok && w == v {
					count++
				}
			}
			if count >= c.DistinctLimit() {
				return false
			}
		}
	}
	return true
}

// constraintPool is what generated groups draw their constraints from.
var constraintPool = []spec.Constraint{
	{Attribute: "${meta.rack}", Operator: "=", Value: "r1"},
	{Attribute: "${meta.rack}", Operator: "!=", Value: "r0"},
	{Attribute: "${meta.rack}", Operator: "set_contains_any", Value: "r1,r2"},
	{Attribute: "${meta.rack}", Operator: "is_set"},
	{Attribute: "${attr.os}", Operator: "regexp", Value: "^lin"},
	{Attribute: "${attr.os}", Operator: "is_not_set"},
	{Operator: "distinct_hosts"},
	{Operator: "distinct_hosts"},
	{Attribute: "${meta.rack}", Operator: "distinct_property"},
	{Attribute: "${meta.rack}", Operator: "distinct_property", Value: "2"},
	{Attribute: "${attr.os}", Operator: "distinct_property", Value: "3"},
}

func genConstraints(t *rapid.T, label string) []*spec.Constraint {
	var out []*spec.Constraint
	for range rapid.IntRange(0, 2).Draw(t, label) {
		c := rapid.SampledFrom(constraintPool).Draw(t, label+".c")
		out = append(out, &c)
	}
	return out
}

var affinityPool = []spec.Affinity{
	{Attribute: "${meta.rack}", Operator: "=", Value: "r1", Weight: 50},
	{Attribute: "${meta.rack}", Operator: "=", Value: "r2", Weight: -30},
	{Attribute: "${attr.os}", Operator: "=", Value: "linux"},
	{Attribute: "${attr.os}", Operator: "regexp", Value: "^dar", Weight: 100},
}

func genAffinities(t *rapid.T, label string) []*spec.Affinity {
	var out []*spec.Affinity
	for range rapid.IntRange(0, 2).Draw(t, label) {
		a := rapid.SampledFrom(affinityPool).Draw(t, label+".a")
		out = append(out, &a)
	}
	return out
}

var spreadPool = []*spec.Spread{
	{Attribute: "${meta.rack}"},
	{Attribute: "${meta.rack}", Weight: 80, Targets: []spec.SpreadTarget{{Value: "r1", Percent: 70}, {Value: "r2", Percent: 30}}},
	{Attribute: "${meta.rack}", Targets: []spec.SpreadTarget{{Value: "r0", Percent: 50}}},
	{Attribute: "${attr.os}", Weight: 20},
}

var allDrivers = []string{"docker", "exec", "raw_exec"}

func genDrivers(t *rapid.T, label string, min int) []string {
	var ds []string
	for _, d := range allDrivers {
		if rapid.Bool().Draw(t, label+"."+d) {
			ds = append(ds, d)
		}
	}
	if len(ds) < min {
		ds = append(ds, rapid.SampledFrom(allDrivers).Draw(t, label+".any"))
	}
	return ds
}

func genInput(t *rapid.T) Input {
	var in Input
	nNodes := rapid.IntRange(0, 12).Draw(t, "nodes")
	capacity := rapid.SampledFrom([]int{0, 300, 500, 1000, 2000, 4000})
	for _, i := range rapid.Permutation(seq(nNodes)).Draw(t, "nodeOrder") {
		n := node(fmt.Sprintf("n%02d", i), capacity.Draw(t, "cpu"), capacity.Draw(t, "mem"), genDrivers(t, "nodeDrivers", 0)...)
		n.Resources.DiskMB = capacity.Draw(t, "disk")
		if rapid.IntRange(0, 4).Draw(t, "down") == 0 {
			n.Status = spec.NodeDown
		}
		switch rapid.IntRange(0, 9).Draw(t, "control") {
		case 0:
			n.Ineligible = true
		case 1:
			n.Drain = &spec.DrainStrategy{}
		}
		if rack := rapid.SampledFrom([]string{"", "r0", "r1", "r2"}).Draw(t, "rack"); rack != "" {
			n.Meta = map[string]string{"rack": rack}
		}
		if os := rapid.SampledFrom([]string{"", "linux", "darwin"}).Draw(t, "os"); os != "" {
			n.Attributes = map[string]string{"os": os}
		}
		in.Nodes = append(in.Nodes, n)
	}

	statuses := rapid.SampledFrom([]spec.ClientStatus{"", spec.ClientPending, spec.ClientRunning, spec.ClientComplete, spec.ClientFailed, spec.ClientLost})
	small := rapid.SampledFrom([]int{0, 50, 100, 250, 500, 1000})
	in.Freed = map[string]bool{}
	for i := range rapid.IntRange(0, 15).Draw(t, "allocs") {
		nodeID := "ghost"
		if nNodes > 0 && rapid.IntRange(0, 9).Draw(t, "onGhost") > 0 {
			nodeID = fmt.Sprintf("n%02d", rapid.IntRange(0, nNodes-1).Draw(t, "allocNode"))
		}
		a := alloc(fmt.Sprintf("a%02d", i), nodeID, small.Draw(t, "allocCPU"), small.Draw(t, "allocMem"), statuses.Draw(t, "status"))
		a.Job = rapid.SampledFrom([]string{"a", "b", "c", "other"}).Draw(t, "allocJob")
		a.Group = fmt.Sprintf("g%d", rapid.IntRange(0, 1).Draw(t, "allocGroup"))
		if rapid.IntRange(0, 3).Draw(t, "allocPort") == 0 {
			a.Ports = []spec.AllocPort{{Label: "p", Value: rapid.SampledFrom([]int{8080, spec.DynamicPortMin, spec.DynamicPortMin + 1}).Draw(t, "port")}}
		}
		in.Allocs = append(in.Allocs, a)
		if rapid.IntRange(0, 4).Draw(t, "freed") == 0 {
			in.Freed[a.ID] = true
		}
	}

	for _, name := range []string{"a", "b", "c"}[:rapid.IntRange(0, 3).Draw(t, "jobs")] {
		j := job(name, rapid.SampledFrom([]int{10, 50, 90}).Draw(t, "priority"))
		j.Constraints = genConstraints(t, "jobConstraints")
		j.Scoring = rapid.SampledFrom(spec.Scorings).Draw(t, "scoring")
		j.Affinities = genAffinities(t, "jobAffinities")
		for gi := range rapid.IntRange(1, 2).Draw(t, "groups") {
			g := group(fmt.Sprintf("g%d", gi), small.Draw(t, "needCPU"), small.Draw(t, "needMem"), genDrivers(t, "groupDrivers", 1)...)
			g.Constraints = genConstraints(t, "groupConstraints")
			g.Tasks[0].Resources.DiskMB = small.Draw(t, "needDisk")
			g.Affinities = genAffinities(t, "groupAffinities")
			if rapid.Bool().Draw(t, "spread") {
				g.Spreads = []*spec.Spread{rapid.SampledFrom(spreadPool).Draw(t, "spreads")}
			}
			for k := range rapid.IntRange(0, 2).Draw(t, "ports") {
				port := spec.Port{Label: fmt.Sprintf("p%d", k)}
				if rapid.Bool().Draw(t, "static") {
					port.Static = 8080 + k
				}
				g.Network = &spec.Network{Ports: append(g.Ports(), port)}
			}
			g.Tasks[len(g.Tasks)-1].Constraints = genConstraints(t, "taskConstraints")
			j.Groups = append(j.Groups, g)
			g.Count = rapid.IntRange(0, 5).Draw(t, "count")
			for idx := range g.Count {
				r := Request{Job: j, Group: g, Index: idx, Reason: "new instance", Previous: fmt.Sprint("prev-", idx)}
				if nNodes > 0 && rapid.Bool().Draw(t, "avoid") {
					r.AvoidNode = fmt.Sprintf("n%02d", rapid.IntRange(0, nNodes).Draw(t, "avoidNode")) // n<nNodes> is no node
				}
				in.Requests = append(in.Requests, r)
			}
		}
	}
	order := rapid.Permutation(seq(len(in.Requests))).Draw(t, "requestOrder")
	shuffled := make([]Request, len(order))
	for i, k := range order {
		shuffled[i] = in.Requests[k]
	}
	in.Requests = shuffled
	return in
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

func requestKey(r Request) string {
	return fmt.Sprintf("%s.%s[%d]", r.Job.Name, r.Group.Name, r.Index)
}

func TestPlaceMatchesReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := genInput(t)
		got := Place(in)
		wantPlacements, wantFailed := referencePlace(in)

		if diff := gocmp.Diff(wantPlacements, got.Placements); diff != "" {
			t.Fatalf("placements differ from the reference (-want +got):\n%s", diff)
		}
		var gotFailed []Request
		for _, f := range got.Failures {
			if f.Missing != len(f.Requests) || f.NodesEvaluated != len(in.Nodes) {
				t.Fatalf("failure %+v: Missing %d, %d requests; NodesEvaluated %d, %d nodes", f, f.Missing, len(f.Requests), f.NodesEvaluated, len(in.Nodes))
			}
			if len(f.Dimensions) == 0 && len(in.Nodes) > 0 {
				t.Fatalf("failure with no reason: %s", f)
			}
			gotFailed = append(gotFailed, f.Requests...)
		}
		byKey := func(a, b Request) int { return strings.Compare(requestKey(a), requestKey(b)) }
		slices.SortFunc(gotFailed, byKey)
		slices.SortFunc(wantFailed, byKey)
		if diff := gocmp.Diff(wantFailed, gotFailed); diff != "" {
			t.Fatalf("failed requests differ from the reference (-want +got):\n%s", diff)
		}
		if n := len(got.Placements) + len(gotFailed); n != len(in.Requests) {
			t.Fatalf("%d requests in, %d placed or failed", len(in.Requests), n)
		}

		// Invariants, checked against the final use of each node.
		nodes := map[string]*spec.Node{}
		for _, n := range in.Nodes {
			nodes[n.ID] = n
		}
		used := map[string]spec.Resources{}
		for _, a := range in.Allocs {
			if !a.Terminal() && !in.Freed[a.ID] {
				used[a.NodeID] = used[a.NodeID].Add(a.Resources)
			}
		}
		for _, p := range got.Placements {
			n := nodes[p.NodeID]
			if n == nil || !n.Eligible() {
				t.Fatalf("%s placed on missing or not eligible node %s", requestKey(p.Request), p.NodeID)
			}
			for _, d := range p.Request.Group.Drivers() {
				if !n.HasDriver(d) {
					t.Fatalf("%s placed on %s, which lacks driver %s", requestKey(p.Request), n.ID, d)
				}
			}
			used[n.ID] = used[n.ID].Add(p.Request.Group.Resources())
		}
		for _, p := range got.Placements {
			if n := nodes[p.NodeID]; !n.Resources.Fits(used[n.ID]) {
				t.Fatalf("node %s over-committed: capacity %+v, used %+v", n.ID, n.Resources, used[n.ID])
			}
		}
		// Constraints hold for every placement, given the instances
		// placed before it; distinct_hosts in particular.
		for i, p := range got.Placements {
			if !referenceMeets(in, got.Placements[:i], p.Request, nodes[p.NodeID]) {
				t.Fatalf("%s placed on %s, which breaks a constraint of %+v", requestKey(p.Request), p.NodeID, p.Request.Job.ConstraintsOf(p.Request.Group))
			}
		}
		hosts := map[[3]string]int{}
		for _, a := range in.Allocs {
			if !a.Terminal() && !in.Freed[a.ID] && nodes[a.NodeID] != nil {
				hosts[[3]string{a.Job, a.Group, a.NodeID}]++
			}
		}
		for _, p := range got.Placements {
			k := [3]string{p.Request.Job.Name, p.Request.Group.Name, p.NodeID}
			hosts[k]++
			distinct := false
			for _, c := range p.Request.Job.ConstraintsOf(p.Request.Group) {
				distinct = distinct || c.Operator == spec.OpDistinctHosts
			}
			if distinct && hosts[k] > 1 {
				t.Fatalf("distinct_hosts broken: %d instances of %s.%s on %s", hosts[k], k[0], k[1], k[2])
			}
		}
		// No placement takes a host port that is held on its node. (The
		// generated allocs may share ports among themselves.)
		held := map[string]map[int]string{}
		hold := func(node string, port int, by string, check bool) {
			if held[node] == nil {
				held[node] = map[int]string{}
			}
			if other, ok := held[node][port]; ok && check {
				t.Fatalf("port %d on %s held by %s and %s", port, node, other, by)
			}
			held[node][port] = by
		}
		for _, a := range in.Allocs {
			if !a.Terminal() {
				for _, p := range a.Ports {
					if !in.Freed[a.ID] || (p.Value >= spec.DynamicPortMin && p.Value <= spec.DynamicPortMax) {
						hold(a.NodeID, p.Value, a.ID, false)
					}
				}
			}
		}
		for _, p := range got.Placements {
			if len(p.Ports) != len(p.Request.Group.Ports()) {
				t.Fatalf("%s got ports %v for %v", requestKey(p.Request), p.Ports, p.Request.Group.Ports())
			}
			for _, port := range p.Ports {
				hold(p.NodeID, port.Value, requestKey(p.Request), true)
			}
		}
		for i := 1; i < len(got.Placements); i++ {
			if compareRequests(got.Placements[i-1].Request, got.Placements[i].Request) > 0 {
				t.Fatalf("placements out of order at %d", i)
			}
		}
	})
}
