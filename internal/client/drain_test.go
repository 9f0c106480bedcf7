package client

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/httpapi"
	"github.com/drover-org/drover/internal/link"
	"github.com/drover-org/drover/internal/pki"
)

// drainServer is one API server for TestAgentMovesOffAServerThatShutsDown:
// /v1/slow runs until released, /v1/wait parks until the server's drain
// runs it again, /v1/report counts the reports it was sent.
type drainServer struct {
	name    string
	entered chan struct{} // /v1/slow has started
	release chan struct{}
	free    func()        // closes release, once
	parked  chan struct{} // /v1/wait is parked

	mu      sync.Mutex
	reports []string
}

func (d *drainServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	from := func() { json.NewEncoder(w).Encode(map[string]string{"from": d.name}) }
	switch r.URL.Path {
	case "/v1/slow":
		close(d.entered)
		<-d.release
		from()
	case "/v1/wait":
		if link.Woken(r) {
			from()
			return
		}
		if !link.Park(r, func(func()) func() { close(d.parked); return func() {} }) {
			http.Error(w, "not over a link", http.StatusInternalServerError)
		}
	case "/v1/report":
		b, _ := io.ReadAll(r.Body)
		d.mu.Lock()
		d.reports = append(d.reports, string(b))
		d.mu.Unlock()
		from()
	default:
		http.NotFound(w, r)
	}
}

func (d *drainServer) reported() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.reports...)
}

// An agent with two servers' addresses, on a link to the first when it
// shuts down: its running request and its parked query are answered by
// the first, a report sent during the drain is refused there unrun and
// goes to the second at once, exactly once, and the agent stays there.
func TestAgentMovesOffAServerThatShutsDown(t *testing.T) {
	dir := t.TempDir()
	if _, err := pki.Init(dir, pki.InitOptions{}); err != nil {
		t.Fatal(err)
	}
	serve, err := pki.ServerConfig(pki.DirFiles(dir, pki.RoleServer))
	if err != nil {
		t.Fatal(err)
	}
	serve.ClientAuth = tls.VerifyClientCertIfGiven
	agentTLS, err := pki.ClientConfig(pki.DirFiles(dir, pki.RoleAgent), pki.ServerName)
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	var servers []*httpapi.Server
	var ds []*drainServer
	for _, name := range []string{"A", "B"} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		d := &drainServer{name: name, entered: make(chan struct{}), release: make(chan struct{}), parked: make(chan struct{})}
		d.free = sync.OnceFunc(func() { close(d.release) })
		t.Cleanup(d.free)
		s := httpapi.Serve(ln, d, httpapi.Limits{TLS: serve}, slog.New(slog.DiscardHandler))
		t.Cleanup(func() { s.Close() })
		addrs, servers, ds = append(addrs, ln.Addr().String()), append(servers, s), append(ds, d)
	}
	a, b := ds[0], ds[1]
	c, err := NewWithOptions(addrs, Options{TLS: agentTLS, Link: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	type result struct {
		from string
		err  error
	}
	call := func(method, path string, body any) <-chan result {
		ch := make(chan result, 1)
		go func() {
			var out struct{ From string }
			_, err := c.do(ctx, method, path, nil, body, &out)
			ch <- result{out.From, err}
		}()
		return ch
	}
	wait := func(ch <-chan result, what string) result {
		t.Helper()
		select {
		case r := <-ch:
			return r
		case <-ctx.Done():
			t.Fatalf("%s: no answer within 20s", what)
			return result{}
		}
	}

	slow := call("GET", "/v1/slow", nil)
	<-a.entered
	query := call("GET", "/v1/wait?index=5", nil)
	<-a.parked
	shutdown := make(chan error, 1)
	go func() { shutdown <- servers[0].Shutdown(ctx) }()

	if r := wait(query, "the parked query"); r.err != nil || r.from != "A" {
		t.Fatalf("the query parked on A when A shut down: from %q, %v; want A's answer", r.from, r.err)
	}
	// A drains (its slow request runs): a report now is refused there
	// and sent to B.
	if r := wait(call("POST", "/v1/report", map[string]int{"n": 1}), "a report during the drain"); r.err != nil || r.from != "B" {
		t.Fatalf("a report sent while A drains: from %q, %v; want B's answer", r.from, r.err)
	}
	a.free()
	if r := wait(slow, "the slow request"); r.err != nil || r.from != "A" {
		t.Fatalf("the request running on A when A shut down: from %q, %v; want A's answer", r.from, r.err)
	}
	select {
	case err := <-shutdown:
		if err != nil {
			t.Fatalf("A's Shutdown: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("A's Shutdown did not return within 20s")
	}
	if r := wait(call("POST", "/v1/report", map[string]int{"n": 2}), "a report after the drain"); r.err != nil || r.from != "B" {
		t.Fatalf("a report after A shut down: from %q, %v; want B's answer", r.from, r.err)
	}
	if got := a.reported(); len(got) != 0 {
		t.Errorf("A ran reports sent after its drain began: %q", got)
	}
	if got := b.reported(); len(got) != 2 || got[0] != `{"n":1}` || got[1] != `{"n":2}` {
		t.Errorf("B's reports %q, want each of the two exactly once", got)
	}
	if c.Address() != "https://"+addrs[1] {
		t.Errorf("the client's current server is %s, want B's %s", c.Address(), addrs[1])
	}
}
