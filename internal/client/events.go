package client

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

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
// (the server stopped, or its watch broke: resume with After set to the
// last index seen).
func (c *Client) FollowEvents(ctx context.Context, o EventOptions, f func(spec.Event) error) error {
	v := o.values()
	v.Set("follow", "true")
	resp, _, err := c.send(ctx, func(base string) (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, "GET", base+"/v1/events?"+v.Encode(), nil)
		if err == nil {
			req.Header.Set("Accept", "text/event-stream")
		}
		return req, err
	})
	if err != nil {
		return fmt.Errorf("cannot reach the drover server at %s: %w%s", c.where(), err, hintFor(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		e := &Error{Status: resp.StatusCode}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if json.Unmarshal(b, &e.APIError) != nil || e.APIError.Error == "" {
			e.APIError.Error = fmt.Sprintf("GET /v1/events: %s", resp.Status)
		}
		return e
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

// Exec asks for cmd to run in a running task of an alloc (task "" is its
// only one), on a terminal when tty, and returns the upgraded connection,
// which carries execstream frames both ways.
// cols and rows are the terminal's size at the start (0: 80x24).
func (c *Client) Exec(ctx context.Context, allocID, task string, cmd []string, tty bool, cols, rows int) (io.ReadWriteCloser, error) {
	v := url.Values{"cmd": cmd}
	if task != "" {
		v.Set("task", task)
	}
	if tty {
		v.Set("tty", "1")
		if cols > 0 && rows > 0 {
			v.Set("cols", strconv.Itoa(cols))
			v.Set("rows", strconv.Itoa(rows))
		}
	}
	resp, _, err := c.send(ctx, func(base string) (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, "GET", base+"/v1/allocations/"+url.PathEscape(allocID)+"/exec?"+v.Encode(), nil)
		if err == nil {
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", "drover-exec")
		}
		return req, err
	})
	if err != nil {
		return nil, fmt.Errorf("cannot reach the drover server at %s: %w%s", c.where(), err, hintFor(err))
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer resp.Body.Close()
		e := &Error{Status: resp.StatusCode}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if json.Unmarshal(b, &e.APIError) != nil || e.APIError.Error == "" {
			e.APIError.Error = fmt.Sprintf("exec: %s: %s", resp.Status, strings.TrimSpace(string(b)))
		}
		return nil, e
	}
	rwc, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		resp.Body.Close()
		return nil, fmt.Errorf("exec: the server's answer is not a stream")
	}
	return rwc, nil
}
