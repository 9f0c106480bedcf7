package link

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// Transport is an http.RoundTripper that sends requests over links: one
// connection per server address, dialed when first needed and again after
// it closes. A server whose handshake does not choose Proto is sent
// requests through Fallback, as are requests a link cannot carry
// (WithoutLink, upgrades).
type Transport struct {
	// TLS is the client's configuration; Proto is offered in its stead
	// of its NextProtos.
	TLS *tls.Config
	// Fallback carries what does not go over a link.
	Fallback http.RoundTripper
	// DialTimeout bounds a connection's dial and handshake (default 10s).
	DialTimeout time.Duration

	mu     sync.Mutex
	conns  map[string]*clientConn // by host:port
	dials  map[string]*dial       // dials in progress
	noLink map[string]time.Time   // servers that chose another protocol, until when
}

// noLinkFor is how long a server that did not choose Proto is spoken to
// through Fallback before the link is offered again (it may be upgraded).
const noLinkFor = time.Minute

type dial struct {
	done chan struct{}
	cc   *clientConn
	err  error
}

type withoutLinkKey struct{}

// WithoutLink marks requests made with the returned context as not for a
// link: their answers stream (a log follow, an event stream), and a link
// carries each answer whole.
func WithoutLink(ctx context.Context) context.Context {
	return context.WithValue(ctx, withoutLinkKey{}, true)
}

// ErrRefused is a request a server did not run, and will not: it is
// shutting down (Server.Shutdown). Sending it to another server is safe.
var ErrRefused = errors.New("link: the server is shutting down and did not run the request; retry another server")

// errNotOffered is a server that completed the handshake without choosing
// the link.
var errNotOffered = errors.New("link: server does not speak " + Proto)

// RoundTrip sends req over the link to its server.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Context().Value(withoutLinkKey{}) != nil || req.Header.Get("Upgrade") != "" || req.URL.Scheme != "https" {
		return t.Fallback.RoundTrip(req)
	}
	host := req.URL.Host
	t.mu.Lock()
	if until, ok := t.noLink[host]; ok && time.Now().Before(until) {
		t.mu.Unlock()
		return t.Fallback.RoundTrip(req)
	}
	t.mu.Unlock()
	cc, err := t.conn(req.Context(), host)
	if errors.Is(err, errNotOffered) {
		return t.Fallback.RoundTrip(req)
	}
	if err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	return cc.roundTrip(req)
}

// CloseIdleConnections takes every link out of use, closing those with no
// request on them, and closes Fallback's idle connections: the client's
// next request dials anew.
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	conns := t.conns
	t.conns = nil
	t.mu.Unlock()
	for _, cc := range conns {
		cc.mu.Lock()
		idle := len(cc.pending) == 0
		cc.mu.Unlock()
		if idle {
			cc.close(errors.New("link: closed by its client"))
		}
		// A link with requests on it is left to them: the next
		// request dials anew, and the server closes this one once it
		// is idle for a minute (or a ping finds it dead).
	}
	if ci, ok := t.Fallback.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

// conn returns the link to host, dialing it (once, for every request that
// wants it meanwhile) when there is none.
func (t *Transport) conn(ctx context.Context, host string) (*clientConn, error) {
	t.mu.Lock()
	if cc := t.conns[host]; cc != nil && cc.usable() {
		t.mu.Unlock()
		return cc, nil
	}
	d := t.dials[host]
	if d == nil {
		d = &dial{done: make(chan struct{})}
		if t.dials == nil {
			t.dials = map[string]*dial{}
		}
		t.dials[host] = d
		go t.dial(host, d)
	}
	t.mu.Unlock()
	select {
	case <-d.done:
		return d.cc, d.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (t *Transport) dial(host string, d *dial) {
	timeout := t.DialTimeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	cfg := t.TLS.Clone()
	// HTTP's protocols too: a server that does not speak the link
	// chooses one of them, where offering the link alone would fail the
	// handshake.
	cfg.NextProtos = []string{Proto, "h2", "http/1.1"}
	if cfg.ServerName == "" {
		h, _, err := net.SplitHostPort(host)
		if err != nil {
			h = host
		}
		cfg.ServerName = h
	}
	addr := host
	if _, _, err := net.SplitHostPort(host); err != nil {
		addr = net.JoinHostPort(host, "443") // https's, as net/http dials it
	}
	dl := &tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}, Config: cfg}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	c, err := dl.DialContext(ctx, "tcp", addr)
	cancel()
	if errors.Is(err, context.DeadlineExceeded) {
		// The handshake did not finish in time: a dial failure (the
		// client tries its next server), not the caller's deadline.
		err = &net.OpError{Op: "dial", Net: "tcp", Err: fmt.Errorf("no TLS handshake within %s", timeout)}
	}
	if err == nil {
		tc := c.(*tls.Conn)
		if tc.ConnectionState().NegotiatedProtocol == Proto {
			d.cc = newClientConn(tc)
		} else {
			c.Close()
			err = errNotOffered
		}
	}
	d.err = err
	t.mu.Lock()
	delete(t.dials, host)
	switch {
	case d.cc != nil:
		if t.conns == nil {
			t.conns = map[string]*clientConn{}
		}
		t.conns[host] = d.cc
	case errors.Is(err, errNotOffered):
		if t.noLink == nil {
			t.noLink = map[string]time.Time{}
		}
		t.noLink[host] = time.Now().Add(noLinkFor)
	}
	t.mu.Unlock()
	close(d.done)
}

// clientConn is one link: a reader goroutine delivers each response to
// the request waiting for it.
type clientConn struct {
	c *tls.Conn

	wmu sync.Mutex

	mu      sync.Mutex
	next    uint64
	pending map[uint64]chan *http.Response // a nil response: refused
	err     error                          // set once the connection is closed
	done    chan struct{}
	// refusing: the server refused a request (it is shutting down), so
	// new requests go to a new connection.
	refusing bool
}

func newClientConn(c *tls.Conn) *clientConn {
	cc := &clientConn{c: c, pending: map[uint64]chan *http.Response{}, done: make(chan struct{})}
	go cc.read()
	return cc
}

// usable reports whether new requests may be sent on cc.
func (cc *clientConn) usable() bool {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.err == nil && !cc.refusing
}

func (cc *clientConn) close(err error) {
	cc.mu.Lock()
	if cc.err == nil {
		cc.err = err
		close(cc.done)
	}
	cc.mu.Unlock()
	cc.c.Close()
}

// read delivers responses.
func (cc *clientConn) read() {
	var hdr [headerLen]byte
	br := bufio.NewReader(&aliveReader{cc: cc})
	for {
		typ, id, msg, err := readFrame(br, &hdr, maxResponseFrame)
		if err != nil {
			cc.close(fmt.Errorf("link to %s: %w", cc.c.RemoteAddr(), err))
			return
		}
		if typ != frameResponse && typ != frameRefused {
			continue // a pong, or what a later server may send
		}
		cc.mu.Lock()
		ch := cc.pending[id]
		delete(cc.pending, id)
		if typ == frameRefused {
			cc.refusing = true
		}
		cc.mu.Unlock()
		if ch == nil {
			continue // its request was given up
		}
		if typ == frameRefused {
			ch <- nil
			continue
		}
		resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(msg)), nil)
		if err != nil {
			cc.close(fmt.Errorf("link: malformed response: %w", err))
			return
		}
		ch <- resp
	}
}

// aliveReader reads the connection, and finds out a server that went
// silent while requests wait on it: after pingAfter without a byte it
// pings, and when nothing comes within pingTimeout after, it fails. A
// deadline passing mid-frame loses nothing: crypto/tls keeps what it has
// read, and the read goes on where it was. With no request waiting it
// does not ping: the server closes a link idle for a minute.
type aliveReader struct {
	cc     *clientConn
	pinged bool
}

func (r *aliveReader) Read(p []byte) (int, error) {
	c := r.cc.c
	for {
		wait := pingAfter
		if r.pinged {
			wait = pingTimeout
		}
		c.SetReadDeadline(time.Now().Add(wait))
		n, err := c.Read(p)
		if n > 0 {
			r.pinged = false
			return n, nil
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			return 0, err
		}
		if r.pinged {
			return 0, fmt.Errorf("the server did not answer a ping within %s: %w", pingTimeout, err)
		}
		r.cc.mu.Lock()
		waiting := len(r.cc.pending) > 0
		r.cc.mu.Unlock()
		if waiting {
			if err := r.cc.write(appendFrame(nil, framePing, 0, nil)); err != nil {
				return 0, err
			}
			r.pinged = true
		}
	}
}

func (cc *clientConn) write(frame []byte) error {
	cc.wmu.Lock()
	defer cc.wmu.Unlock()
	cc.c.SetWriteDeadline(time.Now().Add(pingTimeout))
	_, err := cc.c.Write(frame)
	return err
}

func (cc *clientConn) roundTrip(req *http.Request) (*http.Response, error) {
	var msg bytes.Buffer
	if req.Body != nil && req.Body != http.NoBody {
		// Whole, so that the message says its length.
		body, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		r2 := req.Clone(req.Context())
		r2.Body, r2.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		req = r2
	}
	if err := req.Write(&msg); err != nil {
		return nil, err
	}
	if msg.Len() > maxRequestFrame {
		return nil, fmt.Errorf("link: a request of %d bytes; a link carries at most %d", msg.Len(), maxRequestFrame)
	}
	ch := make(chan *http.Response, 1)
	cc.mu.Lock()
	if cc.err != nil {
		err := cc.err
		cc.mu.Unlock()
		return nil, err
	}
	cc.next++
	id := cc.next
	cc.pending[id] = ch
	cc.mu.Unlock()
	if err := cc.write(appendFrame(make([]byte, 0, headerLen+msg.Len()), frameRequest, id, msg.Bytes())); err != nil {
		err = fmt.Errorf("link to %s: sending: %w", cc.c.RemoteAddr(), err)
		cc.close(err)
		return nil, err
	}
	select {
	case resp := <-ch:
		return answered(req, resp)
	case <-cc.done:
		select {
		case resp := <-ch:
			return answered(req, resp)
		default:
		}
		return nil, cc.err
	case <-req.Context().Done():
		cc.mu.Lock()
		delete(cc.pending, id)
		cc.mu.Unlock()
		cc.write(appendFrame(nil, frameCancel, id, nil))
		return nil, req.Context().Err()
	}
}

// answered is req's answer: resp, or ErrRefused when the server refused
// it (nil).
func answered(req *http.Request, resp *http.Response) (*http.Response, error) {
	if resp == nil {
		return nil, ErrRefused // http.Client names the request
	}
	resp.Request = req
	return resp, nil
}
