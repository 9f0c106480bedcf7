package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/drover-org/drover/internal/driver"
	"github.com/drover-org/drover/internal/spec"
)

func TestSimDriverRunsUntilStopped(t *testing.T) {
	d := &simDriver{}
	h1, err := d.Start(context.Background(), driver.Task{Command: "/bin/sleep"})
	if err != nil {
		t.Fatal(err)
	}
	h2, _ := d.Start(context.Background(), driver.Task{Command: "/bin/sleep"})
	if h1.PID() == h2.PID() || h1.PID() <= 1<<22 {
		t.Errorf("PIDs %d and %d: want distinct and above any real pid_max", h1.PID(), h2.PID())
	}
	select {
	case e := <-h1.Wait():
		t.Fatalf("task exited before Stop: %v", e)
	case <-time.After(20 * time.Millisecond):
	}
	exit, err := h1.Stop(context.Background(), time.Second)
	if err != nil || exit.Signal != "SIGTERM" || exit.Successful() {
		t.Errorf("Stop = %v, %v; want killed by SIGTERM", exit, err)
	}
	if e := <-h1.Wait(); e.Signal != "SIGTERM" {
		t.Errorf("Wait after Stop = %v", e)
	}
	h1.Stop(context.Background(), time.Second) // a second stop neither blocks nor exits again
	select {
	case e := <-h1.Wait():
		t.Errorf("a second exit: %v", e)
	default:
	}
}

func TestRoute(t *testing.T) {
	got := map[string]string{}
	for _, p := range []string{
		"/v1/nodes/abc/heartbeat", "/v1/nodes/abc/allocations/status", "/v1/nodes/abc/allocations",
		"/v1/jobs", "/v1/jobs/web", "/v1/allocations/x1/status", "/v1/nodes",
	} {
		got[p] = route(p)
	}
	want := map[string]string{
		"/v1/nodes/abc/heartbeat":          "/v1/nodes/{id}/heartbeat",
		"/v1/nodes/abc/allocations/status": "/v1/nodes/{id}/allocations/status",
		"/v1/nodes/abc/allocations":        "/v1/nodes/{id}/allocations",
		"/v1/jobs":                         "/v1/jobs",
		"/v1/jobs/web":                     "/v1/jobs/{id}",
		"/v1/allocations/x1/status":        "/v1/allocations/{id}/status",
		"/v1/nodes":                        "/v1/nodes",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("route (-want +got):\n%s", d)
	}
}

// TestObserverReports: a report counts an alloc running once, only when
// the server accepted it and the alloc says running, with the task start
// the agent reported; a report that arrives before the watch saw the
// commit still counts for the job once the commit is seen.
func TestObserverReports(t *testing.T) {
	o := newObserver()
	o.placed["a1"] = placedAlloc{job: "j", node: "n1", rev: 7}
	o.job("j").placed++
	started := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	running := &spec.AllocStatus{ClientStatus: spec.ClientRunning, Tasks: map[string]*spec.TaskState{"t": {State: spec.TaskRunning, StartedAt: started}}}
	pending := &spec.AllocStatus{ClientStatus: spec.ClientPending}
	body := func(entries ...spec.AllocStatusEntry) []byte {
		b, _ := json.Marshal(spec.NodeStatusReport{Allocs: entries})
		return b
	}
	refused, _ := json.Marshal(spec.NodeStatusResult{Refused: []spec.RefusedStatus{{ID: "a3", Status: 409}}})
	t1 := time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC)
	o.reported(body(
		spec.AllocStatusEntry{ID: "a1", Status: running},
		spec.AllocStatusEntry{ID: "a2", Status: pending},
		spec.AllocStatusEntry{ID: "a3", Status: running},
		spec.AllocStatusEntry{ID: "a4", Status: running}, // not yet seen by the watch
	), refused, t1)
	o.reported(body(spec.AllocStatusEntry{ID: "a1", Status: running}), nil, t1.Add(time.Second)) // again: no change
	want := map[string]runningAlloc{"a1": {started: started, acked: t1}, "a4": {started: started, acked: t1}}
	if d := cmp.Diff(want, o.running, cmp.AllowUnexported(runningAlloc{})); d != "" {
		t.Errorf("running (-want +got):\n%s", d)
	}
	placed, run, err := o.counts([]string{"j"})
	if err != nil || placed != 1 || run != 1 {
		t.Errorf("counts = %d placed, %d running, %v; want 1, 1", placed, run, err)
	}
}

func TestEtcdCounts(t *testing.T) {
	before := etcdCounts{"Txn": 10, "Range": 5, "LeaseKeepAlive": 100}
	after := etcdCounts{"Txn": 40, "Range": 5, "LeaseKeepAlive": 160, "Put": 2}
	d := after.since(before)
	if diff := cmp.Diff(etcdCounts{"Txn": 30, "LeaseKeepAlive": 60, "Put": 2}, d); diff != "" {
		t.Errorf("since (-want +got):\n%s", diff)
	}
	if d.total() != 92 {
		t.Errorf("total = %v, want 92", d.total())
	}
	if got, want := d.top(2, 2), "LeaseKeepAlive 30, Txn 15"; got != want {
		t.Errorf("top = %q, want %q", got, want)
	}
}

func TestPct(t *testing.T) {
	var d []time.Duration
	for i := 100; i >= 1; i-- {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	got := []time.Duration{pct(d, 50), pct(d, 99), pct(d, 100), pct(nil, 50)}
	want := []time.Duration{50 * time.Millisecond, 99 * time.Millisecond, 100 * time.Millisecond, 0}
	if !slices.Equal(got, want) {
		t.Errorf("pct = %v, want %v", got, want)
	}
}

// TestSimCluster runs the real server with three simulated agents: a job's
// instances are committed, started by the agents and reported running, and
// etcd's request counters move; the observer keeps no alloc of a job it
// was told to ignore.
func TestSimCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an etcd member")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := startSim(ctx, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	if _, err := c.addAgents(ctx, 3); err != nil {
		t.Fatal(err)
	}
	before, err := gatherEtcd()
	if err != nil {
		t.Fatal(err)
	}
	// A job the observer ignores, placed before j: once j's allocs are
	// seen, the watch has passed this one's.
	c.obs.ignoreJobs("skip-")
	if _, err := c.client.SubmitJob(ctx, simJob("skip-1", 1, instanceSize(2)), 0); err != nil {
		t.Fatal(err)
	}
	err = waitUntil(ctx, 30*time.Second, "skip-1 placed", func() (bool, string) {
		allocs, _, err := c.client.Allocs(ctx, "skip-1", "", nil)
		return err == nil && len(allocs) == 1, fmt.Sprint(len(allocs), err)
	})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if _, err := c.client.SubmitJob(ctx, simJob("j", 4, instanceSize(2)), 0); err != nil {
		t.Fatal(err)
	}
	err = waitUntil(ctx, 30*time.Second, "4 running", func() (bool, string) {
		_, running, err := c.obs.counts([]string{"j"})
		return err == nil && running == 4, ""
	})
	if err != nil {
		t.Fatal(err)
	}
	after, _ := gatherEtcd()
	if d := after.since(before); d["Txn"] < 2 {
		t.Errorf("etcd Txn calls during submit and placement: %v; want at least the submit and the commit", d)
	}
	if got := c.obs.allocs("skip-1"); len(got) != 0 {
		t.Errorf("the observer kept %d allocs of an ignored job", len(got))
	}
	allocs := c.obs.allocs("j")
	nodes := map[string]bool{}
	for id, a := range allocs {
		nodes[a.node] = true
		if !a.isRunning || a.run.started.Before(t0) || a.run.acked.Before(a.run.started) || a.seen.Before(t0) {
			t.Errorf("alloc %s: %+v; want committed, then started and acknowledged after submit", id, a)
		}
	}
	// instanceSize(2): two fill a node, so four take at least two nodes.
	if len(allocs) != 4 || len(nodes) < 2 {
		t.Errorf("%d allocs on nodes %v; want 4 on at least 2", len(allocs), slices.Collect(maps.Keys(nodes)))
	}
	if reqs := c.obs.requestCounts(); reqs["POST /v1/nodes"] != 3 {
		t.Errorf("registrations counted: %v; want 3", reqs)
	}
}
