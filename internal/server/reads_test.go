package server

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/registry"
)

// The API's reads answer from the server's state store: a second server
// (never leading) answers every read of a job, its allocations, the
// allocations, the nodes, a node and its assignments, the deployments and
// the services without reading etcd, each at the store's revision.
func TestAPIReadsReadTheStore(t *testing.T) {
	hs, reg := testServer(t)
	secret := registerNode(t, hs.URL, "n1", "127.0.0.7")
	if status, body := call(t, "POST", hs.URL+"/v1/jobs", jobWith(2, 10), nil); status != 200 {
		t.Fatalf("submit: %d %s", status, body)
	}
	allocs := placed(t, hs.URL, "web", 2)

	ctx, cancel := context.WithCancel(context.Background())
	follower := New(Config{Registry: reg, ID: "follower", Logger: slog.New(slog.DiscardHandler), APIOnly: true})
	done := make(chan struct{})
	go func() { follower.Run(ctx); close(done) }()
	fs := httptest.NewServer(follower.Handler(nil))
	t.Cleanup(func() {
		fs.Close()
		cancel()
		<-done
	})
	written, err := reg.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := follower.state.WaitRev(ctxTimeout(t, 10*time.Second), written); err != nil {
		t.Fatal(err)
	}
	// Its API answers 503 until the mirror that filled the store is
	// published, a moment after the store holds the revision.
	for deadline := time.Now().Add(10 * time.Second); follower.mirror.Load() == nil; {
		if time.Now().After(deadline) {
			t.Fatal("the follower's mirror was not published within 10s of its store holding the registry")
		}
		time.Sleep(5 * time.Millisecond)
	}

	paths := []string{"/v1/jobs/web", "/v1/jobs/web/allocations", "/v1/allocations", "/v1/allocations?job=web&node=n1",
		"/v1/allocations/" + allocs["web.g[0]"].ID, "/v1/nodes", "/v1/nodes/n1", "/v1/nodes/n1/allocations",
		"/v1/deployments", "/v1/jobs/web/deployments", "/v1/services"}
	const rounds = 5
	before := etcdReads(t)
	for range rounds {
		for _, p := range paths {
			req, _ := http.NewRequest("GET", fs.URL+p, nil)
			req.Header.Set(client.NodeSecretHeader, secret) // the node's own query needs it
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("GET %s: %d", p, resp.StatusCode)
			}
			if idx, _ := strconv.ParseInt(resp.Header.Get("X-Drover-Index"), 10, 64); p != "/v1/services" && idx < written {
				t.Errorf("GET %s: index %d, want the store's revision, at least %d", p, idx, written)
			}
		}
	}
	// The leader's loop and the registry's own upkeep read etcd meanwhile:
	// a bound well under one read per request.
	reads := etcdReads(t) - before
	if reads >= rounds*uint64(len(paths))/4 {
		t.Errorf("%d API reads made %d reads of etcd, want none of their own", rounds*len(paths), reads)
	}
}

// etcdReads is how many Range and Txn requests this process has sent etcd.
func etcdReads(t *testing.T) uint64 {
	t.Helper()
	g := prometheus.NewRegistry()
	g.MustRegister(registry.RequestSeconds)
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "method" && (l.GetValue() == "Range" || l.GetValue() == "Txn") {
					n += m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return n
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
