package reconcile

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/drover-org/drover/internal/spec"
)

func TestReconcile(t *testing.T) {
	web := svc("web", 1, grp("api", 2, "serve"))
	stoppedWeb := svc("web", 1, grp("api", 2, "serve"))
	stoppedWeb.Stopped = true
	web2 := svc("web", 2, grp("api", 1, "serve --v2"))
	web2Same := svc("web", 2, grp("api", 2, "serve"))
	one := svc("web", 3, grp("api", 1, "serve"))
	jobs := batch("jobs", 1, grp("work", 3, "run"))

	p1 := mk("p1", gone, "api", 0, 1, spec.ClientRunning)
	d1 := mk("d1", web, "api", 0, 5, spec.ClientRunning)
	d2 := mk("d2", web, "api", 0, 5, spec.ClientRunning)
	d3 := mk("d3", web, "api", 0, 7, spec.ClientPending)
	u1 := mk("u1", web2, "api", 0, 1, spec.ClientRunning, ver(1, "serve"))
	u2 := mk("u2", web2, "api", 0, 2, "", ver(1, "serve"))
	c1 := mk("c1", one, "api", 1, 2, spec.ClientRunning)
	c2 := mk("c2", one, "api", 2, 3, "")
	g1 := mk("g1", web, "cache", 0, 1, spec.ClientRunning)
	s1 := mk("s1", stoppedWeb, "api", 0, 1, spec.ClientRunning)
	l1 := mk("l1aaaaaaaaaa", jobs, "work", 0, 1, spec.ClientLost, ago(time.Minute))
	f1 := mk("f1234567-89ab", web, "api", 0, 1, spec.ClientFailed, ago(31*time.Second))
	f2 := mk("f2", web2, "api", 0, 4, spec.ClientFailed, ago(50*time.Second))

	var seven []*spec.Alloc
	for i := range 7 {
		seven = append(seven, mk(string(rune('a'+i)), one, "api", 0, int64(i+1), spec.ClientFailed, ago(time.Hour)))
	}

	limited := svc("lim", 1, withPolicy(grp("api", 4, "serve"), policy(2, time.Hour, 10*time.Second, spec.DelayConstant, time.Hour)))
	expo := svc("expo", 1, withPolicy(grp("api", 1, "serve"), policy(5, time.Hour, time.Minute, spec.DelayExponential, 3*time.Minute)))
	never := svc("never", 1, grp("api", 1, "serve"))
	never.Reschedule = policy(0, 0, time.Second, spec.DelayConstant, time.Hour)
	many := svc("many", 2, withPolicy(grp("api", 2, "serve"), policy(7, time.Hour, time.Second, spec.DelayConstant, time.Hour)))
	manyAllocs := []*spec.Alloc{
		mk("old1", many, "api", 0, 1, spec.ClientFailed, ver(1, "old"), ago(55*time.Minute)),
		mk("old2", many, "api", 0, 2, spec.ClientFailed, ver(1, "old"), ago(54*time.Minute)),
	}
	for i := range 8 {
		manyAllocs = append(manyAllocs, mk(fmt.Sprintf("m%d", i), many, "api", 0, int64(10+i), spec.ClientFailed, ago(time.Duration(50-i)*time.Minute)))
	}

	lost1 := mk("lost1aaaaaaa", web, "api", 0, 1, spec.ClientRunning, down)
	lostB := mk("lostbbbbbbbb", jobs, "work", 1, 1, spec.ClientRunning, down)
	lostDone := mk("lostdone", jobs, "work", 2, 1, spec.ClientComplete, down)
	lostStopped := mk("lost2", web, "api", 1, 1, spec.ClientRunning, down, stopped)

	single := svc("single", 1, grp("api", 1, "serve"))
	single.Groups[0].Disconnect = &spec.DisconnectPolicy{StopAfter: spec.Duration(10 * time.Second)}
	fenced := func(id string, downFor time.Duration, opts ...opt) *spec.Alloc {
		a := mk(id, single, "api", 0, 1, spec.ClientRunning, append([]opt{down}, opts...)...)
		a.Disconnect = single.Groups[0].Disconnect
		a.NodeDownSince = now.Add(-downFor)
		return a
	}
	fencedNew := fenced("fenced01", 5*time.Second)
	fencedStopped := fenced("fenced02", 5*time.Second, stopped)
	fencedDue := fenced("fenced03aaaa", 11*time.Second, stopped)

	tests := []struct {
		name   string
		jobs   []*spec.Job
		allocs []*spec.Alloc
		want   Result
	}{
		{
			name:   "a singleton on a down node is told to stop but not replaced until its agent has surely fenced it",
			jobs:   []*spec.Job{single},
			allocs: []*spec.Alloc{fencedNew},
			want: Result{
				Stop:    []Stop{{Alloc: fencedNew, Cause: spec.CauseNodeDown, Reason: "node n1 is down (no heartbeat)"}},
				NextRun: now.Add(6 * time.Second), // down 5s ago + stop_after 10s + kill 0 + margin 1s
			},
		},
		{
			name:   "still waiting on the next pass",
			jobs:   []*spec.Job{single},
			allocs: []*spec.Alloc{fencedStopped},
			want:   Result{NextRun: now.Add(6 * time.Second)},
		},
		{
			name:   "once the wait is over, the singleton is replaced",
			jobs:   []*spec.Job{single},
			allocs: []*spec.Alloc{fencedDue},
			want: Result{Place: []Place{{Job: single, Group: single.Groups[0], Index: 0,
				Cause: spec.CauseReplaceLost, Reason: "replaces alloc fenced03 lost with node n1", Previous: "fenced03aaaa", AvoidNode: "n1"}}},
		},
		{
			name:   "an instance on a down node is stopped and replaced at once, batch too; a completed one is not",
			jobs:   []*spec.Job{web, jobs},
			allocs: []*spec.Alloc{lost1, mk("a1", web, "api", 1, 2, spec.ClientRunning), lostB, lostDone, mk("j0", jobs, "work", 0, 1, spec.ClientRunning)},
			want: Result{
				Place: []Place{
					{Job: jobs, Group: jobs.Groups[0], Index: 1, Cause: spec.CauseReplaceLost, Reason: "replaces alloc lostbbbb lost with node n1", Previous: "lostbbbbbbbb", AvoidNode: "n1"},
					{Job: web, Group: web.Groups[0], Index: 0, Cause: spec.CauseReplaceLost, Reason: "replaces alloc lost1aaa lost with node n1", Previous: "lost1aaaaaaa", AvoidNode: "n1"},
				},
				Stop: []Stop{
					{Alloc: lost1, Cause: spec.CauseNodeDown, Reason: "node n1 is down (no heartbeat)"},
					{Alloc: lostB, Cause: spec.CauseNodeDown, Reason: "node n1 is down (no heartbeat)"},
				},
			},
		},
		{
			name:   "a lost alloc already told to stop is history: its replacement runs, nothing more happens",
			jobs:   []*spec.Job{web},
			allocs: []*spec.Alloc{lostStopped, mk("a0", web, "api", 0, 2, spec.ClientRunning), mk("r1", web, "api", 1, 3, spec.ClientRunning)},
			want:   Result{},
		},
		{
			name:   "a purged job's alloc on a down node is stopped, and forgotten once told",
			jobs:   nil,
			allocs: []*spec.Alloc{mk("pl", gone, "api", 0, 1, spec.ClientRunning, down), mk("pm", gone, "api", 0, 2, spec.ClientRunning, down, stopped)},
			want: Result{
				Stop: []Stop{{Alloc: mk("pl", gone, "api", 0, 1, spec.ClientRunning, down), Cause: spec.CauseJobPurged, Reason: "job purged"}},
				GC:   []string{"pm"},
			},
		},
		{
			name: "a new job places every instance",
			jobs: []*spec.Job{web},
			want: Result{Place: []Place{
				{Job: web, Group: web.Groups[0], Index: 0, Cause: spec.CauseNew, Reason: "new instance"},
				{Job: web, Group: web.Groups[0], Index: 1, Cause: spec.CauseNew, Reason: "new instance"},
			}},
		},
		{
			name: "steady state changes nothing",
			jobs: []*spec.Job{web},
			allocs: []*spec.Alloc{
				mk("a0", web, "api", 0, 1, spec.ClientRunning),
				mk("a1", web, "api", 1, 2, ""),
			},
		},
		{
			name: "purged job: live stopped, terminal forgotten, stopping left alone",
			allocs: []*spec.Alloc{
				p1,
				mk("p2", gone, "api", 0, 2, spec.ClientFailed),
				mk("p3", gone, "api", 0, 3, spec.ClientRunning, stopped),
				mk("p4", gone, "api", 1, 4, spec.ClientComplete, stopped),
			},
			want: Result{Stop: []Stop{{Alloc: p1, Cause: spec.CauseJobPurged, Reason: "job purged"}}, GC: []string{"p2", "p4"}},
		},
		{
			name: "stopped job: live stopped, nothing placed",
			jobs: []*spec.Job{stoppedWeb},
			allocs: []*spec.Alloc{
				s1,
				mk("s2", stoppedWeb, "api", 1, 2, spec.ClientFailed, ago(time.Hour)),
			},
			want: Result{Stop: []Stop{{Alloc: s1, Cause: spec.CauseJobStopped, Reason: "job stopped"}}},
		},
		{
			name:   "duplicates: the oldest is kept",
			jobs:   []*spec.Job{web},
			allocs: []*spec.Alloc{d3, d2, d1, mk("a1", web, "api", 1, 8, spec.ClientRunning)},
			want: Result{Stop: []Stop{
				{Alloc: d2, Cause: spec.CauseDuplicate, Reason: "duplicate of d1"},
				{Alloc: d3, Cause: spec.CauseDuplicate, Reason: "duplicate of d1"},
			}},
		},
		{
			name:   "job updated with new tasks: replace",
			jobs:   []*spec.Job{web2},
			allocs: []*spec.Alloc{u1},
			// The new instance waits for the old one to end: it never
			// runs twice; the leader looks again when the wait ends.
			want: Result{
				Place:   []Place{{Job: web2, Group: web2.Groups[0], Index: 0, Cause: spec.CauseUpdate, Reason: "job updated to version 2", Previous: "u1", WaitFor: "u1"}},
				Stop:    []Stop{{Alloc: u1, Cause: spec.CauseUpdate, Reason: "job updated to version 2"}},
				NextRun: now.Add(stopWait),
			},
		},
		{
			name:   "duplicates of an old version: stop the extra, replace the kept",
			jobs:   []*spec.Job{web2},
			allocs: []*spec.Alloc{u2, u1},
			want: Result{
				Place: []Place{{Job: web2, Group: web2.Groups[0], Index: 0, Cause: spec.CauseUpdate, Reason: "job updated to version 2", Previous: "u1", WaitFor: "u1"}},
				Stop: []Stop{
					{Alloc: u1, Cause: spec.CauseUpdate, Reason: "job updated to version 2"},
					{Alloc: u2, Cause: spec.CauseDuplicate, Reason: "duplicate of u1"},
				},
				NextRun: now.Add(stopWait),
			},
		},
		{
			name:   "job updated with the same tasks: keep in place, place the new count",
			jobs:   []*spec.Job{web2Same},
			allocs: []*spec.Alloc{mk("u1", web2Same, "api", 0, 1, spec.ClientRunning, ver(1, "serve"))},
			want: Result{Place: []Place{
				{Job: web2Same, Group: web2Same.Groups[0], Index: 1, Cause: spec.CauseNew, Reason: "new instance"},
			}},
		},
		{
			name: "count reduced",
			jobs: []*spec.Job{one},
			allocs: []*spec.Alloc{
				mk("c0", one, "api", 0, 1, spec.ClientRunning),
				c1, c2,
				mk("c3", one, "api", 3, 4, spec.ClientFailed),
				mk("c4", one, "api", 4, 5, spec.ClientRunning, stopped),
			},
			want: Result{Stop: []Stop{
				{Alloc: c1, Cause: spec.CauseCountReduced, Reason: "count reduced to 1"},
				{Alloc: c2, Cause: spec.CauseCountReduced, Reason: "count reduced to 1"},
			}},
		},
		{
			name:   "group removed",
			jobs:   []*spec.Job{web},
			allocs: []*spec.Alloc{mk("a0", web, "api", 0, 1, spec.ClientRunning), mk("a1", web, "api", 1, 2, spec.ClientRunning), g1},
			want:   Result{Stop: []Stop{{Alloc: g1, Cause: spec.CauseGroupRemoved, Reason: "group cache removed from the job"}}},
		},
		{
			name: "batch default policy: completed is done; a failure gets one more attempt after 5s; a second within 24h is final",
			jobs: []*spec.Job{jobs},
			allocs: []*spec.Alloc{
				mk("b0", jobs, "work", 0, 1, spec.ClientComplete, ago(time.Hour)),
				mk("b1", jobs, "work", 1, 2, spec.ClientFailed, ago(5*time.Second), on("n2")),
				mk("b2", jobs, "work", 2, 3, spec.ClientFailed, ago(23*time.Hour)),
				mk("b3", jobs, "work", 2, 4, spec.ClientFailed, ago(time.Hour)),
			},
			want: Result{Place: []Place{
				{Job: jobs, Group: jobs.Groups[0], Index: 1, Cause: spec.CauseReschedule, Reason: "replaces failed alloc b1 (attempt 1 of 1)", Previous: "b1", AvoidNode: "n2"},
			}},
		},
		{
			name: "batch: a failure not yet 5s old waits; one that follows a completion is not retried",
			jobs: []*spec.Job{jobs},
			allocs: []*spec.Alloc{
				mk("b0", jobs, "work", 0, 1, spec.ClientFailed, ago(2*time.Second)),
				mk("b1", jobs, "work", 1, 2, spec.ClientComplete, ago(time.Hour)),
				mk("b2", jobs, "work", 1, 3, spec.ClientFailed, ago(time.Minute)),
				mk("b3", jobs, "work", 2, 4, spec.ClientRunning),
			},
			want: Result{NextRun: now.Add(3 * time.Second)},
		},
		{
			name: "batch: a lost instance is replaced at once and does not use up the attempt",
			jobs: []*spec.Job{jobs},
			allocs: []*spec.Alloc{
				mk("f0", jobs, "work", 0, 1, spec.ClientFailed, ago(time.Hour)),
				l1,
				mk("b1", jobs, "work", 1, 2, spec.ClientRunning),
				mk("b2", jobs, "work", 2, 3, spec.ClientComplete),
			},
			want: Result{Place: []Place{
				{Job: jobs, Group: jobs.Groups[0], Index: 0, Cause: spec.CauseReplaceLost, Reason: "replaces lost alloc l1aaaaaa", Previous: "l1aaaaaaaaaa", AvoidNode: "n1"},
			}},
		},
		{
			name:   "service: a failed instance is replaced once the delay is over",
			jobs:   []*spec.Job{web},
			allocs: []*spec.Alloc{f1, mk("a1", web, "api", 1, 2, spec.ClientRunning)},
			want: Result{Place: []Place{
				{Job: web, Group: web.Groups[0], Index: 0, Cause: spec.CauseReschedule, Reason: "replaces failed alloc f1234567 (attempt 1)", Previous: "f1234567-89ab", AvoidNode: "n1"},
			}},
		},
		{
			name: "service: due exactly now is placed",
			jobs: []*spec.Job{one},
			allocs: []*spec.Alloc{
				mk("x1", one, "api", 0, 1, spec.ClientFailed, ago(40*time.Second)),
				mk("x2", one, "api", 0, 2, spec.ClientFailed, ago(time.Minute)), // newest by CreateIndex
			},
			want: Result{Place: []Place{
				{Job: one, Group: one.Groups[0], Index: 0, Cause: spec.CauseReschedule, Reason: "replaces failed alloc x2 (attempt 2)", Previous: "x2", AvoidNode: "n1"},
			}},
		},
		{
			name: "service: not yet due sets NextRun to the earliest",
			jobs: []*spec.Job{web},
			allocs: []*spec.Alloc{
				mk("x1", web, "api", 0, 1, spec.ClientFailed, ago(5*time.Minute)),
				mk("x2", web, "api", 0, 2, spec.ClientFailed, ago(30*time.Second)), // attempt 2: 60s, due in 30s
				mk("y1", web, "api", 1, 3, spec.ClientFailed, ago(10*time.Second)), // attempt 1: 30s, due in 20s
			},
			want: Result{NextRun: now.Add(20 * time.Second)},
		},
		{
			name: "service: failures of older versions do not count",
			jobs: []*spec.Job{web2},
			allocs: []*spec.Alloc{
				mk("o1", web2, "api", 0, 1, spec.ClientFailed, ver(1, "serve"), ago(time.Hour)),
				mk("o2", web2, "api", 0, 2, spec.ClientFailed, ver(1, "serve"), ago(time.Hour)),
				mk("o3", web2, "api", 0, 3, spec.ClientFailed, ver(1, "serve"), ago(time.Hour)),
				f2,
			},
			want: Result{Place: []Place{
				{Job: web2, Group: web2.Groups[0], Index: 0, Cause: spec.CauseReschedule, Reason: "replaces failed alloc f2 (attempt 1)", Previous: "f2", AvoidNode: "n1"},
			}},
		},
		{
			name: "service: a completed instance is replaced like a failed one; a lost one at once",
			jobs: []*spec.Job{web},
			allocs: []*spec.Alloc{
				mk("e0", web, "api", 0, 1, spec.ClientComplete, ago(time.Minute)),
				mk("e1", web, "api", 1, 2, spec.ClientLost, ago(0)),
			},
			want: Result{Place: []Place{
				{Job: web, Group: web.Groups[0], Index: 0, Cause: spec.CauseReschedule, Reason: "replaces completed alloc e0 (attempt 1)", Previous: "e0", AvoidNode: "n1"},
				{Job: web, Group: web.Groups[0], Index: 1, Cause: spec.CauseReplaceLost, Reason: "replaces lost alloc e1", Previous: "e1", AvoidNode: "n1"},
			}},
		},
		{
			name: "limited policy: failures within the interval, lost ones not counted; used-up attempts are final",
			jobs: []*spec.Job{limited},
			allocs: []*spec.Alloc{
				// [0] failed 3 times within 1h: 2 attempts used up.
				mk("a1", limited, "api", 0, 1, spec.ClientFailed, ago(50*time.Minute)),
				mk("a2", limited, "api", 0, 2, spec.ClientFailed, ago(20*time.Minute)),
				mk("a3", limited, "api", 0, 3, spec.ClientFailed, ago(time.Minute)),
				// [1] the first failure is more than 1h before the last.
				mk("b1", limited, "api", 1, 4, spec.ClientFailed, ago(2*time.Hour)),
				mk("b2", limited, "api", 1, 5, spec.ClientFailed, ago(30*time.Minute)),
				mk("b3", limited, "api", 1, 6, spec.ClientFailed, ago(time.Minute), on("n7")),
				// [2] a lost alloc between failures does not count.
				mk("c1", limited, "api", 2, 7, spec.ClientFailed, ago(30*time.Minute)),
				mk("c2", limited, "api", 2, 8, spec.ClientLost, ago(20*time.Minute)),
				mk("c3", limited, "api", 2, 9, spec.ClientFailed, ago(time.Minute)),
				// [3] constant 10s delay, not yet over.
				mk("d1", limited, "api", 3, 10, spec.ClientFailed, ago(5*time.Second)),
			},
			want: Result{
				Place: []Place{
					{Job: limited, Group: limited.Groups[0], Index: 1, Cause: spec.CauseReschedule, Reason: "replaces failed alloc b3 (attempt 2 of 2)", Previous: "b3", AvoidNode: "n7"},
					{Job: limited, Group: limited.Groups[0], Index: 2, Cause: spec.CauseReschedule, Reason: "replaces failed alloc c3 (attempt 2 of 2)", Previous: "c3", AvoidNode: "n1"},
				},
				NextRun: now.Add(5 * time.Second),
			},
		},
		{
			name: "exponential delay is capped at max_delay",
			jobs: []*spec.Job{expo},
			allocs: []*spec.Alloc{
				mk("e1", expo, "api", 0, 1, spec.ClientFailed, ago(20*time.Minute)),
				mk("e2", expo, "api", 0, 2, spec.ClientFailed, ago(10*time.Minute)),
				mk("e3", expo, "api", 0, 3, spec.ClientFailed, ago(2*time.Minute)), // 1m * 2^2 = 4m, capped at 3m
			},
			want: Result{NextRun: now.Add(time.Minute)},
		},
		{
			name: "the job's policy applies to groups without one: attempts = 0 never reschedules",
			jobs: []*spec.Job{never},
			allocs: []*spec.Alloc{
				mk("n1", never, "api", 0, 1, spec.ClientFailed, ago(time.Hour)),
			},
		},
		{
			name: "a limit above the history kept: counted failures are not forgotten",
			jobs: []*spec.Job{many},
			allocs: append(slices.Clone(manyAllocs[:9]),
				mk("live", many, "api", 1, 100, spec.ClientRunning)),
			want: Result{
				Place: []Place{{Job: many, Group: many.Groups[0], Index: 0, Cause: spec.CauseReschedule, Reason: "replaces failed alloc m6 (attempt 7 of 7)", Previous: "m6", AvoidNode: "n1"}},
				GC:    []string{"old1", "old2"},
			},
		},
		{
			name:   "a limit above the history kept: the eighth failure is final, and all eight are kept to say so",
			jobs:   []*spec.Job{many},
			allocs: append(slices.Clone(manyAllocs), mk("live", many, "api", 1, 100, spec.ClientRunning)),
			want:   Result{GC: []string{"old1", "old2"}},
		},
		{
			name: "allocs told to stop are not failures",
			jobs: []*spec.Job{web},
			allocs: []*spec.Alloc{
				mk("a0", web, "api", 0, 1, spec.ClientRunning),
				mk("a1", web, "api", 1, 2, spec.ClientComplete, stopped),       // count was reduced, now raised again
				mk("a2", web, "api", 1, 3, spec.ClientFailed, stopped, ago(0)), // killed
			},
			want: Result{Place: []Place{{Job: web, Group: web.Groups[0], Index: 1, Cause: spec.CauseNew, Reason: "new instance"}}},
		},
		{
			name:   "gc keeps the newest five terminal allocs of an instance",
			jobs:   []*spec.Job{one},
			allocs: append(slices.Clone(seven), mk("live", one, "api", 0, 8, spec.ClientRunning), mk("stopping", one, "api", 0, 0, spec.ClientRunning, stopped)),
			want:   Result{GC: []string{"a", "b"}},
		},
		{
			name:   "gc and replacement together",
			jobs:   []*spec.Job{one},
			allocs: seven,
			want: Result{
				Place: []Place{{Job: one, Group: one.Groups[0], Index: 0, Cause: spec.CauseReschedule, Reason: "replaces failed alloc g (attempt 7)", Previous: "g", AvoidNode: "n1"}},
				GC:    []string{"a", "b"},
			},
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

func TestDelay(t *testing.T) {
	svcPolicy := spec.DefaultReschedule(spec.JobService)
	want := []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 16 * time.Minute, 32 * time.Minute, time.Hour, time.Hour}
	var got []time.Duration
	for k := 1; k <= len(want); k++ {
		got = append(got, delay(svcPolicy, k))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("exponential delay(1..%d) mismatch (-want +got):\n%s", len(want), diff)
	}
	if d := delay(svcPolicy, 1000); d != time.Hour {
		t.Errorf("delay(1000) = %v, want 1h", d)
	}
	constant := spec.DefaultReschedule(spec.JobBatch)
	for _, k := range []int{1, 2, 10} {
		if d := delay(constant, k); d != 5*time.Second {
			t.Errorf("constant delay(%d) = %v, want 5s", k, d)
		}
	}
	capped := &spec.ReschedulePolicy{Delay: spec.Duration(time.Minute), DelayFunction: spec.DelayExponential, MaxDelay: spec.Duration(90 * time.Second)}
	if d := delay(capped, 2); d != 90*time.Second {
		t.Errorf("capped delay(2) = %v, want 1m30s", d)
	}
}

// TestTasksEqualCoversEveryField fails when spec.Task gains a field, so that
// tasksEqual is taught about it; and checks that a change to each field it
// knows is seen.
func TestTasksEqualCoversEveryField(t *testing.T) {
	mutate := map[string]func(*spec.Task){
		"Name":             func(t *spec.Task) { t.Name = "other" },
		"Driver":           func(t *spec.Task) { t.Driver = "raw_exec" },
		"Config":           func(t *spec.Task) { t.Config.Args = []string{"-v"} },
		"WorkDir":          func(t *spec.Task) { t.Config.WorkDir = "/tmp" },
		"User":             func(t *spec.Task) { t.Config.User = "nobody" },
		"Prestart":         func(t *spec.Task) { t.Config.Prestart = []spec.Command{{Command: "/bin/true"}} },
		"Poststop":         func(t *spec.Task) { t.Config.Poststop = []spec.Command{{Command: "/bin/true"}} },
		"Stop":             func(t *spec.Task) { t.Config.Stop = &spec.Command{Command: "/bin/true"} },
		"Env":              func(t *spec.Task) { t.Env = map[string]string{"A": "1"} },
		"Resources":        func(t *spec.Task) { t.Resources.MemoryMB++ },
		"Restart":          func(t *spec.Task) { t.Restart = &spec.RestartPolicy{Attempts: new(1)} },
		"KillTimeout":      func(t *spec.Task) { t.KillTimeout++ },
		"Meta":             func(t *spec.Task) { t.Meta = map[string]string{"k": "v"} },
		"KillSignal":       func(t *spec.Task) { t.KillSignal = "SIGINT" },
		"ShutdownDelay":    func(t *spec.Task) { t.ShutdownDelay = spec.Duration(time.Second) },
		"Leader":           func(t *spec.Task) { t.Leader = true },
		"Lifecycle":        func(t *spec.Task) { t.Lifecycle = &spec.Lifecycle{Hook: spec.LifecycleHook("prestart")} },
		"Templates":        func(t *spec.Task) { t.Templates = []*spec.Template{{Data: "x", Destination: "local/x"}} },
		"DispatchPayload":  func(t *spec.Task) { t.DispatchPayload = &spec.DispatchPayload{File: "in"} },
		"Artifacts":        func(t *spec.Task) { t.Artifacts = []*spec.Artifact{{Source: "https://example.com/a"}} },
		"Services":         func(t *spec.Task) { t.Services = []*spec.Service{{Name: "web"}} },
		"Image":            func(t *spec.Task) { t.Config.Image = "app:2" },
		"Entrypoint":       func(t *spec.Task) { t.Config.Entrypoint = []string{"/app"} },
		"Ports":            func(t *spec.Task) { t.Config.Ports = []string{"http"} },
		"Labels":           func(t *spec.Task) { t.Config.Labels = map[string]string{"team": "a"} },
		"Privileged":       func(t *spec.Task) { t.Config.Privileged = true },
		"NetworkMode":      func(t *spec.Task) { t.Config.NetworkMode = "none" },
		"PidMode":          func(t *spec.Task) { t.Config.PidMode = "host" },
		"Volumes":          func(t *spec.Task) { t.Config.Volumes = []string{"/a:/b"} },
		"PortMap":          func(t *spec.Task) { t.Config.PortMap = map[string]string{"http": "80"} },
		"Mounts":           func(t *spec.Task) { t.Config.Mounts = []*spec.DockerMount{{Type: "tmpfs", Target: "/x"}} },
		"CapAdd":           func(t *spec.Task) { t.Config.CapAdd = []string{"NET_ADMIN"} },
		"CapDrop":          func(t *spec.Task) { t.Config.CapDrop = []string{"ALL"} },
		"Ulimit":           func(t *spec.Task) { t.Config.Ulimit = map[string]string{"nofile": "1024"} },
		"Sysctl":           func(t *spec.Task) { t.Config.Sysctl = map[string]string{"net.core.somaxconn": "1024"} },
		"ForcePull":        func(t *spec.Task) { t.Config.ForcePull = true },
		"ImagePullTimeout": func(t *spec.Task) { t.Config.ImagePullTimeout = spec.Duration(time.Minute) },
		"Hostname":         func(t *spec.Task) { t.Config.Hostname = "web-1" },
		"DNSServers":       func(t *spec.Task) { t.Config.DNSServers = []string{"10.0.0.2"} },
		"DNSSearchDomains": func(t *spec.Task) { t.Config.DNSSearchDomains = []string{"svc"} },
		"DNSOptions":       func(t *spec.Task) { t.Config.DNSOptions = []string{"ndots:2"} },
		"ExtraHosts":       func(t *spec.Task) { t.Config.ExtraHosts = []string{"db:10.0.0.5"} },
		"Init":             func(t *spec.Task) { t.Config.Init = true },
		"ReadonlyRootfs":   func(t *spec.Task) { t.Config.ReadonlyRootfs = true },
		"ShmSize":          func(t *spec.Task) { t.Config.ShmSize = 1 << 20 },
		"VolumeMounts":     func(t *spec.Task) { t.VolumeMounts = []*spec.VolumeMount{{Volume: "d", Destination: "/data"}} },
		"Logs":             func(t *spec.Task) { t.Logs = &spec.LogConfig{MaxFiles: 2} },
	}
	// Fields that decide where a task runs, not what it runs: changing
	// them keeps running allocs, as a job or group constraint does.
	placementOnly := map[string]bool{"Constraints": true, "Affinities": true}
	typ := reflect.TypeFor[spec.Task]()
	for i := range typ.NumField() {
		if _, ok := mutate[typ.Field(i).Name]; !ok && !placementOnly[typ.Field(i).Name] {
			t.Errorf("spec.Task has field %s: teach tasksEqual and this test about it", typ.Field(i).Name)
		}
	}
	ctyp := reflect.TypeFor[spec.TaskConfig]()
	for i := range ctyp.NumField() {
		name := ctyp.Field(i).Name
		if _, ok := mutate[name]; !ok && name != "Command" && name != "Args" {
			t.Errorf("spec.TaskConfig has field %s: teach configEqual and this test about it", name)
		}
	}
	base := func() *spec.Task {
		t := task("serve")
		t.Restart = spec.DefaultRestart(spec.JobService)
		return t
	}
	if !tasksEqual([]*spec.Task{base()}, []*spec.Task{base()}) {
		t.Errorf("equal tasks reported different")
	}
	empty := base()
	empty.Env, empty.Meta, empty.Config.Args = map[string]string{}, map[string]string{}, []string{}
	if !tasksEqual([]*spec.Task{base()}, []*spec.Task{empty}) {
		t.Errorf("nil and empty maps and slices reported different")
	}
	placed := base()
	placed.Constraints = []*spec.Constraint{{Attribute: "${attr.os}", Operator: "=", Value: "linux"}}
	if !tasksEqual([]*spec.Task{base()}, []*spec.Task{placed}) {
		t.Errorf("a changed constraint replaces running tasks")
	}
	for field, m := range mutate {
		changed := base()
		m(changed)
		if tasksEqual([]*spec.Task{base()}, []*spec.Task{changed}) {
			t.Errorf("a change to %s was not seen", field)
		}
	}
	if tasksEqual([]*spec.Task{base()}, []*spec.Task{base(), base()}) {
		t.Errorf("different task counts reported equal")
	}
}

// TestReplacementWaitsForTheOldInstanceToEnd: a new version's instance is
// not placed while the instance it replaces may still run: not in the pass
// that stops it, nor while it is stopping; once it ended, or its node is
// down, or its kill_timeout plus stopWait passed, it is.
func TestReplacementWaitsForTheOldInstanceToEnd(t *testing.T) {
	web2 := svc("web", 2, grp("api", 1, "serve --v2"))
	old := mk("old", web2, "api", 0, 1, spec.ClientRunning, ver(1, "serve"))
	res := Reconcile(Input{Jobs: []*spec.Job{web2}, Allocs: []*spec.Alloc{old}, Now: now})
	if len(res.Stop) != 1 || len(res.Place) != 1 || res.Place[0].WaitFor != "old" {
		t.Fatalf("the pass that stops it: stops %+v, places %+v", res.Stop, res.Place)
	}
	old.DesiredStatus, old.DesiredReason, old.ModifyTime = spec.DesiredStop, res.Stop[0].Reason, now
	want := Place{Job: web2, Group: web2.Groups[0], Index: 0, Cause: spec.CauseUpdate, Reason: "job updated to version 2", Previous: "old"}
	for _, c := range []struct {
		name    string
		status  spec.ClientStatus
		down    bool
		at      time.Time
		waitFor string
	}{
		{"still stopping", spec.ClientRunning, false, now.Add(time.Second), "old"},
		{"ended", spec.ClientComplete, false, now.Add(time.Second), ""},
		{"its node is down", spec.ClientRunning, true, now.Add(time.Second), ""},
		{"never heard of again", spec.ClientRunning, false, now.Add(stopWait), ""},
	} {
		a := *old
		a.Status = &spec.AllocStatus{ClientStatus: c.status}
		a.NodeDown = c.down
		res := Reconcile(Input{Jobs: []*spec.Job{web2}, Allocs: []*spec.Alloc{&a}, Now: c.at})
		w := want
		w.WaitFor = c.waitFor
		if len(res.Place) != 1 || !reflect.DeepEqual(res.Place[0], w) {
			t.Errorf("%s: places %+v, want %+v", c.name, res.Place, w)
		}
		if c.waitFor != "" && !res.NextRun.Equal(now.Add(stopWait)) {
			t.Errorf("%s: next run %v, want the wait's end %v", c.name, res.NextRun, now.Add(stopWait))
		}
	}
}
