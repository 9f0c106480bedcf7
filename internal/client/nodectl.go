package client

import (
	"context"
	"net/url"
	"time"

	"github.com/drover-org/drover/internal/spec"
)

// SetNodeEligibility marks node (an ID, unique ID prefix or name) eligible
// for new work or not, and returns the node as stored. A draining node
// cannot be made eligible (409): end the drain first.
func (c *Client) SetNodeEligibility(ctx context.Context, node string, eligible bool) (*spec.Node, error) {
	body := struct {
		Eligible bool `json:"eligible"`
	}{eligible}
	var out spec.Node
	_, err := c.do(ctx, "PUT", "/v1/nodes/"+url.PathEscape(node)+"/eligibility", nil, &body, &out)
	return &out, err
}

// DrainNode starts (enable) or ends a drain of node (an ID, unique ID
// prefix or name), and returns the node as stored. deadline bounds the
// drain (0: none); keepIneligible, when ending one, leaves the node
// ineligible for new work.
func (c *Client) DrainNode(ctx context.Context, node string, enable bool, deadline time.Duration, keepIneligible bool) (*spec.Node, error) {
	body := struct {
		Enable         bool   `json:"enable"`
		Deadline       string `json:"deadline,omitempty"`
		KeepIneligible bool   `json:"keep_ineligible,omitempty"`
	}{Enable: enable, KeepIneligible: keepIneligible}
	if deadline > 0 {
		body.Deadline = deadline.String()
	}
	var out spec.Node
	_, err := c.do(ctx, "PUT", "/v1/nodes/"+url.PathEscape(node)+"/drain", nil, &body, &out)
	return &out, err
}
