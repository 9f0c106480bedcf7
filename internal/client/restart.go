package client

import (
	"context"
	"net/url"

	"github.com/drover-org/drover/internal/spec"
)

// RestartJob asks for every instance of a job to be replaced without a
// spec change, and returns the job with its RestartRequested set: the
// instances created before that time are the old ones. An unknown job is a
// 404 and a stopped one a 409 (IsStatus).
func (c *Client) RestartJob(ctx context.Context, name string) (*spec.Job, error) {
	var out struct {
		Job *spec.Job `json:"job"`
	}
	_, err := c.do(ctx, "POST", "/v1/jobs/"+url.PathEscape(name)+"/restart", nil, nil, &out)
	return out.Job, err
}
