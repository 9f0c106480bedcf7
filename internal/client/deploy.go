package client

import (
	"context"
	"net/url"

	"github.com/drover-org/drover/internal/spec"
)

// JobVersions returns every stored version of a job, newest first.
func (c *Client) JobVersions(ctx context.Context, name string) ([]*spec.Job, error) {
	var out []*spec.Job
	_, err := c.do(ctx, "GET", "/v1/jobs/"+url.PathEscape(name)+"/versions", nil, nil, &out)
	return out, err
}

// RevertJob submits version's spec of a job again, as its next version
// (Changed is false when it is the current spec). checkIndex > 0 refuses
// the revert (409) unless the stored job's ModifyIndex equals it. An
// unknown job or version is a 404 (IsStatus).
func (c *Client) RevertJob(ctx context.Context, name string, version uint64, checkIndex int64) (*spec.SubmitResponse, error) {
	body := struct {
		Version    uint64 `json:"version"`
		CheckIndex int64  `json:"check_index,omitempty"`
	}{version, checkIndex}
	var out spec.SubmitResponse
	_, err := c.do(ctx, "POST", "/v1/jobs/"+url.PathEscape(name)+"/revert", nil, &body, &out)
	return &out, err
}

// ScaleJob sets one group's count (group "" for a job of one group) as
// the job's next version, held to the group's scaling bounds; message is
// kept in the version's Submitted event.
func (c *Client) ScaleJob(ctx context.Context, name, group string, count int, message string, checkIndex int64) (*spec.SubmitResponse, error) {
	body := struct {
		Group      string `json:"group,omitempty"`
		Count      int    `json:"count"`
		Message    string `json:"message,omitempty"`
		CheckIndex int64  `json:"check_index,omitempty"`
	}{group, count, message, checkIndex}
	var out spec.SubmitResponse
	_, err := c.do(ctx, "POST", "/v1/jobs/"+url.PathEscape(name)+"/scale", nil, &body, &out)
	return &out, err
}

// JobDeployments lists a job's deployments, newest first.
func (c *Client) JobDeployments(ctx context.Context, name string, q *QueryOptions) ([]*spec.Deployment, int64, error) {
	v := url.Values{}
	q.values(v)
	var out []*spec.Deployment
	idx, err := c.do(ctx, "GET", "/v1/jobs/"+url.PathEscape(name)+"/deployments", v, nil, &out)
	return out, idx, err
}

// LatestDeployment returns a job's newest deployment; with q it blocks
// until the job's deployments change past q.Index, so a caller follows a
// rollout by passing back the index it got. A job without a deployment is
// a 404 (IsStatus).
func (c *Client) LatestDeployment(ctx context.Context, name string, q *QueryOptions) (*spec.Deployment, int64, error) {
	v := url.Values{}
	q.values(v)
	var out spec.Deployment
	idx, err := c.do(ctx, "GET", "/v1/jobs/"+url.PathEscape(name)+"/deployment", v, nil, &out)
	if err != nil {
		return nil, idx, err
	}
	return &out, idx, nil
}

// Deployments lists every deployment, newest first.
func (c *Client) Deployments(ctx context.Context, q *QueryOptions) ([]*spec.Deployment, int64, error) {
	v := url.Values{}
	q.values(v)
	var out []*spec.Deployment
	idx, err := c.do(ctx, "GET", "/v1/deployments", v, nil, &out)
	return out, idx, err
}

// Deployment returns one deployment by ID or unique ID prefix (at least 4
// characters); with q it blocks until that deployment changes past
// q.Index.
func (c *Client) Deployment(ctx context.Context, id string, q *QueryOptions) (*spec.Deployment, int64, error) {
	v := url.Values{}
	q.values(v)
	var out spec.Deployment
	idx, err := c.do(ctx, "GET", "/v1/deployments/"+url.PathEscape(id), v, nil, &out)
	if err != nil {
		return nil, idx, err
	}
	return &out, idx, nil
}

// PromoteDeployment asks the leader to promote a deployment's canaries.
// A final deployment is a 409; one without canaries a 400. It returns
// the deployment with the request recorded.
func (c *Client) PromoteDeployment(ctx context.Context, id string) (*spec.Deployment, error) {
	var out spec.Deployment
	if _, err := c.do(ctx, "POST", "/v1/deployments/"+url.PathEscape(id)+"/promote", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// FailDeployment asks the leader to fail a running deployment (what a
// failed deployment does then, auto_revert included, is the leader's). A
// final deployment is a 409. It returns the deployment with the request recorded.
func (c *Client) FailDeployment(ctx context.Context, id string) (*spec.Deployment, error) {
	var out spec.Deployment
	if _, err := c.do(ctx, "POST", "/v1/deployments/"+url.PathEscape(id)+"/fail", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PauseDeployment asks the leader to start no new batch of a running
// deployment until ResumeDeployment; both return the deployment with the
// request.
func (c *Client) PauseDeployment(ctx context.Context, id string) (*spec.Deployment, error) {
	var out spec.Deployment
	if _, err := c.do(ctx, "POST", "/v1/deployments/"+url.PathEscape(id)+"/pause", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ResumeDeployment undoes PauseDeployment.
func (c *Client) ResumeDeployment(ctx context.Context, id string) (*spec.Deployment, error) {
	var out spec.Deployment
	if _, err := c.do(ctx, "POST", "/v1/deployments/"+url.PathEscape(id)+"/resume", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
