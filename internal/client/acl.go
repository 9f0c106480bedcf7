package client

import (
	"context"
	"net/url"

	"github.com/drover-org/drover/internal/spec"
)

// ACLBootstrap makes the cluster's first management token (once).
func (c *Client) ACLBootstrap(ctx context.Context) (*spec.ACLToken, error) {
	var out spec.ACLToken
	_, err := c.do(ctx, "POST", "/v1/acl/bootstrap", nil, nil, &out)
	return &out, err
}

// ACLSelf returns the token the client uses.
func (c *Client) ACLSelf(ctx context.Context) (*spec.ACLToken, error) {
	var out spec.ACLToken
	_, err := c.do(ctx, "GET", "/v1/acl/token/self", nil, nil, &out)
	return &out, err
}

// ACLTokens lists tokens (never their secrets).
func (c *Client) ACLTokens(ctx context.Context) ([]*spec.ACLToken, error) {
	var out []*spec.ACLToken
	_, err := c.do(ctx, "GET", "/v1/acl/tokens", nil, nil, &out)
	return out, err
}

// CreateACLToken creates a token; the answer holds its secret, once.
func (c *Client) CreateACLToken(ctx context.Context, req *spec.ACLTokenRequest) (*spec.ACLToken, error) {
	var out spec.ACLToken
	_, err := c.do(ctx, "POST", "/v1/acl/tokens", nil, req, &out)
	return &out, err
}

// DeleteACLToken deletes the token with accessor.
func (c *Client) DeleteACLToken(ctx context.Context, accessor string) error {
	_, err := c.do(ctx, "DELETE", "/v1/acl/tokens/"+url.PathEscape(accessor), nil, nil, nil)
	return err
}

// ACLPolicies lists policies.
func (c *Client) ACLPolicies(ctx context.Context) ([]*spec.ACLPolicy, error) {
	var out []*spec.ACLPolicy
	_, err := c.do(ctx, "GET", "/v1/acl/policies", nil, nil, &out)
	return out, err
}

// ACLPolicy returns one policy.
func (c *Client) ACLPolicy(ctx context.Context, name string) (*spec.ACLPolicy, error) {
	var out spec.ACLPolicy
	_, err := c.do(ctx, "GET", "/v1/acl/policies/"+url.PathEscape(name), nil, nil, &out)
	return &out, err
}

// PutACLPolicy creates or replaces a policy.
func (c *Client) PutACLPolicy(ctx context.Context, p *spec.ACLPolicy) (*spec.ACLPolicy, error) {
	var out spec.ACLPolicy
	_, err := c.do(ctx, "PUT", "/v1/acl/policies/"+url.PathEscape(p.Name), nil, p, &out)
	return &out, err
}

// DeleteACLPolicy deletes a policy.
func (c *Client) DeleteACLPolicy(ctx context.Context, name string) error {
	_, err := c.do(ctx, "DELETE", "/v1/acl/policies/"+url.PathEscape(name), nil, nil, nil)
	return err
}
