package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/drover-org/drover/internal/acl"
	"github.com/drover-org/drover/internal/httpapi"
	"github.com/drover-org/drover/internal/pki"
	"github.com/drover-org/drover/internal/registry"
	"github.com/drover-org/drover/internal/spec"
)

// Who may call what. Every route declares an access (routes in api.go);
// wrap checks it before the handler runs:
//
//   - open: anyone who reached the port (the leader's name; the one-time
//     ACL bootstrap, which refuses a second time).
//   - node: an agent speaking for its node: under TLS it must present an
//     agent certificate, and the handler checks the node's secret. No ACL
//     token is needed or used.
//   - token: an ACL token (when ACLs are on); the handler then checks the
//     token's capability in the namespace of what it touches (s.allow),
//     and list handlers show only what the token may read.
//   - nodeRead, nodeWrite: a token with that node capability.
//   - management: a management token (tokens and policies).
//   - catalog: as token, and also an agent's certificate, without a
//     token: its tasks' templates read the service catalog, which the
//     DNS server answers anyone anyway.
//
// Under TLS an agent's certificate may make node requests only, so a
// stolen agent certificate or node secret reaches no operator endpoint.
type access int

const (
	accessOpen access = iota
	accessNode
	accessToken
	accessNodeRead
	accessNodeWrite
	accessManagement
	accessCatalog
)

func (a access) String() string {
	return [...]string{"open", "node", "token", "node read", "node write", "management", "catalog"}[a]
}

// TokenHeader carries an ACL token's secret; "Authorization: Bearer" works too.
const TokenHeader = "X-Drover-Token"

// identity is who made a request, as wrap found it.
type identity struct {
	// acl is what the token may do; nil when ACLs are off (all allowed).
	acl   *acl.ACL
	token *spec.ACLToken
	// secret is the token's, from a header or the web UI's session.
	secret string
}

type identityKey struct{}

func identityOf(r *http.Request) *identity {
	id, _ := r.Context().Value(identityKey{}).(*identity)
	if id == nil {
		return &identity{}
	}
	return id
}

// authErr is a 401 or 403 with what to do.
func unauthorized(format string, args ...any) *httpapi.Error {
	return &httpapi.Error{Status: http.StatusUnauthorized, Message: fmt.Sprintf(format, args...)}
}

func forbidden(format string, args ...any) *httpapi.Error {
	return &httpapi.Error{Status: http.StatusForbidden, Message: fmt.Sprintf(format, args...)}
}

// authorize checks the request against its route's access and returns the
// request carrying its identity, and what to call when the request ends.
func (s *Server) authorize(r *http.Request, a access) (*http.Request, func(), error) {
	r, err := s.authorizeOnce(r, a)
	if err != nil || identityOf(r).token == nil {
		return r, func() {}, err
	}
	r, stop := s.watchRevocation(r, identityOf(r).secret)
	return r, stop, nil
}

func (s *Server) authorizeOnce(r *http.Request, a access) (*http.Request, error) {
	role := peerRole(r.TLS)
	if a == accessOpen {
		return r, nil
	}
	if a == accessNode {
		if r.TLS != nil && role != pki.RoleAgent {
			return nil, forbidden("%s %s is an agent's request: it needs an agent certificate (this connection presented a %s certificate)", r.Method, r.URL.Path, orNone(role))
		}
		return r, nil
	}
	if a == accessCatalog && role == pki.RoleAgent {
		return r, nil
	}
	if role == pki.RoleAgent {
		return nil, forbidden("an agent certificate may only make an agent's requests (register, heartbeat, assignments, status); %s %s needs an operator's certificate and token", r.Method, r.URL.Path)
	}
	id := &identity{}
	if s.cfg.ACL {
		secret := tokenOf(r)
		if secret == "" {
			sessionSecret, ok, err := s.uiSessionSecret(r)
			if err != nil {
				return nil, err
			}
			if ok {
				secret = sessionSecret
			}
		}
		if secret == "" {
			return nil, unauthorized("%s %s needs an ACL token: set DROVER_TOKEN or --token (drover acl bootstrap makes the first, a management token)", r.Method, r.URL.Path)
		}
		tok, rules, err := s.resolveToken(r.Context(), secret)
		if errors.Is(err, registry.ErrNotFound) {
			return nil, forbidden("the ACL token is not known here (deleted, mistyped, or another cluster's); check DROVER_TOKEN")
		}
		if err != nil {
			return nil, err
		}
		id.acl, id.token, id.secret = rules, tok, secret
		switch {
		case a == accessManagement && !rules.IsManagement():
			return nil, forbidden("%s %s needs a management token; token %q is not one", r.Method, r.URL.Path, tok.Name)
		case a == accessNodeRead && !rules.AllowNode(acl.NodeRead):
			return nil, forbidden("%s %s needs node read; token %q has no policy that grants it", r.Method, r.URL.Path, tok.Name)
		case a == accessNodeWrite && !rules.AllowNode(acl.NodeWrite):
			return nil, forbidden("%s %s needs node write; token %q has no policy that grants it", r.Method, r.URL.Path, tok.Name)
		}
	}
	return r.WithContext(context.WithValue(r.Context(), identityKey{}, id)), nil
}

// needCertificate refuses a TLS request that presented no certificate of
// the cluster: servers accept browsers without one (the UI, whose requests
// carry a token), but metrics and the ACL bootstrap are for the cluster's
// own holders.
func needCertificate(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS != nil && peerRole(r.TLS) == "" {
			httpapi.WriteError(w, http.StatusForbidden, r.URL.Path+" needs a certificate of the cluster (cli.pem from drover tls init)", nil)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func orNone(role string) string {
	if role == "" {
		return "no"
	}
	return role
}

func peerRole(cs *tls.ConnectionState) string {
	if cs == nil {
		return ""
	}
	return pki.PeerRole(cs)
}

// tokenOf reads the token's secret from X-Drover-Token or a bearer
// Authorization header.
func tokenOf(r *http.Request) string {
	if t := r.Header.Get(TokenHeader); t != "" {
		return strings.TrimSpace(t)
	}
	if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return strings.TrimSpace(v)
	}
	return ""
}

// allow checks the request's token grants capability in namespace ns.
func (s *Server) allow(r *http.Request, ns, capability string) error {
	id := identityOf(r)
	if id.acl == nil || id.acl.Allow(ns, capability) {
		return nil
	}
	return forbidden("token %q may not %s in namespace %q; a policy with namespace %q { capabilities = [%q] } grants it",
		id.token.Name, capability, spec.NamespaceOf(ns), spec.NamespaceOf(ns), capability)
}

// canRead says whether the request's token may read namespace ns: the
// filter of every list.
func (s *Server) canRead(r *http.Request, ns string) bool {
	id := identityOf(r)
	return id.acl == nil || id.acl.Allow(spec.NamespaceOf(ns), acl.Read)
}

// allowJob checks capability on the namespace of the stored job name. A
// job that does not exist passes (the handler answers 404 for it).
func (s *Server) allowJob(r *http.Request, name, capability string) error {
	if identityOf(r).acl == nil {
		return nil
	}
	read := s.read
	if capability != acl.Read {
		// A write is checked against every write before it: a job purged
		// and submitted again in another namespace is guarded by the new
		// one at once.
		read = s.readCurrent
	}
	ss, err := read(r.Context())
	if err != nil {
		return err
	}
	job := ss.Job(name)
	if job == nil {
		return nil
	}
	return s.allow(r, job.Namespace, capability)
}

// errTokenRevoked ends a request whose token was deleted while it ran: a
// blocking query still waiting gets this 403 (httpapi.Handle), a stream
// already answering (drover logs -f) just ends.
var errTokenRevoked = &httpapi.Error{Status: http.StatusForbidden, Message: "the request's ACL token was deleted while the request ran"}

// revocationCheck is how often a long request (a blocking query, a log
// follow) checks that its token still exists. A short request ends before
// the first check and costs nothing.
const revocationCheck = time.Second

// watchRevocation cancels r's context, with errTokenRevoked as its cause,
// within revocationCheck of its token's deletion reaching the server's
// state.
// Changes to the token's policies apply to the next request, not to one
// that is running.
func (s *Server) watchRevocation(r *http.Request, secret string) (*http.Request, func()) {
	ctx, cancel := context.WithCancelCause(r.Context())
	var mu sync.Mutex
	stopped := false
	var t *time.Timer
	t = time.AfterFunc(revocationCheck, func() {
		_, _, err := s.resolveToken(ctx, secret)
		if errors.Is(err, registry.ErrNotFound) {
			cancel(errTokenRevoked)
			return
		}
		mu.Lock()
		if !stopped {
			t.Reset(revocationCheck)
		}
		mu.Unlock()
	})
	return r.WithContext(ctx), func() {
		mu.Lock()
		stopped = true
		t.Stop()
		mu.Unlock()
		cancel(nil)
	}
}

// resolveToken finds the token with secret in the server's state, once
// it holds this server's own writes (a token or policy just made or
// deleted here counts at once; one changed through another server as
// soon as the watch brings it), and grants what its policies' rules do.
// A policy the token names that no longer exists grants nothing.
func (s *Server) resolveToken(ctx context.Context, secret string) (*spec.ACLToken, *acl.ACL, error) {
	ss, err := s.read(ctx)
	if err != nil {
		return nil, nil, err
	}
	tok := ss.TokenBySecretHash(hashSecret(secret))
	if tok == nil {
		return nil, nil, fmt.Errorf("no such token: %w", registry.ErrNotFound)
	}
	if tok.Type == spec.TokenManagement {
		return tok, acl.Management(), nil
	}
	var parsed []*acl.Rules
	for _, name := range tok.Policies {
		if _, rules := ss.Policy(name); rules != nil {
			parsed = append(parsed, rules)
		}
	}
	return tok, acl.New(parsed...), nil
}

// jobName reads the {name} of a job path and checks the token's
// capability in the job's namespace.
func (s *Server) jobName(r *http.Request, capability string) (string, error) {
	name, err := httpapi.PathName(r, "name", "job name")
	if err != nil {
		return "", err
	}
	return name, s.allowJob(r, name, capability)
}

// namespaceTaken answers a submission whose job name is taken in another
// namespace: job names are unique across namespaces, and moving a job
// between namespaces would move it past whoever guards the old one. The
// other namespace is named only to a token that may read it.
func (s *Server) namespaceTaken(r *http.Request, e *registry.JobNamespaceError) error {
	where := "another namespace"
	if s.canRead(r, e.Namespace) {
		where = fmt.Sprintf("namespace %q", e.Namespace)
	}
	return &httpapi.Error{Status: http.StatusConflict, Message: fmt.Sprintf(
		"a job named %q already exists in %s; job names are unique across namespaces, and a job cannot move between them: choose another name, or stop and purge the old job first", e.Job, where)}
}
