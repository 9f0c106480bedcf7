package state

import (
	"testing"
	"time"

	"github.com/drover-org/drover/internal/spec"
)

// TestCredentials: tokens are found by their secret's hash and accessor,
// listed oldest first, and gone with their deletion; a policy's rules are
// parsed when stored (nil when they do not parse); a snapshot keeps what
// it saw.
func TestCredentials(t *testing.T) {
	s := New()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tx := s.Write()
	tx.PutToken(&spec.ACLToken{AccessorID: "b", Name: "newer", CreateTime: t0.Add(time.Minute)}, "hb")
	tx.PutToken(&spec.ACLToken{AccessorID: "a", Name: "older", CreateTime: t0}, "ha")
	tx.PutPolicy(&spec.ACLPolicy{Name: "read", Rules: `namespace "*" { capabilities = ["read"] }`})
	tx.PutPolicy(&spec.ACLPolicy{Name: "broken", Rules: `namespace {`})
	tx.PutNodeSecret("n1", "h1")
	tx.Commit(1)
	before := s.Snapshot()

	if tok := before.TokenBySecretHash("hb"); tok == nil || tok.Name != "newer" {
		t.Errorf("token by hash hb: %+v", tok)
	}
	if tok, h := before.Token("a"); tok == nil || h != "ha" {
		t.Errorf("token a: %+v %q", tok, h)
	}
	if ts := before.Tokens(); len(ts) != 2 || ts[0].Name != "older" {
		t.Errorf("tokens, oldest first: %+v", ts)
	}
	if p, rules := before.Policy("read"); p == nil || rules == nil {
		t.Errorf("policy read: %+v, rules %v", p, rules)
	}
	if p, rules := before.Policy("broken"); p == nil || rules != nil {
		t.Errorf("policy broken: %+v, rules %v (want stored, granting nothing)", p, rules)
	}
	if h := before.NodeSecretHash("n1"); h != "h1" {
		t.Errorf("node secret: %q", h)
	}

	tx = s.Write()
	tx.DeleteToken("b")
	tx.DeletePolicy("read")
	tx.DeleteNodeSecret("n1")
	tx.Commit(2)
	after := s.Snapshot()
	if after.TokenBySecretHash("hb") != nil || len(after.Tokens()) != 1 {
		t.Errorf("token b still there after its deletion: %+v", after.Tokens())
	}
	if p, _ := after.Policy("read"); p != nil || len(after.Policies()) != 1 {
		t.Errorf("policy read still there after its deletion: %+v", after.Policies())
	}
	if after.NodeSecretHash("n1") != "" {
		t.Error("node secret still there after its deletion")
	}
	if before.TokenBySecretHash("hb") == nil || before.NodeSecretHash("n1") == "" {
		t.Error("an earlier snapshot lost what it saw")
	}
}
