package state

import (
	"slices"

	memdb "github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/internal/acl"
	"github.com/drover-org/drover/internal/spec"
)

// Credentials: ACL tokens and policies, and nodes' secrets, as the
// registry holds them (only secrets' hashes). The server checks every
// request against these tables, so that a check costs no etcd read and
// a revoked token or a deleted policy stops granting as soon as the
// store has the deletion.

// tokenRow is a token (without its secret) and its secret's hash.
type tokenRow struct {
	Accessor   string
	SecretHash string
	Token      *spec.ACLToken
}

// policyRow is a policy and its rules, parsed once when stored (nil when
// they do not parse: such a policy grants nothing).
type policyRow struct {
	Name   string
	Policy *spec.ACLPolicy
	Rules  *acl.Rules
}

// secretRow is the hash of a node's secret.
type secretRow struct {
	Node, Hash string
}

func accessTables() map[string]*memdb.TableSchema {
	id := func(f func(any) string) *memdb.IndexSchema {
		return &memdb.IndexSchema{Name: "id", Unique: true, Indexer: keyIndex{func(o any) ([]byte, bool) { return str(nil, f(o)), true }}}
	}
	secret := id(func(o any) string { return o.(*tokenRow).SecretHash })
	secret.Name = "secret"
	return map[string]*memdb.TableSchema{
		tableTokens: {Name: tableTokens, Indexes: map[string]*memdb.IndexSchema{
			"id":     id(func(o any) string { return o.(*tokenRow).Accessor }),
			"secret": secret,
		}},
		tablePolicies: {Name: tablePolicies, Indexes: map[string]*memdb.IndexSchema{
			"id": id(func(o any) string { return o.(*policyRow).Name }),
		}},
		tableNodeSecrets: {Name: tableNodeSecrets, Indexes: map[string]*memdb.IndexSchema{
			"id": id(func(o any) string { return o.(*secretRow).Node }),
		}},
	}
}

// PutToken stores a token under its accessor and its secret's hash.
func (t *Txn) PutToken(tok *spec.ACLToken, secretHash string) {
	t.insert(tableTokens, &tokenRow{Accessor: tok.AccessorID, SecretHash: secretHash, Token: tok})
}

// DeleteToken removes the token with accessor.
func (t *Txn) DeleteToken(accessor string) { t.delete(tableTokens, accessor) }

// PutPolicy stores a policy; its rules are parsed here, once. A policy
// whose rules do not parse (the API refuses them, so it is not expected)
// grants nothing.
func (t *Txn) PutPolicy(p *spec.ACLPolicy) {
	rules, err := acl.Parse(p.Name, []byte(p.Rules))
	if err != nil {
		rules = nil
	}
	t.insert(tablePolicies, &policyRow{Name: p.Name, Policy: p, Rules: rules})
}

// DeletePolicy removes a policy.
func (t *Txn) DeletePolicy(name string) { t.delete(tablePolicies, name) }

// PutNodeSecret stores the hash of node id's secret.
func (t *Txn) PutNodeSecret(id, hash string) {
	t.insert(tableNodeSecrets, &secretRow{Node: id, Hash: hash})
}

// DeleteNodeSecret removes node id's secret.
func (t *Txn) DeleteNodeSecret(id string) { t.delete(tableNodeSecrets, id) }

// TokenBySecretHash returns the token whose secret hashes to h, or nil.
func (s *Snapshot) TokenBySecretHash(h string) *spec.ACLToken {
	raw, err := s.tx.First(tableTokens, "secret", h)
	if err != nil || raw == nil {
		return nil
	}
	return raw.(*tokenRow).Token
}

// Token returns the token with accessor and its secret's hash, or nil.
func (s *Snapshot) Token(accessor string) (*spec.ACLToken, string) {
	row, _ := s.first(tableTokens, accessor).(*tokenRow)
	if row == nil {
		return nil, ""
	}
	return row.Token, row.SecretHash
}

// Tokens returns every token, oldest first.
func (s *Snapshot) Tokens() []*spec.ACLToken {
	out := list(s.get(tableTokens, "id_prefix", ""), func(o any) *spec.ACLToken { return o.(*tokenRow).Token })
	slices.SortStableFunc(out, func(a, b *spec.ACLToken) int { return a.CreateTime.Compare(b.CreateTime) })
	return out
}

// Policy returns a policy and its parsed rules (nil when they do not
// parse), or nil.
func (s *Snapshot) Policy(name string) (*spec.ACLPolicy, *acl.Rules) {
	row, _ := s.first(tablePolicies, name).(*policyRow)
	if row == nil {
		return nil, nil
	}
	return row.Policy, row.Rules
}

// Policies returns every policy, by name.
func (s *Snapshot) Policies() []*spec.ACLPolicy {
	return list(s.get(tablePolicies, "id_prefix", ""), func(o any) *spec.ACLPolicy { return o.(*policyRow).Policy })
}

// NodeSecretHash returns the hash of node id's secret, "" when it has
// none.
func (s *Snapshot) NodeSecretHash(id string) string {
	row, _ := s.first(tableNodeSecrets, id).(*secretRow)
	if row == nil {
		return ""
	}
	return row.Hash
}
