package server

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/httpapi"
	"github.com/drover-org/drover/internal/registry"
)

// Node identity. A node's first registration brings a secret (an agent
// makes one), or is given one; the server keeps only its SHA-256 (registry node_secrets/). Every later request made
// as that node (registering again, heartbeats, reading its assignments,
// reporting status) must carry the secret in X-Drover-Node-Secret, so one
// node cannot read another's work or speak for it, and a registration that
// reuses a node ID without the secret is refused (403).
//
// This is the node half of the security issue's story; operator tokens and
// TLS come with it.

func hashSecret(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// secretHash returns node id's stored secret hash, "" when it has none,
// from the server's state: the latest one, which holds every secret but
// the newest; a node not found there is looked for again once the state
// holds this server's own writes (a registration just made here).
func (s *Server) secretHash(r *http.Request, id string) (string, error) {
	if h := s.state.Snapshot().NodeSecretHash(id); h != "" {
		return h, nil // written once, never changed
	}
	ss, err := s.read(r.Context())
	if err != nil {
		return "", err
	}
	return ss.NodeSecretHash(id), nil
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
		return httpapi.NotFound("node %q is not registered; register it first", id)
	}
	return checkSecret(r, id, want)
}

func checkSecret(r *http.Request, id, want string) error {
	got := r.Header.Get(client.NodeSecretHeader)
	if got == "" || subtle.ConstantTimeCompare([]byte(hashSecret(got)), []byte(want)) != 1 {
		return &httpapi.Error{Status: http.StatusForbidden, Message: fmt.Sprintf(
			"requests as node %q need that node's secret (header %s); it was missing or wrong", id, client.NodeSecretHeader)}
	}
	return nil
}

// admitRegistration decides whether a registration of node id may proceed,
// and returns the secret to hand out when this is the node's first and the
// registration brought none. An agent makes its node's secret and keeps it
// before its first registration, which carries it: a registration whose
// answer was lost after the secret was stored is then sent again as it
// was, and admitted, where a secret made here would be lost with the
// answer and lock the node out.
func (s *Server) admitRegistration(r *http.Request, id string) (newSecret string, err error) {
	want, err := s.secretHash(r, id)
	if err != nil {
		return "", err
	}
	if want != "" {
		if err := checkSecret(r, id, want); err != nil {
			return "", &httpapi.Error{Status: http.StatusForbidden, Message: fmt.Sprintf(
				"node id %q is already registered with another secret; an agent keeps its secret in its data dir (node-secret): use that data dir, or a fresh one for a new node", id)}
		}
		return "", nil
	}
	secret := r.Header.Get(client.NodeSecretHeader)
	if secret == "" {
		b := make([]byte, 32)
		rand.Read(b)
		secret, newSecret = hex.EncodeToString(b), hex.EncodeToString(b)
	} else if err := checkProposedSecret(secret); err != nil {
		return "", err
	}
	h := hashSecret(secret)
	if err := s.reg.CreateNodeSecret(r.Context(), id, h); err != nil {
		if !errors.Is(err, registry.ErrConflict) {
			return "", err
		}
		// Stored meanwhile: by this registration sent twice (its first
		// copy still in flight when the agent gave up on it), or by
		// someone else, perhaps through another server.
		ss, err := s.readCurrent(r.Context())
		if err != nil {
			return "", err
		}
		if ss.NodeSecretHash(id) != h {
			return "", &httpapi.Error{Status: http.StatusForbidden, Message: fmt.Sprintf("node id %q was just registered by someone else", id)}
		}
	}
	return newSecret, nil
}

// Bounds of a secret a registration brings: at least 128 bits of an
// agent's random hex (it makes 256), and no more than a header needs.
const (
	minProposedSecret = 32
	maxProposedSecret = 256
)

// checkProposedSecret refuses a secret too short to be guessed hard, or
// not made of letters, digits, '-' and '_'.
func checkProposedSecret(secret string) error {
	ok := len(secret) >= minProposedSecret && len(secret) <= maxProposedSecret
	for _, c := range secret {
		ok = ok && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_')
	}
	if !ok {
		return httpapi.BadRequest("the node secret a first registration brings (header %s) must be %d to %d letters, digits, '-' or '_' (an agent makes a random one); this one has %d characters: remove the data dir's node-secret file, and the agent makes a new one",
			client.NodeSecretHeader, minProposedSecret, maxProposedSecret, len(secret))
	}
	return nil
}
