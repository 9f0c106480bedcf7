package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/registry"
	"github.com/drover-org/drover/internal/spec"
)

// The HTTP limits are tested on real TCP connections to a real listener,
// with the timeouts shortened through HTTPLimits.

// serveLimited serves h within lim on a fresh loopback port and returns
// its address.
func serveLimited(t *testing.T, h http.Handler, lim HTTPLimits) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := Serve(ln, h, lim, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { s.Close() })
	return ln.Addr().String()
}

func okHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	return mux
}

// get makes one request on a new connection and returns the body.
func get(t *testing.T, addr, path string, within time.Duration) string {
	t.Helper()
	c := &http.Client{Timeout: within, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s %q %v", path, resp.Status, b, err)
	}
	return string(b)
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedWithin waits for the server to close c (EOF or reset) and returns
// how long that took from start; it fails the test when c is still open
// after limit.
func closedWithin(c net.Conn, start time.Time, limit time.Duration) (time.Duration, error) {
	c.SetReadDeadline(start.Add(limit))
	_, err := io.Copy(io.Discard, c) // whatever the server answers, then its close
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return 0, fmt.Errorf("still open after %s", limit)
	}
	return time.Since(start), nil
}

// Case 39 (slowloris): 200 clients that send half a request line and stall
// are all closed within the header timeout, and a well-behaved client is
// served meanwhile.
func TestHTTPSlowHeadersAreClosedWhileOthersAreServed(t *testing.T) {
	const hdr = time.Second
	addr := serveLimited(t, okHandler(), HTTPLimits{ReadHeaderTimeout: hdr})
	start := time.Now()
	conns := make([]net.Conn, 200)
	for i := range conns {
		conns[i] = dial(t, addr)
		if _, err := io.WriteString(conns[i], "GET /ok HT"); err != nil {
			t.Fatal(err)
		}
	}
	if got := get(t, addr, "/ok", hdr/2); got != "ok\n" {
		t.Fatalf("normal client got %q", got)
	}
	if served := time.Since(start); served >= hdr {
		t.Fatalf("the normal client was served after %s, not while the stallers were open", served)
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(conns))
	for i, c := range conns {
		wg.Go(func() {
			took, err := closedWithin(c, start, hdr+3*time.Second)
			if err == nil && took < hdr*9/10 {
				err = fmt.Errorf("closed after %s, before the header timeout", took)
			}
			if err != nil {
				errs <- fmt.Errorf("staller %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// trickle sends a request's line and headers, announcing a body of 100
// bytes, and then the body one byte a second; it returns the server's
// answer and how long it took to come.
func trickle(t *testing.T, addr, method, path string, header http.Header, within time.Duration) (*http.Response, string, time.Duration) {
	t.Helper()
	c := dial(t, addr)
	start := time.Now()
	var req strings.Builder
	fmt.Fprintf(&req, "%s %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n", method, path)
	header.Write(&req)
	req.WriteString("\r\n")
	io.WriteString(c, req.String())
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	go func() {
		for {
			if _, err := c.Write([]byte("{")); err != nil {
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
		}
	}()
	c.SetReadDeadline(start.Add(within))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%s %s: no answer within %s: %v", method, path, within, err)
	}
	b, _ := io.ReadAll(resp.Body)
	took := time.Since(start)
	if _, err := closedWithin(c, time.Now(), 2*time.Second); err != nil {
		t.Errorf("%s %s: connection after the answer: %v", method, path, err)
	}
	return resp, string(b), took
}

// A client that sends its headers and then trickles the body one byte a
// second is cut off at the body read timeout; the handler (the API's own
// body reader) answers 408 instead of waiting for the rest.
func TestHTTPTrickledBodyIsCutOff(t *testing.T) {
	const body = 500 * time.Millisecond
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := readBody(w, r); err != nil {
			status, msg, _ := statusOf(err)
			writeError(w, status, msg, nil)
			return
		}
		io.WriteString(w, "read it all\n")
	})
	addr := serveLimited(t, h, HTTPLimits{BodyReadTimeout: body})
	resp, b, took := trickle(t, addr, "POST", "/v1/jobs", nil, body+3*time.Second)
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(b, "did not arrive within 500ms") {
		t.Errorf("got %s %s, want 408 saying the body did not arrive within the timeout", resp.Status, b)
	}
	if took < body || took > body+2*time.Second {
		t.Errorf("cut off after %s, want about the body timeout %s", took, body)
	}
}

// limitedAPIServer runs a real server (the leader, on an embedded etcd)
// with cfg, its API served within lim on a real socket; it returns the
// API's address, the registry and the etcd.
func limitedAPIServer(t *testing.T, cfg Config, lim HTTPLimits) (string, *registry.Registry, *registry.Embedded) {
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
	addr, reg, _ := limitedAPIServer(t, Config{ACL: true}, HTTPLimits{BodyReadTimeout: body})
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
	before, err := reg.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	header := http.Header{TokenHeader: {tok.SecretID}}
	ids := strings.NewReplacer("{name}", "web", "{id}", "n1", "{accessor}", "a1")
	var srv Server
	timedOut := map[string]bool{}
	for _, rt := range srv.routeTable() {
		method, path, _ := strings.Cut(rt.pattern, " ")
		if method != "POST" && method != "PUT" {
			continue
		}
		resp, b, took := trickle(t, addr, method, ids.Replace(path), header, body+5*time.Second)
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

// With the connection limit taken by idle clients (some that never send a
// request, some idle on a kept-alive connection), a new client waits, the
// server closes the idle ones at their timeouts, and the new client is
// served.
func TestHTTPConnectionLimitHoldsAndIdleConnectionsEnd(t *testing.T) {
	const (
		max = 10
		hdr = time.Second
	)
	addr := serveLimited(t, okHandler(), HTTPLimits{MaxConns: max, ReadHeaderTimeout: hdr, IdleTimeout: hdr})
	start := time.Now()
	var idle []net.Conn
	for i := range max {
		c := dial(t, addr)
		if i%2 == 1 {
			// One request, then idle on the kept-alive connection.
			io.WriteString(c, "GET /ok HTTP/1.1\r\nHost: x\r\n\r\n")
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("kept-alive client %d: %v", i, err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		idle = append(idle, c)
	}
	if got := get(t, addr, "/ok", 5*hdr); got != "ok\n" {
		t.Fatalf("new client got %q", got)
	}
	if waited := time.Since(start); waited < hdr*8/10 {
		t.Errorf("the new client was served after %s, before any idle connection timed out: the limit of %d did not hold", waited, max)
	}
	for i, c := range idle {
		if _, err := closedWithin(c, start, hdr+3*time.Second); err != nil {
			t.Errorf("idle client %d: %v", i, err)
		}
	}
	// The slots are free again: clients are served at once.
	for range 2 * max {
		get(t, addr, "/ok", hdr/2)
	}
}

// The deadlines do not cut what is meant to take long: a response written
// after longer than every timeout (a blocking query), and a stream whose
// writes are further apart than the write stall timeout (a log follow).
func TestHTTPLongPollAndFollowOutliveTheTimeouts(t *testing.T) {
	const d = 200 * time.Millisecond
	lim := HTTPLimits{ReadHeaderTimeout: d, BodyReadTimeout: d, WriteStallTimeout: d, IdleTimeout: d}
	mux := http.NewServeMux()
	mux.HandleFunc("/poll", func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		select {
		case <-time.After(5 * d):
			io.WriteString(w, "changed\n")
		case <-r.Context().Done():
			// What a read deadline left on the connection would cause.
		}
	})
	mux.HandleFunc("/follow", func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		for i := range 4 {
			fmt.Fprintf(w, "line %d\n", i)
			if err := rc.Flush(); err != nil {
				t.Errorf("flush: %v", err)
				return
			}
			time.Sleep(3 * d)
		}
	})
	addr := serveLimited(t, mux, lim)
	if got := get(t, addr, "/poll", 20*d); got != "changed\n" {
		t.Errorf("long poll got %q", got)
	}
	// With a body, whose read deadline must be lifted once it is read.
	resp, err := (&http.Client{Timeout: 20 * d}).Post("http://"+addr+"/poll", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatalf("long poll with a body: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "changed\n" {
		t.Errorf("long poll with a body got %q", b)
	}
	if got := get(t, addr, "/follow", 30*d); got != "line 0\nline 1\nline 2\nline 3\n" {
		t.Errorf("follow got %q", got)
	}
}

// The API's own blocking query (?index=&wait=) outlives timeouts shorter
// than its wait.
func TestHTTPBlockingQueryOutlivesTheTimeouts(t *testing.T) {
	const d = 200 * time.Millisecond
	addr, _, _ := limitedAPIServer(t, Config{}, HTTPLimits{ReadHeaderTimeout: d, BodyReadTimeout: d, WriteStallTimeout: d, IdleTimeout: d})
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

// A client that stops reading a response is cut off at the write stall
// timeout instead of holding the handler forever.
func TestHTTPStalledReaderIsCutOff(t *testing.T) {
	const stall = 300 * time.Millisecond
	done := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 64<<10)
		for range 1024 { // 64 MiB: more than any socket buffers
			if _, err := w.Write(chunk); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	})
	addr := serveLimited(t, h, HTTPLimits{WriteStallTimeout: stall})
	c := dial(t, addr)
	io.WriteString(c, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("the handler wrote 64 MiB to a client that reads nothing")
		}
	case <-time.After(stall + 5*time.Second):
		t.Fatal("the handler is still writing to a client that stopped reading")
	}
}

// Headers past MaxHeaderBytes are refused with 431.
func TestHTTPHeaderSizeLimit(t *testing.T) {
	addr := serveLimited(t, okHandler(), HTTPLimits{MaxHeaderBytes: 1 << 10})
	req, _ := http.NewRequest("GET", "http://"+addr+"/ok", nil)
	req.Header.Set("X-Big", strings.Repeat("a", 16<<10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("got %s, want 431", resp.Status)
	}
}
