package server

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"

	"github.com/drover-org/drover/internal/spec"
)

// TestUILoginSession: a token's login code becomes, once, an HttpOnly,
// Secure, SameSite=Strict session cookie that stands for the token (and
// only it: its namespace limits hold); a change made with the cookie from
// another site is refused; logout ends the session on the server, so the
// cookie is worth nothing after it even if kept.
func TestUILoginSession(t *testing.T) {
	f := newAuthFixture(t)
	jar, _ := cookiejar.New(nil)
	browser := *f.browser
	browser.Jar = jar
	do := func(method, path, body string, hdr map[string]string) (int, string, *http.Response) {
		t.Helper()
		req, _ := http.NewRequest(method, f.base+path, strings.NewReader(body))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := browser.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp
	}
	sameOrigin := map[string]string{"Sec-Fetch-Site": "same-origin"}

	// Before a login: whoami is a 401 (the page shows its login screen).
	if st, body, _ := do("GET", "/v1/ui/whoami", "", nil); st != http.StatusUnauthorized {
		t.Fatalf("whoami before a login: %d %s", st, body)
	}
	// The "other" namespace's token asks for a code, as drover ui does.
	st, body := f.call("other namespace", "POST", "/v1/ui/login-codes", "")
	if st != 200 {
		t.Fatalf("login code: %d %s", st, body)
	}
	code := field(t, body, "code")
	if st, body, _ := do("POST", "/v1/ui/session", `{"code":"`+code+`"}`, map[string]string{"Sec-Fetch-Site": "cross-site"}); st != http.StatusForbidden {
		t.Errorf("a login from another site: %d %s, want 403", st, body)
	}
	st, body, resp := do("POST", "/v1/ui/session", `{"code":"`+code+`"}`, sameOrigin)
	if st != http.StatusNoContent {
		t.Fatalf("login: %d %s", st, body)
	}
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == uiCookie {
			cookie = c
		}
	}
	if cookie == nil || !cookie.HttpOnly || !cookie.Secure || cookie.SameSite != http.SameSiteStrictMode || cookie.Value == "" {
		t.Fatalf("the session cookie is %+v; want HttpOnly, Secure, SameSite=Strict", cookie)
	}
	if strings.Contains(cookie.Value, f.tokens["other namespace"]) {
		t.Error("the cookie carries the token's secret")
	}
	if st, body, _ := do("POST", "/v1/ui/session", `{"code":"`+code+`"}`, sameOrigin); st != http.StatusBadRequest || !strings.Contains(body, "drover ui") {
		t.Errorf("the same code again: %d %s, want 400 saying to run drover ui", st, body)
	}

	// The cookie is the token: whoami names it and its namespaces.
	st, body, _ = do("GET", "/v1/ui/whoami", "", nil)
	var who spec.UIIdentity
	if err := json.Unmarshal([]byte(body), &who); st != 200 || err != nil {
		t.Fatalf("whoami: %d %s", st, body)
	}
	if who.Token != "other" || who.Management || len(who.Node) != 0 {
		t.Errorf("whoami: %+v; want token other, not management, no node capability", who)
	}
	var other *spec.UINamespace
	for i, n := range who.Namespaces {
		if n.Name == "default" {
			t.Errorf("whoami offers namespace default, where the token may do nothing: %+v", who.Namespaces)
		}
		if n.Name == "other" {
			other = &who.Namespaces[i]
		}
	}
	if other == nil || strings.Join(other.Capabilities, ",") != "read,submit,logs" {
		t.Errorf("whoami's namespace other: %+v; want read, submit, logs", other)
	}
	if st, body, _ := do("GET", "/v1/jobs/web", "", nil); st != http.StatusForbidden {
		t.Errorf("the session read a job of namespace default: %d %s", st, body)
	}
	job := `{"name":"uijob","namespace":"other","groups":[{"name":"g","tasks":[{"name":"t","driver":"exec","config":{"command":"/bin/true"},"resources":{"cpu":10,"memory":10}}]}]}`
	if st, body, _ := do("POST", "/v1/jobs", job, map[string]string{"Sec-Fetch-Site": "cross-site"}); st != http.StatusForbidden || !strings.Contains(body, "UI's own page") {
		t.Errorf("a submit with the cookie from another site: %d %s, want 403", st, body)
	}
	if st, body, _ := do("POST", "/v1/jobs", job, map[string]string{"Origin": "https://evil.example"}); st != http.StatusForbidden {
		t.Errorf("a submit with the cookie from another origin: %d %s, want 403", st, body)
	}
	if st, body, _ := do("POST", "/v1/jobs", job, sameOrigin); st != 200 {
		t.Errorf("a submit with the cookie from the UI's page: %d %s", st, body)
	}
	if st, body, _ := do("GET", "/v1/allocations/"+f.alloc+"/exec?cmd=true", "", map[string]string{"Upgrade": "websocket", "Connection": "Upgrade"}); st != http.StatusForbidden {
		t.Errorf("exec with the cookie: %d %s, want 403", st, body)
	}

	// Logout: the server forgets the session; the old cookie, sent again,
	// is a 401 that says how to log in.
	if st, body, _ := do("DELETE", "/v1/ui/session", "", sameOrigin); st != http.StatusNoContent {
		t.Fatalf("logout: %d %s", st, body)
	}
	req, _ := http.NewRequest("GET", f.base+"/v1/jobs", nil)
	req.AddCookie(cookie)
	r2, err := f.browser.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r2.Body)
	r2.Body.Close()
	if r2.StatusCode != http.StatusUnauthorized || !strings.Contains(string(b), "drover ui") {
		t.Errorf("the cookie after logout: %d %s, want 401 saying how to log in again", r2.StatusCode, b)
	}
}

// TestJobDiff: GET /v1/jobs/{name}/diff lists what changed between two
// versions, as drover history does; a version that does not exist is a 404
// that says where the versions are.
func TestJobDiff(t *testing.T) {
	f := newAuthFixture(t)
	st, body := f.call("read-only", "GET", "/v1/jobs/web/diff?from=1&to=2", "")
	var d spec.JobDiff
	if err := json.Unmarshal([]byte(body), &d); st != 200 || err != nil {
		t.Fatalf("diff: %d %s", st, body)
	}
	if d.From != 1 || d.To != 2 || len(d.Changes) != 1 || d.Changes[0].Line != `~ meta.m: "1" -> "2"` || d.Changes[0].Op != "~" {
		t.Errorf("diff 1 -> 2: %+v", d)
	}
	// Without to: the current version (2); from itself: nothing.
	if st, body := f.call("read-only", "GET", "/v1/jobs/web/diff?from=2", ""); st != 200 || !strings.Contains(body, `"changes":[]`) {
		t.Errorf("diff 2 -> current: %d %s", st, body)
	}
	if st, body := f.call("read-only", "GET", "/v1/jobs/web/diff?from=9", ""); st != 404 || !strings.Contains(body, "drover history web") {
		t.Errorf("diff from a missing version: %d %s", st, body)
	}
	if st, body := f.call("read-only", "GET", "/v1/jobs/web/diff?from=x", ""); st != 400 {
		t.Errorf("diff from x: %d %s", st, body)
	}
}
