package client

import (
	"context"

	"github.com/drover-org/drover/internal/spec"
)

// UILoginCode asks for a one-time login code of the web UI for the
// client's own token; the link is UILoginLink(c.Address(), code).
func (c *Client) UILoginCode(ctx context.Context) (*spec.UILoginCode, error) {
	var out spec.UILoginCode
	_, err := c.do(ctx, "POST", "/v1/ui/login-codes", nil, nil, &out)
	return &out, err
}

// UILoginLink is the web UI's login link for a code, on the server at
// address (as Address returns it: scheme and host). The code travels in
// the fragment, which a browser sends to no server.
func UILoginLink(address, code string) string {
	return address + "/ui/#login=" + code
}
