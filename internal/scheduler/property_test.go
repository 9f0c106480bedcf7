package scheduler

import (
	"fmt"
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
	for _, a := range in.Allocs {
		if !a.Terminal() && !in.Freed[a.ID] {
			used[a.NodeID] = used[a.NodeID].Add(a.Resources)
		}
	}
	frac := func(u, t int) float64 {
		if t <= 0 {
			return 1
		}
		return float64(u) / float64(t)
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
		var bestLoad float64
		for _, n := range in.Nodes {
			if n.Status != spec.NodeReady {
				continue
			}
			ok := true
			for _, t := range r.Group.Tasks {
				ok = ok && n.HasDriver(t.Driver)
			}
			u := used[n.ID]
			free := spec.Resources{CPU: n.Resources.CPU - u.CPU, MemoryMB: n.Resources.MemoryMB - u.MemoryMB}
			if !ok || need.CPU > free.CPU || need.MemoryMB > free.MemoryMB || !referenceMeets(in, placements, r, n) {
				continue
			}
			if n.ID == r.AvoidNode {
				avoided = n
				continue
			}
			load := (frac(u.CPU, n.Resources.CPU) + frac(u.MemoryMB, n.Resources.MemoryMB)) / 2
			if best == nil || load < bestLoad || load == bestLoad && n.ID < best.ID {
				best, bestLoad = n, load
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
		placements = append(placements, Placement{Request: r, NodeID: best.ID, NodeName: best.Name})
	}
	return placements, failed
}

// referenceMeets reports whether one more instance of r's group may go on
// n, given the placements made so far: every constraint of the job, the
// group and its tasks, compiled afresh, and the distinct ones counted from
// scratch over the live allocs and the placements.
func referenceMeets(in Input, placements []Placement, r Request, n *spec.Node) bool {
	nodes := map[string]*spec.Node{}
	for _, x := range in.Nodes {
		nodes[x.ID] = x
	}
	var others []*spec.Node // where the group's instances are
	for _, a := range in.Allocs {
		if !a.Terminal() && !in.Freed[a.ID] && a.Job == r.Job.Name && a.Group == r.Group.Name && nodes[a.NodeID] != nil {
			others = append(others, nodes[a.NodeID])
		}
	}
	for _, p := range placements {
		if p.Request.Job.Name == r.Job.Name && p.Request.Group.Name == r.Group.Name {
			others = append(others, nodes[p.NodeID])
		}
	}
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
		if rapid.IntRange(0, 4).Draw(t, "down") == 0 {
			n.Status = spec.NodeDown
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
		in.Allocs = append(in.Allocs, a)
		if rapid.IntRange(0, 4).Draw(t, "freed") == 0 {
			in.Freed[a.ID] = true
		}
	}

	for _, name := range []string{"a", "b", "c"}[:rapid.IntRange(0, 3).Draw(t, "jobs")] {
		j := job(name, rapid.SampledFrom([]int{10, 50, 90}).Draw(t, "priority"))
		j.Constraints = genConstraints(t, "jobConstraints")
		for gi := range rapid.IntRange(1, 2).Draw(t, "groups") {
			g := group(fmt.Sprintf("g%d", gi), small.Draw(t, "needCPU"), small.Draw(t, "needMem"), genDrivers(t, "groupDrivers", 1)...)
			g.Constraints = genConstraints(t, "groupConstraints")
			g.Tasks[len(g.Tasks)-1].Constraints = genConstraints(t, "taskConstraints")
			j.Groups = append(j.Groups, g)
			for idx := range rapid.IntRange(0, 5).Draw(t, "count") {
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
			if n == nil || n.Status != spec.NodeReady {
				t.Fatalf("%s placed on missing or not-ready node %s", requestKey(p.Request), p.NodeID)
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
		for i := 1; i < len(got.Placements); i++ {
			if compareRequests(got.Placements[i-1].Request, got.Placements[i].Request) > 0 {
				t.Fatalf("placements out of order at %d", i)
			}
		}
	})
}
