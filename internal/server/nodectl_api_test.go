package server

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/spec"
)

// registerAs registers a node through the API and returns a client that
// speaks as it (its secret set).
func registerAs(t *testing.T, url, id, name string) *client.Client {
	t.Helper()
	c, err := client.New(url)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := c.RegisterNode(context.Background(), &spec.Node{ID: id, Name: name,
		Resources: spec.Resources{CPU: 1000, MemoryMB: 1000}, Drivers: []string{"exec"}})
	if err != nil {
		t.Fatalf("register %s: %v", id, err)
	}
	c.SetNodeSecret(reg.Secret)
	return c
}

// TestNodeEligibilityAndDrain: an operator marks a node ineligible, drains
// it and ends the drain, naming it by ID, ID prefix or name; each answer
// is the node as every read merges it, and the agent registering again
// changes none of it.
func TestNodeEligibilityAndDrain(t *testing.T) {
	hs, _ := testServer(t)
	ctx := context.Background()
	agent := registerAs(t, hs.URL, "aaaa1111", "alpha")
	registerAs(t, hs.URL, "bbbb2222", "beta")
	op, err := client.New(hs.URL)
	if err != nil {
		t.Fatal(err)
	}

	n, err := op.SetNodeEligibility(ctx, "alpha", false)
	if err != nil || n.ID != "aaaa1111" || !n.Ineligible || n.Eligible() || n.Drain != nil {
		t.Fatalf("eligibility off by name = %+v, %v", n, err)
	}
	if n, err = op.SetNodeEligibility(ctx, "aaaa", true); err != nil || n.Ineligible || !n.Eligible() {
		t.Fatalf("eligibility on by ID prefix = %+v, %v", n, err)
	}

	before := time.Now().UTC()
	n, err = op.DrainNode(ctx, "aaaa1111", true, client.DrainOptions{Deadline: time.Hour})
	if err != nil || n.Drain == nil || n.Eligible() {
		t.Fatalf("drain = %+v, %v", n, err)
	}
	started := n.Drain.StartedAt
	if started.Before(before.Add(-time.Second)) || started.After(time.Now().Add(time.Second)) || n.Drain.Deadline.Sub(started) != time.Hour {
		t.Fatalf("drain strategy %+v: want started now, deadline an hour later", n.Drain)
	}
	// A draining node cannot be made eligible: the drain says otherwise.
	if _, err := op.SetNodeEligibility(ctx, "alpha", true); !client.IsStatus(err, http.StatusConflict) || !strings.Contains(err.Error(), "drover node drain --disable alpha") {
		t.Fatalf("eligible while draining: %v, want 409 naming the way out", err)
	}
	// Registering again keeps the drain.
	if _, err := agent.RegisterNode(ctx, &spec.Node{ID: "aaaa1111", Name: "alpha", Resources: spec.Resources{CPU: 1000, MemoryMB: 1000}}); err != nil {
		t.Fatal(err)
	}
	if n, err = op.Node(ctx, "alpha"); err != nil || n.Drain == nil || !n.Drain.StartedAt.Equal(started) {
		t.Fatalf("after registering again: %+v, %v", n, err)
	}
	// Draining again replaces the deadline and keeps the start.
	time.Sleep(10 * time.Millisecond)
	if n, err = op.DrainNode(ctx, "alpha", true, client.DrainOptions{}); err != nil || !n.Drain.StartedAt.Equal(started) || !n.Drain.Deadline.IsZero() {
		t.Fatalf("drain again without deadline = %+v, %v; want started %v, no deadline", n.Drain, err, started)
	}
	// Ending it: ineligible when asked to stay so, else eligible.
	if n, err = op.DrainNode(ctx, "alpha", false, client.DrainOptions{KeepIneligible: true}); err != nil || n.Drain != nil || !n.Ineligible {
		t.Fatalf("end drain, keep ineligible = %+v, %v", n, err)
	}
	// A drain that leaves system jobs' instances says so in the node.
	if n, err = op.DrainNode(ctx, "alpha", true, client.DrainOptions{IgnoreSystemJobs: true}); err != nil || n.Drain == nil || !n.Drain.IgnoreSystemJobs {
		t.Fatalf("drain ignoring system jobs = %+v, %v", n.Drain, err)
	}
	if _, err = op.DrainNode(ctx, "alpha", false, client.DrainOptions{IgnoreSystemJobs: true}); !client.IsStatus(err, http.StatusBadRequest) {
		t.Fatalf("ending a drain with ignore_system_jobs: %v, want 400", err)
	}
	if n, err = op.DrainNode(ctx, "alpha", false, client.DrainOptions{}); err != nil || n.Drain != nil || n.Ineligible || !n.Eligible() {
		t.Fatalf("end drain = %+v, %v", n, err)
	}
	// The other node was never touched.
	if b, err := op.Node(ctx, "beta"); err != nil || !b.Eligible() {
		t.Fatalf("beta = %+v, %v", b, err)
	}
	// Unknown nodes are a 404.
	if _, err := op.SetNodeEligibility(ctx, "gamma", false); !client.IsStatus(err, http.StatusNotFound) {
		t.Fatalf("eligibility of an unknown node: %v, want 404", err)
	}
	if _, err := op.DrainNode(ctx, "gamma", true, client.DrainOptions{}); !client.IsStatus(err, http.StatusNotFound) {
		t.Fatalf("drain of an unknown node: %v, want 404", err)
	}
}

// TestNodeControlBadBodiesAre400: every malformed request is a 400 that
// says what was expected, and writes nothing.
func TestNodeControlBadBodiesAre400(t *testing.T) {
	hs, reg := testServer(t)
	registerAs(t, hs.URL, "aaaa1111", "alpha")
	ctx := context.Background()
	before, err := reg.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path, body, want string
	}{
		{"eligibility", ``, "not an eligibility request"},
		{"eligibility", `{}`, `"eligible" is missing`},
		{"eligibility", `{"eligible":"no"}`, "not an eligibility request"},
		{"eligibility", `{"eligible":false,"reason":"x"}`, "unknown field"},
		{"eligibility", `{"eligible":false} {}`, "data after"},
		{"drain", `{}`, `"enable" is missing`},
		{"drain", `{"enable":true,"deadline":"soon"}`, "deadline must be"},
		{"drain", `{"enable":true,"deadline":"-1h"}`, "deadline must be"},
		{"drain", `{"enable":true,"deadline":3600}`, "not a drain request"},
		{"drain", `{"enable":false,"deadline":"1h"}`, "deadline applies when starting"},
		{"drain", `{"enable":true,"keep_ineligible":true}`, "keep_ineligible applies when ending"},
		{"drain", `{"enable":true,"force":true}`, "unknown field"},
	} {
		status, e, _ := do(t, "PUT", hs.URL+"/v1/nodes/alpha/"+c.path, c.body)
		if status != http.StatusBadRequest || !strings.Contains(e.Error, c.want) {
			t.Errorf("PUT %s %s: %d %q, want 400 with %q", c.path, c.body, status, e.Error, c.want)
		}
	}
	if status, _, _ := do(t, "PUT", hs.URL+"/v1/nodes/no..de/drain", `{"enable":true}`); status != http.StatusBadRequest {
		t.Errorf("a node id that cannot be a key: %d, want 400", status)
	}
	if after, _ := reg.Revision(ctx); after != before {
		t.Fatalf("bad requests wrote: revision %d -> %d", before, after)
	}
}

// TestNodeUsageReport: only the node itself reports its usage; the
// report (without per-alloc figures) is merged into reads of the node, and
// wakes a blocking listing of the nodes.
func TestNodeUsageReport(t *testing.T) {
	hs, _ := testServer(t)
	ctx := context.Background()
	a := registerAs(t, hs.URL, "aaaa1111", "alpha")
	b := registerAs(t, hs.URL, "bbbb2222", "beta")
	op, err := client.New(hs.URL)
	if err != nil {
		t.Fatal(err)
	}
	_, index, err := op.Nodes(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	type listed struct {
		nodes []*spec.Node
		err   error
		took  time.Duration
	}
	woke := make(chan listed, 1)
	go func() {
		start := time.Now()
		ns, _, err := op.Nodes(ctx, &client.QueryOptions{Index: index, Wait: 20 * time.Second})
		woke <- listed{ns, err, time.Since(start)}
	}()
	time.Sleep(100 * time.Millisecond) // the query is waiting
	report := &spec.NodeUsage{NodeID: "aaaa1111", Time: time.Unix(1, 0), Tasks: spec.Usage{CPU: 250, MemoryMB: 300},
		Allocs: map[string]map[string]spec.Usage{"x": {"t": {CPU: 250, MemoryMB: 300}}}}
	if err := a.ReportNodeUsage(ctx, "aaaa1111", report); err != nil {
		t.Fatal(err)
	}
	l := <-woke
	if l.err != nil || l.took > 10*time.Second {
		t.Fatalf("blocking node list: %v after %s; want woken by the report", l.err, l.took)
	}
	n, err := op.Node(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	u := n.Usage
	if u == nil || u.NodeID != "aaaa1111" || u.Tasks != (spec.Usage{CPU: 250, MemoryMB: 300}) || u.Allocs != nil || time.Since(u.Time) > time.Minute {
		t.Fatalf("stored usage = %+v; want the totals, no allocs, received just now", u)
	}

	// Only the node itself may report.
	if err := b.ReportNodeUsage(ctx, "aaaa1111", report); !client.IsStatus(err, http.StatusForbidden) {
		t.Fatalf("node beta reporting for alpha: %v, want 403", err)
	}
	if err := op.ReportNodeUsage(ctx, "aaaa1111", report); !client.IsStatus(err, http.StatusForbidden) {
		t.Fatalf("a report without a node secret: %v, want 403", err)
	}
	if err := op.ReportNodeUsage(ctx, "cccc3333", report); !client.IsStatus(err, http.StatusNotFound) {
		t.Fatalf("a report for an unknown node: %v, want 404", err)
	}
	if err := a.ReportNodeUsage(ctx, "aaaa1111", &spec.NodeUsage{NodeID: "bbbb2222"}); !client.IsStatus(err, http.StatusBadRequest) {
		t.Fatalf("a report naming another node: %v, want 400", err)
	}
	if err := a.ReportNodeUsage(ctx, "aaaa1111", &spec.NodeUsage{Tasks: spec.Usage{CPU: -1}}); !client.IsStatus(err, http.StatusBadRequest) {
		t.Fatalf("a negative report: %v, want 400", err)
	}
	if n2, _ := op.Node(ctx, "alpha"); n2.Usage == nil || n2.Usage.Tasks.CPU != 250 {
		t.Fatalf("a refused report changed the usage: %+v", n2.Usage)
	}
}
