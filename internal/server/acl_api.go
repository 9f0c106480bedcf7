package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/drover-org/drover/internal/acl"
	"github.com/drover-org/drover/internal/httpapi"
	"github.com/drover-org/drover/internal/inputlimit"
	"github.com/drover-org/drover/internal/registry"
	"github.com/drover-org/drover/internal/spec"
)

// The ACL API (management tokens only, but for bootstrap and self):
//
//	POST   /v1/acl/bootstrap              the first management token, once per cluster
//	GET    /v1/acl/token/self             the calling token
//	GET    /v1/acl/tokens                 list (never secrets)
//	POST   /v1/acl/tokens                 create; the answer holds the secret, once
//	GET    /v1/acl/tokens/{accessor}
//	DELETE /v1/acl/tokens/{accessor}
//	GET    /v1/acl/policies
//	GET    /v1/acl/policies/{name}
//	PUT    /v1/acl/policies/{name}        {"rules": "<HCL>", "description": "..."}
//	DELETE /v1/acl/policies/{name}
func (s *Server) aclRoutes() []route {
	return []route{
		{"POST /v1/acl/bootstrap", accessOpen, s.aclBootstrap},
		{"GET /v1/acl/token/self", accessToken, s.aclSelf},
		{"GET /v1/acl/tokens", accessManagement, s.aclListTokens},
		{"POST /v1/acl/tokens", accessManagement, s.aclCreateToken},
		{"GET /v1/acl/tokens/{accessor}", accessManagement, s.aclGetToken},
		{"DELETE /v1/acl/tokens/{accessor}", accessManagement, s.aclDeleteToken},
		{"GET /v1/acl/policies", accessManagement, s.aclListPolicies},
		{"GET /v1/acl/policies/{name}", accessManagement, s.aclGetPolicy},
		{"PUT /v1/acl/policies/{name}", accessManagement, s.aclPutPolicy},
		{"DELETE /v1/acl/policies/{name}", accessManagement, s.aclDeletePolicy},
	}
}

func (s *Server) aclOn() error {
	if !s.cfg.ACL {
		return httpapi.BadRequest("ACLs are off on this server (it was started with --acl=false): every request is allowed and tokens mean nothing")
	}
	return nil
}

// newSecret is 32 random bytes, hex.
func newSecret() string {
	b := make([]byte, 32)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// createToken stores a new token and returns it with its secret.
func (s *Server) createToken(ctx context.Context, req spec.ACLTokenRequest, bootstrap bool) (*spec.ACLToken, error) {
	t := &spec.ACLToken{AccessorID: uuid.NewString(), SecretID: newSecret(), Name: req.Name,
		Type: req.Type, Policies: req.Policies, CreateTime: time.Now().UTC()}
	if err := s.reg.CreateToken(ctx, t, hashSecret(t.SecretID), bootstrap); err != nil {
		return nil, err
	}
	return t, nil
}

func (s *Server) aclBootstrap(w http.ResponseWriter, r *http.Request) error {
	if err := s.aclOn(); err != nil {
		return err
	}
	if r.TLS != nil && peerRole(r.TLS) == "" {
		// The first token goes to someone who holds the cluster's CLI
		// certificate, not to whoever reaches the port first.
		return forbidden("the ACL bootstrap needs a certificate of the cluster: give --tls-dir (or DROVER_TLS_DIR) with cli.pem")
	}
	t, err := s.createToken(r.Context(), spec.ACLTokenRequest{Name: "bootstrap", Type: spec.TokenManagement}, true)
	if errors.Is(err, registry.ErrConflict) {
		return &httpapi.Error{Status: http.StatusConflict, Message: "ACLs were already bootstrapped: ask the holder of a management token (drover acl token create)"}
	}
	if err != nil {
		return err
	}
	s.log.Info("ACL bootstrap: management token created", "accessor", t.AccessorID)
	return httpapi.WriteJSON(w, 0, t)
}

// EnsureToken returns a management token for drover dev: the one whose
// secret is given when it still exists, else a new one named name. Dev owns
// its cluster, so it may mint one without the bootstrap. It reads the
// registry itself: dev calls it before the server's state is loaded.
func (s *Server) EnsureToken(ctx context.Context, secret, name string) (string, error) {
	if secret != "" {
		if t, err := s.reg.TokenBySecretHash(ctx, hashSecret(secret)); err == nil && t.Type == spec.TokenManagement {
			return secret, nil
		}
	}
	booted, err := s.reg.Bootstrapped(ctx)
	if err != nil {
		return "", err
	}
	t, err := s.createToken(ctx, spec.ACLTokenRequest{Name: name, Type: spec.TokenManagement}, !booted)
	if err != nil {
		return "", err
	}
	return t.SecretID, nil
}

func (s *Server) aclSelf(w http.ResponseWriter, r *http.Request) error {
	if err := s.aclOn(); err != nil {
		return err
	}
	return httpapi.WriteJSON(w, 0, identityOf(r).token)
}

func (s *Server) aclListTokens(w http.ResponseWriter, r *http.Request) error {
	ss, err := s.read(r.Context())
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, 0, ss.Tokens())
}

func (s *Server) aclCreateToken(w http.ResponseWriter, r *http.Request) error {
	if err := s.aclOn(); err != nil {
		return err
	}
	body, err := httpapi.ReadBody(w, r)
	if err != nil {
		return err
	}
	var req spec.ACLTokenRequest
	if err := httpapi.DecodeStrict(body, &req, "a token request"); err != nil {
		return err
	}
	if req.Type == "" {
		req.Type = spec.TokenClient
	}
	var ps spec.Problems
	if strings.TrimSpace(req.Name) == "" || len(req.Name) > spec.MaxNameLen {
		ps.Add("name", "give the token a name of 1 to %d characters that says whose it is", spec.MaxNameLen)
	}
	switch req.Type {
	case spec.TokenClient:
		if len(req.Policies) == 0 {
			ps.Add("policies", "a client token needs at least one policy (drover acl policy list)")
		}
	case spec.TokenManagement:
		if len(req.Policies) > 0 {
			ps.Add("policies", "a management token may do everything; it takes no policies")
		}
	default:
		ps.Add("type", "type %q is not known; use client or management", req.Type)
	}
	ss, err := s.read(r.Context())
	if err != nil {
		return err
	}
	for i, p := range req.Policies {
		if pol, _ := ss.Policy(p); pol == nil {
			ps.Add(fmt.Sprintf("policies[%d]", i), "no policy %q; create it first (drover acl policy apply %s FILE)", p, p)
		}
	}
	if len(ps) > 0 {
		return &httpapi.Error{Status: http.StatusBadRequest, Message: "the token request is not valid", Problems: ps}
	}
	slices.Sort(req.Policies)
	t, err := s.createToken(r.Context(), req, false)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, 0, t)
}

func (s *Server) aclGetToken(w http.ResponseWriter, r *http.Request) error {
	id, err := httpapi.PathName(r, "accessor", "token accessor")
	if err != nil {
		return err
	}
	ss, err := s.read(r.Context())
	if err != nil {
		return err
	}
	t, _ := ss.Token(id)
	if t == nil {
		return httpapi.NotFound("no token with accessor %q; drover acl token list shows them", id)
	}
	return httpapi.WriteJSON(w, 0, t)
}

func (s *Server) aclDeleteToken(w http.ResponseWriter, r *http.Request) error {
	id, err := httpapi.PathName(r, "accessor", "token accessor")
	if err != nil {
		return err
	}
	if err := s.reg.DeleteToken(r.Context(), id); errors.Is(err, registry.ErrNotFound) {
		return httpapi.NotFound("no token with accessor %q; drover acl token list shows them", id)
	} else if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) aclListPolicies(w http.ResponseWriter, r *http.Request) error {
	ss, err := s.read(r.Context())
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, 0, ss.Policies())
}

func (s *Server) aclGetPolicy(w http.ResponseWriter, r *http.Request) error {
	name, err := httpapi.PathName(r, "name", "policy name")
	if err != nil {
		return err
	}
	ss, err := s.read(r.Context())
	if err != nil {
		return err
	}
	p, _ := ss.Policy(name)
	if p == nil {
		return httpapi.NotFound("no policy %q; drover acl policy list shows them", name)
	}
	return httpapi.WriteJSON(w, p.ModifyIndex, p)
}

func (s *Server) aclPutPolicy(w http.ResponseWriter, r *http.Request) error {
	if err := s.aclOn(); err != nil {
		return err
	}
	name, err := httpapi.PathName(r, "name", "policy name")
	if err != nil {
		return err
	}
	p, err := decodePolicy(w, r, name)
	if err != nil {
		return err
	}
	if err := s.reg.PutPolicy(r.Context(), p); err != nil {
		return err
	}
	ss, err := s.read(r.Context())
	if err != nil {
		return err
	}
	stored, _ := ss.Policy(name)
	if stored == nil {
		return httpapi.NotFound("policy %q was deleted right after it was stored", name)
	}
	return httpapi.WriteJSON(w, stored.ModifyIndex, stored)
}

// decodePolicy reads the body of a policy named name and parses its rules:
// a policy nested too deep is a 400 like a body that is (refused before
// parsing), one whose rules are wrong is a 422.
func decodePolicy(w http.ResponseWriter, r *http.Request, name string) (*spec.ACLPolicy, error) {
	body, err := httpapi.ReadBody(w, r)
	if err != nil {
		return nil, err
	}
	var p spec.ACLPolicy
	if err := httpapi.DecodeStrict(body, &p, "a policy"); err != nil {
		return nil, err
	}
	if p.Name != "" && p.Name != name {
		return nil, httpapi.BadRequest("the body names policy %q but the path %q", p.Name, name)
	}
	p.Name = name
	if _, err := acl.Parse(name, []byte(p.Rules)); err != nil {
		var deep *inputlimit.TooDeepError
		if errors.As(err, &deep) {
			return nil, httpapi.BadRequest("the policy's rules are not valid: %v", err)
		}
		return nil, &httpapi.Error{Status: http.StatusUnprocessableEntity, Message: "the policy's rules are not valid: " + err.Error()}
	}
	return &p, nil
}

func (s *Server) aclDeletePolicy(w http.ResponseWriter, r *http.Request) error {
	name, err := httpapi.PathName(r, "name", "policy name")
	if err != nil {
		return err
	}
	if err := s.reg.DeletePolicy(r.Context(), name); errors.Is(err, registry.ErrNotFound) {
		return httpapi.NotFound("no policy %q; drover acl policy list shows them", name)
	} else if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
