package link

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/pki"
)

// tlsPair is a server's and an agent's TLS configuration from one CA.
func tlsPair(t testing.TB) (server, agent *tls.Config) {
	t.Helper()
	dir := t.TempDir()
	if _, err := pki.Init(dir, pki.InitOptions{}); err != nil {
		t.Fatal(err)
	}
	server, err := pki.ServerConfig(pki.DirFiles(dir, pki.RoleServer))
	if err != nil {
		t.Fatal(err)
	}
	agent, err = pki.ClientConfig(pki.DirFiles(dir, pki.RoleAgent), pki.ServerName)
	if err != nil {
		t.Fatal(err)
	}
	return server, agent
}

// plainConns: the test servers do not wrap their connections
// (WrapConn), so each link is read on a goroutine of its own.
var plainConns bool

// linkServer serves h over links on a loopback port, as the API's
// listener does, and counts the connections it accepted. serve, when not
// nil, replaces ServeConn (a server that misbehaves).
func linkServer(t testing.TB, h http.Handler, serve func(*tls.Conn)) (addr string, agent *tls.Config, accepted *atomic.Int64) {
	t.Helper()
	return linkServerIdle(t, h, serve, 0)
}

// linkServerIdle is linkServer closing connections idle for idle.
func linkServerIdle(t testing.TB, h http.Handler, serve func(*tls.Conn), idle time.Duration) (addr string, agent *tls.Config, accepted *atomic.Int64) {
	t.Helper()
	srvCfg, agent := tlsPair(t)
	srvCfg.NextProtos = []string{Proto, "h2", "http/1.1"}
	srvCfg.ClientAuth = tls.VerifyClientCertIfGiven // as drover server serves
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Handler: h, WriteTimeout: 5 * time.Second, IdleTimeout: idle}
	if serve == nil {
		serve = s.ServeConn
	}
	accepted = new(atomic.Int64)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				nc := net.Conn(c)
				if !plainConns {
					nc = WrapConn(c)
				}
				tc := tls.Server(nc, srvCfg)
				if err := tc.Handshake(); err != nil || tc.ConnectionState().NegotiatedProtocol != Proto {
					c.Close()
					return
				}
				serve(tc)
			})
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String(), agent, accepted
}

// noFallback fails the test when a request does not go over the link.
type noFallback struct{ t testing.TB }

func (f noFallback) RoundTrip(r *http.Request) (*http.Response, error) {
	f.t.Errorf("%s %s went to the fallback", r.Method, r.URL)
	return nil, errors.New("no fallback")
}

func TestRequestsShareOneLink(t *testing.T) {
	addr, agent, accepted := linkServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
			t.Errorf("the handler sees no client certificate")
		}
		w.Header().Set("X-Drover-Index", r.URL.Query().Get("i"))
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "%s %s %s %s", r.Method, r.URL.Path, r.Header.Get("X-Test"), body)
	}), nil)
	tr := &Transport{TLS: agent, Fallback: noFallback{t}}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			req, _ := http.NewRequest("PUT", fmt.Sprintf("https://%s/v1/x?i=%d", addr, i), strings.NewReader(fmt.Sprintf("body %d", i)))
			req.Header.Set("X-Test", "h")
			resp, err := hc.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			got, _ := io.ReadAll(resp.Body)
			if want := fmt.Sprintf("PUT /v1/x h body %d", i); resp.StatusCode != http.StatusCreated || string(got) != want || resp.Header.Get("X-Drover-Index") != fmt.Sprint(i) {
				t.Errorf("request %d: %d %q (index %q), want 201 %q", i, resp.StatusCode, got, resp.Header.Get("X-Drover-Index"), want)
			}
		})
	}
	wg.Wait()
	if n := accepted.Load(); n != 1 {
		t.Errorf("%d connections for 20 requests, want 1", n)
	}
}

// parkingHandler parks each request it has not been woken for, keeping
// the wake-ups, and answers "woken" when run again.
type parkingHandler struct {
	mu      sync.Mutex
	runs    int
	wakes   []func()
	stopped int
	parked  chan struct{}
}

func newParkingHandler() *parkingHandler { return &parkingHandler{parked: make(chan struct{}, 100)} }

func (h *parkingHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.runs++
	h.mu.Unlock()
	if Woken(r) {
		io.WriteString(w, "woken")
		return
	}
	if !Park(r, func(wake func()) func() {
		h.mu.Lock()
		h.wakes = append(h.wakes, wake)
		h.mu.Unlock()
		h.parked <- struct{}{}
		return func() {
			h.mu.Lock()
			h.stopped++
			h.mu.Unlock()
		}
	}) {
		http.Error(w, "not parked", http.StatusInternalServerError)
	}
}

func (h *parkingHandler) waitParked(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-h.parked:
		case <-time.After(10 * time.Second):
			t.Fatal("a request was not parked within 10s")
		}
	}
}

func TestParkedRequestRunsAgainWhenWoken(t *testing.T) {
	h := newParkingHandler()
	addr, agent, _ := linkServer(t, h, nil)
	tr := &Transport{TLS: agent, Fallback: noFallback{t}}
	defer tr.CloseIdleConnections()
	type result struct {
		body string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := (&http.Client{Transport: tr}).Get("https://" + addr + "/wait")
		if err != nil {
			done <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		done <- result{body: string(b)}
	}()
	h.waitParked(t, 1)
	select {
	case r := <-done:
		t.Fatalf("a parked request was answered before its wake: %+v", r)
	case <-time.After(200 * time.Millisecond):
	}
	h.mu.Lock()
	wake := h.wakes[0]
	h.mu.Unlock()
	wake()
	wake() // a second call is ignored
	select {
	case r := <-done:
		if r.err != nil || r.body != "woken" {
			t.Fatalf("after the wake: %q, %v; want woken", r.body, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer within 10s of the wake")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.runs != 2 {
		t.Errorf("the handler ran %d times, want 2 (parked, then woken)", h.runs)
	}
}

// waitFor polls cond for up to 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestGivenUpRequestsAreTakenBack(t *testing.T) {
	h := newParkingHandler()
	addr, agent, _ := linkServer(t, h, nil)
	tr := &Transport{TLS: agent, Fallback: noFallback{t}}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}

	// The client gives up on one: it is taken back, and the link serves on.
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "GET", "https://"+addr+"/wait", nil)
		_, err := hc.Do(req)
		errc <- err
	}()
	h.waitParked(t, 1)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("a canceled request returned %v, want context.Canceled", err)
	}
	waitFor(t, "the canceled request's wake-up taken back", func() bool { h.mu.Lock(); defer h.mu.Unlock(); return h.stopped == 1 })

	// The connection closes under three: all are taken back.
	for range 3 {
		go hc.Get("https://" + addr + "/wait")
	}
	h.waitParked(t, 3)
	tr.mu.Lock()
	cc := tr.conns[addr]
	tr.mu.Unlock()
	cc.close(errors.New("closed by the test"))
	waitFor(t, "the closed link's requests taken back", func() bool { h.mu.Lock(); defer h.mu.Unlock(); return h.stopped == 4 })
}

func TestRequestsBeyondTheBoundAreRefused(t *testing.T) {
	h := newParkingHandler()
	addr, agent, _ := linkServer(t, h, nil)
	tr := &Transport{TLS: agent, Fallback: noFallback{t}}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	for range maxInFlight {
		go hc.Get("https://" + addr + "/wait")
	}
	h.waitParked(t, maxInFlight)
	resp, err := hc.Get("https://" + addr + "/wait")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), "in flight") {
		t.Errorf("request %d: %d %q, want 503 saying why", maxInFlight+1, resp.StatusCode, b)
	}
}

func TestServerWithoutTheLinkIsSpokenHTTP(t *testing.T) {
	srvCfg, agent := tlsPair(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &http.Server{TLSConfig: srvCfg, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Proto)
	})}
	go s.ServeTLS(ln, "", "")
	defer s.Close()
	fallback := &http.Transport{TLSClientConfig: agent.Clone(), ForceAttemptHTTP2: true}
	defer fallback.CloseIdleConnections()
	hc := &http.Client{Transport: &Transport{TLS: agent, Fallback: fallback}}
	for range 2 { // the second goes straight to the fallback
		resp, err := hc.Get("https://" + ln.Addr().String() + "/")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "HTTP/2.0" {
			t.Errorf("served over %q, want HTTP/2.0 (the fallback)", b)
		}
	}
}

func TestSilentServerIsLeft(t *testing.T) {
	defer func(a, b time.Duration) { pingAfter, pingTimeout = a, b }(pingAfter, pingTimeout)
	pingAfter, pingTimeout = 100*time.Millisecond, 200*time.Millisecond
	// A server that answers nothing, as one stopped (SIGSTOP).
	addr, agent, _ := linkServer(t, nil, func(c *tls.Conn) { io.Copy(io.Discard, c) })
	tr := &Transport{TLS: agent, Fallback: noFallback{t}}
	defer tr.CloseIdleConnections()
	start := time.Now()
	_, err := (&http.Client{Transport: tr}).Get("https://" + addr + "/")
	if err == nil || !strings.Contains(err.Error(), "did not answer a ping") {
		t.Fatalf("got %v, want the server's silence named", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %s to leave a silent server, want about 300ms", d)
	}
}

func TestSilentOrOversizedClientsAreClosed(t *testing.T) {
	// One server closes idle connections at once, the other only after a
	// minute: a connection it closes sooner was closed for what it sent.
	quick, quickAgent, _ := linkServerIdle(t, http.NotFoundHandler(), nil, 200*time.Millisecond)
	addr, agent, _ := linkServer(t, http.NotFoundHandler(), nil)
	tooLarge := appendFrame(nil, frameRequest, 1, nil)
	binary.BigEndian.PutUint32(tooLarge, 9+maxRequestFrame+1)
	for _, tc := range []struct {
		name   string
		send   []byte
		noCert bool
	}{
		{name: "no client certificate", send: appendFrame(nil, framePing, 0, nil), noCert: true},
		{name: "silent"},
		{name: "frame too large", send: tooLarge},
		{name: "unknown frame type", send: appendFrame(nil, 99, 1, nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			to, cfg := addr, agent.Clone()
			if tc.send == nil {
				to, cfg = quick, quickAgent.Clone()
			}
			cfg.NextProtos = []string{Proto}
			if tc.noCert {
				cfg.Certificates, cfg.GetClientCertificate = nil, nil
			}
			c, err := tls.Dial("tcp", to, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if tc.send != nil {
				c.Write(tc.send)
			}
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
				t.Errorf("read %v, want EOF: the server closes the connection", err)
			}
		})
	}
}

// A response that stops mid-frame for longer than the client waits before
// pinging is read on where it stopped, the ping answered after it.
func TestResponseSlowerThanAPingArrivesWhole(t *testing.T) {
	defer func(a, b time.Duration) { pingAfter, pingTimeout = a, b }(pingAfter, pingTimeout)
	pingAfter, pingTimeout = 100*time.Millisecond, 5*time.Second
	body := strings.Repeat("x", 20000)
	addr, agent, _ := linkServer(t, nil, func(c *tls.Conn) {
		var hdr [headerLen]byte
		var wmu sync.Mutex
		for {
			typ, id, _, err := readFrame(c, &hdr, maxRequestFrame)
			if err != nil {
				return
			}
			switch typ {
			case framePing:
				wmu.Lock()
				c.Write(appendFrame(nil, framePong, id, nil))
				wmu.Unlock()
			case frameRequest:
				go func() {
					var b bytes.Buffer
					(&http.Response{StatusCode: 200, ProtoMajor: 1, ProtoMinor: 1, ContentLength: int64(len(body)),
						Body: io.NopCloser(strings.NewReader(body))}).Write(&b)
					f := appendFrame(nil, frameResponse, id, b.Bytes())
					wmu.Lock()
					defer wmu.Unlock()
					c.Write(f[:5000])
					time.Sleep(3 * pingAfter)
					c.Write(f[5000:])
				}()
			}
		}
	})
	tr := &Transport{TLS: agent, Fallback: noFallback{t}}
	defer tr.CloseIdleConnections()
	for i := range 2 {
		resp, err := (&http.Client{Transport: tr}).Get("https://" + addr + "/")
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != body {
			t.Errorf("request %d: %d bytes, want %d", i, len(b), len(body))
		}
	}
}

// Sizes past what a frame carries fail the one request, with a status or
// error that says so, and leave the link and its other requests be.
func TestOversizedRequestsAndAnswersFailAlone(t *testing.T) {
	h := newParkingHandler()
	mux := http.NewServeMux()
	mux.Handle("/wait", h)
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		if _, err := w.Write(make([]byte, maxResponseFrame)); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError) // as the API's door would
		}
	})
	addr, agent, accepted := linkServer(t, mux, nil)
	tr := &Transport{TLS: agent, Fallback: noFallback{t}}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	go hc.Get("https://" + addr + "/wait")
	h.waitParked(t, 1)

	_, err := hc.Post("https://"+addr+"/wait", "text/plain", strings.NewReader(strings.Repeat("x", maxRequestFrame+1)))
	if err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("an oversized request: %v, want an error naming the bound", err)
	}
	req, _ := http.NewRequest("GET", "https://"+addr+"/wait", nil)
	req.Header.Set("X-Big", strings.Repeat("x", http.DefaultMaxHeaderBytes+1))
	if resp, err := hc.Do(req); err != nil || resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("headers over the bound: %v, %v; want 431", resp, err)
	}
	resp, err := hc.Get("https://" + addr + "/big")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(b), "larger than a link carries") {
		t.Errorf("an oversized answer: %d %.100q, want 500 saying why", resp.StatusCode, b)
	}
	h.mu.Lock()
	stopped := h.stopped
	h.mu.Unlock()
	if stopped != 0 || accepted.Load() != 1 {
		t.Errorf("%d parked requests taken back, %d connections: the link did not survive", stopped, accepted.Load())
	}
}

// rawLink is a client of the link's frames alone, as an older agent that
// knows no refusal frame would be: it reads whatever comes.
type rawLink struct {
	t   *testing.T
	c   *tls.Conn
	hdr [headerLen]byte
}

func dialRaw(t *testing.T, addr string, agent *tls.Config) *rawLink {
	t.Helper()
	cfg := agent.Clone()
	cfg.NextProtos = []string{Proto}
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(20 * time.Second))
	return &rawLink{t: t, c: c}
}

func (l *rawLink) get(id uint64, path string) {
	l.t.Helper()
	if _, err := l.c.Write(appendFrame(nil, frameRequest, id, []byte("GET "+path+" HTTP/1.1\r\nHost: drover\r\n\r\n"))); err != nil {
		l.t.Fatal(err)
	}
}

func (l *rawLink) read() (typ byte, id uint64, msg []byte, err error) {
	return readFrame(l.c, &l.hdr, maxResponseFrame)
}

// drainServer serves a link whose /slow runs until release, and counts
// what it ran by path.
func drainServer(t *testing.T) (s *Server, addr string, agent *tls.Config, entered, release chan struct{}, ran func(string) int) {
	entered, release = make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	runs := map[string]int{}
	s = &Server{WriteTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		runs[r.URL.Path]++
		mu.Unlock()
		if r.URL.Path == "/slow" {
			close(entered)
			<-release
		}
		io.WriteString(w, "answer to "+r.URL.Path)
	})}
	addr, agent, _ = linkServer(t, nil, s.ServeConn)
	return s, addr, agent, entered, release, func(p string) int { mu.Lock(); defer mu.Unlock(); return runs[p] }
}

// On the wire, a draining link refuses new requests by their ID, writes
// the answer of the one running once it returns, and only then says
// goodbye (close_notify: the client reads EOF); Shutdown returns once the
// client has closed.
func TestShutdownSaysGoodbyeAfterTheLastAnswer(t *testing.T) {
	s, addr, agent, entered, release, ran := drainServer(t)
	l := dialRaw(t, addr, agent)
	l.get(1, "/slow")
	<-entered
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		done <- s.Shutdown(ctx)
	}()
	// Answered until the drain begins, then refused.
	refused := uint64(0)
	for id := uint64(2); refused == 0; id++ {
		l.get(id, "/fast")
		typ, got, _, err := l.read()
		switch {
		case err != nil:
			t.Fatalf("request %d while the server shuts down: %v; want an answer, then a refusal", id, err)
		case got != id || typ != frameResponse && typ != frameRefused:
			t.Fatalf("request %d: frame type %d for request %d, want its answer or its refusal", id, typ, got)
		case typ == frameRefused:
			refused = id
		}
	}
	if n := ran("/fast"); n != int(refused-2) {
		t.Errorf("%d /fast requests ran, want the %d before the refusal", n, refused-2)
	}
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned (%v) while a request ran", err)
	default:
	}
	close(release)
	typ, id, msg, err := l.read()
	if err != nil || typ != frameResponse || id != 1 || !strings.Contains(string(msg), "answer to /slow") {
		t.Fatalf("after the running request returned: frame %d for %d %q, %v; want its answer", typ, id, msg, err)
	}
	if _, _, _, err := l.read(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last answer: %v, want EOF (close_notify)", err)
	}
	l.c.Close()
	if err := <-done; err != nil {
		t.Fatalf("Shutdown: %v, want nil", err)
	}
}

// A client that does not close after the goodbye does not hold Shutdown
// past lingerAfterBye, and what it sends after is not run.
func TestShutdownDoesNotWaitForAClientThatStays(t *testing.T) {
	s, addr, agent, _, _, ran := drainServer(t)
	l := dialRaw(t, addr, agent)
	l.get(1, "/fast")
	if typ, _, _, err := l.read(); err != nil || typ != frameResponse {
		t.Fatalf("before the shutdown: frame %d, %v; want an answer", typ, err)
	}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		done <- s.Shutdown(ctx)
	}()
	if _, _, _, err := l.read(); !errors.Is(err, io.EOF) {
		t.Fatalf("an idle link when the server shuts down: %v, want EOF (close_notify)", err)
	}
	l.get(2, "/late") // the server may read it before it closes: it does not run it
	if err := <-done; err != nil {
		t.Fatalf("Shutdown with a client that stays: %v, want nil after %s", err, lingerAfterBye)
	}
	if n := ran("/late"); n != 0 {
		t.Errorf("a request sent after the goodbye ran %d times", n)
	}
}
