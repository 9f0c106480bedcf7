package server

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/registry"
)

// TestMetricsCountWhatHappened scrapes a real server (mutual TLS, ACLs on:
// /metrics needs a certificate of the cluster, no token) after the fixture
// registered a node and placed two jobs, and checks the figures against
// what happened. Every drover_ metric's labels are from a bounded set.
func TestMetricsCountWhatHappened(t *testing.T) {
	f := newAuthFixture(t)
	// The fixture waits for web's placement only; stopme's may come a
	// pass later.
	f.waitAllocs(t, "stopme")
	st, body := f.call("", "GET", "/metrics", "")
	if st != 200 {
		t.Fatalf("GET /metrics with a CLI certificate and no token: %d %s", st, body)
	}
	value := func(name string) float64 {
		t.Helper()
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("no %s in /metrics", name)
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		return v
	}
	checks := []struct {
		name string
		ok   func(float64) bool
		want string
	}{
		{"drover_leader", func(v float64) bool { return v == 1 }, "1"},
		{"drover_placements_total", func(v float64) bool { return v >= 2 }, ">= 2 (web and stopme)"},
		{`drover_nodes{status="ready"}`, func(v float64) bool { return v == 1 }, "1"},
		{`drover_allocations{status="pending"}`, func(v float64) bool { return v >= 2 }, ">= 2 (no agent runs them)"},
		{"drover_scheduling_latency_seconds_count", func(v float64) bool { return v >= 2 }, ">= 2 (one per job version placed)"},
		{"drover_leader_pass_seconds_count", func(v float64) bool { return v >= 1 }, ">= 1"},
		{"drover_leader_snapshot_seconds_count", func(v float64) bool { return v >= 1 }, ">= 1 (one per pass)"},
		{`drover_etcd_request_seconds_count{method="Txn"}`, func(v float64) bool { return v >= 1 }, ">= 1"},
		{"drover_state_scrape_error", func(v float64) bool { return v == 0 }, "0"},
	}
	for _, c := range checks {
		if v := value(c.name); !c.ok(v) {
			t.Errorf("%s = %v, want %s", c.name, v, c.want)
		}
	}
	// Bounded labels: a drover_ metric may carry only these.
	allowed := map[string]bool{"status": true, "method": true, "le": true}
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, "drover_") {
			continue
		}
		for _, m := range regexp.MustCompile(`([a-z_]+)="`).FindAllStringSubmatch(line, -1) {
			if !allowed[m[1]] {
				t.Errorf("metric line with label %q, not a bounded one: %s", m[1], line)
			}
		}
	}
	if st, _ := f.call("node identity", "GET", "/metrics", ""); st != 200 {
		t.Errorf("GET /metrics with an agent certificate: %d", st)
	}
}

// TestReadyzFollowsTheRegistryAndLivezDoesNot stops the real etcd under a
// server: /readyz turns 503 naming the registry within its check's
// timeout, /livez stays 200 (a registry outage must not get servers
// restarted).
func TestReadyzFollowsTheRegistryAndLivezDoesNot(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	emb, err := registry.StartEmbedded(ctx, registry.EmbeddedConfig{DataDir: t.TempDir(), ClientAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := registry.Open(ctx, emb.Endpoints(), log)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	srv := New(Config{Registry: reg, ID: "r", Logger: log})
	done := make(chan struct{})
	go func() { srv.Run(ctx); close(done) }()
	defer func() {
		// A server whose etcd went away still stops when told to.
		cancel()
		stopped := time.Now()
		select {
		case <-done:
			t.Logf("server stopped %s after it was told to, its etcd gone", time.Since(stopped).Round(time.Millisecond))
		case <-time.After(30 * time.Second):
			t.Error("the server did not stop within 30s of being told to, with its etcd gone")
		}
	}()
	hs := httptest.NewServer(srv.Handler(nil))
	defer hs.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(hs.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st, body := get("/readyz?verbose")
		if st == 200 && strings.Contains(body, "[+]registry ok") && strings.Contains(body, "[+]caches ok") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz not ready within 10s: %d %s", st, body)
		}
	}
	if st, body := get("/readyz"); st != 200 || strings.TrimSpace(body) != "ok" {
		t.Errorf("/readyz without verbose: %d %q", st, body)
	}
	emb.Close()
	start := time.Now()
	st, body := get("/readyz")
	if st != http.StatusServiceUnavailable || !strings.Contains(body, "[-]registry failed") {
		t.Errorf("/readyz with etcd stopped: %d %s", st, body)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("/readyz took %s with etcd stopped; its check is bounded at 2s", took)
	}
	if st, body := get("/livez"); st != 200 {
		t.Errorf("/livez with etcd stopped: %d %s, want 200", st, body)
	}
}
