package registry

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/spec"
)

// TestEventsAreOrderedFilteredAndTrimmed: events come back in the order
// they were written, each with its write's revision; a reader resumes
// after an index; a watch delivers new ones; trimming honours both the age
// and the count bound.
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

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := r.WatchEvents(wctx, rev)
	if err := r.AppendEvents(ctx, []spec.Event{{Topic: spec.TopicNode, Type: "Down", Node: "n1"}}); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-w:
		if len(got) != 1 || got[0].Node != "n1" || got[0].Index <= rev {
			t.Fatalf("watched %+v", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the watch delivered nothing in 5s")
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
