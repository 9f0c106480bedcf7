package registry

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/drover-org/drover/internal/spec"
	"github.com/drover-org/drover/internal/state"
)

// TestEventsAreOrderedFilteredAndTrimmed: events come back in the order
// they were written, each with its write's revision; a reader resumes
// after an index; trimming honours both the age and the count bound.
func TestEventsAreOrderedFilteredAndTrimmed(t *testing.T) {
	r := open(t, startEtcd(t))
	ctx := context.Background()
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r.now = func() time.Time { return clock }
	for i := range 5 {
		clock = clock.Add(time.Hour)
		if err := r.AppendEvents(ctx, []spec.Event{{Topic: spec.TopicJob, Type: "Submitted", Job: fmt.Sprintf("j%d", i)}, {Topic: spec.TopicJob, Type: "Stopped", Job: fmt.Sprintf("j%d", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	evs, rev, err := r.ListEvents(ctx, EventQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 10 || rev == 0 {
		t.Fatalf("ListEvents: %d events at %d, want 10", len(evs), rev)
	}
	for i, e := range evs {
		if want := fmt.Sprintf("j%d", i/2); e.Job != want || (i > 0 && e.Index < evs[i-1].Index) {
			t.Fatalf("event %d: %+v, want job %s in index order", i, e, want)
		}
		if i%2 == 1 && e.Index != evs[i-1].Index {
			t.Errorf("events of one write have indexes %d and %d", evs[i-1].Index, e.Index)
		}
		if e.Time.IsZero() {
			t.Errorf("event %d has no time", i)
		}
	}
	after, _, err := r.ListEvents(ctx, EventQuery{After: evs[5].Index})
	if err != nil || len(after) != 4 || after[0].Job != "j3" {
		t.Fatalf("ListEvents after index %d: %v %+v, want j3 and j4's", evs[5].Index, err, after)
	}
	// Since reads from a time on; MaxRecords keeps the newest records.
	since, _, err := r.ListEvents(ctx, EventQuery{Since: time.Date(2026, 1, 1, 4, 30, 0, 0, time.UTC)})
	if err != nil || len(since) != 2 || since[0].Job != "j4" {
		t.Fatalf("ListEvents since +4h30m: %v %+v, want j4's two", err, since)
	}
	newest, _, err := r.ListEvents(ctx, EventQuery{MaxRecords: 2})
	if err != nil || len(newest) != 4 || newest[0].Job != "j3" || newest[3].Job != "j4" {
		t.Fatalf("ListEvents of the newest 2 records: %v %+v, want j3's and j4's in order", err, newest)
	}

	if err := r.AppendEvents(ctx, []spec.Event{{Topic: spec.TopicNode, Type: "Down", Node: "n1"}}); err != nil {
		t.Fatal(err)
	}

	// Six records written an hour apart (the last at +6h): older than
	// +3h30m goes (3 records), then the count bound keeps the newest 2.
	n, err := r.TrimEvents(ctx, time.Date(2026, 1, 1, 3, 30, 0, 0, time.UTC), 0)
	if err != nil || n != 3 {
		t.Fatalf("TrimEvents by age: %d, %v; want 3", n, err)
	}
	if n, err := r.TrimEvents(ctx, time.Time{}, 2); err != nil || n != 1 {
		t.Fatalf("TrimEvents by count: %d, %v; want 1", n, err)
	}
	left, _, _ := r.ListEvents(ctx, EventQuery{})
	if len(left) != 3 || left[0].Job != "j4" || left[2].Node != "n1" {
		t.Fatalf("left after trimming: %+v", left)
	}
}

// TestStatusEventsAreTheNewOnes: a report's events are the task events
// newer than the stored report's, the client status when it changed, and
// the deployment verdict when it first comes.
func TestStatusEventsAreTheNewOnes(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := &spec.Alloc{ID: "a1", Name: "web.g[0]", Job: "web", Namespace: "team", NodeName: "n1", DeploymentID: "d1234567890"}
	old := &spec.AllocStatus{ClientStatus: spec.ClientPending, Tasks: map[string]*spec.TaskState{
		"t": {Events: []spec.TaskEvent{{Time: t0, Type: spec.EventReceived}}}}}
	now := &spec.AllocStatus{ClientStatus: spec.ClientRunning, Description: "all tasks running",
		DeploymentHealth: &spec.DeploymentHealth{Healthy: true, Time: t0.Add(3 * time.Second)},
		Tasks: map[string]*spec.TaskState{"t": {Events: []spec.TaskEvent{
			{Time: t0, Type: spec.EventReceived}, {Time: t0.Add(time.Second), Type: spec.EventStarted, Message: "pid 7"}}}}}
	got := statusEvents(a, old, now)
	var types []string
	for _, e := range got {
		types = append(types, e.Topic+"/"+string(e.Type))
		if e.Job != "web" || e.Namespace != "team" || e.Alloc != "web.g[0]" || e.Node != "n1" {
			t.Errorf("event without its subject: %+v", e)
		}
	}
	if want := "alloc/Started deployment/Healthy alloc/Running"; fmt.Sprint(types) != "["+want+"]" {
		t.Errorf("events %v, want [%s]", types, want)
	}
	if again := statusEvents(a, now, now); len(again) != 0 {
		t.Errorf("the same report twice made events: %+v", again)
	}
}

// TestStoreHoldsTheHistoryAsEtcdDoes: a server's store, fed by its
// mirror, answers every query of the history as a read of etcd at the
// same revision does: the records its full read found and those its watch
// brought (one from a clock behind the others'), and none of those the
// leader's trimming deleted, by age or by count.
func TestStoreHoldsTheHistoryAsEtcdDoes(t *testing.T) {
	r := open(t, startEtcd(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := t0
	r.now = func() time.Time { return clock }
	var idx []int64 // each record's index
	write := func(n int) {
		for range n {
			clock = clock.Add(time.Hour)
			if err := r.AppendEvents(ctx, []spec.Event{{Topic: spec.TopicJob, Type: spec.EventSubmitted, Job: fmt.Sprintf("j%d", len(idx))},
				{Topic: spec.TopicNode, Type: spec.EventDown, Node: fmt.Sprintf("n%d", len(idx))}}); err != nil {
				t.Fatal(err)
			}
			rev, err := r.Revision(ctx)
			if err != nil {
				t.Fatal(err)
			}
			idx = append(idx, rev)
		}
	}
	st := state.New()
	compare := func(when string) {
		t.Helper()
		for _, q := range []EventQuery{{}, {After: idx[2]}, {Since: t0.Add(150 * time.Minute)}, {MaxRecords: 2}, {MaxRecords: 3, After: idx[3]},
			{MaxRecords: 2, Since: t0.Add(5 * time.Hour)}, {After: idx[1], Since: t0.Add(270 * time.Minute)}, {After: idx[len(idx)-1]}} {
			want, rev, err := r.ListEvents(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
			err = st.WaitRev(wctx, rev)
			wcancel()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, st.Snapshot().Events(q)); diff != "" {
				t.Errorf("%s: %+v from the store (-etcd +store):\n%s", when, q, diff)
			}
		}
	}
	write(3) // found by the mirror's full read
	if _, err := r.NewMirror(ctx, "test", st, nil); err != nil {
		t.Fatal(err)
	}
	write(4) // brought by its watch
	now := clock
	clock = t0.Add(30 * time.Minute) // a server whose clock is behind: +1h30m
	write(1)
	clock = now
	compare("written")
	if n, err := r.TrimEvents(ctx, t0.Add(150*time.Minute), 0); err != nil || n != 3 {
		t.Fatalf("TrimEvents by age: %d, %v; want 3", n, err)
	}
	compare("trimmed by age")
	if n, err := r.TrimEvents(ctx, time.Time{}, 3); err != nil || n != 2 {
		t.Fatalf("TrimEvents by count: %d, %v; want 2", n, err)
	}
	compare("trimmed by count")
	if evs := st.Snapshot().Events(EventQuery{}); len(evs) != 6 || evs[0].Job != "j4" {
		t.Errorf("the store kept %+v, want j4's to j6's records", evs)
	}
}
