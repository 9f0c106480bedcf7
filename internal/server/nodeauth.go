package server

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/registry"
)

// Node identity. A node's first registration is given a secret; the server
// keeps only its SHA-256 (registry node_secrets/). Every later request made
// as that node (registering again, heartbeats, reading its assignments,
// reporting status) must carry the secret in X-Drover-Node-Secret, so one
// node cannot read another's work or speak for it, and a registration that
// reuses a node ID without the secret is refused (403).
//
// This is the node half of the security issue's story; operator tokens and
// TLS come with it.

// nodeSecrets caches the hashes: once written they never change.
type nodeSecrets struct {
	mu sync.Mutex
	m  map[string]string
}

func (c *nodeSecrets) get(id string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.m[id]
	return h, ok
}

func (c *nodeSecrets) set(id, h string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]string{}
	}
	c.m[id] = h
}

func hashSecret(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// secretHash returns node id's stored secret hash, "" when it has none.
func (s *Server) secretHash(r *http.Request, id string) (string, error) {
	if h, ok := s.secrets.get(id); ok {
		return h, nil
	}
	h, err := s.reg.NodeSecretHash(r.Context(), id)
	if err != nil || h == "" {
		return "", err
	}
	s.secrets.set(id, h)
	return h, nil
}

// checkNode verifies that the request is made by node id: 404 when the
// node never registered (the agent then registers), 403 when the secret is
// missing or wrong.
func (s *Server) checkNode(r *http.Request, id string) error {
	want, err := s.secretHash(r, id)
	if err != nil {
		return err
	}
	if want == "" {
		return notFound("node %q is not registered; register it first", id)
	}
	return checkSecret(r, id, want)
}

func checkSecret(r *http.Request, id, want string) error {
	got := r.Header.Get(client.NodeSecretHeader)
	if got == "" || subtle.ConstantTimeCompare([]byte(hashSecret(got)), []byte(want)) != 1 {
		return &apiError{status: http.StatusForbidden, msg: fmt.Sprintf(
			"requests as node %q need that node's secret (header %s); it was missing or wrong", id, client.NodeSecretHeader)}
	}
	return nil
}

// admitRegistration decides whether a registration of node id may proceed,
// and returns the secret to hand out when this is the node's first.
func (s *Server) admitRegistration(r *http.Request, id string) (newSecret string, err error) {
	want, err := s.secretHash(r, id)
	if err != nil {
		return "", err
	}
	if want != "" {
		if err := checkSecret(r, id, want); err != nil {
			return "", &apiError{status: http.StatusForbidden, msg: fmt.Sprintf(
				"node id %q is already registered with another secret; an agent keeps its secret in its data dir (node-secret): use that data dir, or a fresh one for a new node", id)}
		}
		return "", nil
	}
	b := make([]byte, 32)
	rand.Read(b)
	secret := hex.EncodeToString(b)
	h := hashSecret(secret)
	if err := s.reg.CreateNodeSecret(r.Context(), id, h); err != nil {
		if errors.Is(err, registry.ErrConflict) {
			return "", &apiError{status: http.StatusForbidden, msg: fmt.Sprintf("node id %q was just registered by someone else", id)}
		}
		return "", err
	}
	s.secrets.set(id, h)
	return secret, nil
}
