package httpapi

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/testkit"
)

// The HTTP limits are tested on real TCP connections to a real listener,
// with the timeouts shortened through Limits.

// serveLimited serves h within lim on a fresh loopback port and returns
// its address.
func serveLimited(t *testing.T, h http.Handler, lim Limits) string {
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

// Case 39 (slowloris): 200 clients that send half a request line and stall
// are all closed within the header timeout, and a well-behaved client is
// served meanwhile.
func TestHTTPSlowHeadersAreClosedWhileOthersAreServed(t *testing.T) {
	const hdr = time.Second
	addr := serveLimited(t, okHandler(), Limits{ReadHeaderTimeout: hdr})
	start := time.Now()
	conns := make([]net.Conn, 200)
	for i := range conns {
		conns[i] = testkit.Dial(t, addr)
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
			took, err := testkit.ClosedWithin(c, start, hdr+3*time.Second)
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

// A client that sends its headers and then trickles the body one byte a
// second is cut off at the body read timeout; the handler (the API's own
// body reader) answers 408 instead of waiting for the rest.
func TestHTTPTrickledBodyIsCutOff(t *testing.T) {
	const body = 500 * time.Millisecond
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := ReadBody(w, r); err != nil {
			status, msg, _ := StatusOf(err)
			WriteError(w, status, msg, nil)
			return
		}
		io.WriteString(w, "read it all\n")
	})
	addr := serveLimited(t, h, Limits{BodyReadTimeout: body})
	resp, b, took := testkit.Trickle(t, addr, "POST", "/v1/jobs", nil, body+3*time.Second)
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(b, "did not arrive within 500ms") {
		t.Errorf("got %s %s, want 408 saying the body did not arrive within the timeout", resp.Status, b)
	}
	if took < body || took > body+2*time.Second {
		t.Errorf("cut off after %s, want about the body timeout %s", took, body)
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
	addr := serveLimited(t, okHandler(), Limits{MaxConns: max, ReadHeaderTimeout: hdr, IdleTimeout: hdr})
	start := time.Now()
	var idle []net.Conn
	for i := range max {
		c := testkit.Dial(t, addr)
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
		if _, err := testkit.ClosedWithin(c, start, hdr+3*time.Second); err != nil {
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
	lim := Limits{ReadHeaderTimeout: d, BodyReadTimeout: d, WriteStallTimeout: d, IdleTimeout: d}
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
	addr := serveLimited(t, h, Limits{WriteStallTimeout: stall})
	c := testkit.Dial(t, addr)
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
	addr := serveLimited(t, okHandler(), Limits{MaxHeaderBytes: 1 << 10})
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
