package client

import (
	"context"
	"net/url"

	"github.com/drover-org/drover/internal/spec"
)

// Services lists the service catalog: one summary per service.
func (c *Client) Services(ctx context.Context, q *QueryOptions) ([]spec.ServiceSummary, int64, error) {
	v := url.Values{}
	q.values(v)
	var out []spec.ServiceSummary
	idx, err := c.do(ctx, "GET", "/v1/services", v, nil, &out)
	return out, idx, err
}

// Service returns a service's healthy instances, or with all every
// instance with its checks. An unknown service is a 404 (IsStatus).
func (c *Client) Service(ctx context.Context, name string, all bool, q *QueryOptions) ([]spec.ServiceInstance, int64, error) {
	v := url.Values{}
	if all {
		v.Set("all", "1")
	}
	q.values(v)
	var out []spec.ServiceInstance
	idx, err := c.do(ctx, "GET", "/v1/services/"+url.PathEscape(name), v, nil, &out)
	return out, idx, err
}
