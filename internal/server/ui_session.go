package server

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/drover-org/drover/internal/acl"
	"github.com/drover-org/drover/internal/httpapi"
	"github.com/drover-org/drover/internal/spec"
)

// The web UI's login. An operator's CLI (drover ui, or drover dev itself)
// asks for a one-time login code with its token; the link it prints
// carries the code in its fragment (/ui/#login=CODE), which a browser never
// sends to a server or in a Referer. The page exchanges the code for a
// session: a random ID in an HttpOnly, SameSite=Strict cookie (Secure under
// TLS) that stands for the token on this server. The token's secret never
// reaches the page. Sessions and codes live in this server's memory: a
// restart ends them, and the page then asks for a new link.
//
// A request authenticated by the cookie that changes anything must pass
// net/http's CrossOriginProtection (Sec-Fetch-Site, or Origin against
// Host) besides SameSite=Strict. The only connection upgrade it opens is
// the web UI terminal's WebSocket (exec_ws.go), and only from a page whose
// Origin is this server's own.

const (
	// uiCookie names the session cookie.
	uiCookie = "drover_session"
	// uiCodeTTL is how long a login link works (once).
	uiCodeTTL = 10 * time.Minute
	// uiSessionTTL is how long a session lasts from its login.
	uiSessionTTL = 12 * time.Hour
	// uiMaxCodes and uiMaxSessions bound the memory either takes: past
	// them the oldest goes.
	uiMaxCodes    = 1000
	uiMaxSessions = 10000
)

// uiSessions holds the pending login codes and the sessions, each by the
// SHA-256 of its value, with the token secret it stands for ("" with ACLs
// off).
type uiSessions struct {
	mu       sync.Mutex
	codes    map[string]uiGrant
	sessions map[string]uiGrant
}

type uiGrant struct {
	secret  string
	expires time.Time
}

func newUISessions() *uiSessions {
	return &uiSessions{codes: map[string]uiGrant{}, sessions: map[string]uiGrant{}}
}

func uiKey(v string) string {
	h := sha256.Sum256([]byte(v))
	return hex.EncodeToString(h[:])
}

// put stores a new random value for secret in m and returns it.
func (u *uiSessions) put(m map[string]uiGrant, limit int, secret string, ttl time.Duration) string {
	b := make([]byte, 32)
	rand.Read(b)
	v := hex.EncodeToString(b)
	now := time.Now()
	u.mu.Lock()
	defer u.mu.Unlock()
	for k, g := range m {
		if now.After(g.expires) {
			delete(m, k)
		}
	}
	for len(m) >= limit { // drop the one that ends first
		var oldest string
		for k, g := range m {
			if oldest == "" || g.expires.Before(m[oldest].expires) {
				oldest = k
			}
		}
		delete(m, oldest)
	}
	m[uiKey(v)] = uiGrant{secret: secret, expires: now.Add(ttl)}
	return v
}

// redeem takes a login code: once, within its time.
func (u *uiSessions) redeem(code string) (string, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	k := uiKey(code)
	g, ok := u.codes[k]
	delete(u.codes, k)
	if !ok || time.Now().After(g.expires) {
		return "", false
	}
	return g.secret, true
}

// session returns the secret a session stands for.
func (u *uiSessions) session(id string) (string, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	g, ok := u.sessions[uiKey(id)]
	if !ok || time.Now().After(g.expires) {
		return "", false
	}
	return g.secret, true
}

func (u *uiSessions) end(id string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.sessions, uiKey(id))
}

// UILoginCode makes a one-time login code for the token with secret (""
// with ACLs off): the web UI's link is ADDRESS/ui/#login=CODE. drover dev
// calls it for its own management token; others ask
// POST /v1/ui/login-codes.
func (s *Server) UILoginCode(secret string) string {
	return s.ui.put(s.ui.codes, uiMaxCodes, secret, uiCodeTTL)
}

func (s *Server) uiRoutes() []route {
	return []route{
		{"POST /v1/ui/login-codes", accessToken, s.uiCreateLoginCode},
		{"POST /v1/ui/session", accessOpen, s.uiLogin},
		{"DELETE /v1/ui/session", accessOpen, s.uiLogout},
		{"GET /v1/ui/whoami", accessToken, s.uiWhoami},
	}
}

// uiCreateLoginCode is POST /v1/ui/login-codes: a login code for the
// request's own token.
func (s *Server) uiCreateLoginCode(w http.ResponseWriter, r *http.Request) error {
	// No body, or {}: it is read all the same, so that one that never
	// arrives is a 408 as everywhere else.
	body, err := httpapi.ReadBody(w, r)
	if err != nil {
		return err
	}
	if b := strings.TrimSpace(string(body)); b != "" && b != "{}" {
		return httpapi.BadRequest("POST /v1/ui/login-codes takes no body: the code is for the request's own token")
	}
	code := s.UILoginCode(identityOf(r).secret)
	return httpapi.WriteJSON(w, 0, spec.UILoginCode{Code: code, Expires: time.Now().Add(uiCodeTTL).UTC()})
}

// uiLogin is POST /v1/ui/session {"code": CODE}: the session cookie for a
// login code, which is used up.
func (s *Server) uiLogin(w http.ResponseWriter, r *http.Request) error {
	if err := http.NewCrossOriginProtection().Check(r); err != nil {
		return forbidden("a login must come from the UI's own page: %v", err)
	}
	body, err := httpapi.ReadBody(w, r)
	if err != nil {
		return err
	}
	var req struct {
		Code string `json:"code"`
	}
	if err := httpapi.DecodeStrict(body, &req, `a login ({"code": "..."})`); err != nil {
		return err
	}
	secret, ok := s.ui.redeem(req.Code)
	if !ok {
		return httpapi.BadRequest("this login link was used already or has expired (a link works once, for %s): run drover ui for a new one", uiCodeTTL)
	}
	id := s.ui.put(s.ui.sessions, uiMaxSessions, secret, uiSessionTTL)
	http.SetCookie(w, &http.Cookie{Name: uiCookie, Value: id, Path: "/", HttpOnly: true, Secure: r.TLS != nil,
		SameSite: http.SameSiteStrictMode, MaxAge: int(uiSessionTTL / time.Second)})
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// uiLogout is DELETE /v1/ui/session: the session ends here and the
// browser drops its cookie.
func (s *Server) uiLogout(w http.ResponseWriter, r *http.Request) error {
	if err := http.NewCrossOriginProtection().Check(r); err != nil {
		return forbidden("a logout must come from the UI's own page: %v", err)
	}
	if c, err := r.Cookie(uiCookie); err == nil {
		s.ui.end(c.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: uiCookie, Value: "", Path: "/", HttpOnly: true, Secure: r.TLS != nil,
		SameSite: http.SameSiteStrictMode, MaxAge: -1})
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// uiWhoami is GET /v1/ui/whoami: who the request is, and what it may do
// where, so that the UI offers only what will be allowed.
func (s *Server) uiWhoami(w http.ResponseWriter, r *http.Request) error {
	id := identityOf(r)
	out := spec.UIIdentity{ACL: id.acl != nil, Management: id.acl == nil || id.acl.IsManagement()}
	if id.token != nil {
		out.Token, out.TokenType = id.token.Name, id.token.Type
	}
	allowNode := func(c string) bool { return id.acl == nil || id.acl.AllowNode(c) }
	for _, c := range acl.NodeCapabilities {
		if allowNode(c) {
			out.Node = append(out.Node, c)
		}
	}
	// The namespaces to offer: every one a job lives in, the default, and
	// every one a rule names exactly.
	ss, err := s.read(r.Context())
	if err != nil {
		return err
	}
	names := []string{spec.DefaultNamespace}
	for _, j := range ss.Jobs() {
		names = append(names, spec.NamespaceOf(j.Namespace))
	}
	if id.acl != nil {
		for _, n := range id.acl.Namespaces() {
			if !strings.Contains(n, "*") {
				names = append(names, n)
			}
		}
	}
	slices.Sort(names)
	for _, n := range slices.Compact(names) {
		var caps []string
		for _, c := range acl.NamespaceCapabilities {
			if id.acl == nil || id.acl.Allow(n, c) {
				caps = append(caps, c)
			}
		}
		if len(caps) > 0 {
			out.Namespaces = append(out.Namespaces, spec.UINamespace{Name: n, Capabilities: caps})
		}
	}
	return httpapi.WriteJSON(w, 0, out)
}

// uiSessionSecret finds the token secret of a request that carries the
// UI's session cookie and no token: ok is false without a cookie; an
// unknown or ended session, an upgrade other than a same-origin
// WebSocket, or a cross-origin change is an error.
func (s *Server) uiSessionSecret(r *http.Request) (secret string, ok bool, err error) {
	c, cerr := r.Cookie(uiCookie)
	if cerr != nil || c.Value == "" {
		return "", false, nil
	}
	switch {
	case isWebSocket(r):
		// The terminal's WebSocket: a browser always sends Origin with
		// one, and it must be this server's.
		if r.Header.Get("Origin") == "" {
			return "", true, forbidden("%s %s: a WebSocket with the web UI's session must come from the UI's own page, and this one has no Origin", r.Method, r.URL.Path)
		}
		if err := checkExecOrigin(r); err != nil {
			return "", true, err
		}
	case r.Header.Get("Upgrade") != "":
		return "", true, forbidden("%s %s: the web UI's session opens no %s connection; use drover exec with a token", r.Method, r.URL.Path, r.Header.Get("Upgrade"))
	default:
		if err := http.NewCrossOriginProtection().Check(r); err != nil {
			return "", true, forbidden("%s %s with the web UI's session must come from the UI's own page: %v", r.Method, r.URL.Path, err)
		}
	}
	secret, found := s.ui.session(c.Value)
	if !found {
		return "", true, unauthorized("the web UI's session has ended (logged out, expired after %s, or the server restarted): open a new link from drover ui", uiSessionTTL)
	}
	return secret, true, nil
}
