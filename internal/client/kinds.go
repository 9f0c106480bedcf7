package client

import (
	"context"
	"net/url"

	"github.com/drover-org/drover/internal/spec"
)

// ForcePeriodic launches a child of periodic job name now
// (POST /v1/jobs/{name}/periodic/force) and returns it.
func (c *Client) ForcePeriodic(ctx context.Context, name string) (*spec.Job, error) {
	var out struct {
		Job *spec.Job `json:"job"`
	}
	_, err := c.do(ctx, "POST", "/v1/jobs/"+url.PathEscape(name)+"/periodic/force", nil, nil, &out)
	return out.Job, err
}

// Dispatch makes a child of parameterized job name with req's meta and
// payload (POST /v1/jobs/{name}/dispatch) and returns it.
func (c *Client) Dispatch(ctx context.Context, name string, req spec.DispatchRequest) (*spec.Job, error) {
	var out struct {
		Job *spec.Job `json:"job"`
	}
	_, err := c.do(ctx, "POST", "/v1/jobs/"+url.PathEscape(name)+"/dispatch", nil, req, &out)
	return out.Job, err
}
