package scheduler

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/drover-org/drover/internal/spec"
)

// explain says why none of nodes can take an instance of the group, and
// what smallest change would let some of them. It runs only after a
// failure, so it may look at every node. Each node is counted under the
// first filter it fails, in the order status (not ready), draining,
// ineligible, node pool and datacenters (spec.Job.Excluded), drivers,
// host volumes (missing, or read-only where the group writes), constraints (with distinct_*, colocate and conflicts), ports,
// resources; a node missing
// several drivers counts under each, a node that fails several
// constraints counts under each, and a node short of several resources
// counts under each. MostFree is the largest free amount among the nodes
// that are short in that dimension, so it always reads as less than Need;
// Largest, set only when Need is more than it, is the largest total among
// them: none of them could take the group even empty.
//
// Hints come from the nodes that fail exactly one thing: "fits on 3 nodes
// if memory <= 512 MB" (the most free memory among nodes that have enough
// of everything else), "fits on 2 nodes without constraint ...".
func (gr *groupRun) explain(nodes []*nodeState) spec.PlacementFailure {
	var notReady, draining, ineligible int
	excluded := map[string]int{} // by spec.Job.Excluded's dimension
	missing := make([]int, len(gr.drivers))
	volMissing := make([]int, len(gr.volumes))
	volReadOnly := make([]int, len(gr.volumes))
	netMissing := 0 // nodes without the group's network mode
	unmet := make([]int, len(gr.rules))
	onlyRule := make([]int, len(gr.rules))
	distinct := map[*rule]*distinctRule{}
	for _, d := range gr.distinct {
		distinct[d.rule] = d
	}
	portTaken := map[int]int{}
	onlyPort := map[int]int{}
	var dynFull, theirs int
	type dim struct {
		name, unit  string
		need        func(spec.Resources) int
		nodes, most int
		largest     int // the largest total among the nodes counted
		only        int // nodes short of this dimension alone
		onlyMost    int
	}
	dims := []*dim{
		{name: "cpu", unit: "MHz", need: func(r spec.Resources) int { return r.CPU }},
		{name: "memory", unit: "MB", need: func(r spec.Resources) int { return r.MemoryMB }},
		{name: "disk", unit: "MB", need: func(r spec.Resources) int { return r.DiskMB }},
	}
	for _, n := range nodes {
		switch {
		case n.node.Status != spec.NodeReady:
			notReady++
			continue
		case n.node.Drain != nil:
			draining++ // an operator's drain: its work moves off
			continue
		case n.node.Ineligible:
			ineligible++ // an operator's `drover node eligibility off`
			continue
		case !gr.job.Admits(n.node):
			excluded[gr.job.Excluded(n.node)]++
			continue
		}
		lacks := false
		for i, d := range gr.drivers {
			if !n.cls.drivers[d] {
				missing[i]++
				lacks = true
			}
		}
		if gr.net != 0 && n.cls.net&gr.net == 0 {
			netMissing++
			lacks = true
		}
		if lacks {
			continue
		}
		for i, v := range gr.volumes {
			switch volumeLack(n.node, v, gr.index) {
			case volumeMissing:
				volMissing[i]++
				lacks = true
			case volumeReadOnly:
				volReadOnly[i]++
				lacks = true
			}
		}
		if lacks {
			continue
		}
		failedRules := 0
		last := -1
		for i, r := range gr.rules {
			if !gr.ruleAllows(r, distinct[r], n) {
				unmet[i]++
				failedRules++
				last = i
			}
		}
		if failedRules == 0 && gr.conflictNodes[n.idx] {
			theirs++ // another job's conflicts or replaces names this one
			continue
		}
		var taken []int
		for _, p := range gr.static0 {
			if n.ports[p] {
				portTaken[p]++
				taken = append(taken, p)
			}
		}
		dynShort := gr.dynamic > 0 && n.dynFree() < gr.dynamic
		if dynShort {
			dynFull++
		}
		free := n.node.Resources.Sub(n.used)
		var short []*dim
		for _, d := range dims {
			if need := d.need(gr.need); need > d.need(free) {
				short = append(short, d)
			}
		}
		for _, d := range short {
			if failedRules == 0 && len(taken) == 0 && !dynShort {
				d.nodes++
				d.most = max(d.most, d.need(free))
				d.largest = max(d.largest, d.need(n.node.Resources))
			}
		}
		switch {
		case failedRules == 1 && len(taken) == 0 && !dynShort && len(short) == 0:
			onlyRule[last]++
		case failedRules == 0 && len(taken) == 1 && !dynShort && len(short) == 0:
			onlyPort[taken[0]]++
		case failedRules == 0 && len(taken) == 0 && !dynShort && len(short) == 1:
			// The hint names the most free; count the nodes that have it.
			switch f := short[0].need(free); {
			case f > short[0].onlyMost || short[0].only == 0:
				short[0].onlyMost, short[0].only = f, 1
			case f == short[0].onlyMost:
				short[0].only++
			}
		}
	}
	f := spec.PlacementFailure{NodesEvaluated: len(nodes)}
	add := func(d spec.DimensionFailure) { f.Dimensions = append(f.Dimensions, d) }
	if notReady > 0 {
		add(spec.DimensionFailure{Dimension: spec.DimensionNotReady, Nodes: notReady})
	}
	if draining > 0 {
		add(spec.DimensionFailure{Dimension: spec.DimensionDraining, Nodes: draining})
	}
	if ineligible > 0 {
		add(spec.DimensionFailure{Dimension: spec.DimensionIneligible, Nodes: ineligible})
	}
	byRank := func(a, b string) int { return cmp.Compare(dimensionRank(a), dimensionRank(b)) }
	for _, d := range slices.SortedFunc(maps.Keys(excluded), byRank) {
		add(spec.DimensionFailure{Dimension: d, Nodes: excluded[d]})
	}
	for i, d := range gr.drivers {
		if missing[i] > 0 {
			add(spec.DimensionFailure{Dimension: spec.DriverDimension(d), Nodes: missing[i]})
		}
	}
	for i, v := range gr.volumes {
		if volMissing[i] > 0 {
			add(spec.DimensionFailure{Dimension: spec.HostVolumeDimension(v.For(gr.index)), Nodes: volMissing[i]})
		}
		if volReadOnly[i] > 0 {
			add(spec.DimensionFailure{Dimension: spec.HostVolumeReadOnlyDimension(v.For(gr.index)), Nodes: volReadOnly[i]})
		}
	}
	if netMissing > 0 {
		add(spec.DimensionFailure{Dimension: spec.NetworkModeDimension(gr.g.NetworkMode()), Nodes: netMissing})
	}
	for i, r := range gr.rules {
		if unmet[i] > 0 {
			add(spec.DimensionFailure{Dimension: r.dimension(), Nodes: unmet[i]})
		}
	}
	if theirs > 0 {
		add(spec.DimensionFailure{Dimension: "conflict", Nodes: theirs})
	}
	for _, p := range gr.static0 {
		if portTaken[p] > 0 {
			add(spec.DimensionFailure{Dimension: fmt.Sprintf("port %d", p), Nodes: portTaken[p]})
		}
	}
	if dynFull > 0 {
		add(spec.DimensionFailure{Dimension: "dynamic ports", Nodes: dynFull})
	}
	for _, d := range dims {
		if d.nodes > 0 {
			df := spec.DimensionFailure{Dimension: d.name, Nodes: d.nodes, Need: d.need(gr.need), MostFree: d.most, Unit: d.unit}
			if df.Need > d.largest {
				df.Largest = d.largest // none of them could take it even empty
			}
			add(df)
		}
	}
	for _, d := range dims {
		if d.only > 0 && d.onlyMost > 0 {
			f.Hints = append(f.Hints, fmt.Sprintf("fits on %s if %s <= %d %s", plural(d.only, "node"), d.name, d.onlyMost, d.unit))
		}
	}
	for i, r := range gr.rules {
		if onlyRule[i] > 0 && r.check != nil {
			f.Hints = append(f.Hints, fmt.Sprintf("fits on %s without constraint %s", plural(onlyRule[i], "node"), r.c.String()))
		}
	}
	for _, p := range gr.static0 {
		if onlyPort[p] > 0 {
			f.Hints = append(f.Hints, fmt.Sprintf("fits on %s with a dynamic port instead of static port %d", plural(onlyPort[p], "node"), p))
		}
	}
	return f
}

// ruleAllows reports whether n passes one of the group's constraints,
// counting the instances already placed for distinct_*, colocate,
// conflicts and replaces.
func (gr *groupRun) ruleAllows(r *rule, d *distinctRule, n *nodeState) bool {
	switch {
	case r.check == nil:
		return false
	case d != nil:
		return d.allows(n.node)
	case r.c.Operator == spec.OpColocate:
		return gr.s.jobIndex()[r.c.Value][n.idx] > 0
	case r.c.Operator == spec.OpConflicts || r.c.Operator == spec.OpReplaces:
		for job, nodes := range gr.s.jobIndex() {
			if job != gr.job.Name && nodes[n.idx] > 0 && r.c.MatchJob(job) {
				return false
			}
		}
		return true
	}
	return r.match(n.node)
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// mergeFailures adds one explanation to a group's failure: a group whose
// unpinned and pinned requests both failed has two. With sameNodes, b
// looked at the nodes a did (two unpinned instances of a per_alloc group,
// each explained for its own volumes): a node counts once in each
// dimension.
func mergeFailures(a, b spec.PlacementFailure, sameNodes bool) spec.PlacementFailure {
	out := a
	out.Group = cmp.Or(a.Group, b.Group)
	out.NodesEvaluated += b.NodesEvaluated
	if sameNodes {
		out.NodesEvaluated = max(a.NodesEvaluated, b.NodesEvaluated)
	}
	out.Dimensions = append([]spec.DimensionFailure(nil), a.Dimensions...)
	for _, d := range b.Dimensions {
		found := false
		for i := range out.Dimensions {
			if o := &out.Dimensions[i]; o.Dimension == d.Dimension {
				if sameNodes {
					o.Nodes = max(o.Nodes, d.Nodes)
				} else {
					o.Nodes += d.Nodes
				}
				o.MostFree = max(o.MostFree, d.MostFree)
				// Too large only if too large for both sets of nodes.
				if o.Largest > 0 && d.Largest > 0 {
					o.Largest = max(o.Largest, d.Largest)
				} else {
					o.Largest = 0
				}
				found = true
			}
		}
		if !found {
			out.Dimensions = append(out.Dimensions, d)
		}
	}
	slices.SortStableFunc(out.Dimensions, func(x, y spec.DimensionFailure) int {
		return cmp.Compare(dimensionRank(x.Dimension), dimensionRank(y.Dimension))
	})
	for _, h := range b.Hints {
		dup := false
		for _, o := range out.Hints {
			dup = dup || o == h
		}
		if !dup {
			out.Hints = append(out.Hints, h)
		}
	}
	return out
}

// dimensionRank orders dimensions as explain writes them.
func dimensionRank(d string) int {
	for i, prefix := range []string{"unregistered", spec.DimensionNotReady, spec.DimensionDraining, spec.DimensionIneligible,
		spec.DimensionNodePool, spec.DimensionDatacenter, "driver ", spec.DimensionNetworkMode, "constraint ", "conflict", "port ", "dynamic ports", "cpu", "memory", "disk"} {
		if strings.HasPrefix(d, prefix) {
			return i
		}
	}
	return 99
}
