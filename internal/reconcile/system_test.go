package reconcile

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/drover-org/drover/internal/spec"
)

// node is a ready node with the exec driver and the given meta.
func node(id string, meta ...string) *spec.Node {
	n := &spec.Node{ID: id, Name: id, Status: spec.NodeReady, Drivers: []string{"exec"}, Meta: map[string]string{}}
	for i := 0; i+1 < len(meta); i += 2 {
		n.Meta[meta[i]] = meta[i+1]
	}
	return n
}

func nodeDown(n *spec.Node) *spec.Node {
	n.Status = spec.NodeDown
	return n
}

// system is a system job whose groups run only on nodes with meta
// class = edge.
func system(name string, version uint64, groups ...*spec.Group) *spec.Job {
	j := svc(name, version, groups...)
	j.Type = spec.JobSystem
	j.Constraints = []*spec.Constraint{{Attribute: "${meta.class}", Operator: "=", Value: "edge"}}
	return j
}

// reason sets why the alloc was told to stop.
func reason(c spec.DesiredCause, r string) opt {
	return func(a *spec.Alloc) { a.DesiredStatus, a.DesiredCause, a.DesiredReason = spec.DesiredStop, c, r }
}

// evicted is an alloc the leader stopped for a scheduler eviction.
func evicted(r string) opt {
	return reason(spec.CausePreempted, r)
}

func TestReconcileSystem(t *testing.T) {
	logs := system("logs", 1, grp("ship", 1, "ship"))
	// The scheduler's constraints are not the reconciler's to check.
	logs.Groups[0].Constraints = []*spec.Constraint{{Operator: spec.OpDistinctHosts}, {Operator: spec.OpConflicts, Value: "db*"}}
	ship := logs.Groups[0]
	logs2 := system("logs", 2, grp("ship", 1, "ship --v2"))
	same2 := system("logs", 2, grp("ship", 1, "ship"))
	stoppedLogs := system("logs", 1, grp("ship", 1, "ship"))
	stoppedLogs.Stopped = true
	noCount := system("logs", 1, grp("ship", 0, "ship"))

	edge := func(id string) *spec.Node { return node(id, "class", "edge") }
	rawOnly := edge("n3")
	rawOnly.Drivers = []string{"raw_exec"}
	nodes := []*spec.Node{edge("n1"), node("n2", "class", "core"), rawOnly, nodeDown(edge("n4")), edge("n5")}

	run := func(id string, j *spec.Job, n string, index int, ci int64, opts ...opt) *spec.Alloc {
		return mk(id, j, "ship", index, ci, spec.ClientRunning, append([]opt{on(n)}, opts...)...)
	}
	onCore := run("c1", logs, "n2", 1, 2)
	onRaw := run("r1", logs, "n3", 2, 3)
	lost := run("l1aaaaaaaaaa", logs, "n4", 3, 4, down, on("n4"))
	gone1 := run("g1", logs, "n9", 4, 5)
	gone2 := run("g2", logs, "n9", 4, 4, stopped, down, on("n9"))
	old1 := run("o1", logs2, "n1", 0, 1, ver(1, "ship"))
	old5 := run("o5", logs2, "n5", 1, 2, ver(1, "ship"))
	dup := run("d2", logs, "n1", 0, 6)
	// n6 is in an eu datacenter; n7 too, but in another node pool.
	inEU := system("logs", 1, grp("ship", 1, "ship"))
	inEU.Datacenters = []string{"eu-*"}
	euEdge, euPool := edge("n6"), edge("n7")
	euEdge.Datacenter, euPool.Datacenter, euPool.NodePool = "eu-west-1", "eu-west-1", "batch"
	onN1 := run("e1", inEU, "n1", 0, 1)

	tests := []struct {
		name   string
		jobs   []*spec.Job
		nodes  []*spec.Node
		allocs []*spec.Alloc
		want   Result
	}{
		{
			name:  "a new system job runs on every eligible ready node, pinned, whatever its count",
			jobs:  []*spec.Job{noCount},
			nodes: nodes,
			want: Result{Place: []Place{
				{Job: noCount, Group: noCount.Groups[0], Index: 0, Cause: spec.CauseNew, Reason: "new instance", Node: "n1"},
				{Job: noCount, Group: noCount.Groups[0], Index: 1, Cause: spec.CauseNew, Reason: "new instance", Node: "n5"},
			}},
		},
		{
			name: "a system job that no node may run says why, node by node, rather than placing nothing quietly",
			jobs: []*spec.Job{logs},
			nodes: []*spec.Node{node("n2", "class", "core"), rawOnly, nodeDown(edge("n4")), func() *spec.Node {
				n := edge("n6")
				n.Drain = &spec.DrainStrategy{}
				return n
			}()},
			want: Result{Unmatched: []Unmatched{{Job: "logs", PlacementFailure: spec.PlacementFailure{Group: "ship", NodesEvaluated: 4, NoNodeMatched: true,
				Dimensions: []spec.DimensionFailure{{Dimension: "status", Nodes: 1}, {Dimension: "draining", Nodes: 1},
					{Dimension: "constraint ${meta.class} = edge", Nodes: 1}, {Dimension: "driver exec", Nodes: 1}}}}}},
		},
		{
			name:   "a group that still runs on a node taken out of scheduling is not reported",
			jobs:   []*spec.Job{logs},
			nodes:  []*spec.Node{func() *spec.Node { n := edge("n1"); n.Ineligible = true; return n }()},
			allocs: []*spec.Alloc{run("a1", logs, "n1", 0, 1)},
		},
		{
			name:   "steady state, indexes above the count included, changes nothing",
			jobs:   []*spec.Job{logs},
			nodes:  nodes,
			allocs: []*spec.Alloc{run("a1", logs, "n1", 0, 1), run("a5", logs, "n5", 7, 2)},
		},
		{
			name:   "instances on nodes no longer eligible are stopped, with why; a duplicate on one node too",
			jobs:   []*spec.Job{logs},
			nodes:  nodes,
			allocs: []*spec.Alloc{run("a1", logs, "n1", 0, 1), dup, run("a5", logs, "n5", 5, 2), onCore, onRaw},
			want: Result{Stop: []Stop{
				{Alloc: onCore, Cause: spec.CauseNodeIneligible, Reason: "node no longer eligible: constraint ${meta.class} = edge not met"},
				{Alloc: dup, Cause: spec.CauseDuplicate, Reason: "duplicate of a1"},
				{Alloc: onRaw, Cause: spec.CauseNodeIneligible, Reason: "node no longer eligible: missing driver exec"},
			}},
		},
		{
			name:   "a system job runs only in its datacenters: a node outside them is not eligible, and its instance stops",
			jobs:   []*spec.Job{inEU},
			nodes:  []*spec.Node{edge("n1"), euEdge, euPool},
			allocs: []*spec.Alloc{onN1},
			want: Result{
				Place: []Place{{Job: inEU, Group: inEU.Groups[0], Index: 1, Cause: spec.CauseNew, Reason: "new instance", Node: "n6"}},
				Stop:  []Stop{{Alloc: onN1, Cause: spec.CauseNodeIneligible, Reason: "node no longer eligible: not in datacenter eu-*"}},
			},
		},
		{
			name:   "a new node takes the smallest free index; an index held by a stopping alloc is not free",
			jobs:   []*spec.Job{logs},
			nodes:  nodes,
			allocs: []*spec.Alloc{run("a1", logs, "n1", 0, 1), run("c1", logs, "n2", 1, 2, stopped)},
			want:   Result{Place: []Place{{Job: logs, Group: ship, Index: 2, Cause: spec.CauseNew, Reason: "new instance", Node: "n5"}}},
		},
		{
			name:   "an instance lost with its node is stopped and not placed elsewhere",
			jobs:   []*spec.Job{logs},
			nodes:  nodes,
			allocs: []*spec.Alloc{run("a1", logs, "n1", 0, 1), run("a5", logs, "n5", 1, 2), lost},
			want:   Result{Stop: []Stop{{Alloc: lost, Cause: spec.CauseNodeDown, Reason: "node n4 is down (no heartbeat)"}}},
		},
		{
			name:   "before the leader counts a down node as down, its instance is left alone",
			jobs:   []*spec.Job{logs},
			nodes:  nodes,
			allocs: []*spec.Alloc{run("a1", logs, "n1", 0, 1), run("a5", logs, "n5", 1, 2), run("a4", logs, "n4", 2, 3)},
		},
		{
			name:  "when the node is back, its instance is placed there again at once, with its index",
			jobs:  []*spec.Job{logs},
			nodes: []*spec.Node{edge("n1"), edge("n4"), edge("n5")},
			allocs: []*spec.Alloc{
				run("a1", logs, "n1", 0, 1), run("a5", logs, "n5", 1, 2),
				mk("f4", logs, "ship", 3, 1, spec.ClientFailed, on("n4")),
				run("l1aaaaaaaaaa", logs, "n4", 3, 4, reason(spec.CauseNodeDown, "node n4 is down (no heartbeat)")),
			},
			want: Result{Place: []Place{{Job: logs, Group: ship, Index: 3, Cause: spec.CauseReplaceLost, Reason: "replaces alloc l1aaaaaa lost with node n4",
				Previous: "l1aaaaaaaaaa", Node: "n4"}}},
		},
		{
			name:   "instances on a node removed from the registry stop, and are forgotten once stopped",
			jobs:   []*spec.Job{logs},
			nodes:  []*spec.Node{edge("n1")},
			allocs: []*spec.Alloc{run("a1", logs, "n1", 0, 1), gone1, gone2, mk("g3", logs, "ship", 4, 1, spec.ClientFailed, on("n9"))},
			want: Result{
				Stop: []Stop{{Alloc: gone1, Cause: spec.CauseNodeGone, Reason: "node n9 is no longer registered"}},
				GC:   []string{"g2", "g3"},
			},
		},
		{
			name:  "a failed or completed instance is not rescheduled, as in Nomad: it stays down until the job changes",
			jobs:  []*spec.Job{logs},
			nodes: []*spec.Node{edge("n1"), edge("n5"), edge("n6")},
			allocs: []*spec.Alloc{
				mk("f1", logs, "ship", 4, 1, spec.ClientFailed, on("n1"), ago(time.Hour)),
				mk("c5", logs, "ship", 0, 2, spec.ClientComplete, on("n5"), ago(10*time.Second)),
				run("a6", logs, "n6", 1, 3),
			},
		},
		{
			name:  "an instance that failed under an older version runs the new one at once; a node whose old index another node now holds takes a free one",
			jobs:  []*spec.Job{logs2},
			nodes: []*spec.Node{edge("n1"), edge("n5")},
			allocs: []*spec.Alloc{
				mk("f1", logs2, "ship", 0, 1, spec.ClientFailed, on("n1"), ago(time.Second), ver(1, "ship")),
				run("a5", logs2, "n5", 0, 2),
			},
			want: Result{Place: []Place{{Job: logs2, Group: logs2.Groups[0], Index: 1, Cause: spec.CauseUpdate, Reason: "job updated to version 2", Previous: "f1", Node: "n1"}}},
		},
		{
			name:   "a job update with new tasks replaces each instance on its node",
			jobs:   []*spec.Job{logs2},
			nodes:  nodes,
			allocs: []*spec.Alloc{old1, old5},
			want: Result{
				Place: []Place{
					{Job: logs2, Group: logs2.Groups[0], Index: 0, Cause: spec.CauseUpdate, Reason: "job updated to version 2", Previous: "o1", Node: "n1", WaitFor: "o1"},
					{Job: logs2, Group: logs2.Groups[0], Index: 1, Cause: spec.CauseUpdate, Reason: "job updated to version 2", Previous: "o5", Node: "n5", WaitFor: "o5"},
				},
				Stop:    []Stop{{Alloc: old1, Cause: spec.CauseUpdate, Reason: "job updated to version 2"}, {Alloc: old5, Cause: spec.CauseUpdate, Reason: "job updated to version 2"}},
				NextRun: now.Add(stopWait),
			},
		},
		{
			name:   "a job update with the same tasks keeps the instances",
			jobs:   []*spec.Job{same2},
			nodes:  nodes,
			allocs: []*spec.Alloc{run("o1", same2, "n1", 0, 1, ver(1, "ship")), run("o5", same2, "n5", 1, 2, ver(1, "ship"))},
		},
		{
			name:   "a stopped system job stops everywhere",
			jobs:   []*spec.Job{stoppedLogs},
			nodes:  nodes,
			allocs: []*spec.Alloc{run("s1", stoppedLogs, "n1", 0, 1), run("s5", stoppedLogs, "n5", 3, 2)},
			want: Result{Stop: []Stop{
				{Alloc: run("s1", stoppedLogs, "n1", 0, 1), Cause: spec.CauseJobStopped, Reason: "job stopped"},
				{Alloc: run("s5", stoppedLogs, "n5", 3, 2), Cause: spec.CauseJobStopped, Reason: "job stopped"},
			}},
		},
		{
			name:  "an evicted instance is placed again on its node at once",
			jobs:  []*spec.Job{logs},
			nodes: []*spec.Node{edge("n1")},
			allocs: []*spec.Alloc{
				mk("f1", logs, "ship", 0, 1, spec.ClientFailed, on("n1"), ago(time.Second)),
				run("e1", logs, "n1", 0, 2, evicted("preempted by web.api[2] (priority 80 > 50)")),
			},
			want: Result{Place: []Place{{Job: logs, Group: ship, Index: 0, Cause: spec.CauseReplaceEvicted, Reason: "evicted: preempted by web.api[2] (priority 80 > 50)",
				Previous: "e1", Node: "n1"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Reconcile(Input{Jobs: tt.jobs, Allocs: tt.allocs, Nodes: tt.nodes, Now: now})
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Reconcile() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReconcileEvicted(t *testing.T) {
	web := svc("web", 1, withPolicy(grp("api", 2, "serve"), policy(2, time.Hour, time.Minute, spec.DelayConstant, time.Hour)))
	api := web.Groups[0]
	jobs := batch("jobs", 1, grp("work", 1, "run"))
	tests := []struct {
		name   string
		jobs   []*spec.Job
		allocs []*spec.Alloc
		want   Result
	}{
		{
			name: "an evicted instance is placed again at once, even right after a failure",
			jobs: []*spec.Job{web, jobs},
			allocs: []*spec.Alloc{
				mk("f0", web, "api", 0, 1, spec.ClientFailed, ago(time.Second)),
				mk("e0", web, "api", 0, 2, spec.ClientRunning, evicted("preempted by db.main[0] (priority 80 > 50)"), on("n2")),
				mk("e1", web, "api", 1, 3, "", evicted("replaced by edge.proxy[0]")),
				mk("b0", jobs, "work", 0, 4, spec.ClientComplete, evicted("replaced by edge.proxy[1]")),
			},
			want: Result{Place: []Place{
				{Job: jobs, Group: jobs.Groups[0], Index: 0, Cause: spec.CauseReplaceEvicted, Reason: "evicted: replaced by edge.proxy[1]", Previous: "b0", AvoidNode: "n1"},
				{Job: web, Group: api, Index: 0, Cause: spec.CauseReplaceEvicted, Reason: "evicted: preempted by db.main[0] (priority 80 > 50)", Previous: "e0", AvoidNode: "n2"},
				{Job: web, Group: api, Index: 1, Cause: spec.CauseReplaceEvicted, Reason: "evicted: replaced by edge.proxy[0]", Previous: "e1", AvoidNode: "n1"},
			}},
		},
		{
			name: "an eviction is not a reschedule attempt",
			jobs: []*spec.Job{web},
			allocs: []*spec.Alloc{
				mk("f0", web, "api", 0, 1, spec.ClientFailed, ago(10*time.Minute)),
				mk("e0", web, "api", 0, 2, spec.ClientFailed, evicted("preempted by db.main[0] (priority 80 > 50)"), ago(5*time.Minute)),
				mk("f1", web, "api", 0, 3, spec.ClientFailed, ago(time.Minute)),
				mk("a1", web, "api", 1, 4, spec.ClientRunning),
			},
			want: Result{Place: []Place{{Job: web, Group: api, Index: 0, Cause: spec.CauseReschedule, Reason: "replaces failed alloc f1 (attempt 2 of 2)", Previous: "f1", AvoidNode: "n1"}}},
		},
		{
			name: "an instance stopped for another reason waits as before",
			jobs: []*spec.Job{web},
			allocs: []*spec.Alloc{
				mk("f0", web, "api", 0, 1, spec.ClientFailed, ago(time.Second)),
				mk("s0", web, "api", 0, 2, spec.ClientComplete, reason(spec.CauseUpdate, "job updated to version 1")),
				mk("a1", web, "api", 1, 4, spec.ClientRunning),
			},
			want: Result{NextRun: now.Add(59 * time.Second)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Reconcile(Input{Jobs: tt.jobs, Allocs: tt.allocs, Now: now})
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Reconcile() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// simNodes are the node IDs the system property test draws from; n9 is
// never registered.
var simNodes = []string{"n1", "n2", "n3", "n4", "n5"}

func genNode(t *rapid.T, id string) *spec.Node {
	n := &spec.Node{ID: id, Name: id, Status: spec.NodeReady, Meta: map[string]string{}}
	if rapid.IntRange(0, 3).Draw(t, "down") == 0 {
		n.Status = spec.NodeDown
	}
	for _, d := range []string{"exec", "raw_exec"} {
		if rapid.IntRange(0, 3).Draw(t, "has "+d) > 0 {
			n.Drivers = append(n.Drivers, d)
		}
	}
	for _, k := range []string{"class", "rack"} {
		if v := rapid.SampledFrom([]string{"", "a", "b"}).Draw(t, k); v != "" {
			n.Meta[k] = v
		}
	}
	return n
}

// genConstraint draws a constraint that meetsRef can judge, or one the
// reconciler must leave to the scheduler.
func genConstraint(t *rapid.T) *spec.Constraint {
	return rapid.SampledFrom([]*spec.Constraint{
		{Attribute: "${meta.class}", Operator: "=", Value: "a"},
		{Attribute: "${meta.class}", Operator: "!=", Value: "b"},
		{Attribute: "${meta.rack}", Operator: spec.OpIsSet},
		{Attribute: "${meta.rack}", Value: "b"},
		{Operator: spec.OpDistinctHosts},
		{Attribute: "${meta.rack}", Operator: spec.OpDistinctProperty},
		{Operator: spec.OpConflicts, Value: "db"},
	}).Draw(t, "constraint")
}

// meetsRef is the reference for eligibility, written out for the few
// constraints genConstraint draws.
func meetsRef(j *spec.Job, g *spec.Group, n *spec.Node) bool {
	if n == nil || n.Status != spec.NodeReady {
		return false
	}
	for _, task := range g.Tasks {
		if !slices.Contains(n.Drivers, task.Driver) {
			return false
		}
	}
	for _, c := range slices.Concat(j.Constraints, g.Constraints) {
		v, ok := "", false
		if key, found := strings.CutPrefix(c.Attribute, "${meta."); found {
			v, ok = n.Meta[strings.TrimSuffix(key, "}")]
		}
		switch c.Operator {
		case "", "=":
			if !ok || v != c.Value {
				return false
			}
		case "!=":
			if ok && v == c.Value {
				return false
			}
		case spec.OpIsSet:
			if !ok {
				return false
			}
		}
	}
	return true
}

// sim is a cluster the reconciler's decisions are carried out on, as the
// leader, the scheduler (a pinned request goes to its node) and the agents
// would.
type sim struct {
	job    *spec.Job
	nodes  []*spec.Node
	allocs []*spec.Alloc
	clock  time.Time
	seq    int64
}

func (s *sim) node(id string) *spec.Node {
	for _, n := range s.nodes {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// converge reconciles and applies the result until nothing changes,
// moving the clock to NextRun when only a delayed replacement is left.
func (s *sim) converge(t *rapid.T) {
	for pass := 0; ; pass++ {
		if pass == 40 {
			t.Fatalf("no fixed point after %d passes", pass)
		}
		for _, a := range s.allocs {
			n := s.node(a.NodeID)
			a.NodeDown = n == nil || n.Status != spec.NodeReady
			// An agent that is up stops what it is told to stop.
			if !a.NodeDown && a.DesiredStatus == spec.DesiredStop && !a.Terminal() {
				a.Status = &spec.AllocStatus{ClientStatus: spec.ClientComplete, UpdateTime: s.clock}
			}
		}
		res := Reconcile(Input{Jobs: []*spec.Job{s.job}, Allocs: s.allocs, Nodes: s.nodes, Now: s.clock})
		if len(res.Place) == 0 && len(res.Stop) == 0 && len(res.GC) == 0 {
			if res.NextRun.IsZero() {
				return
			}
			s.clock = res.NextRun
			continue
		}
		for _, st := range res.Stop {
			st.Alloc.DesiredStatus, st.Alloc.DesiredReason = spec.DesiredStop, st.Reason
		}
		s.allocs = slices.DeleteFunc(s.allocs, func(a *spec.Alloc) bool { return slices.Contains(res.GC, a.ID) })
		for _, p := range res.Place {
			if n := s.node(p.Node); n == nil || !meetsRef(p.Job, p.Group, n) || p.AvoidNode != "" {
				t.Fatalf("%s placed on %q, avoiding %q: not an eligible node", spec.AllocName(p.Job.Name, p.Group.Name, p.Index), p.Node, p.AvoidNode)
			}
			s.seq++
			a := mk(fmt.Sprintf("s%03d", s.seq), p.Job, p.Group.Name, p.Index, 100+s.seq, spec.ClientRunning, on(p.Node))
			a.Status.UpdateTime = s.clock
			s.allocs = append(s.allocs, a)
		}
	}
}

// check: exactly one live instance of each group on each eligible node
// (at most one where an instance of the job's version ended on its own: a
// system job is not rescheduled), none elsewhere, their indexes distinct,
// and nothing left running on a node that is down or gone.
func (s *sim) check(t *rapid.T) {
	eligible := 0
	for _, g := range s.job.Groups {
		perNode := map[string]int{}
		indexes := map[int][]*spec.Alloc{}
		ended := map[string]*spec.Alloc{} // per node, the newest alloc that ended while meant to run
		endedNow := map[string]bool{}     // per node, whether one of the job's version ended on its own
		for _, a := range s.allocs {
			if a.Group != g.Name {
				continue
			}
			if e := ended[a.NodeID]; a.DesiredStatus == spec.DesiredRun && a.Terminal() && (e == nil || a.CreateIndex > e.CreateIndex) {
				ended[a.NodeID] = a
			}
			if a.DesiredStatus == spec.DesiredRun && a.Terminal() && a.JobVersion == s.job.Version && a.ClientStatusOr() != spec.ClientLost {
				endedNow[a.NodeID] = true
			}
			if a.NodeDown && a.DesiredStatus == spec.DesiredRun && !a.Terminal() {
				t.Fatalf("%s on down node %s is not stopped", a.ID, a.NodeID)
			}
			if !live(a) {
				continue
			}
			perNode[a.NodeID]++
			indexes[a.Index] = append(indexes[a.Index], a)
		}
		// Two live allocs drawn with one index stay (nothing is wrong
		// with either), but the reconciler never places one more.
		for i, as := range indexes {
			if len(as) > 1 && slices.ContainsFunc(as, func(a *spec.Alloc) bool { return a.CreateIndex > 100 }) {
				t.Fatalf("group %s: %d live instances share index %d: %s on %s, %s on %s", g.Name, len(as), i, as[0].ID, as[0].NodeID, as[1].ID, as[1].NodeID)
			}
		}
		for _, id := range append(slices.Clone(simNodes), "n9") {
			want := 0
			if meetsRef(s.job, g, s.node(id)) {
				want = 1
			}
			e := ended[id]
			notRescheduled := endedNow[id] && e.ClientStatusOr() != spec.ClientLost
			if perNode[id] != want && !(notRescheduled && perNode[id] == 0) {
				t.Fatalf("group %s: %d live instances on node %s, want %d; node: %s", g.Name, perNode[id], id, want, describe(s.node(id)))
			}
		}
		for _, id := range simNodes {
			if meetsRef(s.job, g, s.node(id)) {
				eligible++
			}
		}
	}
	sum := Summarize(s.job, s.allocs, s.nodes, &spec.JobSchedule{Job: s.job.Name, JobVersion: s.job.Version})
	if sum.Desired != eligible || sum.Running+sum.Pending+sum.Failed+sum.Complete != eligible || sum.Lost != 0 {
		t.Fatalf("summary %+v; want %d desired, none lost", sum, eligible)
	}
}

func TestSystemConverges(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := &sim{clock: now}
		for _, id := range simNodes {
			if rapid.IntRange(0, 4).Draw(t, "registered") > 0 {
				s.nodes = append(s.nodes, genNode(t, id))
			}
		}
		j := svc("sys", 1)
		j.Type = spec.JobSystem
		if rapid.Bool().Draw(t, "jobConstraint") {
			j.Constraints = append(j.Constraints, genConstraint(t))
		}
		for gi := range rapid.IntRange(1, 2).Draw(t, "groups") {
			g := grp(fmt.Sprintf("g%d", gi), rapid.IntRange(0, 2).Draw(t, "count"), "x")
			g.Tasks[0].Driver = rapid.SampledFrom([]string{"exec", "raw_exec"}).Draw(t, "driver")
			for range rapid.IntRange(0, 2).Draw(t, "constraints") {
				g.Constraints = append(g.Constraints, genConstraint(t))
			}
			j.Groups = append(j.Groups, g)
		}
		s.job = j

		statuses := rapid.SampledFrom([]spec.ClientStatus{"", spec.ClientPending, spec.ClientRunning, spec.ClientComplete, spec.ClientFailed, spec.ClientLost})
		reasons := rapid.SampledFrom([]string{"", "preempted by x.y[0] (priority 90 > 50)", "replaced by z.w[1]", "node n1 is down (no heartbeat)", "job stopped"})
		for i := range rapid.IntRange(0, 10).Draw(t, "allocs") {
			g := rapid.SampledFrom(j.Groups).Draw(t, "allocGroup")
			a := mk(fmt.Sprintf("a%02d", i), j, g.Name, rapid.IntRange(0, 3).Draw(t, "index"), int64(i), statuses.Draw(t, "status"),
				on(rapid.SampledFrom(append(slices.Clone(simNodes), "n9")).Draw(t, "node")))
			if a.Status != nil {
				a.Status.UpdateTime = now.Add(-time.Duration(rapid.IntRange(0, 600).Draw(t, "age")) * time.Second)
			}
			if r := reasons.Draw(t, "reason"); r != "" {
				a.DesiredStatus, a.DesiredReason = spec.DesiredStop, r
			}
			if rapid.IntRange(0, 3).Draw(t, "old") == 0 {
				ver(0, "y")(a)
			}
			s.allocs = append(s.allocs, a)
		}
		s.converge(t)
		s.check(t)

		// The cluster changes: nodes go down, come back, lose a driver or
		// change meta, leave or join; the job may change its tasks.
		var next []*spec.Node
		for _, id := range simNodes {
			switch n := s.node(id); {
			case n == nil && rapid.IntRange(0, 2).Draw(t, "join") == 0:
				next = append(next, genNode(t, id))
			case n == nil:
			case rapid.IntRange(0, 5).Draw(t, "leave") == 0:
			case rapid.Bool().Draw(t, "change"):
				m := genNode(t, id)
				next = append(next, m)
			default:
				next = append(next, n)
			}
		}
		s.nodes = next
		if rapid.Bool().Draw(t, "update") {
			j2 := *j
			j2.Version++
			j2.Groups = nil
			for _, g := range j.Groups {
				g2 := *g
				g2.Tasks = []*spec.Task{task("x --v2")}
				g2.Tasks[0].Driver = g.Tasks[0].Driver
				j2.Groups = append(j2.Groups, &g2)
			}
			s.job = &j2
		}
		s.converge(t)
		s.check(t)
	})
}

func describe(n *spec.Node) string {
	if n == nil {
		return "not registered"
	}
	return fmt.Sprintf("%s, drivers %v, meta %v", n.Status, n.Drivers, n.Meta)
}
