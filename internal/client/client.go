// Package client is the Go client of drover's HTTP API. The CLI and the agent
// both use it: agents speak the same API as operators.
package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/drover-org/drover/internal/link"
	"github.com/drover-org/drover/internal/spec"
)

// DefaultAddress is where the CLI looks for a server when neither
// --address nor DROVER_ADDR says otherwise.
// An address without a scheme is https when the client has TLS settings,
// else http.
const DefaultAddress = "127.0.0.1:4646"

// Client talks to one server, or fails over between several (NewWithOptions).
type Client struct {
	base string
	hc   atomic.Pointer[http.Client]
	// fresh, with TLS, makes the transport of a fresh hc: a request that
	// timed out on an HTTP/2 connection or a link moves the client to new
	// connections (freshConns).
	fresh func() http.RoundTripper
	// upgrades carries requests that upgrade their connection (exec):
	// HTTP/1.1 only, as HTTP/2 has no upgrade.
	upgrades *http.Client
	bases    []string     // NewWithOptions' addresses; nil for New
	cur      atomic.Int32 // index in bases of the address in use
	// nodeSecret, when set, proves the caller is its node (agents only).
	nodeSecret atomic.Pointer[string]
	// token is the ACL token's secret sent with every request, or "".
	token string
	// caGiven says TLS verifies servers with a CA of the caller's
	// (caFile, when known), not the system's; for errors.
	caGiven bool
	caFile  string
}

// Options configure a client beyond its addresses.
type Options struct {
	// TLS is used for https addresses (mutual TLS: it carries the
	// client's certificate). With it, an address without a scheme is
	// https.
	TLS *tls.Config
	// Token is the ACL token's secret, sent in TokenHeader.
	Token string
	// CAFile names the CA file TLS verifies servers with, for errors.
	CAFile string
	// Link sends the requests over a link (internal/link) when the server
	// speaks it: one connection that costs the server far less than
	// HTTP/2's. For a client that stays connected: an agent. Answers
	// that stream (Logs, Monitor, Events) still go over HTTP. Needs TLS.
	Link bool
}

// TokenHeader carries an ACL token's secret.
const TokenHeader = "X-Drover-Token"

// NewWithOptions returns a client for one or several servers, with TLS
// and a token. A call goes to the current address; when it cannot connect
// there (refused, reset or closed before any answer, dial error, or
// refused unrun over a link by a server shutting down), it moves
// to the next address and retries at once, trying each address at most
// once per call. The address that last
// answered stays current. An HTTP error status is an answer: it is returned,
// never retried elsewhere. No address: DefaultAddress.
//
// A request that failed to connect was not processed by that server, so
// the retry is safe. A reset after the request was sent but before the
// answer is retried too: every API write is idempotent (the same job spec
// twice changes nothing; status reports are states, not increments).
func NewWithOptions(addrs []string, o Options) (*Client, error) {
	scheme := "http://"
	if o.TLS != nil {
		scheme = "https://"
	}
	var bases []string
	for _, a := range addrs {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		b, err := normalizeWith(a, scheme)
		if err != nil {
			return nil, err
		}
		bases = append(bases, b)
	}
	if len(bases) == 0 {
		b, _ := normalizeWith(DefaultAddress, scheme)
		bases = []string{b}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	if o.TLS != nil {
		// A copy: net/http adds h2 to the config's protocols in place.
		// The transport (ForceAttemptHTTP2, from DefaultTransport) speaks
		// HTTP/2 to a server that offers it, so that an agent's blocking
		// query, heartbeats and reports share one connection.
		tr.TLSClientConfig = o.TLS.Clone()
		tr.HTTP2 = &http.HTTP2Config{SendPingTimeout: pingAfter, PingTimeout: pingTimeout}
	}
	h1 := tr.Clone()
	h1.Protocols = new(http.Protocols)
	h1.Protocols.SetHTTP1(true)
	if h1.TLSClientConfig != nil {
		h1.TLSClientConfig.NextProtos = []string{"http/1.1"} // Clone copied tr's h2
	}
	c := &Client{base: bases[0], bases: bases, upgrades: &http.Client{Transport: h1}, token: o.Token,
		caGiven: o.TLS != nil && o.TLS.RootCAs != nil, caFile: o.CAFile}
	if o.TLS != nil {
		c.fresh = func() http.RoundTripper { return tr.Clone() }
		if o.Link && (len(o.TLS.Certificates) > 0 || o.TLS.GetClientCertificate != nil) { // a link is served to certificates only
			cfg := o.TLS.Clone()
			c.fresh = func() http.RoundTripper { return &link.Transport{TLS: cfg, Fallback: tr.Clone()} }
		}
		c.hc.Store(&http.Client{Transport: c.fresh()})
	} else {
		c.hc.Store(&http.Client{Transport: tr})
	}
	return c, nil
}

// A silent HTTP/2 connection is pinged after pingAfter, and closed when
// the ping is not answered within pingTimeout: one that died without a
// word (a NAT or firewall dropped it) and carries no request is replaced
// in at most 15 s; one whose requests time out is left at once
// (freshConns). The bounds are loose on purpose: a connection closed for
// a ping that a busy server answered late takes every request on it down
// and costs a new TLS handshake, which, when thousands of agents do it at
// once, is what keeps the server busy. With 1.5 s and 2 s, 5,000 agents
// on a loaded 2-core machine kept only 0.3 connections each (43,674
// abandoned TLS handshakes in 90 s); with these, every agent kept its one.
const (
	pingAfter   = 5 * time.Second
	pingTimeout = 10 * time.Second
)

// NodeSecretHeader carries a node's secret on its own requests.
const NodeSecretHeader = "X-Drover-Node-Secret"

// SetNodeSecret makes every later request carry the node's secret.
func (c *Client) SetNodeSecret(s string) { c.nodeSecret.Store(&s) }

// New returns a client for addr ("http://host:port" or "host:port").
func New(addr string) (*Client, error) {
	base, err := normalize(addr)
	if err != nil {
		return nil, err
	}
	// No overall timeout: blocking queries and log follows are long by
	// design; every call takes a context that bounds it.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	hc := &http.Client{Transport: tr} // plain HTTP: HTTP/1.1, upgrades included
	c := &Client{base: base, upgrades: hc}
	c.hc.Store(hc)
	return c, nil
}

func normalize(addr string) (string, error) { return normalizeWith(addr, "http://") }

// normalizeWith puts scheme before an address that has none.
func normalizeWith(addr, scheme string) (string, error) {
	if addr == "" {
		addr = DefaultAddress
	}
	if !strings.Contains(addr, "://") {
		addr = scheme + addr
	}
	u, err := url.Parse(addr)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", fmt.Errorf("invalid server address %q: want https://host:port (or http:// for a server run with --tls=false)", addr)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// Address is the base URL of the server in use.
func (c *Client) Address() string {
	if len(c.bases) > 0 {
		return c.bases[int(c.cur.Load())%len(c.bases)]
	}
	return c.base
}

// Error is a non-2xx answer.
type Error struct {
	Status int
	spec.APIError
}

func (e *Error) Error() string {
	if len(e.Problems) == 0 {
		return e.APIError.Error
	}
	return e.APIError.Error + "\n" + spec.Problems(e.Problems).Error()
}

// IsStatus reports whether err is an API answer with the given status.
func IsStatus(err error, status int) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == status
}

// QueryOptions make a list call a blocking query: it returns when the
// registry index passes Index, or after Wait.
type QueryOptions struct {
	Index int64
	Wait  time.Duration
	// Namespace narrows a job list to one namespace ("": every namespace
	// the token may read).
	Namespace string
}

func (q *QueryOptions) values(v url.Values) {
	if q != nil && q.Namespace != "" {
		v.Set("namespace", q.Namespace)
	}
	if q == nil || q.Index == 0 {
		return
	}
	v.Set("index", strconv.FormatInt(q.Index, 10))
	if q.Wait > 0 {
		v.Set("wait", q.Wait.String())
	}
}

func (c *Client) do(ctx context.Context, method, path string, query url.Values, body, out any) (int64, error) {
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			return 0, err
		}
	}
	resp, _, err := c.send(ctx, func(base string) (*http.Request, error) {
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(b)
		}
		u := base + path
		if len(query) > 0 {
			u += "?" + query.Encode()
		}
		req, err := http.NewRequestWithContext(ctx, method, u, rd)
		if err == nil && body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		return req, err
	})
	if err != nil {
		return 0, c.unreachable(err)
	}
	defer resp.Body.Close()
	index, _ := strconv.ParseInt(resp.Header.Get("X-Drover-Index"), 10, 64)
	if resp.StatusCode/100 != 2 {
		return index, errorOf(resp, method+" "+path)
	}
	if out == nil {
		return index, nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return index, fmt.Errorf("%s %s: bad response: %w", method, path, err)
	}
	return index, nil
}

// errorOf reads a non-2xx answer: the API's error, or what (the request)
// with the status and the body when the answer is not the API's.
func errorOf(resp *http.Response, what string) *Error {
	e := &Error{Status: resp.StatusCode}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if json.Unmarshal(b, &e.APIError) != nil || e.APIError.Error == "" {
		e.APIError.Error = fmt.Sprintf("%s: %s: %s", what, resp.Status, strings.TrimSpace(string(b)))
		if strings.Contains(string(b), "HTTP request to an HTTPS server") {
			e.APIError.Error += " (the server speaks TLS: use an https:// address and give its CA with --ca-cert or DROVER_CACERT, or --tls-dir or DROVER_TLS_DIR)"
		}
	}
	return e
}

// unreachable is the error of a request no server answered, with what to
// do about it.
func (c *Client) unreachable(err error) error {
	return fmt.Errorf("cannot reach the drover server at %s: %w%s", c.where(), err, c.hintFor(err))
}

func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// SubmitJob applies a job. checkIndex > 0 refuses the submit (409) unless
// the stored job's ModifyIndex equals it.
func (c *Client) SubmitJob(ctx context.Context, job *spec.Job, checkIndex int64) (*spec.SubmitResponse, error) {
	q := url.Values{}
	if checkIndex > 0 {
		q.Set("check_index", strconv.FormatInt(checkIndex, 10))
	}
	var out spec.SubmitResponse
	_, err := c.do(ctx, "POST", "/v1/jobs", q, job, &out)
	return &out, err
}

// Jobs lists jobs.
func (c *Client) Jobs(ctx context.Context, q *QueryOptions) ([]*spec.JobListEntry, int64, error) {
	v := url.Values{}
	q.values(v)
	var out []*spec.JobListEntry
	idx, err := c.do(ctx, "GET", "/v1/jobs", v, nil, &out)
	return out, idx, err
}

// Job returns a job with its summary, placement failures and allocations.
func (c *Client) Job(ctx context.Context, name string, q *QueryOptions) (*spec.JobStatus, int64, error) {
	v := url.Values{}
	q.values(v)
	var out spec.JobStatus
	idx, err := c.do(ctx, "GET", "/v1/jobs/"+url.PathEscape(name), v, nil, &out)
	return &out, idx, err
}

// StopJob stops a job; purge also removes it.
func (c *Client) StopJob(ctx context.Context, name string, purge bool) (*spec.Job, error) {
	v := url.Values{}
	if purge {
		v.Set("purge", "true")
	}
	var out struct {
		Job *spec.Job `json:"job"`
	}
	_, err := c.do(ctx, "DELETE", "/v1/jobs/"+url.PathEscape(name), v, nil, &out)
	return out.Job, err
}

// Allocs lists allocations, optionally of one job or one node.
func (c *Client) Allocs(ctx context.Context, job, node string, q *QueryOptions) ([]*spec.Alloc, int64, error) {
	v := url.Values{}
	if job != "" {
		v.Set("job", job)
	}
	if node != "" {
		v.Set("node", node)
	}
	q.values(v)
	var out []*spec.Alloc
	idx, err := c.do(ctx, "GET", "/v1/allocations", v, nil, &out)
	return out, idx, err
}

// Alloc returns one allocation by ID or unique ID prefix.
func (c *Client) Alloc(ctx context.Context, id string) (*spec.Alloc, error) {
	var out spec.Alloc
	_, err := c.do(ctx, "GET", "/v1/allocations/"+url.PathEscape(id), nil, nil, &out)
	return &out, err
}

// NodeAllocs is the agent's assignment query: the allocations placed on
// node, blocking until they change past q.Index.
func (c *Client) NodeAllocs(ctx context.Context, node string, q *QueryOptions) ([]*spec.Alloc, int64, error) {
	v := url.Values{}
	q.values(v)
	var out []*spec.Alloc
	idx, err := c.do(ctx, "GET", "/v1/nodes/"+url.PathEscape(node)+"/allocations", v, nil, &out)
	return out, idx, err
}

// ReportAllocStatuses sends a node's reports for many allocs in one request
// (agents only); at most spec.MaxStatusBatch at a time.
func (c *Client) ReportAllocStatuses(ctx context.Context, node string, r *spec.NodeStatusReport) (*spec.NodeStatusResult, error) {
	var out spec.NodeStatusResult
	_, err := c.do(ctx, "PUT", "/v1/nodes/"+url.PathEscape(node)+"/allocations/status", nil, r, &out)
	return &out, err
}

// RegisterNode registers or updates a node and starts its liveness
// (agents only).
func (c *Client) RegisterNode(ctx context.Context, n *spec.Node) (*spec.NodeRegistration, error) {
	var out spec.NodeRegistration
	_, err := c.do(ctx, "POST", "/v1/nodes", nil, n, &out)
	return &out, err
}

// Heartbeat keeps a node up (agents only), and says when to heartbeat
// next. A 404 means its liveness ran out: register again.
func (c *Client) Heartbeat(ctx context.Context, node string) (*spec.NodeHeartbeat, error) {
	var out spec.NodeHeartbeat
	_, err := c.do(ctx, "PUT", "/v1/nodes/"+url.PathEscape(node)+"/heartbeat", nil, nil, &out)
	return &out, err
}

// Nodes lists nodes.
func (c *Client) Nodes(ctx context.Context, q *QueryOptions) ([]*spec.Node, int64, error) {
	v := url.Values{}
	q.values(v)
	var out []*spec.Node
	idx, err := c.do(ctx, "GET", "/v1/nodes", v, nil, &out)
	return out, idx, err
}

// Node returns one node by ID, unique ID prefix, or name.
func (c *Client) Node(ctx context.Context, id string) (*spec.Node, error) {
	var out spec.Node
	_, err := c.do(ctx, "GET", "/v1/nodes/"+url.PathEscape(id), nil, nil, &out)
	return &out, err
}

// Leader returns the current leader's server ID.
func (c *Client) Leader(ctx context.Context) (string, error) {
	var out spec.LeaderResponse
	_, err := c.do(ctx, "GET", "/v1/status/leader", nil, nil, &out)
	return out.Leader, err
}

// LogOptions select a task's log stream.
type LogOptions struct {
	Task   string
	Stderr bool
	Tail   int // last N lines; < 0 for all
	Follow bool
	// Since keeps the output written in the last Since (0: all), to
	// about a second.
	Since time.Duration
}

// Logs streams a task's output. The caller closes the reader; cancelling
// ctx ends a follow.
func (c *Client) Logs(ctx context.Context, allocID string, o LogOptions) (io.ReadCloser, error) {
	v := url.Values{}
	v.Set("task", o.Task)
	if o.Stderr {
		v.Set("type", "stderr")
	} else {
		v.Set("type", "stdout")
	}
	v.Set("tail", strconv.Itoa(o.Tail))
	if o.Since > 0 {
		v.Set("since", o.Since.String())
	}
	if o.Follow {
		v.Set("follow", "true")
	}
	resp, _, err := c.send(ctx, func(base string) (*http.Request, error) {
		return http.NewRequestWithContext(link.WithoutLink(ctx), "GET", base+"/v1/allocations/"+url.PathEscape(allocID)+"/logs?"+v.Encode(), nil)
	})
	if err != nil {
		return nil, c.unreachable(err)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		return nil, errorOf(resp, "GET /v1/allocations/"+allocID+"/logs")
	}
	return resp.Body, nil
}

// Monitor streams a server's log records at level (debug, info, warn,
// error), or with node those of that node's agent, as text lines, until
// ctx ends. The caller closes the reader.
func (c *Client) Monitor(ctx context.Context, level, node string) (io.ReadCloser, error) {
	v := url.Values{"log_level": {level}}
	if node != "" {
		v.Set("node", node)
	}
	resp, _, err := c.send(ctx, func(base string) (*http.Request, error) {
		return http.NewRequestWithContext(link.WithoutLink(ctx), "GET", base+"/v1/agent/monitor?"+v.Encode(), nil)
	})
	if err != nil {
		return nil, c.unreachable(err)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		return nil, errorOf(resp, "GET /v1/agent/monitor")
	}
	return resp.Body, nil
}
