package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/drover-org/drover/internal/execstream"
)

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
			req.Header.Set("Upgrade", execstream.Protocol)
		}
		return req, err
	})
	if err != nil {
		return nil, c.unreachable(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer resp.Body.Close()
		return nil, errorOf(resp, "exec")
	}
	rwc, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		resp.Body.Close()
		return nil, errors.New("exec: the server's answer is not a stream")
	}
	return rwc, nil
}
