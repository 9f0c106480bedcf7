package reconcile

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/drover-org/drover/internal/spec"
)

// The decisions that read an alloc back go by its cause: rewording (or
// translating) a reason changes no decision, and a record from before
// causes existed is taken for a plain stop, whatever its words.
func TestDecisionsFollowTheCauseNotTheReason(t *testing.T) {
	web := svc("web", 1, grp("api", 1, "serve"))
	api := web.Groups[0]
	low := svc("low", 1, grp("api", 1, "serve"))
	low.Priority = 20
	a, b := sized("a", 4000, 1000), sized("b", 4000, 1000)
	a.Usage = &spec.NodeUsage{Tasks: spec.Usage{MemoryMB: 950}, Time: now.Add(-5 * time.Second)}
	// A memory move off a within its interval, by cause and words.
	moved := func(c spec.DesiredCause, words string) *spec.Alloc {
		return mk("moved", low, "api", 0, 1, spec.ClientComplete, on("a"), reason(c, words),
			func(a *spec.Alloc) { a.ModifyTime = now.Add(-10 * time.Second) })
	}
	running := mk("low-a", low, "api", 0, 2, spec.ClientRunning, on("a"))
	const memoryWords = "node a uses 95.0% of its memory (950 of 1000 MB), over 90%: moving its lowest-priority instance"

	tests := []struct {
		name   string
		jobs   []*spec.Job
		allocs []*spec.Alloc
		nodes  []*spec.Node
		want   Result
	}{
		{
			name:   "stopped with its node, reworded: replaced as lost",
			jobs:   []*spec.Job{web},
			allocs: []*spec.Alloc{mk("l1", web, "api", 0, 1, "", on("n1"), reason(spec.CauseNodeDown, "Knoten n1 antwortet nicht"))},
			want: Result{Place: []Place{{Job: web, Group: api, Cause: spec.CauseReplaceLost, Reason: "replaces alloc l1 lost with node n1",
				Previous: "l1", AvoidNode: "n1"}}},
		},
		{
			name:   "the words of a node's loss, no cause (an older record): a new instance",
			jobs:   []*spec.Job{web},
			allocs: []*spec.Alloc{mk("l1", web, "api", 0, 1, "", on("n1"), reason("", "node n1 is down (no heartbeat)"))},
			want:   Result{Place: []Place{{Job: web, Group: api, Cause: spec.CauseNew, Reason: "new instance"}}},
		},
		{
			name:   "the words of a node's loss, another cause: a new instance",
			jobs:   []*spec.Job{web},
			allocs: []*spec.Alloc{mk("l1", web, "api", 0, 1, "", on("n1"), reason(spec.CauseJobStopped, "node n1 is down (no heartbeat)"))},
			want:   Result{Place: []Place{{Job: web, Group: api, Cause: spec.CauseNew, Reason: "new instance"}}},
		},
		{
			name:   "evicted, reworded: placed again at once",
			jobs:   []*spec.Job{web},
			allocs: []*spec.Alloc{mk("e1", web, "api", 0, 1, "", on("n1"), reason(spec.CauseDisplaced, "verdrängt"))},
			want: Result{Place: []Place{{Job: web, Group: api, Cause: spec.CauseReplaceEvicted, Reason: "evicted: verdrängt",
				Previous: "e1", AvoidNode: "n1"}}},
		},
		{
			name: "evicted by an older server, which recorded no cause: placed again at once",
			jobs: []*spec.Job{web},
			allocs: []*spec.Alloc{mk("e1", web, "api", 0, 1, "", on("n1"), reason("", "preempted by db.main[0] (priority 80 > 50)"),
				func(a *spec.Alloc) { a.EvictedLegacy = true })},
			want: Result{Place: []Place{{Job: web, Group: api, Cause: spec.CauseReplaceEvicted,
				Reason: "evicted: preempted by db.main[0] (priority 80 > 50)", Previous: "e1", AvoidNode: "n1"}}},
		},
		{
			name:   "a memory move, reworded: the node's interval holds",
			jobs:   []*spec.Job{low},
			allocs: []*spec.Alloc{moved(spec.CauseMemory, "Knoten a: Speicher knapp"), running},
			nodes:  []*spec.Node{a, b},
			want:   Result{NextRun: now.Add(50 * time.Second)},
		},
		{
			name:   "the words of a memory move, another cause: the node's instance moves",
			jobs:   []*spec.Job{low},
			allocs: []*spec.Alloc{moved(spec.CauseDrain, memoryWords), running},
			nodes:  []*spec.Node{a, b},
			want: Result{Stop: []Stop{{Alloc: running, Cause: spec.CauseMemory, Reason: memoryWords}},
				Place: []Place{{Job: low, Group: low.Groups[0], Cause: spec.CauseMemory, Reason: memoryWords, Previous: "low-a", AvoidNode: "a",
					Update: spec.DefaultUpdate()}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Reconcile(Input{Jobs: tt.jobs, Allocs: tt.allocs, Nodes: tt.nodes, Now: now,
				MemoryHighPercent: 90, MemoryMoveInterval: time.Minute})
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Reconcile() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
