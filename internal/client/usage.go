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

// ReportNodeUsage stores what node id's tasks use in all (agents only:
// the request carries the node's secret). u.Allocs is not kept.
func (c *Client) ReportNodeUsage(ctx context.Context, id string, u *spec.NodeUsage) error {
	_, err := c.do(ctx, "PUT", "/v1/nodes/"+url.PathEscape(id)+"/usage", nil, u, nil)
	return err
}
