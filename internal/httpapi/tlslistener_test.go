package httpapi

import (
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/pki"
	"github.com/drover-org/drover/internal/testkit"
)

// serveTLS serves h within lim over mutual TLS (certificates made by
// internal/pki) on a fresh loopback port; it returns the address, the
// server, and an HTTP client with an agent's certificate.
func serveTLS(t *testing.T, h http.Handler, lim Limits) (string, *Server, *http.Client) {
	t.Helper()
	dir := t.TempDir()
	if _, err := pki.Init(dir, pki.InitOptions{}); err != nil {
		t.Fatal(err)
	}
	serve, err := pki.ServerConfig(pki.DirFiles(dir, pki.RoleServer))
	if err != nil {
		t.Fatal(err)
	}
	serve.ClientAuth = tls.VerifyClientCertIfGiven // as drover server serves
	cli, err := pki.ClientConfig(pki.DirFiles(dir, pki.RoleAgent), pki.ServerName)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lim.TLS = serve
	s := Serve(ln, h, lim, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { s.Close() })
	tr := &http.Transport{TLSClientConfig: cli, ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	return ln.Addr().String(), s, &http.Client{Timeout: 10 * time.Second, Transport: tr}
}

// Clients that open a connection and never finish the TLS handshake are
// closed within the header timeout (the handshake's bound), while a client
// that does is served over HTTP/2 meanwhile.
func TestTLSStalledHandshakesAreClosedWhileOthersAreServed(t *testing.T) {
	const hdr = time.Second
	addr, _, client := serveTLS(t, okHandler(), Limits{ReadHeaderTimeout: hdr})
	start := time.Now()
	conns := make([]net.Conn, 50)
	for i := range conns {
		conns[i] = testkit.Dial(t, addr)
		if i%2 == 0 {
			// Half a record header; the others send nothing at all.
			if _, err := conns[i].Write([]byte{0x16, 0x03}); err != nil {
				t.Fatal(err)
			}
		}
	}
	resp, err := client.Get("https://" + addr + "/ok")
	if err != nil {
		t.Fatalf("a client with a certificate, while 50 stall their handshakes: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "ok\n" || resp.ProtoMajor != 2 {
		t.Fatalf("got %s %s %q, want 200 over HTTP/2", resp.Proto, resp.Status, b)
	}
	if served := time.Since(start); served >= hdr {
		t.Fatalf("served after %s, not while the others stalled", served)
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(conns))
	for _, c := range conns {
		wg.Go(func() {
			took, err := testkit.ClosedWithin(c, start, hdr+3*time.Second)
			if err == nil && took < hdr-100*time.Millisecond {
				t.Errorf("a stalled handshake was closed after %s, before the %s timeout", took, hdr)
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A client speaking plain HTTP to the TLS server is told so in plain HTTP
// (internal/client turns that answer into advice), as net/http does.
func TestTLSServerAnswersPlainHTTP(t *testing.T) {
	addr, _, _ := serveTLS(t, okHandler(), Limits{})
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + addr + "/ok")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(b), "HTTP request to an HTTPS server") {
		t.Fatalf("got %s %q, want 400 saying the server speaks HTTPS", resp.Status, b)
	}
}

// Closing the server closes the connections still in their handshake at
// once, not at their timeout.
func TestTLSCloseEndsHandshakesInProgress(t *testing.T) {
	addr, s, _ := serveTLS(t, okHandler(), Limits{ReadHeaderTimeout: time.Minute})
	c := testkit.Dial(t, addr)
	if _, err := c.Write([]byte{0x16, 0x03}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // accepted, its handshake waiting
	start := time.Now()
	s.Close()
	if _, err := testkit.ClosedWithin(c, start, 5*time.Second); err != nil {
		t.Fatalf("a connection in its handshake when the server closed: %v", err)
	}
}
