package registry

import (
	"context"
	"encoding/json"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/drover-org/drover/internal/spec"
)

// ACL records:
//
//	acl_tokens/<accessor>     the token without its secret, plus the secret's hash
//	acl_secrets/<sha256 hex>  the accessor of the token with that secret
//	acl_policies/<name>       a policy
//	acl_bootstrap             the accessor of the bootstrap token, written once
//
// Only the secret's hash is stored: a copy of etcd's data does not hold a
// usable token.
const (
	dirACLTokens   = "acl_tokens/"
	dirACLSecrets  = "acl_secrets/"
	dirACLPolicies = "acl_policies/"
	keyACLBoot     = "acl_bootstrap"
)

// storedToken is a token as kept: the API's view plus its secret's hash.
type storedToken struct {
	spec.ACLToken
	SecretHash string `json:"secret_hash"`
}

// CreateToken stores t (whose SecretID is not stored) under the hash of its
// secret. With bootstrap it succeeds only once per cluster: ErrConflict
// when a bootstrap token was ever made.
func (r *Registry) CreateToken(ctx context.Context, t *spec.ACLToken, secretHash string, bootstrap bool) error {
	ctx, cancel := r.opCtx(ctx)
	defer cancel()
	tk, err := r.key(dirACLTokens, "token accessor", t.AccessorID)
	if err != nil {
		return err
	}
	sk, err := r.key(dirACLSecrets, "token hash", secretHash)
	if err != nil {
		return err
	}
	st := storedToken{ACLToken: *t, SecretHash: secretHash}
	st.SecretID = ""
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	conds := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(tk), "=", 0), clientv3.Compare(clientv3.CreateRevision(sk), "=", 0)}
	ops := []clientv3.Op{clientv3.OpPut(tk, string(b)), clientv3.OpPut(sk, t.AccessorID)}
	if bootstrap {
		bk := r.prefix + keyACLBoot
		conds = append(conds, clientv3.Compare(clientv3.CreateRevision(bk), "=", 0))
		ops = append(ops, clientv3.OpPut(bk, t.AccessorID))
	}
	resp, err := r.cli.Txn(ctx).If(conds...).Then(ops...).Commit()
	if err != nil {
		return wrap("store token "+t.AccessorID, err)
	}
	if !resp.Succeeded {
		if bootstrap {
			return fmt.Errorf("registry: ACLs were already bootstrapped: %w", ErrConflict)
		}
		return fmt.Errorf("registry: token %s already exists: %w", t.AccessorID, ErrConflict)
	}
	return nil
}

// Bootstrapped reports whether the bootstrap token was ever made.
func (r *Registry) Bootstrapped(ctx context.Context) (bool, error) {
	ctx, cancel := r.opCtx(ctx)
	defer cancel()
	resp, err := r.cli.Get(ctx, r.prefix+keyACLBoot, clientv3.WithCountOnly())
	if err != nil {
		return false, wrap("read ACL bootstrap", err)
	}
	return resp.Count > 0, nil
}

// TokenBySecretHash returns the token whose secret hashes to h; ErrNotFound
// when there is none.
func (r *Registry) TokenBySecretHash(ctx context.Context, h string) (*spec.ACLToken, error) {
	ctx, cancel := r.opCtx(ctx)
	defer cancel()
	sk, err := r.key(dirACLSecrets, "token hash", h)
	if err != nil {
		return nil, err
	}
	resp, err := r.cli.Get(ctx, sk)
	if err != nil {
		return nil, wrap("read token", err)
	}
	if len(resp.Kvs) == 0 {
		return nil, fmt.Errorf("registry: no such token: %w", ErrNotFound)
	}
	st, err := r.getToken(ctx, string(resp.Kvs[0].Value))
	if err != nil {
		return nil, err
	}
	return &st.ACLToken, nil
}

func (r *Registry) getToken(ctx context.Context, accessor string) (*storedToken, error) {
	tk, err := r.key(dirACLTokens, "token accessor", accessor)
	if err != nil {
		return nil, err
	}
	resp, err := r.cli.Get(ctx, tk)
	if err != nil {
		return nil, wrap("read token", err)
	}
	if len(resp.Kvs) == 0 {
		return nil, fmt.Errorf("registry: no token with accessor %q: %w", accessor, ErrNotFound)
	}
	var st storedToken
	if err := json.Unmarshal(resp.Kvs[0].Value, &st); err != nil {
		return nil, fmt.Errorf("registry: decode token %s: %w", accessor, err)
	}
	return &st, nil
}

// DeleteToken removes the token with accessor and its secret's index.
func (r *Registry) DeleteToken(ctx context.Context, accessor string) error {
	ctx, cancel := r.opCtx(ctx)
	defer cancel()
	st, err := r.getToken(ctx, accessor)
	if err != nil {
		return err
	}
	tk, _ := r.key(dirACLTokens, "token accessor", accessor)
	sk, err := r.key(dirACLSecrets, "token hash", st.SecretHash)
	if err != nil {
		return err
	}
	if _, err := r.cli.Txn(ctx).Then(clientv3.OpDelete(tk), clientv3.OpDelete(sk)).Commit(); err != nil {
		return wrap("delete token "+accessor, err)
	}
	return nil
}

// PutPolicy creates or replaces a policy.
func (r *Registry) PutPolicy(ctx context.Context, p *spec.ACLPolicy) error {
	ctx, cancel := r.opCtx(ctx)
	defer cancel()
	k, err := r.key(dirACLPolicies, "policy name", p.Name)
	if err != nil {
		return err
	}
	c := *p
	c.ModifyIndex = 0
	if err := CheckEncodedSize("policy "+p.Name, c); err != nil {
		return err
	}
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if _, err := r.cli.Put(ctx, k, string(b)); err != nil {
		return wrap("store policy "+p.Name, err)
	}
	return nil
}

// DeletePolicy removes a policy; ErrNotFound when there is none. Tokens
// that name it keep the name and lose what it granted.
func (r *Registry) DeletePolicy(ctx context.Context, name string) error {
	ctx, cancel := r.opCtx(ctx)
	defer cancel()
	k, err := r.key(dirACLPolicies, "policy name", name)
	if err != nil {
		return err
	}
	resp, err := r.cli.Delete(ctx, k)
	if err != nil {
		return wrap("delete policy "+name, err)
	}
	if resp.Deleted == 0 {
		return fmt.Errorf("registry: no policy %q: %w", name, ErrNotFound)
	}
	return nil
}
