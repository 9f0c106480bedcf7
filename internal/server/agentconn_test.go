package server

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/httpapi"
	"github.com/drover-org/drover/internal/pki"
	"github.com/drover-org/drover/internal/registry"
	"github.com/drover-org/drover/internal/spec"
)

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	accepted atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

// tlsTestServer runs a real server on a real embedded etcd, serving mutual
// TLS as drover server does, on a listener that counts its connections.
// It returns the API's URL, the TLS directory and the listener.
func tlsTestServer(t *testing.T) (string, string, *countingListener) {
	t.Helper()
	return tlsTestServerWith(t, httpapi.Limits{})
}

// tlsTestServerWith is tlsTestServer with limits of its own (TLS is set).
func tlsTestServerWith(t *testing.T, lim httpapi.Limits) (string, string, *countingListener) {
	t.Helper()
	url, tlsDir, ln, _ := tlsTestServerSrv(t, lim)
	return url, tlsDir, ln
}

// tlsTestServerSrv is tlsTestServerWith that also returns the server.
func tlsTestServerSrv(t *testing.T, lim httpapi.Limits) (string, string, *countingListener, *Server) {
	t.Helper()
	ts := startTLSTestServer(t, lim)
	return ts.url, ts.tlsDir, ts.ln, ts.srv
}

// tlsTestServerParts is a test server's parts: stop ends the server's Run
// (as a signal does in drover server), hs serves its API.
type tlsTestServerParts struct {
	url, tlsDir string
	ln          *countingListener
	srv         *Server
	hs          *httpapi.Server
	stop        func()
}

func startTLSTestServer(t *testing.T, lim httpapi.Limits) *tlsTestServerParts {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := t.TempDir()
	tlsDir := filepath.Join(dir, "tls")
	if _, err := pki.Init(tlsDir, pki.InitOptions{}); err != nil {
		t.Fatal(err)
	}
	emb, err := registry.StartEmbedded(ctx, registry.EmbeddedConfig{DataDir: filepath.Join(dir, "etcd"), ClientAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := registry.Open(ctx, emb.Endpoints(), log)
	if err != nil {
		t.Fatal(err)
	}
	srv := New(Config{Registry: reg, ID: "test", Logger: log})
	done := make(chan struct{})
	go func() { srv.Run(ctx); close(done) }()
	serveTLS, err := pki.ServerConfig(pki.DirFiles(tlsDir, pki.RoleServer))
	if err != nil {
		t.Fatal(err)
	}
	serveTLS.ClientAuth = tls.VerifyClientCertIfGiven // as drover server serves
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &countingListener{Listener: tcp}
	lim.TLS = serveTLS
	lim.LinkContext = srv.LinkContext // as drover server serves
	hs := httpapi.Serve(ln, srv.Handler(nil), lim, log)
	t.Cleanup(func() {
		hs.Close()
		cancel()
		<-done
		reg.Close()
		emb.Close()
	})
	// A registration checks the node's secret against the server's
	// state: until it has read the registry the server answers 503 (an
	// agent retries).
	for deadline := time.Now().Add(10 * time.Second); !srv.ready.Load(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the server did not read the registry within 10s")
		}
	}
	return &tlsTestServerParts{url: "https://" + tcp.Addr().String(), tlsDir: tlsDir, ln: ln, srv: srv, hs: hs,
		stop: func() { cancel(); <-done }}
}

// transports are the two ways a client speaks to a TLS server: HTTP/2,
// and the link agents use.
var transports = []struct {
	name   string
	linked bool
}{{"http2", false}, {"link", true}}

// An agent's requests share one connection to a TLS server: its
// assignments' blocking query stays open while its heartbeats, status
// reports and a registration again go over the same connection (HTTP/2,
// or a link).
func TestAgentSpeaksOverOneConnection(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) { testAgentSpeaksOverOneConnection(t, tr.linked) })
	}
}

func testAgentSpeaksOverOneConnection(t *testing.T, linked bool) {
	url, tlsDir, ln := tlsTestServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := tlsClientOver(t, url, tlsDir, pki.RoleAgent, linked)
	node, index := registerAgent(t, ctx, c)
	// The blocking query waits (nothing changes for this node) while the
	// other requests are made.
	qctx, stopQuery := context.WithCancel(ctx)
	queryDone := make(chan error, 1)
	go func() {
		_, _, err := c.NodeAllocs(qctx, node.ID, &client.QueryOptions{Index: index, Wait: time.Minute})
		queryDone <- err
	}()
	for range 3 {
		if _, err := c.Heartbeat(ctx, node.ID); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.ReportAllocStatuses(ctx, node.ID, &spec.NodeStatusReport{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RegisterNode(ctx, node); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-queryDone:
		t.Fatalf("the blocking query ended before it was cancelled: %v", err)
	default:
	}
	stopQuery()
	<-queryDone
	if n := ln.accepted.Load(); n != 1 {
		t.Errorf("the agent's requests took %d connections, want 1", n)
	}
}

// TestBlockingQueryOutlastsTheWriteStallTimeout: over HTTP/2 a write
// deadline is a timer that resets the stream when it fires, even while
// nothing is being written; a blocking query that waits longer than the
// write stall timeout still gets its answer.
func TestBlockingQueryOutlastsTheWriteStallTimeout(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) { testBlockingQueryOutlastsTheWriteStallTimeout(t, tr.linked) })
	}
}

func testBlockingQueryOutlastsTheWriteStallTimeout(t *testing.T, linked bool) {
	url, tlsDir, _ := tlsTestServerWith(t, httpapi.Limits{WriteStallTimeout: 300 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := tlsClientOver(t, url, tlsDir, pki.RoleAgent, linked)
	node, index := registerAgent(t, ctx, c)
	start := time.Now()
	if _, _, err := c.NodeAllocs(ctx, node.ID, &client.QueryOptions{Index: index, Wait: 1500 * time.Millisecond}); err != nil {
		t.Fatalf("a blocking query of 1.5s, with writes bounded to 300ms: %v after %s", err, time.Since(start).Round(time.Millisecond))
	}
}

// TestFollowOutlastsTheWriteStallTimeout: a follow that has written and
// then waits longer than the write stall timeout for the next event is
// not cut (over HTTP/2 a deadline left armed after a write would reset
// it).
func TestFollowOutlastsTheWriteStallTimeout(t *testing.T) {
	url, tlsDir, _ := tlsTestServerWith(t, httpapi.Limits{WriteStallTimeout: 300 * time.Millisecond})
	c, operator := tlsClient(t, url, tlsDir, pki.RoleAgent), tlsClient(t, url, tlsDir, pki.RoleCLI)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := make(chan spec.Event, 100)
	followed := make(chan error, 1)
	go func() {
		followed <- operator.FollowEvents(ctx, client.EventOptions{Topics: []string{string(spec.TopicNode)}}, func(e spec.Event) error {
			got <- e
			return nil
		})
	}()
	time.Sleep(time.Second) // idle, longer than the stall timeout
	if _, err := c.RegisterNode(ctx, &spec.Node{ID: "n1", Name: "n1", Resources: spec.Resources{CPU: 1000, MemoryMB: 1000}, Drivers: []string{"exec"}}); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-got:
		if e.Node != "n1" {
			t.Fatalf("followed %+v, want n1's registration", e)
		}
	case err := <-followed:
		t.Fatalf("the follow ended while it waited: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s of the registration")
	}
}

// tlsClient is a client of the server at url with the certificate of
// role from tlsDir, over HTTP/2.
func tlsClient(t *testing.T, url, tlsDir, role string) *client.Client {
	t.Helper()
	return tlsClientOver(t, url, tlsDir, role, false)
}

// tlsClientOver is tlsClient over a link (internal/link) when linked, as
// agents speak.
func tlsClientOver(t *testing.T, url, tlsDir, role string, linked bool) *client.Client {
	t.Helper()
	cfg, err := pki.ClientConfig(pki.DirFiles(tlsDir, role), pki.ServerName)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.NewWithOptions([]string{url}, client.Options{TLS: cfg, Link: linked})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// registerAgent registers node n1 through c, as an agent does, and
// returns it with the index of its first assignments' answer.
func registerAgent(t *testing.T, ctx context.Context, c *client.Client) (*spec.Node, int64) {
	t.Helper()
	node := &spec.Node{ID: "n1", Name: "n1", Resources: spec.Resources{CPU: 1000, MemoryMB: 1000}, Drivers: []string{"exec"}}
	reg, err := c.RegisterNode(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	c.SetNodeSecret(reg.Secret)
	_, index, err := c.NodeAllocs(ctx, node.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	return node, index
}

// freezer relays TCP to target; freeze makes the connections open at that
// moment carry nothing more either way, without closing them (a NAT or a
// firewall that dropped them), while new connections are relayed.
type freezer struct {
	ln     net.Listener
	target string
	gen    atomic.Int64 // connections of an older generation are frozen
}

func startFreezer(t *testing.T, target string) *freezer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &freezer{ln: ln, target: target}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			gen := f.gen.Load()
			go f.relay(up, c, gen)
			go f.relay(c, up, gen)
			t.Cleanup(func() { c.Close(); up.Close() })
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return f
}

// relay copies src to dst until the connection's generation is frozen;
// then it reads on and drops what it reads.
func (f *freezer) relay(dst, src net.Conn, gen int64) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if err != nil {
			dst.Close()
			return
		}
		if f.gen.Load() == gen {
			dst.Write(buf[:n])
		}
	}
}

func (f *freezer) freeze() { f.gen.Add(1) }

// A connection that dies without a word is replaced before the node's TTL
// runs out: the client leaves an HTTP/2 connection on which a request timed
// out (client.freshConns), as HTTP/1.1 dialled anew for each request that
// timed out.
func TestAgentReplacesAFrozenConnection(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) { testAgentReplacesAFrozenConnection(t, tr.linked) })
	}
}

func testAgentReplacesAFrozenConnection(t *testing.T, linked bool) {
	url, tlsDir, _ := tlsTestServer(t)
	fr := startFreezer(t, strings.TrimPrefix(url, "https://"))
	c := tlsClientOver(t, "https://"+fr.ln.Addr().String(), tlsDir, pki.RoleAgent, linked)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	node := &spec.Node{ID: "n1", Name: "n1", Resources: spec.Resources{CPU: 1000, MemoryMB: 1000}, Drivers: []string{"exec"}}
	reg, err := c.RegisterNode(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	c.SetNodeSecret(reg.Secret)
	fr.freeze()
	frozen := time.Now()
	// Heartbeats as the agent makes them: each bounded by the interval.
	for {
		hctx, hcancel := context.WithTimeout(ctx, reg.HeartbeatInterval.Std())
		_, err := c.Heartbeat(hctx, node.ID)
		hcancel()
		if err == nil {
			break
		}
		if time.Since(frozen) > reg.NodeTTL.Std() {
			t.Fatalf("no heartbeat got through within the node TTL (%s) of the connection freezing: %v", reg.NodeTTL.Std(), err)
		}
		sleep := time.NewTimer(reg.HeartbeatInterval.Std() / 4)
		<-sleep.C
	}
	t.Logf("a heartbeat got through %s after the connection froze", time.Since(frozen).Round(time.Millisecond))
}

// TestParkedAssignmentQueryWakesOnPlacement: over a link an agent's
// blocking query for its assignments is parked in the hub, with no
// goroutine waiting on it; the leader placing an instance on its node
// wakes it, and it answers with the instance long before its wait.
func TestParkedAssignmentQueryWakesOnPlacement(t *testing.T) {
	url, tlsDir, _, srv := tlsTestServerSrv(t, httpapi.Limits{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	agent := tlsClientOver(t, url, tlsDir, pki.RoleAgent, true)
	node, index := registerAgent(t, ctx, agent)
	type answer struct {
		allocs []*spec.Alloc
		err    error
	}
	got := make(chan answer, 1)
	start := time.Now()
	go func() {
		allocs, _, err := agent.NodeAllocs(ctx, node.ID, &client.QueryOptions{Index: index, Wait: 5 * time.Minute})
		got <- answer{allocs, err}
	}()
	select {
	case a := <-got:
		t.Fatalf("the query answered before anything was placed: %d allocs, %v", len(a.allocs), a.err)
	case <-time.After(300 * time.Millisecond):
	}
	srv.hub.mu.Lock()
	var parked int
	for w := range srv.hub.waiters["node/"+node.ID] {
		if w.fn != nil {
			parked++
		}
	}
	srv.hub.mu.Unlock()
	if parked != 1 {
		t.Fatalf("%d parked waiters on node/%s, want the agent's query", parked, node.ID)
	}
	job := &spec.Job{Name: "woken", Groups: []*spec.Group{{Name: "g", Count: 1, Tasks: []*spec.Task{{
		Name: "t", Driver: "exec", Resources: spec.Resources{CPU: 100, MemoryMB: 64},
		Config: spec.TaskConfig{Command: "/bin/sleep", Args: []string{"1000"}},
	}}}}}
	job.Canonicalize()
	if _, err := tlsClient(t, url, tlsDir, pki.RoleCLI).SubmitJob(ctx, job, 0); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-got:
		if a.err != nil || len(a.allocs) != 1 || a.allocs[0].Job != "woken" {
			t.Fatalf("the woken query answered %d allocs (%v), want the one instance of woken", len(a.allocs), a.err)
		}
		t.Logf("answered %s after the query began", time.Since(start).Round(time.Millisecond))
	case <-time.After(30 * time.Second):
		t.Fatal("the parked query was not woken within 30s of the submission")
	}
}

// A server told to stop (drover server on SIGTERM: its Run ends, and with
// it the watch that feeds its state) and then shut down answers an agent's
// parked assignment query with what its state holds, not 503.
func TestShutdownAnswersAParkedAssignmentQuery(t *testing.T) {
	ts := startTLSTestServer(t, httpapi.Limits{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	agent := tlsClientOver(t, ts.url, ts.tlsDir, pki.RoleAgent, true)
	node, index := registerAgent(t, ctx, agent)
	type answer struct {
		allocs []*spec.Alloc
		index  int64
		err    error
	}
	got := make(chan answer, 1)
	go func() {
		allocs, idx, err := agent.NodeAllocs(ctx, node.ID, &client.QueryOptions{Index: index, Wait: 5 * time.Minute})
		got <- answer{allocs, idx, err}
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		ts.srv.hub.mu.Lock()
		parked := len(ts.srv.hub.waiters["node/"+node.ID])
		ts.srv.hub.mu.Unlock()
		if parked == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the agent's query did not park within 10s")
		}
	}
	ts.stop()
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	if err := ts.hs.Shutdown(sctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	select {
	case a := <-got:
		if a.err != nil || len(a.allocs) != 0 || a.index < index {
			t.Fatalf("the parked query at shutdown: %d allocs, index %d (asked after %d), %v; want its node's (none) as the state holds them", len(a.allocs), a.index, index, a.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the parked query was not answered within 30s of the shutdown")
	}
}
