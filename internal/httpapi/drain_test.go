package httpapi

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/link"
	"github.com/drover-org/drover/internal/pki"
)

// serveLinks serves h within lim over mutual TLS on a fresh loopback
// port, as drover server does; it returns the address, the server, and a
// client that sends its requests over a link with an agent's certificate.
func serveLinks(t *testing.T, h http.Handler) (string, *Server, *http.Client) {
	t.Helper()
	dir := t.TempDir()
	if _, err := pki.Init(dir, pki.InitOptions{}); err != nil {
		t.Fatal(err)
	}
	serve, err := pki.ServerConfig(pki.DirFiles(dir, pki.RoleServer))
	if err != nil {
		t.Fatal(err)
	}
	serve.ClientAuth = tls.VerifyClientCertIfGiven
	agent, err := pki.ClientConfig(pki.DirFiles(dir, pki.RoleAgent), pki.ServerName)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := Serve(ln, h, Limits{TLS: serve}, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { s.Close() })
	tr := &link.Transport{TLS: agent, Fallback: failFallback{t}}
	t.Cleanup(tr.CloseIdleConnections)
	return ln.Addr().String(), s, &http.Client{Timeout: 20 * time.Second, Transport: tr}
}

// failFallback fails the test when a request does not go over the link.
type failFallback struct{ t *testing.T }

func (f failFallback) RoundTrip(r *http.Request) (*http.Response, error) {
	f.t.Errorf("%s %s did not go over the link", r.Method, r.URL)
	return nil, errors.New("not over the link")
}

type answer struct {
	status int
	body   string
	err    error
}

// getAsync sends GET url on hc and delivers its answer.
func getAsync(hc *http.Client, url string) <-chan answer {
	ch := make(chan answer, 1)
	go func() {
		resp, err := hc.Get(url)
		if err != nil {
			ch <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		ch <- answer{status: resp.StatusCode, body: string(b), err: err}
	}()
	return ch
}

func waitAnswer(t *testing.T, ch <-chan answer, what string) answer {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: no answer within 20s", what)
		return answer{}
	}
}

// waitRefused sends GET /ok over hc until the link refuses it: the
// server's drain has begun.
func waitRefused(t *testing.T, hc *http.Client, addr string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		a := waitAnswer(t, getAsync(hc, "https://"+addr+"/ok"), "a request while the server shuts down")
		if errors.Is(a.err, link.ErrRefused) {
			return
		}
		if a.err != nil || a.status != http.StatusOK {
			t.Fatalf("a request while the server shuts down: %d %q, %v; want 200 before its drain, then link.ErrRefused", a.status, a.body, a.err)
		}
	}
	t.Fatal("the link refused no request within 10s of Shutdown")
}

type shutdownResult struct {
	err     error
	elapsed time.Duration
}

func shutdownAsync(s *Server, timeout time.Duration) <-chan shutdownResult {
	ch := make(chan shutdownResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		start := time.Now()
		err := s.Shutdown(ctx)
		ch <- shutdownResult{err, time.Since(start)}
	}()
	return ch
}

// A request running on a link when the server shuts down gets its
// answer, and Shutdown waits for it; requests sent after the drain began
// are refused unrun (link.ErrRefused), so the client can send them to
// another server.
func TestShutdownAnswersARequestRunningOnALink(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var okRuns atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
		io.WriteString(w, "slow answer")
	})
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
		okRuns.Add(1)
		io.WriteString(w, "ok")
	})
	addr, s, hc := serveLinks(t, mux)
	slow := getAsync(hc, "https://"+addr+"/slow")
	<-entered
	done := shutdownAsync(s, 20*time.Second)
	waitRefused(t, hc, addr)
	runsBefore := okRuns.Load()
	select {
	case r := <-done:
		t.Fatalf("Shutdown returned (%v) while a link's request ran", r.err)
	default:
	}
	close(release)
	if a := waitAnswer(t, slow, "the running request"); a.err != nil || a.status != http.StatusOK || a.body != "slow answer" {
		t.Fatalf("the request running when the server shut down: %d %q, %v; want 200 %q", a.status, a.body, a.err, "slow answer")
	}
	if r := <-done; r.err != nil {
		t.Fatalf("Shutdown: %v, want nil once the link drained", r.err)
	}
	if n := okRuns.Load(); n != runsBefore {
		t.Errorf("a refused request ran (%d runs, %d before the refusal)", n, runsBefore)
	}
	// The listener is closed: nothing new is served.
	if a := waitAnswer(t, getAsync(hc, "https://"+addr+"/ok"), "a request after Shutdown"); a.err == nil {
		t.Errorf("a request after Shutdown was answered %d %q", a.status, a.body)
	}
}

// A blocking query parked on a link when the server shuts down is run
// again at once and answers what is there now, and its wake-up is taken
// back.
func TestShutdownAnswersAParkedQuery(t *testing.T) {
	parked := make(chan struct{})
	var stops atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if link.Woken(r) {
			io.WriteString(w, "current state")
			return
		}
		if !link.Park(r, func(wake func()) func() {
			close(parked) // never woken: only the drain runs it again
			return func() { stops.Add(1) }
		}) {
			http.Error(w, "not parked", http.StatusInternalServerError)
		}
	})
	addr, s, hc := serveLinks(t, h)
	q := getAsync(hc, "https://"+addr+"/v1/wait?index=7")
	<-parked
	done := shutdownAsync(s, 20*time.Second)
	if a := waitAnswer(t, q, "the parked query"); a.err != nil || a.status != http.StatusOK || a.body != "current state" {
		t.Fatalf("the query parked when the server shut down: %d %q, %v; want 200 %q", a.status, a.body, a.err, "current state")
	}
	if r := <-done; r.err != nil {
		t.Fatalf("Shutdown: %v, want nil once the link drained", r.err)
	}
	// Taken back by the drain, or by the park itself when the drain came
	// while its registration was under way (then a moment later).
	for deadline := time.Now().Add(10 * time.Second); stops.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if n := stops.Load(); n != 1 {
		t.Errorf("the parked query's wake-up was taken back %d times, want 1", n)
	}
}

// Shutdown waits no longer than its context for a handler that does not
// return; Close then cuts the link, and the request fails at once.
func TestShutdownOfALinkIsBounded(t *testing.T) {
	entered, unblock := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(unblock) })
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-unblock // until the test ends
	})
	addr, s, hc := serveLinks(t, h)
	stuck := getAsync(hc, "https://"+addr+"/stuck")
	<-entered
	const bound = 300 * time.Millisecond
	r := <-shutdownAsync(s, bound)
	if !errors.Is(r.err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown with a handler that never returns: %v after %s, want context.DeadlineExceeded after %s", r.err, r.elapsed, bound)
	}
	if r.elapsed > bound+5*time.Second {
		t.Errorf("Shutdown returned %s after its %s bound", r.elapsed-bound, bound)
	}
	select {
	case a := <-stuck:
		t.Fatalf("the stuck request ended before Close: %d %q, %v", a.status, a.body, a.err)
	default:
	}
	s.Close()
	if a := waitAnswer(t, stuck, "the stuck request after Close"); a.err == nil {
		t.Fatalf("the stuck request was answered %d %q after Close, want the link's end", a.status, a.body)
	}
}
