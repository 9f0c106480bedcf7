package scheduler

import "github.com/drover-org/drover/internal/spec"

// explain says why no node can take an instance of g. It runs only after a
// failure, so it may look at every node. Each node is counted under the
// first filter it fails, in the order status, drivers, constraints,
// resources; a node missing several drivers counts under each, a node that
// fails several constraints counts under each, and a node short of both
// cpu and memory counts under both. MostFree is the largest free amount
// among the nodes that are short in that dimension, so it always reads as
// less than Need.
func (s *state) explain(g *groupInfo) spec.PlacementFailure {
	var notReady, cpu, mem, mostCPU, mostMem int
	missing := make([]int, len(g.drivers))
	unmet := make([]int, len(g.rules))
	distinct := map[*rule]*distinctRule{}
	for _, d := range g.distinct {
		distinct[d.rule] = d
	}
	for _, n := range s.all {
		if n.node.Status != spec.NodeReady {
			notReady++
			continue
		}
		lacks := false
		for i, d := range g.drivers {
			if !n.cls.drivers[d] {
				missing[i]++
				lacks = true
			}
		}
		if lacks {
			continue
		}
		for i, r := range g.rules {
			ok := r.match(n.node)
			if d := distinct[r]; d != nil {
				ok = ok && d.allows(n.node)
			}
			if !ok {
				unmet[i]++
				lacks = true
			}
		}
		if lacks {
			continue
		}
		free := n.node.Resources.Sub(n.used)
		if g.need.CPU > free.CPU {
			cpu++
			mostCPU = max(mostCPU, free.CPU)
		}
		if g.need.MemoryMB > free.MemoryMB {
			mem++
			mostMem = max(mostMem, free.MemoryMB)
		}
	}
	f := spec.PlacementFailure{NodesEvaluated: len(s.all)}
	if notReady > 0 {
		f.Dimensions = append(f.Dimensions, spec.DimensionFailure{Dimension: "status", Nodes: notReady})
	}
	for i, d := range g.drivers {
		if missing[i] > 0 {
			f.Dimensions = append(f.Dimensions, spec.DimensionFailure{Dimension: "driver " + d, Nodes: missing[i]})
		}
	}
	for i, r := range g.rules {
		if unmet[i] > 0 {
			f.Dimensions = append(f.Dimensions, spec.DimensionFailure{Dimension: r.dimension(), Nodes: unmet[i]})
		}
	}
	if cpu > 0 {
		f.Dimensions = append(f.Dimensions, spec.DimensionFailure{Dimension: "cpu", Nodes: cpu, Need: g.need.CPU, MostFree: mostCPU, Unit: "MHz"})
	}
	if mem > 0 {
		f.Dimensions = append(f.Dimensions, spec.DimensionFailure{Dimension: "memory", Nodes: mem, Need: g.need.MemoryMB, MostFree: mostMem, Unit: "MB"})
	}
	return f
}
