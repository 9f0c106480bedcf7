package scheduler

import (
	"slices"
	"testing"

	"github.com/drover-org/drover/internal/spec"
)

// nomadNodes are four idle nodes as agents now register them: attributes
// under Nomad's names, a datacenter, a class and a pool. n4 is a record
// of an older agent: drover's old attribute names, no datacenter or pool.
func nomadNodes() []*spec.Node {
	mk := func(id, dc, class, pool string, attrs, meta map[string]string, drivers ...string) *spec.Node {
		n := node(id, 4000, 8192, drivers...)
		n.Datacenter, n.NodeClass, n.NodePool, n.Attributes, n.Meta = dc, class, pool, attrs, meta
		return n
	}
	return []*spec.Node{
		mk("n1", "dc1", "linux-64bit", "default",
			map[string]string{spec.AttrKernelName: "linux", spec.AttrCPUArch: "amd64", spec.AttrKernelVersion: "6.8.0", spec.AttrOSName: "ubuntu"},
			map[string]string{"rack": "r1"}, "exec", "raw_exec"),
		mk("n2", "us-east-1", "linux-arm", "default",
			map[string]string{spec.AttrKernelName: "linux", spec.AttrCPUArch: "arm64", spec.AttrKernelVersion: "6.1.0", spec.AttrOSName: "debian"},
			map[string]string{"rack": "r2"}, "exec"),
		mk("n3", "us-west-2", "", "gpu",
			map[string]string{spec.AttrKernelName: "linux", spec.AttrCPUArch: "amd64", spec.AttrKernelVersion: "6.8.0"},
			nil, "exec"),
		mk("n4", "", "", "",
			map[string]string{"os": "linux", "arch": "amd64", "kernel": "5.15.0"},
			nil, "exec"),
	}
}

// placeOn places one instance of j's group more than want has nodes, one
// a node (distinct_hosts), and returns the node IDs and the failure's
// text: when the nodes j may use are exactly want, the last instance
// fails.
func placeOn(t *testing.T, nodes []*spec.Node, j *spec.Job, want []string) ([]string, string) {
	t.Helper()
	g := j.Groups[0]
	g.Constraints = append(g.Constraints, con("", spec.OpDistinctHosts, ""))
	got := Place(Input{Nodes: nodes, Requests: reqs(j, g, seq(len(want)+1)...)})
	var ids []string
	for _, p := range got.Placements {
		ids = append(ids, p.NodeID)
	}
	slices.Sort(ids)
	if len(got.Failures) != 1 {
		t.Fatalf("placed on %v, failures %v: want one instance not placed", ids, got.Failures)
	}
	return ids, got.Failures[0].String()
}

// TestNomadTargets matches constraints on Nomad's attribute names and
// node fields, on records of both kinds: Nomad's names read an old
// record, drover's old names read a new one.
func TestNomadTargets(t *testing.T) {
	for _, tt := range []struct {
		name string
		c    *spec.Constraint
		want []string
	}{
		{"attr.kernel.name", con("${attr.kernel.name}", "=", "linux"), []string{"n1", "n2", "n3", "n4"}},
		{"attr.cpu.arch reads an old record's arch", con("${attr.cpu.arch}", "=", "amd64"), []string{"n1", "n3", "n4"}},
		{"the old attr.arch reads a new record", con("${attr.arch}", "=", "arm64"), []string{"n2"}},
		{"attr.kernel.version", con("${attr.kernel.version}", "version", ">= 6.5"), []string{"n1", "n3"}},
		{"attr.os.name", con("${attr.os.name}", "regexp", "^(ubuntu|debian)$"), []string{"n1", "n2"}},
		{"attr.driver.<name> is 1 for each driver", con("${attr.driver.raw_exec}", "=", "1"), []string{"n1"}},
		{"attr.driver.<name> is not set without the driver", con("${attr.driver.raw_exec}", "is_not_set", ""), []string{"n2", "n3", "n4"}},
		{"node.class", con("${node.class}", "=", "linux-arm"), []string{"n2"}},
		{"node.class is set, empty, on a node without one", con("${node.class}", "=", ""), []string{"n3", "n4"}},
		{"node.datacenter, dc1 on an old record", con("${node.datacenter}", "=", "dc1"), []string{"n1", "n4"}},
		{"node.datacenter regexp", con("${node.datacenter}", "regexp", "^us-"), []string{"n2", "n3"}},
		{"node.pool, all: every pool", con("${node.pool}", "=", "default"), []string{"n1", "n2", "n4"}},
		{"node.unique.id", con("${node.unique.id}", "=", "n2"), []string{"n2"}},
		{"meta", con("${meta.rack}", "set_contains_any", "r2,r9"), []string{"n2"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := group("api", 100, 128, "exec")
			g.Constraints = []*spec.Constraint{tt.c}
			j := job("web", 50, g)
			j.NodePool = spec.NodePoolAll
			if got, _ := placeOn(t, nomadNodes(), j, tt.want); !slices.Equal(got, tt.want) {
				t.Errorf("placed on %v, want %v", got, tt.want)
			}
		})
	}
}

// TestDatacentersAndPools places jobs by their datacenters (Nomad's
// globs) and node pool, and checks the reason when no node is in them.
func TestDatacentersAndPools(t *testing.T) {
	for _, tt := range []struct {
		name        string
		datacenters []string
		pool        string
		want        []string
		fail        string
	}{
		{"no datacenters: every one; the default pool", nil, "", []string{"n1", "n2", "n4"}, ""},
		{"dc1 holds the record without a datacenter", []string{"dc1"}, "", []string{"n1", "n4"}, ""},
		{"a glob", []string{"us-*"}, "", []string{"n2"}, ""},
		{"a glob in the middle", []string{"us-*-1"}, "", []string{"n2"}, ""},
		{"* is every datacenter", []string{"*"}, "", []string{"n1", "n2", "n4"}, ""},
		{"several", []string{"dc1", "us-west-*"}, spec.NodePoolAll, []string{"n1", "n3", "n4"}, ""},
		{"a pool", nil, "gpu", []string{"n3"}, ""},
		{"the all pool", nil, spec.NodePoolAll, []string{"n1", "n2", "n3", "n4"}, ""},
		{"no node in the datacenter", []string{"nowhere"}, "", nil,
			"0/4 nodes fit: not in node pool default on 1; not in datacenter nowhere on 3"},
		{"no node in either datacenter", []string{"eu-*", "ap-*"}, spec.NodePoolAll, nil,
			"0/4 nodes fit: not in datacenter eu-* or ap-* on 4"},
		{"no node in the pool", nil, "arm", nil, "0/4 nodes fit: not in node pool arm on 4"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			j := job("web", 50, group("api", 100, 128, "exec"))
			j.Datacenters, j.NodePool = tt.datacenters, tt.pool
			got, fail := placeOn(t, nomadNodes(), j, tt.want)
			if !slices.Equal(got, tt.want) || tt.want == nil && fail != tt.fail {
				t.Errorf("placed on %v, failure %q;\nwant %v, failure %q", got, fail, tt.want, tt.fail)
			}
		})
	}
}

// TestDatacentersStopPreemption: a job that may preempt does not evict
// work in a datacenter it does not run in.
func TestDatacentersStopPreemption(t *testing.T) {
	nodes := []*spec.Node{node("a", 1000, 1024, "exec"), node("b", 1000, 1024, "exec")}
	nodes[0].Datacenter, nodes[1].Datacenter = "dc1", "dc2"
	low := alloc("low", "b", 1000, 1024, spec.ClientRunning)
	low.Job = "batchy"
	yes := true
	j := job("urgent", 90, group("api", 1000, 1024, "exec"))
	j.Datacenters, j.Preempt = []string{"dc2"}, &yes
	other := job("batchy", 10, group("g", 1000, 1024, "exec"))
	full := alloc("full", "a", 1000, 1024, spec.ClientRunning)
	full.Job = "batchy"
	rs := reqs(j, j.Groups[0], 0)
	got := Place(Input{Nodes: nodes, Requests: rs, Allocs: []*spec.Alloc{full, low},
		Jobs: map[string]*spec.Job{"urgent": j, "batchy": other}})
	if len(got.Placements) != 1 || got.Placements[0].NodeID != "b" || len(got.Evictions) != 1 || got.Evictions[0].Alloc.ID != "low" {
		t.Fatalf("placements %+v, evictions %+v; want on b, evicting low", got.Placements, got.Evictions)
	}
	j.Datacenters = []string{"dc3"}
	got = Place(Input{Nodes: nodes, Requests: rs, Allocs: []*spec.Alloc{full, low},
		Jobs: map[string]*spec.Job{"urgent": j, "batchy": other}})
	if len(got.Placements) != 0 || len(got.Evictions) != 0 {
		t.Fatalf("placed %+v, evicted %+v outside the job's datacenters", got.Placements, got.Evictions)
	}
}
