package reconcile

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/drover-org/drover/internal/spec"
)

// TestReconcileSysBatch: a sysbatch job places as a system job (one
// instance per eligible node, nodes that join later included) and ends as
// a batch job (an instance that completed is done, on any version; one that
// failed is not rescheduled).
func TestReconcileSysBatch(t *testing.T) {
	sweep := system("sweep", 1, grp("clean", 0, "clean"))
	sweep.Type = spec.JobSysBatch
	sweep2 := system("sweep", 2, grp("clean", 0, "clean --v2"))
	sweep2.Type = spec.JobSysBatch
	g := sweep.Groups[0]
	edge := func(id string) *spec.Node { return node(id, "class", "edge") }
	at := func(id string, j *spec.Job, n string, index int, cs spec.ClientStatus, opts ...opt) *spec.Alloc {
		return mk(id, j, "clean", index, 1, cs, append([]opt{on(n)}, opts...)...)
	}

	tests := []struct {
		name   string
		jobs   []*spec.Job
		nodes  []*spec.Node
		allocs []*spec.Alloc
		want   Result
	}{
		{
			name:  "a new sysbatch job runs once on every eligible node",
			jobs:  []*spec.Job{sweep},
			nodes: []*spec.Node{edge("n1"), node("n2", "class", "core"), edge("n3")},
			want: Result{Place: []Place{
				{Job: sweep, Group: g, Index: 0, Cause: spec.CauseNew, Reason: "new instance", Node: "n1"},
				{Job: sweep, Group: g, Index: 1, Cause: spec.CauseNew, Reason: "new instance", Node: "n3"},
			}},
		},
		{
			name:   "an instance that completed is done: nothing runs there again",
			jobs:   []*spec.Job{sweep},
			nodes:  []*spec.Node{edge("n1"), edge("n3")},
			allocs: []*spec.Alloc{at("a1", sweep, "n1", 0, spec.ClientComplete), at("a3", sweep, "n3", 1, spec.ClientComplete)},
		},
		{
			name:   "a node that joins after the others completed gets its own instance",
			jobs:   []*spec.Job{sweep},
			nodes:  []*spec.Node{edge("n1"), edge("n3"), edge("n4")},
			allocs: []*spec.Alloc{at("a1", sweep, "n1", 0, spec.ClientComplete), at("a3", sweep, "n3", 1, spec.ClientComplete)},
			want: Result{Place: []Place{
				{Job: sweep, Group: g, Index: 2, Cause: spec.CauseNew, Reason: "new instance", Node: "n4"},
			}},
		},
		{
			name:   "a failed instance is not rescheduled, as a system job's",
			jobs:   []*spec.Job{sweep},
			nodes:  []*spec.Node{edge("n1")},
			allocs: []*spec.Alloc{at("f1", sweep, "n1", 0, spec.ClientFailed)},
		},
		{
			name:   "a completed instance of an older version is done too (a batch job's is)",
			jobs:   []*spec.Job{sweep2},
			nodes:  []*spec.Node{edge("n1")},
			allocs: []*spec.Alloc{at("a1", sweep2, "n1", 0, spec.ClientComplete, ver(1, "clean"))},
		},
		{
			name:   "a running instance of an older version is replaced in place",
			jobs:   []*spec.Job{sweep2},
			nodes:  []*spec.Node{edge("n1")},
			allocs: []*spec.Alloc{at("a1", sweep2, "n1", 0, spec.ClientRunning, ver(1, "clean"))},
			want: Result{
				Stop:    []Stop{{Alloc: at("a1", sweep2, "n1", 0, spec.ClientRunning, ver(1, "clean")), Cause: spec.CauseUpdate, Reason: "job updated to version 2"}},
				Place:   []Place{{Job: sweep2, Group: sweep2.Groups[0], Index: 0, Cause: spec.CauseUpdate, Reason: "job updated to version 2", Previous: "a1", Node: "n1", WaitFor: "a1"}},
				NextRun: now.Add(10 * time.Second), // the old one's kill timeout
			},
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

// TestSummarizeSysBatch: a sysbatch job is complete once every eligible
// node's instance completed, and not before.
func TestSummarizeSysBatch(t *testing.T) {
	sweep := system("sweep", 1, grp("clean", 0, "clean"))
	sweep.Type = spec.JobSysBatch
	nodes := []*spec.Node{node("n1", "class", "edge"), node("n2", "class", "edge")}
	sched := &spec.JobSchedule{JobVersion: 1}
	a1 := mk("a1", sweep, "clean", 0, 1, spec.ClientComplete, on("n1"))
	a2 := mk("a2", sweep, "clean", 1, 1, spec.ClientRunning, on("n2"))
	if s := Summarize(sweep, []*spec.Alloc{a1, a2}, nodes, sched); s.State == spec.JobComplete || s.Desired != 2 {
		t.Fatalf("one of two nodes done: state %s, desired %d; want not complete, desired 2", s.State, s.Desired)
	}
	a2 = mk("a2", sweep, "clean", 1, 1, spec.ClientComplete, on("n2"))
	if s := Summarize(sweep, []*spec.Alloc{a1, a2}, nodes, sched); s.State != spec.JobComplete {
		t.Fatalf("both nodes done: state %s (%s); want complete", s.State, s.Reason)
	}
}
