package scheduler

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/drover-org/drover/internal/spec"
)

// constraintNodes are four idle nodes of equal size that differ in their
// attributes and meta.
func constraintNodes() []*spec.Node {
	with := func(n *spec.Node, attrs, meta map[string]string) *spec.Node {
		n.Attributes, n.Meta = attrs, meta
		return n
	}
	return []*spec.Node{
		with(node("n1", 4000, 8192, "exec"),
			map[string]string{"os": "linux", "arch": "amd64", "kernel": "6.1.0", "cpu.count": "8"},
			map[string]string{"rack": "r1", "tags": "ssd,gpu", "version": "1.10.0", "zone": "a"}),
		with(node("n2", 4000, 8192, "exec"),
			map[string]string{"os": "linux", "arch": "arm64", "kernel": "5.10.0", "cpu.count": "16"},
			map[string]string{"rack": "r2", "tags": "ssd", "version": "1.9.2", "zone": "a"}),
		with(node("n3", 4000, 8192, "exec"),
			map[string]string{"os": "darwin", "arch": "arm64", "kernel": "23.1.0", "cpu.count": "4"},
			map[string]string{"rack": "r10", "tags": "gpu, big", "version": "2.0.0-rc.1"}),
		with(node("n4", 4000, 8192, "exec"),
			map[string]string{"os": "linux", "arch": "amd64", "kernel": "6.1.0-rc3", "cpu.count": "32"},
			nil),
	}
}

func con(attr, op, value string) *spec.Constraint {
	return &spec.Constraint{Attribute: attr, Operator: op, Value: value}
}

// TestConstraintOperators places one instance per node that meets the
// constraint (all nodes are idle and alike, so they fill in ID order) and
// compares the whole result; a case that wants no node compares the
// failure and its text.
func TestConstraintOperators(t *testing.T) {
	tests := []struct {
		name string
		c    *spec.Constraint
		want []string // node IDs, in placement order
		text string   // the failure, when want is empty
	}{
		{"= on node.name", con("${node.name}", "=", "host-n2"), []string{"n2"}, ""},
		{"empty operator means =", con("${attr.os}", "", "darwin"), []string{"n3"}, ""},
		{"= on node.id", con("${node.id}", "=", "n3"), []string{"n3"}, ""},
		{"node.unique.name is node.name", con("${node.unique.name}", "=", "host-n4"), []string{"n4"}, ""},
		{"!= on node.name", con("${node.name}", "!=", "host-n2"), []string{"n1", "n3", "n4"}, ""},
		{"!= holds where the target is not set", con("${meta.rack}", "!=", "r1"), []string{"n2", "n3", "n4"}, ""},
		{"> numeric when both sides are numbers", con("${attr.cpu.count}", ">", "10"), []string{"n2", "n4"}, ""},
		{">= numeric", con("${attr.cpu.count}", ">=", "16"), []string{"n2", "n4"}, ""},
		{"< numeric", con("${attr.cpu.count}", "<", "8"), []string{"n3"}, ""},
		{"<= numeric", con("${attr.cpu.count}", "<=", "8.0"), []string{"n1", "n3"}, ""},
		{"< lexical otherwise", con("${meta.rack}", "<", "r2"), []string{"n1", "n3"}, ""},
		{"> lexical on strings", con("${attr.os}", ">", "e"), []string{"n1", "n2", "n4"}, ""},
		{"comparison fails where the target is not set", con("${meta.rack}", ">=", "r"), []string{"n1", "n2", "n3"}, ""},
		{"regexp is unanchored", con("${attr.kernel}", "regexp", `6\.1`), []string{"n1", "n4"}, ""},
		{"regexp anchored", con("${attr.kernel}", "regexp", `^6\.`), []string{"n1", "n4"}, ""},
		{"version range", con("${meta.version}", "version", ">= 1.9, < 2"), []string{"n1", "n2"}, ""},
		{"version: a prerelease meets only prerelease terms", con("${attr.kernel}", "version", ">= 6"), []string{"n1", "n3"}, ""},
		{"version: a prerelease meets a prerelease term of its numbers", con("${attr.kernel}", "version", ">= 6.1.0-rc1"), []string{"n1", "n3", "n4"}, ""},
		{"version pessimistic", con("${meta.version}", "version", "~> 1.9"), []string{"n1", "n2"}, ""},
		{"version pessimistic patch", con("${meta.version}", "version", "~> 1.9.0"), []string{"n2"}, ""},
		{"version equal pads zeros", con("${meta.version}", "version", "1.10"), []string{"n1"}, ""},
		{"semver orders prereleases", con("${meta.version}", "semver", ">= 1.9.0, < 2.0.0"), []string{"n1", "n2", "n3"}, ""},
		{"semver on kernels", con("${attr.kernel}", "semver", ">= 6.0.0"), []string{"n1", "n3", "n4"}, ""},
		{"set_contains all", con("${meta.tags}", "set_contains", "ssd,gpu"), []string{"n1"}, ""},
		{"set_contains one", con("${meta.tags}", "set_contains", "gpu"), []string{"n1", "n3"}, ""},
		{"set_contains_any", con("${meta.tags}", "set_contains_any", "big, ssd"), []string{"n1", "n2", "n3"}, ""},
		{"is_set on meta", con("${meta.zone}", "is_set", ""), []string{"n1", "n2"}, ""},
		{"is_not_set on meta", con("${meta.zone}", "is_not_set", ""), []string{"n3", "n4"}, ""},
		{"is_set on attr", con("${attr.arch}", "is_set", ""), []string{"n1", "n2", "n3", "n4"}, ""},
		{"is_not_set on attr", con("${attr.gpu}", "is_not_set", ""), []string{"n1", "n2", "n3", "n4"}, ""},
		{"no node", con("${attr.os}", "=", "windows"), nil, "0/4 nodes fit: constraint ${attr.os} = windows not met on 4; hint: fits on 4 nodes without constraint ${attr.os} = windows"},
		{"is_set nowhere", con("${meta.gpu}", "is_set", ""), nil, "0/4 nodes fit: constraint ${meta.gpu} is_set not met on 4; hint: fits on 4 nodes without constraint ${meta.gpu} is_set"},
		{"invalid constraint places nothing", con("${attr.os}", "regexp", "("), nil, "0/4 nodes fit: constraint ${attr.os} regexp ( (invalid) not met on 4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes := constraintNodes()
			byID := map[string]*spec.Node{}
			for _, n := range nodes {
				byID[n.ID] = n
			}
			g := group("api", 100, 128, "exec")
			g.Constraints = []*spec.Constraint{tt.c}
			j := job("web", 50, g)
			var want Result
			var rs []Request
			if len(tt.want) == 0 {
				rs = reqs(j, g, 0)
				c := *tt.c
				if c.Operator == "" {
					c.Operator = "="
				}
				want.Failures = []Failure{{Job: "web", Requests: rs, PlacementFailure: spec.PlacementFailure{
					Group: "api", Missing: 1, NodesEvaluated: 4,
					Dimensions: []spec.DimensionFailure{{Dimension: "constraint " + c.String() + map[bool]string{true: " (invalid)"}[tt.c.Value == "("], Nodes: 4}},
				}}}
				if tt.c.Value != "(" {
					want.Failures[0].Hints = []string{"fits on 4 nodes without constraint " + c.String()}
				}
			} else {
				rs = reqs(j, g, seq(len(tt.want))...)
				for i, id := range tt.want {
					want.Placements = append(want.Placements, placed(rs[i], byID[id]))
				}
			}
			got := Place(Input{Nodes: nodes, Requests: rs})
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Place() mismatch (-want +got):\n%s", diff)
			}
			if tt.text != "" && len(got.Failures) == 1 {
				if s := got.Failures[0].String(); s != tt.text {
					t.Errorf("failure text\n got %s\nwant %s", s, tt.text)
				}
			}
		})
	}
}

// groupAlloc is a live alloc of web.api on a node.
func groupAlloc(id, nodeID string) *spec.Alloc {
	a := alloc(id, nodeID, 100, 128, spec.ClientRunning)
	a.Job, a.Group = "web", "api"
	return a
}

func TestConstraintPlacement(t *testing.T) {
	nodes := constraintNodes()
	n1, n2, n3, n4 := nodes[0], nodes[1], nodes[2], nodes[3]

	// Constraints at every level all apply to the group.
	levels := group("api", 100, 128, "exec")
	levels.Tasks[0].Constraints = []*spec.Constraint{con("${attr.arch}", "=", "amd64")}
	levelsJob := job("web", 50, levels)
	levelsJob.Constraints = []*spec.Constraint{con("${attr.os}", "=", "linux")}
	levelsReqs := reqs(levelsJob, levels, 0, 1, 2)

	hosts := group("api", 100, 128, "exec")
	hosts.Constraints = []*spec.Constraint{{Operator: "distinct_hosts"}}
	hostsJob := job("web", 50, hosts)
	hostsReqs := reqs(hostsJob, hosts, 0, 1, 2, 3, 4)

	hostsOff := group("api", 100, 128, "exec")
	hostsOff.Constraints = []*spec.Constraint{{Operator: "distinct_hosts", Value: "false"}}
	hostsOffJob := job("web", 50, hostsOff)
	hostsOffReqs := reqs(hostsOffJob, hostsOff, 0, 1, 2, 3, 4)

	prop := group("api", 100, 128, "exec")
	prop.Constraints = []*spec.Constraint{con("${attr.arch}", "distinct_property", "")}
	propJob := job("web", 50, prop)
	propReqs := reqs(propJob, prop, 0, 1, 2)

	prop2 := group("api", 100, 128, "exec")
	prop2.Constraints = []*spec.Constraint{con("${meta.zone}", "distinct_property", "2")}
	prop2Job := job("web", 50, prop2)
	prop2Reqs := reqs(prop2Job, prop2, 0, 1, 2)

	// 10 nodes: 6 in the wrong rack, 4 in r1 but short of memory.
	var ten []*spec.Node
	for i := range 10 {
		n := node(fmt.Sprintf("m%02d", i), 4000, 8192, "exec")
		n.Meta = map[string]string{"rack": "r3"}
		if i >= 6 {
			n.Meta["rack"] = "r1"
			n.Resources.MemoryMB = 256 * (i - 5)
		}
		ten = append(ten, n)
	}
	rack := group("api", 100, 2048, "exec")
	rack.Constraints = []*spec.Constraint{con("${meta.rack}", "set_contains_any", "r1,r2")}
	rackJob := job("web", 50, rack)
	rackReqs := reqs(rackJob, rack, 0)

	// Two groups with the same constraint share a node set, and the
	// placements of one move the other.
	shareA := group("a", 1000, 1024, "exec")
	shareB := group("b", 1000, 1024, "exec")
	shareA.Constraints = []*spec.Constraint{con("${attr.os}", "=", "linux")}
	shareB.Constraints = []*spec.Constraint{con("${attr.os}", "=", "linux")}
	shareJob := job("web", 50, shareA, shareB)
	aReqs, bReqs := reqs(shareJob, shareA, 0, 1), reqs(shareJob, shareB, 0, 1)

	tests := []struct {
		name     string
		in       Input
		want     Result
		wantText []string
	}{
		{
			name: "job, group and task constraints all apply",
			in:   Input{Nodes: nodes, Requests: levelsReqs},
			want: Result{Placements: []Placement{placed(levelsReqs[0], n1), placed(levelsReqs[1], n4), placed(levelsReqs[2], n1)}},
		},
		{
			name: "distinct_hosts: one instance per node, then a reason",
			in:   Input{Nodes: nodes, Requests: hostsReqs},
			want: Result{
				Placements: []Placement{placed(hostsReqs[0], n1), placed(hostsReqs[1], n2), placed(hostsReqs[2], n3), placed(hostsReqs[3], n4)},
				Failures: []Failure{{Job: "web", Requests: hostsReqs[4:], PlacementFailure: spec.PlacementFailure{
					Group: "api", Missing: 1, NodesEvaluated: 4, Dimensions: []spec.DimensionFailure{{Dimension: "constraint distinct_hosts", Nodes: 4}},
					Hints: []string{"fits on 4 nodes without constraint distinct_hosts"},
				}}},
			},
			wantText: []string{"0/4 nodes fit: constraint distinct_hosts not met on 4; hint: fits on 4 nodes without constraint distinct_hosts"},
		},
		{
			name: "distinct_hosts counts the group's live allocs, not others or stopped ones",
			in: Input{
				Nodes: nodes,
				Allocs: []*spec.Alloc{
					groupAlloc("x1", "n2"),
					alloc("x2", "n1", 100, 128, spec.ClientRunning), // another group
					func() *spec.Alloc { a := groupAlloc("x3", "n3"); a.Status.ClientStatus = spec.ClientComplete; return a }(),
					groupAlloc("x4", "n4"),
				},
				Freed:    map[string]bool{"x4": true},
				Requests: hostsReqs[:4],
			},
			want: Result{
				Placements: []Placement{placed(hostsReqs[0], n3), placed(hostsReqs[1], n4), placed(hostsReqs[2], n1)},
				Failures: []Failure{{Job: "web", Requests: hostsReqs[3:4], PlacementFailure: spec.PlacementFailure{
					Group: "api", Missing: 1, NodesEvaluated: 4, Dimensions: []spec.DimensionFailure{{Dimension: "constraint distinct_hosts", Nodes: 4}},
					Hints: []string{"fits on 4 nodes without constraint distinct_hosts"},
				}}},
			},
		},
		{
			name: "distinct_hosts = false asks for nothing",
			in:   Input{Nodes: nodes, Requests: hostsOffReqs},
			want: Result{Placements: []Placement{
				placed(hostsOffReqs[0], n1), placed(hostsOffReqs[1], n2), placed(hostsOffReqs[2], n3), placed(hostsOffReqs[3], n4), placed(hostsOffReqs[4], n1),
			}},
		},
		{
			name: "distinct_property: one per value by default",
			in:   Input{Nodes: nodes, Requests: propReqs},
			want: Result{
				Placements: []Placement{placed(propReqs[0], n1), placed(propReqs[1], n2)},
				Failures: []Failure{{Job: "web", Requests: propReqs[2:], PlacementFailure: spec.PlacementFailure{
					Group: "api", Missing: 1, NodesEvaluated: 4, Dimensions: []spec.DimensionFailure{{Dimension: "constraint ${attr.arch} distinct_property", Nodes: 4}},
					Hints: []string{"fits on 4 nodes without constraint ${attr.arch} distinct_property"},
				}}},
			},
			wantText: []string{"0/4 nodes fit: constraint ${attr.arch} distinct_property not met on 4; hint: fits on 4 nodes without constraint ${attr.arch} distinct_property"},
		},
		{
			name: "distinct_property counts live allocs by the value of their node",
			in:   Input{Nodes: nodes, Allocs: []*spec.Alloc{groupAlloc("x1", "n3")}, Requests: propReqs[:2]},
			want: Result{
				Placements: []Placement{placed(propReqs[0], n1)},
				Failures: []Failure{{Job: "web", Requests: propReqs[1:2], PlacementFailure: spec.PlacementFailure{
					Group: "api", Missing: 1, NodesEvaluated: 4, Dimensions: []spec.DimensionFailure{{Dimension: "constraint ${attr.arch} distinct_property", Nodes: 4}},
					Hints: []string{"fits on 4 nodes without constraint ${attr.arch} distinct_property"},
				}}},
			},
		},
		{
			name: "distinct_property with a limit; nodes without the property do not fit",
			in:   Input{Nodes: nodes, Requests: prop2Reqs},
			want: Result{
				Placements: []Placement{placed(prop2Reqs[0], n1), placed(prop2Reqs[1], n2)},
				Failures: []Failure{{Job: "web", Requests: prop2Reqs[2:], PlacementFailure: spec.PlacementFailure{
					Group: "api", Missing: 1, NodesEvaluated: 4, Dimensions: []spec.DimensionFailure{{Dimension: "constraint ${meta.zone} distinct_property 2", Nodes: 4}},
					Hints: []string{"fits on 4 nodes without constraint ${meta.zone} distinct_property 2"},
				}}},
			},
			wantText: []string{"0/4 nodes fit: constraint ${meta.zone} distinct_property 2 not met on 4; hint: fits on 4 nodes without constraint ${meta.zone} distinct_property 2"},
		},
		{
			name: "constraint and memory in one explanation",
			in:   Input{Nodes: ten, Requests: rackReqs},
			want: Result{Failures: []Failure{{Job: "web", Requests: rackReqs, PlacementFailure: spec.PlacementFailure{
				Group: "api", Missing: 1, NodesEvaluated: 10, Dimensions: []spec.DimensionFailure{
					{Dimension: "constraint ${meta.rack} set_contains_any r1,r2", Nodes: 6},
					{Dimension: "memory", Nodes: 4, Need: 2048, MostFree: 1024, Largest: 1024, Unit: "MB"},
				},
				Hints: []string{"fits on 1 node if memory <= 1024 MB", "fits on 6 nodes without constraint ${meta.rack} set_contains_any r1,r2"},
			}}}},
			wantText: []string{"0/10 nodes fit: constraint ${meta.rack} set_contains_any r1,r2 not met on 6; memory too small on 4 (need 2048 MB, the largest has 1024 MB in all); hint: fits on 1 node if memory <= 1024 MB; hint: fits on 6 nodes without constraint ${meta.rack} set_contains_any r1,r2"},
		},
		{
			name: "status, driver, constraints, resources in that order",
			in: Input{
				Nodes: []*spec.Node{
					down(node("d1", 4000, 8192, "exec")),
					node("d2", 4000, 8192, "raw_exec"),
					func() *spec.Node {
						n := node("d3", 4000, 8192, "exec")
						n.Meta = map[string]string{"rack": "r9"}
						return n
					}(),
					func() *spec.Node {
						n := node("d4", 4000, 1024, "exec")
						n.Meta = map[string]string{"rack": "r1"}
						return n
					}(),
				},
				Requests: rackReqs,
			},
			want: Result{Failures: []Failure{{Job: "web", Requests: rackReqs, PlacementFailure: spec.PlacementFailure{
				Group: "api", Missing: 1, NodesEvaluated: 4, Dimensions: []spec.DimensionFailure{
					{Dimension: "status", Nodes: 1},
					{Dimension: "driver exec", Nodes: 1},
					{Dimension: "constraint ${meta.rack} set_contains_any r1,r2", Nodes: 1},
					{Dimension: "memory", Nodes: 1, Need: 2048, MostFree: 1024, Largest: 1024, Unit: "MB"},
				},
				Hints: []string{"fits on 1 node if memory <= 1024 MB", "fits on 1 node without constraint ${meta.rack} set_contains_any r1,r2"},
			}}}},
			wantText: []string{"0/4 nodes fit: not ready on 1; missing driver exec on 1; constraint ${meta.rack} set_contains_any r1,r2 not met on 1; memory too small on 1 (need 2048 MB, the largest has 1024 MB in all); hint: fits on 1 node if memory <= 1024 MB; hint: fits on 1 node without constraint ${meta.rack} set_contains_any r1,r2"},
		},
		{
			name: "groups sharing a constraint see each other's load",
			in:   Input{Nodes: nodes, Requests: concat(aReqs, bReqs)},
			want: Result{Placements: []Placement{
				placed(aReqs[0], n1), placed(aReqs[1], n2), placed(bReqs[0], n4), placed(bReqs[1], n1),
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Place(tt.in)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Place() mismatch (-want +got):\n%s", diff)
			}
			if tt.wantText != nil {
				var text []string
				for _, f := range got.Failures {
					text = append(text, f.String())
				}
				if diff := cmp.Diff(tt.wantText, text); diff != "" {
					t.Errorf("failure text mismatch (-want +got):\n%s", diff)
				}
			}
		})
	}
}
