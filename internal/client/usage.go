package client

import (
	"context"
	"net/url"

	"github.com/drover-org/drover/internal/spec"
)

// NodeUsage returns what node id's tasks use now, as its agent measures
// them (the server proxies the request to the node).
func (c *Client) NodeUsage(ctx context.Context, id string) (*spec.NodeUsage, error) {
	var out spec.NodeUsage
	_, err := c.do(ctx, "GET", "/v1/nodes/"+url.PathEscape(id)+"/usage", nil, nil, &out)
	return &out, err
}
