package scheduler

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/drover-org/drover/internal/spec"
)

// nodesOf returns the node of each placement, in order.
func nodesOf(res Result) []string {
	var out []string
	for _, p := range res.Placements {
		out = append(out, p.NodeID)
	}
	return out
}

func TestPorts(t *testing.T) {
	nodes := []*spec.Node{node("n1", 4000, 8192, "exec"), node("n2", 4000, 8192, "exec")}
	nodes[1].Attributes = map[string]string{spec.NodeIPAttribute: "10.0.0.2"}
	j := job("web", 50, group("api", 100, 128, "exec"))
	j.Scoring = spec.ScoreBinpack // would stack all instances on one node
	g := j.Groups[0]
	g.Count = 3
	g.Network = &spec.Network{Ports: []spec.Port{{Label: "http", Static: 8080}, {Label: "admin"}}}
	existing := alloc("x1", "n1", 100, 128, spec.ClientRunning)
	existing.Ports = []spec.AllocPort{{Label: "p", Value: spec.DynamicPortMin}}
	_, res := placeAll(j, nodes, existing)

	// A static port is held once per node: two instances, one per node,
	// and the third waits with the port as its reason.
	want := []Placement{
		{NodeID: "n1", Ports: []spec.AllocPort{{Label: "http", Value: 8080, HostIP: "127.0.0.1"}, {Label: "admin", Value: spec.DynamicPortMin + 1, HostIP: "127.0.0.1"}}},
		{NodeID: "n2", Ports: []spec.AllocPort{{Label: "http", Value: 8080, HostIP: "10.0.0.2"}, {Label: "admin", Value: spec.DynamicPortMin, HostIP: "10.0.0.2"}}},
	}
	var got []Placement
	for _, p := range res.Placements {
		got = append(got, Placement{NodeID: p.NodeID, Ports: p.Ports})
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("placements (-want +got):\n%s", diff)
	}
	if len(res.Failures) != 1 {
		t.Fatalf("failures %v, want one", res.Failures)
	}
	wantText := "0/2 nodes fit: port 8080 in use on 2; hint: fits on 2 nodes with a dynamic port instead of static port 8080"
	if s := res.Failures[0].String(); s != wantText {
		t.Errorf("failure\n got %s\nwant %s", s, wantText)
	}
}

func TestDisk(t *testing.T) {
	nodes := []*spec.Node{node("n1", 4000, 8192, "exec"), node("n2", 4000, 8192, "exec")}
	nodes[0].Resources.DiskMB, nodes[1].Resources.DiskMB = 1000, 500
	j := job("web", 50, group("api", 100, 128, "exec"))
	j.Groups[0].Count = 3
	j.Groups[0].Tasks[0].Resources.DiskMB = 400
	_, res := placeAll(j, nodes)
	if diff := cmp.Diff([]string{"n1", "n2", "n1"}, nodesOf(res)); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
	_, res = placeAll(j, nodes[1:])
	if len(res.Failures) != 1 || res.Failures[0].String() != "0/1 nodes fit: disk exhausted on 1 (need 400 MB, most free 100 MB); hint: fits on 1 node if disk <= 100 MB" {
		t.Errorf("failures %v", res.Failures)
	}
}

func TestPinned(t *testing.T) {
	nodes := []*spec.Node{node("n1", 4000, 8192, "exec"), node("n2", 400, 8192, "exec"), down(node("n3", 4000, 8192, "exec"))}
	j := job("agent", 50, group("g", 500, 128, "exec"))
	j.Type = spec.JobSystem
	var rs []Request
	for i, n := range []string{"n1", "n2", "n3", "n9"} {
		rs = append(rs, Request{Job: j, Group: j.Groups[0], Index: i, Node: n})
	}
	res := Place(Input{Nodes: nodes, Requests: rs})
	if diff := cmp.Diff([]string{"n1"}, nodesOf(res)); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
	want := "0/2 nodes fit: 1 pinned node(s) not registered; not ready on 1; cpu too small on 1 (need 500 MHz, the largest has 400 MHz in all); hint: fits on 1 node if cpu <= 400 MHz"
	if len(res.Failures) != 1 || res.Failures[0].Missing != 3 || res.Failures[0].String() != want {
		t.Errorf("failures %+v\nwant one with 3 missing: %s", res.Failures, want)
	}
}

func TestPreemption(t *testing.T) {
	nodes := []*spec.Node{node("n1", 1000, 1024, "exec"), node("n2", 1000, 1024, "exec")}
	low := job("batch", 20, group("g", 600, 128, "exec"))
	mid := job("mid", 45, group("g", 600, 128, "exec"))
	jobs := map[string]*spec.Job{"batch": low, "mid": mid}
	a1 := alloc("low-1", "n1", 600, 128, spec.ClientRunning)
	a1.Job, a1.Group = "batch", "g"
	a2 := alloc("mid-1", "n2", 600, 128, spec.ClientRunning)
	a2.Job, a2.Group = "mid", "g"
	for _, tt := range []struct {
		name     string
		preempt  *bool
		typ      spec.JobType
		node     string
		evicted  []string
		failures int
	}{
		{name: "off by default for services", failures: 1},
		{name: "opt in: the lowest priority goes", preempt: ptr(true), node: "n1", evicted: []string{"low-1"}},
		{name: "on by default for system jobs", typ: spec.JobSystem, node: "n1", evicted: []string{"low-1"}},
		{name: "less than 10 below is never evicted", preempt: ptr(true), typ: spec.JobService, node: "n2", failures: 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			hi := job("web", 50, group("api", 600, 128, "exec"))
			hi.Preempt = tt.preempt
			if tt.typ != "" {
				hi.Type = tt.typ
			}
			r := Request{Job: hi, Group: hi.Groups[0]}
			if tt.node == "n2" {
				r.Node = "n2" // only mid (45) is there: within 10 of 50
			}
			res := Place(Input{Nodes: nodes, Allocs: []*spec.Alloc{a1, a2}, Jobs: jobs, Requests: []Request{r}})
			var evicted []string
			for _, e := range res.Evictions {
				evicted = append(evicted, e.Alloc.ID)
			}
			if diff := cmp.Diff(tt.evicted, evicted); diff != "" {
				t.Errorf("evicted (-want +got):\n%s", diff)
			}
			if len(res.Failures) != tt.failures {
				t.Errorf("failures %v, want %d", res.Failures, tt.failures)
			}
			if tt.failures == 0 && (len(res.Placements) != 1 || res.Placements[0].NodeID != tt.node) {
				t.Errorf("placements %v, want on %s", res.Placements, tt.node)
			}
			if len(res.Evictions) > 0 && res.Evictions[0].Reason != "preempted by web.api[0] (priority 50 > 20)" {
				t.Errorf("reason %q", res.Evictions[0].Reason)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestJobRules(t *testing.T) {
	nodes := []*spec.Node{node("n1", 4000, 8192, "exec"), node("n2", 4000, 8192, "exec"), node("n3", 4000, 8192, "exec")}
	db := alloc("db-1", "n2", 100, 128, spec.ClientRunning)
	db.Job, db.Group = "db", "g"
	old := alloc("old-1", "n3", 100, 128, spec.ClientRunning)
	old.Job, old.Group = "web-old", "g"
	jobs := map[string]*spec.Job{
		"db":      job("db", 50, group("g", 100, 128, "exec")),
		"web-old": job("web-old", 50, group("g", 100, 128, "exec")),
	}
	jobs["db"].Constraints = []*spec.Constraint{{Operator: spec.OpConflicts, Value: "cache*"}}
	for _, tt := range []struct {
		name    string
		c       []*spec.Constraint
		job     string
		pin     string
		want    []string
		evicted []string
	}{
		{name: "colocate goes where the job runs", c: []*spec.Constraint{{Operator: spec.OpColocate, Value: "db"}}, want: []string{"n2", "n2"}},
		{name: "conflicts keeps off its nodes", c: []*spec.Constraint{{Operator: spec.OpConflicts, Value: "db*"}, {Operator: spec.OpDistinctHosts}}, want: []string{"n1", "n3"}},
		{name: "another job's conflicts keep this one off", job: "cache", c: []*spec.Constraint{{Operator: spec.OpDistinctHosts}}, want: []string{"n1", "n3"}},
		{name: "replaces avoids the node while others fit", c: []*spec.Constraint{{Operator: spec.OpReplaces, Value: "web-*"}, {Operator: spec.OpDistinctHosts}}, want: []string{"n1", "n2"}},
		{name: "replaces takes the node when pinned there", c: []*spec.Constraint{{Operator: spec.OpReplaces, Value: "web-*"}}, pin: "n3", want: []string{"n3"}, evicted: []string{"old-1"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			name := tt.job
			if name == "" {
				name = "web"
			}
			j := job(name, 50, group("api", 100, 128, "exec"))
			j.Groups[0].Count = 2
			j.Constraints = tt.c
			in := Input{Nodes: nodes, Allocs: []*spec.Alloc{db, old}, Jobs: jobs, Requests: reqs(j, j.Groups[0], 0, 1)}
			if tt.pin != "" {
				in.Requests = in.Requests[:1]
				in.Requests[0].Node = tt.pin
			}
			res := Place(in)
			if diff := cmp.Diff(tt.want, nodesOf(res)); diff != "" {
				t.Errorf("nodes (-want +got):\n%s\nfailures: %v", diff, res.Failures)
			}
			var evicted []string
			for _, e := range res.Evictions {
				evicted = append(evicted, e.Alloc.ID)
			}
			if diff := cmp.Diff(tt.evicted, evicted); diff != "" {
				t.Errorf("evicted (-want +got):\n%s", diff)
			}
		})
	}
}
