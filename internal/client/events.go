package client

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/drover-org/drover/internal/link"
	"github.com/drover-org/drover/internal/spec"
)

// EventOptions filter the event history (GET /v1/events).
type EventOptions struct {
	// After is the last index seen: only later events come.
	After int64
	// Since keeps events newer than this long ago (0: all).
	Since     time.Duration
	Topics    []string
	Job, Node string
	Namespace string
}

func (o EventOptions) values() url.Values {
	v := url.Values{}
	if o.After > 0 {
		v.Set("index", strconv.FormatInt(o.After, 10))
	}
	if o.Since > 0 {
		v.Set("since", o.Since.String())
	}
	if len(o.Topics) > 0 {
		v.Set("topic", strings.Join(o.Topics, ","))
	}
	for k, s := range map[string]string{"job": o.Job, "node": o.Node, "namespace": o.Namespace} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

// Events returns the history matching o, oldest first, and the index read
// at.
func (c *Client) Events(ctx context.Context, o EventOptions) ([]spec.Event, int64, error) {
	var out []spec.Event
	idx, err := c.do(ctx, "GET", "/v1/events", o.values(), nil, &out)
	return out, idx, err
}

// FollowEvents streams the history matching o, then every new event as it
// is stored, to f, until ctx ends, f returns an error, or the stream ends
// (the server stopped: resume with After set to the last index seen).
func (c *Client) FollowEvents(ctx context.Context, o EventOptions, f func(spec.Event) error) error {
	v := o.values()
	v.Set("follow", "true")
	resp, _, err := c.send(ctx, func(base string) (*http.Request, error) {
		req, err := http.NewRequestWithContext(link.WithoutLink(ctx), "GET", base+"/v1/events?"+v.Encode(), nil)
		if err == nil {
			req.Header.Set("Accept", "text/event-stream")
		}
		return req, err
	})
	if err != nil {
		return c.unreachable(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errorOf(resp, "GET /v1/events")
	}
	// Server-sent events: "data:" lines carry one event's JSON; a blank
	// line ends it; ":" lines are keep-alives.
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var e spec.Event
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			return fmt.Errorf("GET /v1/events: bad event: %w", err)
		}
		if err := f(e); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return sc.Err()
}
