package client

import (
	"context"
	"net/url"

	"github.com/drover-org/drover/internal/spec"
)

// PlanJob asks what submitting job would do, with the nodes in without
// (names or IDs) planned as down. diff asks for the spec diff.
func (c *Client) PlanJob(ctx context.Context, job *spec.Job, without []string, diff bool) (*spec.JobPlan, error) {
	q := url.Values{}
	if len(without) > 0 {
		q["without"] = without
	}
	if !diff {
		q.Set("diff", "0")
	}
	var out spec.JobPlan
	_, err := c.do(ctx, "POST", "/v1/jobs/plan", q, job, &out)
	return &out, err
}

// PlanWithout asks where the work on the named nodes (names or IDs) would
// go if they were down, and what would not fit.
func (c *Client) PlanWithout(ctx context.Context, nodes []string) (*spec.NodeLossPlan, error) {
	var out spec.NodeLossPlan
	_, err := c.do(ctx, "GET", "/v1/plan/without", url.Values{"node": nodes}, nil, &out)
	return &out, err
}
