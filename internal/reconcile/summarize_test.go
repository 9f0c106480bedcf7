package reconcile

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/drover-org/drover/internal/spec"
)

func TestSummarize(t *testing.T) {
	web := svc("web", 2, grp("api", 2, "serve"))
	stoppedWeb := svc("web", 2, grp("api", 2, "serve"))
	stoppedWeb.Stopped = true
	two := svc("web", 2, grp("api", 1, "serve"), grp("db", 2, "db"))
	jobs := batch("jobs", 2, grp("work", 2, "run"))
	limited := svc("web", 2, withPolicy(grp("api", 3, "serve"), policy(2, time.Hour, 10*time.Second, spec.DelayConstant, time.Hour)))
	never := svc("web", 2, grp("api", 2, "serve"))
	never.Reschedule = policy(0, 0, time.Second, spec.DelayConstant, time.Hour)
	sys := system("web", 2, grp("ship", 1, "ship"))
	sched := &spec.JobSchedule{Job: "web", JobVersion: 2}
	bsched := &spec.JobSchedule{Job: "jobs", JobVersion: 2}
	room := spec.PlacementFailure{Group: "db", Missing: 2, NodesEvaluated: 3, Dimensions: []spec.DimensionFailure{
		{Dimension: "memory", Nodes: 3, Need: 900, MostFree: 512, Unit: "MB"},
	}}
	room1 := spec.PlacementFailure{Group: "api", Missing: 1, NodesEvaluated: 3, Dimensions: []spec.DimensionFailure{
		{Dimension: "driver docker", Nodes: 3},
	}}

	running := func(j *spec.Job, g string, i int, ci int64) *spec.Alloc {
		return mk("r", j, g, i, ci, spec.ClientRunning)
	}

	tests := []struct {
		name   string
		job    *spec.Job
		allocs []*spec.Alloc
		nodes  []*spec.Node
		sched  *spec.JobSchedule
		want   spec.JobSummary
	}{
		{
			name: "stopped job counts what is still shutting down",
			job:  stoppedWeb,
			allocs: []*spec.Alloc{
				mk("a", stoppedWeb, "api", 0, 1, spec.ClientRunning, stopped),
				mk("b", stoppedWeb, "api", 1, 2, spec.ClientComplete, stopped),
			},
			sched: sched,
			want:  spec.JobSummary{State: spec.JobStopped, Running: 1, Reason: "1 instance still shutting down"},
		},
		{
			name:  "stopped job, all gone",
			job:   stoppedWeb,
			sched: sched,
			want:  spec.JobSummary{State: spec.JobStopped},
		},
		{
			name: "not scheduled yet",
			job:  web,
			want: spec.JobSummary{State: spec.JobPending, Desired: 2, Pending: 2, Reason: "waiting for the scheduler"},
		},
		{
			name:   "scheduled for an older version",
			job:    web,
			allocs: []*spec.Alloc{running(web, "api", 0, 1), running(web, "api", 1, 2)},
			sched:  &spec.JobSchedule{Job: "web", JobVersion: 1},
			want:   spec.JobSummary{State: spec.JobPending, Desired: 2, Running: 2, Reason: "waiting for the scheduler"},
		},
		{
			name:   "service all running",
			job:    web,
			allocs: []*spec.Alloc{running(web, "api", 0, 1), running(web, "api", 1, 2)},
			sched:  sched,
			want:   spec.JobSummary{State: spec.JobRunning, Desired: 2, Running: 2},
		},
		{
			name:   "service starting",
			job:    web,
			allocs: []*spec.Alloc{running(web, "api", 0, 1), mk("p", web, "api", 1, 2, "")},
			sched:  sched,
			want:   spec.JobSummary{State: spec.JobPending, Desired: 2, Running: 1, Pending: 1},
		},
		{
			name: "service: a failed instance will be replaced",
			job:  web,
			allocs: []*spec.Alloc{
				running(web, "api", 0, 1),
				mk("f", web, "api", 1, 2, spec.ClientFailed, desc("exit code 1 after 2 restarts")),
			},
			sched: sched,
			want: spec.JobSummary{NextReplacement: due(30 * time.Second), State: spec.JobPending, Desired: 2, Running: 1, Failed: 1,
				Reason: "web.api[1] failed: exit code 1 after 2 restarts, will be replaced"},
		},
		{
			name: "service: several ended instances",
			job:  web,
			allocs: []*spec.Alloc{
				mk("l", web, "api", 0, 1, spec.ClientLost, desc("node n1 is down")),
				mk("c", web, "api", 1, 2, spec.ClientComplete),
			},
			sched: sched,
			want: spec.JobSummary{NextReplacement: due(0), State: spec.JobPending, Desired: 2, Complete: 1, Lost: 1,
				Reason: "web.api[0] lost: node n1 is down, will be replaced (+1 more)"},
		},
		{
			name: "service: the live replacement is what counts",
			job:  web,
			allocs: []*spec.Alloc{
				mk("f", web, "api", 0, 1, spec.ClientFailed),
				mk("r2", web, "api", 0, 3, spec.ClientRunning),
				mk("r1", web, "api", 0, 2, spec.ClientPending), // oldest live
				running(web, "api", 1, 4),
				mk("s", web, "api", 1, 5, spec.ClientFailed, stopped), // told to stop: not an instance
			},
			sched: sched,
			want:  spec.JobSummary{State: spec.JobPending, Desired: 2, Running: 1, Pending: 1},
		},
		{
			name:   "waiting for room",
			job:    two,
			allocs: []*spec.Alloc{running(two, "api", 0, 1)},
			sched:  &spec.JobSchedule{Job: "web", JobVersion: 2, Failures: []spec.PlacementFailure{room}},
			want: spec.JobSummary{State: spec.JobPending, Desired: 3, Running: 1, Pending: 2,
				Reason: "2 instances of group db waiting for room: 0/3 nodes fit: memory exhausted on 3 (need 900 MB, most free 512 MB)"},
		},
		{
			name:  "waiting for room in two groups",
			job:   two,
			sched: &spec.JobSchedule{Job: "web", JobVersion: 2, Failures: []spec.PlacementFailure{room1, room}},
			want: spec.JobSummary{State: spec.JobPending, Desired: 3, Pending: 3,
				Reason: "1 instance of group api waiting for room: 0/3 nodes fit: no node has driver docker; " +
					"2 instances of group db waiting for room: 0/3 nodes fit: memory exhausted on 3 (need 900 MB, most free 512 MB)"},
		},
		{
			name: "failed instance and waiting for room",
			job:  two,
			allocs: []*spec.Alloc{
				mk("f", two, "api", 0, 1, spec.ClientFailed, desc("exit code 2")),
			},
			sched: &spec.JobSchedule{Job: "web", JobVersion: 2, Failures: []spec.PlacementFailure{room}},
			want: spec.JobSummary{NextReplacement: due(30 * time.Second), State: spec.JobPending, Desired: 3, Pending: 2, Failed: 1,
				Reason: "web.api[0] failed: exit code 2, will be replaced; " +
					"2 instances of group db waiting for room: 0/3 nodes fit: memory exhausted on 3 (need 900 MB, most free 512 MB)"},
		},
		{
			name: "batch complete",
			job:  jobs,
			allocs: []*spec.Alloc{
				mk("a", jobs, "work", 0, 1, spec.ClientComplete),
				mk("b", jobs, "work", 1, 2, spec.ClientComplete),
			},
			sched: bsched,
			// 2/2 complete, as drover status and the web UI show it (the
			// UI once showed 0/2).
			want: spec.JobSummary{State: spec.JobComplete, Desired: 2, Complete: 2, Shown: "2/2 complete"},
		},
		{
			name: "batch running: the rest is done",
			job:  jobs,
			allocs: []*spec.Alloc{
				mk("a", jobs, "work", 0, 1, spec.ClientComplete),
				mk("b", jobs, "work", 1, 2, spec.ClientRunning),
			},
			sched: bsched,
			want:  spec.JobSummary{State: spec.JobRunning, Desired: 2, Complete: 1, Running: 1},
		},
		{
			name: "batch pending",
			job:  jobs,
			allocs: []*spec.Alloc{
				mk("a", jobs, "work", 0, 1, spec.ClientComplete),
			},
			sched: bsched,
			want:  spec.JobSummary{State: spec.JobPending, Desired: 2, Complete: 1, Pending: 1},
		},
		{
			name: "batch: a first failure gets one more attempt",
			job:  jobs,
			allocs: []*spec.Alloc{
				mk("a", jobs, "work", 0, 1, spec.ClientRunning),
				mk("b", jobs, "work", 1, 2, spec.ClientFailed, desc("exit code 3 after 3 restarts")),
			},
			sched: bsched,
			want: spec.JobSummary{NextReplacement: due(5 * time.Second), State: spec.JobPending, Desired: 2, Running: 1, Failed: 1,
				Reason: "jobs.work[1] failed: exit code 3 after 3 restarts, will be replaced"},
		},
		{
			name: "batch failed twice within 24h: not rescheduled",
			job:  jobs,
			allocs: []*spec.Alloc{
				mk("a", jobs, "work", 0, 1, spec.ClientRunning),
				mk("b1", jobs, "work", 1, 2, spec.ClientFailed, ago(time.Hour)),
				mk("b2", jobs, "work", 1, 3, spec.ClientFailed, desc("exit code 3 after 3 restarts")),
			},
			sched: bsched,
			want: spec.JobSummary{State: spec.JobFailed, Desired: 2, Running: 1, Failed: 1,
				Reason: "jobs.work[1] failed 2 times within 24h; not rescheduled (reschedule attempts = 1); last: exit code 3 after 3 restarts"},
		},
		{
			name: "service: attempts used up in one instance, another will be replaced",
			job:  limited,
			allocs: []*spec.Alloc{
				mk("a1", limited, "api", 0, 1, spec.ClientFailed, ago(time.Minute)),
				mk("b1", limited, "api", 1, 2, spec.ClientFailed, ago(50*time.Minute)),
				mk("b2", limited, "api", 1, 3, spec.ClientFailed, ago(20*time.Minute)),
				mk("b3", limited, "api", 1, 4, spec.ClientFailed, desc("exit code 1")),
				mk("c1", limited, "api", 2, 5, spec.ClientRunning),
			},
			sched: sched,
			want: spec.JobSummary{NextReplacement: due(-50 * time.Second), State: spec.JobFailed, Desired: 3, Running: 1, Failed: 2,
				Reason: "web.api[1] failed 3 times within 1h; not rescheduled (reschedule attempts = 2); last: exit code 1"},
		},
		{
			name: "service: attempts = 0, and lost allocs do not count",
			job:  never,
			allocs: []*spec.Alloc{
				mk("l", never, "api", 0, 1, spec.ClientLost, ago(time.Hour)),
				mk("f", never, "api", 0, 2, spec.ClientFailed),
				mk("g", never, "api", 1, 3, spec.ClientFailed),
			},
			sched: sched,
			want: spec.JobSummary{State: spec.JobFailed, Desired: 2, Failed: 2,
				Reason: "web.api[0] failed once; not rescheduled (reschedule attempts = 0) (+1 more)"},
		},
		{
			name: "batch lost is replaced",
			job:  jobs,
			allocs: []*spec.Alloc{
				mk("a", jobs, "work", 0, 1, spec.ClientComplete),
				mk("b", jobs, "work", 1, 2, spec.ClientLost),
			},
			sched: bsched,
			want: spec.JobSummary{NextReplacement: due(0), State: spec.JobPending, Desired: 2, Complete: 1, Lost: 1,
				Reason: "jobs.work[1] lost, will be replaced"},
		},
		{
			name:  "system: one instance wanted per eligible node; instances elsewhere are not counted",
			job:   sys,
			nodes: []*spec.Node{node("n1", "class", "edge"), node("n2", "class", "edge"), node("n3", "class", "core"), nodeDown(node("n4", "class", "edge"))},
			allocs: []*spec.Alloc{
				mk("a1", sys, "ship", 0, 1, spec.ClientRunning, on("n1")),
				mk("a2", sys, "ship", 1, 2, spec.ClientFailed, on("n2"), desc("exit code 1")),
				mk("a3", sys, "ship", 2, 3, spec.ClientRunning, on("n3")),
				mk("a4", sys, "ship", 3, 4, spec.ClientRunning, on("n4"), down),
			},
			sched: sched,
			want: spec.JobSummary{State: spec.JobFailed, Desired: 2, Running: 1, Failed: 1,
				Reason: "web.ship[1] failed once; not rescheduled (system jobs are not): it runs there again when the job changes; last: exit code 1"},
		},
		{
			name:  "system: no node matches, so nothing runs: pending, with why, not 0 of 0 running",
			job:   sys,
			nodes: []*spec.Node{node("n3", "class", "core")},
			sched: &spec.JobSchedule{Job: "web", JobVersion: 2, Failures: []spec.PlacementFailure{{Group: "ship", NodesEvaluated: 1, NoNodeMatched: true,
				Dimensions: []spec.DimensionFailure{{Dimension: "constraint ${meta.class} = edge", Nodes: 1}}}}},
			want: spec.JobSummary{State: spec.JobPending,
				Reason: "group ship runs on no node: no node matches: 0/1 nodes eligible: constraint ${meta.class} = edge not met on 1"},
		},
		{
			name:  "system: all eligible nodes run it",
			job:   sys,
			nodes: []*spec.Node{node("n1", "class", "edge"), node("n3", "class", "core")},
			allocs: []*spec.Alloc{
				mk("a1", sys, "ship", 5, 1, spec.ClientRunning, on("n1")),
			},
			sched: sched,
			want:  spec.JobSummary{State: spec.JobRunning, Desired: 1, Running: 1},
		},
		{
			name: "an evicted instance is pending, whatever happened to it before",
			job:  web,
			allocs: []*spec.Alloc{
				running(web, "api", 0, 1),
				mk("f", web, "api", 1, 2, spec.ClientFailed),
				mk("e", web, "api", 1, 3, spec.ClientRunning, evicted("preempted by db.main[0] (priority 80 > 50)")),
			},
			sched: sched,
			want: spec.JobSummary{State: spec.JobPending, Desired: 2, Running: 1, Pending: 1,
				Reason: "web.api[1] evicted (preempted by db.main[0] (priority 80 > 50)), will be placed again"},
		},
		{
			name:  "no instances wanted",
			job:   svc("web", 2, grp("api", 0, "serve")),
			sched: sched,
			want:  spec.JobSummary{State: spec.JobRunning},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Summarize(tt.job, tt.allocs, tt.nodes, tt.sched)
			if tt.want.Shown == "" {
				tt.want.SetProgress()
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Summarize() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// due is a replacement due d after now.
func due(d time.Duration) *time.Time {
	t := now.Add(d)
	return &t
}

// TestInstanceAllocs: each instance is represented by the alloc Summarize
// counts for it: a failed alloc whose replacement is placed is not one, the
// live alloc is; an instance with only a failed alloc is that alloc; an
// evicted instance waiting to be placed again has none; a stopped alloc
// represents nothing; a system job's instances are told apart by node,
// all of index 0.
func TestInstanceAllocs(t *testing.T) {
	web := svc("web", 2, grp("api", 3, "serve"))
	sys := system("logs", 2, grp("ship", 1, "ship"))
	ids := func(as []*spec.Alloc) []string {
		var out []string
		for _, a := range as {
			out = append(out, a.ID)
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		job    *spec.Job
		allocs []*spec.Alloc
		want   []string
	}{
		{"a replaced failure is its replacement's", web, []*spec.Alloc{
			mk("f0", web, "api", 0, 1, spec.ClientFailed),
			mk("p0", web, "api", 0, 5, spec.ClientPending),
			mk("f1", web, "api", 1, 2, spec.ClientFailed),
			mk("r2", web, "api", 2, 3, spec.ClientRunning),
			mk("s2", web, "api", 2, 4, spec.ClientComplete, stopped),
		}, []string{"p0", "f1", "r2"}},
		{"the newest failure of an instance not yet replaced", web, []*spec.Alloc{
			mk("f0", web, "api", 0, 1, spec.ClientFailed),
			mk("g0", web, "api", 0, 2, spec.ClientFailed),
		}, []string{"g0"}},
		{"an evicted instance has none", web, []*spec.Alloc{
			mk("e0", web, "api", 0, 1, spec.ClientRunning, evicted("preempted")),
			mk("r1", web, "api", 1, 2, spec.ClientRunning),
		}, []string{"r1"}},
		{"a system job's instances by node", sys, []*spec.Alloc{
			mk("a", sys, "ship", 0, 1, spec.ClientFailed, on("n1")),
			mk("b", sys, "ship", 0, 2, spec.ClientRunning, on("n2")),
			mk("c", sys, "ship", 0, 3, spec.ClientFailed, on("n2")),
		}, []string{"a", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ids(InstanceAllocs(tc.job, tc.allocs))); diff != "" {
				t.Errorf("InstanceAllocs (-want +got):\n%s", diff)
			}
		})
	}
}
