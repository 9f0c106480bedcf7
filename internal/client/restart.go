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

// SignalAlloc has the alloc's agent send sig (SIGHUP, ...) to its running
// task (task "" is the alloc's only one). The alloc is an ID or a unique
// prefix.
func (c *Client) SignalAlloc(ctx context.Context, alloc, task, sig string) (*spec.TaskActionResult, error) {
	v := url.Values{"signal": {sig}}
	if task != "" {
		v.Set("task", task)
	}
	var out spec.TaskActionResult
	_, err := c.do(ctx, "POST", "/v1/allocations/"+url.PathEscape(alloc)+"/signal", v, nil, &out)
	return &out, err
}

// RestartAlloc has the alloc's agent stop its running task (task "" is
// the alloc's only one) and start it again in place.
func (c *Client) RestartAlloc(ctx context.Context, alloc, task string) (*spec.TaskActionResult, error) {
	v := url.Values{}
	if task != "" {
		v.Set("task", task)
	}
	var out spec.TaskActionResult
	_, err := c.do(ctx, "POST", "/v1/allocations/"+url.PathEscape(alloc)+"/restart", v, nil, &out)
	return &out, err
}

// StopAlloc asks for the alloc to be stopped and replaced; it returns the
// alloc as it was and its job, whose StopAllocs holds the request.
func (c *Client) StopAlloc(ctx context.Context, alloc string) (*spec.Alloc, *spec.Job, error) {
	var out struct {
		Alloc *spec.Alloc `json:"alloc"`
		Job   *spec.Job   `json:"job"`
	}
	_, err := c.do(ctx, "POST", "/v1/allocations/"+url.PathEscape(alloc)+"/stop", nil, nil, &out)
	return out.Alloc, out.Job, err
}
