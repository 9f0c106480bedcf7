package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"

	"github.com/drover-org/drover/internal/link"
	"github.com/drover-org/drover/internal/pki"
)

// SplitAddrs splits comma-separated addresses (as --servers, --address and
// DROVER_ADDR take them), dropping empty ones.
func SplitAddrs(list ...string) []string {
	var out []string
	for _, l := range list {
		for _, a := range strings.Split(l, ",") {
			if a = strings.TrimSpace(a); a != "" {
				out = append(out, a)
			}
		}
	}
	return out
}

// Addresses returns every server address this client knows, in order.
func (c *Client) Addresses() []string {
	if len(c.bases) == 0 {
		return []string{c.base}
	}
	return append([]string(nil), c.bases...)
}

// addr returns the address for the k-th try of a call that began at start.
func (c *Client) addrAt(start, k int) (int, string) {
	if len(c.bases) == 0 {
		return 0, c.base
	}
	i := (start + k) % len(c.bases)
	return i, c.bases[i]
}

// tries is how many addresses one call may try.
func (c *Client) tries() int { return max(1, len(c.bases)) }

// send runs one request, failing over on connection failures. build makes
// the request for a base URL (called again per try, so bodies are fresh).
func (c *Client) send(ctx context.Context, build func(base string) (*http.Request, error)) (*http.Response, string, error) {
	start := int(c.cur.Load())
	var errs []string
	for k := 0; k < c.tries(); k++ {
		i, base := c.addrAt(start, k)
		req, err := build(base)
		if err != nil {
			return nil, base, err
		}
		if s := c.nodeSecret.Load(); s != nil && *s != "" {
			req.Header.Set(NodeSecretHeader, *s)
		}
		if c.token != "" {
			req.Header.Set(TokenHeader, c.token)
		}
		hc := c.hc.Load()
		if req.Header.Get("Upgrade") != "" {
			hc = c.upgrades
		}
		resp, err := hc.Do(req)
		if err == nil {
			c.cur.Store(int32(i))
			return resp, base, nil
		}
		err = unwrapURL(err)
		if errors.Is(err, context.DeadlineExceeded) {
			c.freshConns(hc)
		}
		if ctx.Err() != nil || !connectFailure(err) || k == c.tries()-1 {
			if len(errs) > 0 {
				return nil, base, fmt.Errorf("%w (also tried %s)", err, strings.Join(errs, "; "))
			}
			return nil, base, err
		}
		errs = append(errs, base+": "+err.Error())
		if len(c.bases) > 0 {
			c.cur.CompareAndSwap(int32(i), int32((i+1)%len(c.bases)))
		}
	}
	panic("unreachable")
}

// freshConns moves the client off hc's connections after a request on
// them timed out: an HTTP/2 connection carries all of a client's requests,
// and one that froze (its peer or the path to it stopped without a word)
// would take each later request down the same way until a ping found it
// out. The next request dials anew. Requests that were on hc, when several
// time out at once, move the client once. Over HTTP/1.1, net/http closes
// the connection of a request that was cancelled itself.
func (c *Client) freshConns(hc *http.Client) {
	if c.fresh == nil || !c.hc.CompareAndSwap(hc, &http.Client{Transport: c.fresh()}) {
		return
	}
	hc.CloseIdleConnections()
}

// connectFailure reports whether err means the server never answered: it
// could not be reached, it closed or reset the connection before any
// response, or it refused the request unrun because it is shutting down
// (link.ErrRefused). Context errors and timeouts of a live server are not.
func connectFailure(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if errors.Is(err, link.ErrRefused) {
		return true
	}
	for _, e := range []error{syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED,
		syscall.EHOSTUNREACH, syscall.ENETUNREACH, syscall.EPIPE, io.EOF, io.ErrUnexpectedEOF} {
		if errors.Is(err, e) {
			return true
		}
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return false
}

// where names the server(s) for an error message.
func (c *Client) where() string {
	if len(c.bases) > 1 {
		return strings.Join(c.bases, ", ")
	}
	return c.Address()
}

// Rotate moves to the next server address, for a caller that has its own
// evidence the current one is unwell (a server that accepts connections but
// never answers, such as a stopped process, is not caught by connection
// failures). It returns the address now in use.
func (c *Client) Rotate() string {
	if len(c.bases) > 1 {
		for {
			cur := c.cur.Load()
			if c.cur.CompareAndSwap(cur, (cur+1)%int32(len(c.bases))) {
				break
			}
		}
	}
	return c.Address()
}

// hintFor says what to do about a failure to reach a server.
func (c *Client) hintFor(err error) string {
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var alert tls.AlertError
	switch {
	case errors.Is(err, link.ErrRefused):
		return " (the server is stopping; a client given several servers' addresses moves to the next)"
	case errors.As(err, &alert) && alert == certificateRequired:
		return " (the server wants a client certificate: give --tls-dir or DROVER_TLS_DIR, a directory with ca.pem, cli.pem and cli-key.pem from drover tls init, or --client-cert and --client-key)"
	case errors.As(err, &unknownCA) && !c.caGiven:
		return " (no CA was given, and the server's certificate is not signed by one this system trusts: give the cluster's ca.pem with --ca-cert or DROVER_CACERT, or --tls-dir or DROVER_TLS_DIR)"
	case errors.As(err, &unknownCA) && c.caFile != "":
		return fmt.Sprintf(" (the server's certificate is not signed by the CA in %s: check --ca-cert, --tls-dir, DROVER_CACERT or DROVER_TLS_DIR)", c.caFile)
	case errors.As(err, &unknownCA):
		return " (the server's certificate is not signed by the CA you gave: check --tls-dir or DROVER_TLS_DIR)"
	case errors.As(err, &hostname):
		return fmt.Sprintf(" (the server's certificate is not for %q: drover's carry %s; set --tls-server-name or DROVER_TLS_SERVER_NAME to the name it carries)", hostname.Host, pki.ServerName)
	// net/http says this in text only: it has no type for it.
	case strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return " (that server speaks plain HTTP: use an http:// address)"
	case errors.As(err, new(*tls.CertificateVerificationError)) || errors.As(err, new(tls.RecordHeaderError)) || errors.As(err, &alert):
		return " (a TLS problem: check --tls-dir or DROVER_TLS_DIR)"
	}
	return " (is it running? set --address or DROVER_ADDR)"
}

// certificateRequired is TLS 1.3's alert for a missing client certificate.
const certificateRequired tls.AlertError = 116
