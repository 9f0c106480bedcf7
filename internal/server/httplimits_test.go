package server

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/httpapi"
	"github.com/drover-org/drover/internal/registry"
	"github.com/drover-org/drover/internal/spec"
	"github.com/drover-org/drover/internal/testkit"
)

// The API within its HTTP limits (internal/httpapi, which tests the limits
// themselves), on real TCP connections with the timeouts shortened.

// serveLimited serves h within lim on a fresh loopback port and returns
// its address.
func serveLimited(t *testing.T, h http.Handler, lim httpapi.Limits) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := httpapi.Serve(ln, h, lim, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { s.Close() })
	return ln.Addr().String()
}

// limitedAPIServer runs a real server (the leader, on an embedded etcd)
// with cfg, its API served within lim on a real socket; it returns the
// API's address, the registry and the etcd.
func limitedAPIServer(t *testing.T, cfg Config, lim httpapi.Limits) (string, *registry.Registry, *registry.Embedded) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	log := slog.New(slog.DiscardHandler)
	emb, err := registry.StartEmbedded(ctx, registry.EmbeddedConfig{DataDir: t.TempDir(), ClientAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := registry.Open(ctx, emb.Endpoints(), log)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Registry, cfg.ID, cfg.Logger = reg, "test", log
	srv := New(cfg)
	done := make(chan struct{})
	go func() { srv.Run(ctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
		reg.Close()
		emb.Close()
	})
	addr := serveLimited(t, srv.Handler(nil), lim)
	for deadline := time.Now().Add(10 * time.Second); !srv.loop.IsLeader(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the server did not become leader within 10s")
		}
	}
	return addr, reg, emb
}

// Every API request with a body that does not arrive within the body read
// timeout is answered, not with net/http's empty 200 but with an error
// (408 once its handler was reading the body), and applies nothing.
func TestAPISlowBodyIs408AndAppliesNothing(t *testing.T) {
	const body = 300 * time.Millisecond
	addr, reg, _ := limitedAPIServer(t, Config{ACL: true}, httpapi.Limits{BodyReadTimeout: body})
	resp, err := http.Post("http://"+addr+"/v1/acl/bootstrap", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var tok struct {
		SecretID string `json:"secret_id"`
	}
	json.NewDecoder(resp.Body).Decode(&tok)
	resp.Body.Close()
	if resp.StatusCode != 200 || tok.SecretID == "" {
		t.Fatalf("bootstrap: %s", resp.Status)
	}
	ctx := context.Background()
	header := http.Header{TokenHeader: {tok.SecretID}}
	// The server's state holds every write before the requests below: a
	// request's token check waits for this server's own writes (the
	// bootstrap), and a state slower than that to get there is moved on
	// with a barrier write of its own mirror, which is no request's doing.
	req, _ := http.NewRequest("GET", "http://"+addr+"/v1/jobs?consistent", nil)
	req.Header = header
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("consistent read: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	before, err := reg.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ids := strings.NewReplacer("{name}", "web", "{id}", "n1", "{accessor}", "a1")
	var srv Server
	timedOut := map[string]bool{}
	for _, rt := range srv.routeTable() {
		method, path, _ := strings.Cut(rt.pattern, " ")
		if method != "POST" && method != "PUT" {
			continue
		}
		resp, b, took := testkit.Trickle(t, addr, method, ids.Replace(path), header, body+5*time.Second)
		var e spec.APIError
		json.Unmarshal([]byte(b), &e)
		switch {
		case resp.StatusCode == http.StatusRequestTimeout:
			timedOut[rt.pattern] = true
			if !strings.Contains(e.Error, "did not arrive within 300ms") || !strings.Contains(e.Error, "nothing was applied") {
				t.Errorf("%s: 408 %q, want it to say the body did not arrive in time and nothing was applied", rt.pattern, b)
			}
			if took < body {
				t.Errorf("%s: 408 after %s, before the body timeout %s", rt.pattern, took, body)
			}
		case resp.StatusCode < 400 || e.Error == "":
			t.Errorf("%s with a body that never arrives: %s %q, want an error that says what is wrong", rt.pattern, resp.Status, b)
		}
	}
	for _, p := range []string{"POST /v1/jobs", "PUT /v1/acl/policies/{name}", "POST /v1/nodes", "PUT /v1/allocations/{id}/status"} {
		if !timedOut[p] {
			t.Errorf("%s: not answered 408 (answered: %v)", p, timedOut)
		}
	}
	if _, err := reg.GetJob(ctx, "web"); !errors.Is(err, registry.ErrNotFound) {
		t.Errorf("job web after its body timed out: %v, want not found", err)
	}
	if after, _ := reg.Revision(ctx); after != before {
		t.Errorf("requests whose bodies timed out wrote to the registry: revision %d -> %d", before, after)
	}
}

// The API's own blocking query (?index=&wait=) outlives timeouts shorter
// than its wait.
func TestHTTPBlockingQueryOutlivesTheTimeouts(t *testing.T) {
	const d = 200 * time.Millisecond
	addr, _, _ := limitedAPIServer(t, Config{}, httpapi.Limits{ReadHeaderTimeout: d, BodyReadTimeout: d, WriteStallTimeout: d, IdleTimeout: d})
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + addr + "/v1/jobs")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	index, _ := strconv.ParseInt(resp.Header.Get("X-Drover-Index"), 10, 64)
	start := time.Now()
	resp, err = c.Get("http://" + addr + "/v1/jobs?index=" + strconv.FormatInt(index, 10) + "&wait=1500ms")
	if err != nil {
		t.Fatalf("blocking query: %v", err)
	}
	resp.Body.Close()
	if took := time.Since(start); resp.StatusCode != 200 || took < time.Second {
		t.Errorf("blocking query: %s after %s, want 200 after its 1.5 s wait", resp.Status, took)
	}
}
