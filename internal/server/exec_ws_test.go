package server

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestExecWebSocketRefusals: the web UI's exec WebSocket is refused, with
// a 403 that says why, to a page of another origin or site (with a token
// or with the session cookie), to the cookie without an Origin, and to a
// token without exec in the alloc's namespace; the cookie from the UI's
// own origin passes the origin and ACL checks and gets as far as the
// relay (here a 502: the fixture's node has no agent to reach). The relay
// itself, to a real agent, is internal/e2e's TestExecWebSocket.
func TestExecWebSocketRefusals(t *testing.T) {
	f := newAuthFixture(t)
	tlsCfg := f.browser.Transport.(*http.Transport).TLSClientConfig
	dialer := websocket.Dialer{TLSClientConfig: tlsCfg, HandshakeTimeout: 10 * time.Second}
	wsURL := "wss" + strings.TrimPrefix(f.base, "https") + "/v1/allocations/" + f.alloc + "/exec?cmd=/bin/true"
	own := f.base // the page's origin: this server's scheme and host

	// The session cookie, as the page gets it from a login link.
	st, body := f.call("management", "POST", "/v1/ui/login-codes", "")
	if st != 200 {
		t.Fatalf("login code: %d %s", st, body)
	}
	req, _ := http.NewRequest("POST", f.base+"/v1/ui/session", strings.NewReader(`{"code":"`+field(t, body, "code")+`"}`))
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := f.browser.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var cookie string
	for _, c := range resp.Cookies() {
		if c.Name == uiCookie {
			cookie = c.Name + "=" + c.Value
		}
	}
	if cookie == "" {
		t.Fatalf("login gave no session cookie: %d", resp.StatusCode)
	}

	open := func(hdr map[string]string) (int, string) {
		t.Helper()
		h := http.Header{}
		for k, v := range hdr {
			h.Set(k, v)
		}
		ws, resp, err := dialer.Dial(wsURL, h)
		if err == nil {
			ws.Close()
			return http.StatusSwitchingProtocols, ""
		}
		if resp == nil {
			t.Fatalf("dial %s: %v", wsURL, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	cases := []struct {
		what   string
		hdr    map[string]string
		status int
		want   string
	}{
		{"a token from another origin", map[string]string{TokenHeader: f.tokens["management"], "Origin": "https://evil.example"}, 403, "UI's own page"},
		{"a token from another port of the same host", map[string]string{TokenHeader: f.tokens["management"], "Origin": "https://127.0.0.1:1"}, 403, "UI's own page"},
		{"a token from a cross-site page", map[string]string{TokenHeader: f.tokens["management"], "Origin": own, "Sec-Fetch-Site": "cross-site"}, 403, "cross-site"},
		{"the cookie from another origin", map[string]string{"Cookie": cookie, "Origin": "https://evil.example"}, 403, "UI's own page"},
		{"the cookie without an Origin", map[string]string{"Cookie": cookie}, 403, "no Origin"},
		{"a token without exec", map[string]string{TokenHeader: f.tokens["read-only"], "Origin": own}, 403, "may not exec"},
		{"a token without exec in the namespace", map[string]string{TokenHeader: f.tokens["other namespace"], "Origin": own}, 403, `may not exec in namespace \"default\"`},
		{"the cookie from the UI's own page", map[string]string{"Cookie": cookie, "Origin": own, "Sec-Fetch-Site": "same-origin"}, 502, "no address"},
	}
	for _, c := range cases {
		st, body := open(c.hdr)
		if st != c.status || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s; want %d saying %q", c.what, st, strings.TrimSpace(body), c.status, c.want)
		}
	}
}
