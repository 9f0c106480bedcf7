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

// DrainOptions are a drain's: Deadline bounds it (0: none) and
// IgnoreSystemJobs leaves the node's system jobs' instances running, when
// starting one; KeepIneligible, when ending one, leaves the node
// ineligible for new work.
type DrainOptions struct {
	Deadline         time.Duration
	IgnoreSystemJobs bool
	KeepIneligible   bool
}

// DrainNode starts (enable) or ends a drain of node (an ID, unique ID
// prefix or name), and returns the node as stored.
func (c *Client) DrainNode(ctx context.Context, node string, enable bool, o DrainOptions) (*spec.Node, error) {
	body := struct {
		Enable           bool   `json:"enable"`
		Deadline         string `json:"deadline,omitempty"`
		KeepIneligible   bool   `json:"keep_ineligible,omitempty"`
		IgnoreSystemJobs bool   `json:"ignore_system_jobs,omitempty"`
	}{Enable: enable, KeepIneligible: o.KeepIneligible, IgnoreSystemJobs: o.IgnoreSystemJobs}
	if o.Deadline > 0 {
		body.Deadline = o.Deadline.String()
	}
	var out spec.Node
	_, err := c.do(ctx, "PUT", "/v1/nodes/"+url.PathEscape(node)+"/drain", nil, &body, &out)
	return &out, err
}
