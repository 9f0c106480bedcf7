package server

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/httpapi"
)

// TestCredentialsChangedThroughAnotherServer: a second server checks
// tokens, policies and node secrets against its own state, so a change
// made through the first applies there as soon as its state holds it: a
// ?consistent request right after the change sees it. (With tokens kept
// for a second, the second server granted a deleted policy and token.)
func TestCredentialsChangedThroughAnotherServer(t *testing.T) {
	f := newAuthFixture(t)
	second := New(Config{Registry: f.srv.reg, ID: "second", Logger: slog.New(slog.DiscardHandler), ACL: true, APIOnly: true})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { second.Run(ctx); close(done) }()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := httpapi.Serve(ln, second.Handler(nil), httpapi.Limits{}, nil)
	t.Cleanup(func() {
		hs.Close()
		cancel()
		<-done
	})
	call := func(method, path, header, value string) int {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+ln.Addr().String()+path, nil)
		req.Header.Set(header, value)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}
	want := func(what string, got, want int) {
		t.Helper()
		if got != want {
			t.Errorf("%s: %d, want %d", what, got, want)
		}
	}

	f.mustOK(t, "PUT", "/v1/acl/policies/temp", `{"rules":"namespace \"*\" { capabilities = [\"read\"] }"}`)
	body := f.mustOK(t, "POST", "/v1/acl/tokens", `{"name":"temp","policies":["temp"]}`)
	secret, accessor := field(t, body, "secret_id"), field(t, body, "accessor_id")
	// The second server answers 503 until it has read the registry once.
	first := call("GET", "/v1/jobs/web?consistent", TokenHeader, secret)
	for deadline := time.Now().Add(10 * time.Second); first == http.StatusServiceUnavailable && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		first = call("GET", "/v1/jobs/web?consistent", TokenHeader, secret)
	}
	want("a token made through the first server", first, 200)

	f.mustOK(t, "DELETE", "/v1/acl/policies/temp", "")
	want("right after its only policy was deleted", call("GET", "/v1/jobs/web?consistent", TokenHeader, secret), 403)
	f.mustOK(t, "PUT", "/v1/acl/policies/temp", `{"rules":"namespace \"*\" { capabilities = [\"read\"] }"}`)
	want("right after the policy came back", call("GET", "/v1/jobs/web?consistent", TokenHeader, secret), 200)
	f.mustOK(t, "DELETE", "/v1/acl/tokens/"+accessor, "")
	want("right after the token was deleted", call("GET", "/v1/jobs/web?consistent", TokenHeader, secret), 403)

	// The node registered through the first server; the second knows its
	// secret, and refuses another.
	want("a heartbeat with the node's secret", call("PUT", "/v1/nodes/n1/heartbeat", "X-Drover-Node-Secret", f.nodeSecret), 200)
	want("a heartbeat with another secret", call("PUT", "/v1/nodes/n1/heartbeat", "X-Drover-Node-Secret", strings.Repeat("cd", 32)), 403)
}

// TestTokenWorksWithinItsServerAtOnce: a token or policy made through a
// server works in the next request to that server, which waits until its
// state holds the server's own writes.
func TestTokenWorksWithinItsServerAtOnce(t *testing.T) {
	f := newAuthFixture(t)
	for i := range 20 {
		f.mustOK(t, "PUT", "/v1/acl/policies/p", `{"rules":"namespace \"*\" { capabilities = [\"read\"] }"}`)
		body := f.mustOK(t, "POST", "/v1/acl/tokens", `{"name":"t","policies":["p"]}`)
		f.tokens["t"] = field(t, body, "secret_id")
		if st, out := f.call("t", "GET", "/v1/jobs/web", ""); st != 200 {
			t.Fatalf("round %d: a token just made: %d %s", i, st, out)
		}
		f.mustOK(t, "DELETE", "/v1/acl/tokens/"+field(t, body, "accessor_id"), "")
		if st, _ := f.call("t", "GET", "/v1/jobs/web", ""); st != 403 {
			t.Fatalf("round %d: a token just deleted: %d, want 403", i, st)
		}
	}
}
