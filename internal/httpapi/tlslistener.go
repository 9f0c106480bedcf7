package httpapi

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/drover-org/drover/internal/link"
)

// newHandshakeListener returns ln serving TLS with cfg, whose Accept
// returns only connections whose handshake is done: each handshake runs
// on a goroutine of its own, within timeout, and that goroutine ends with
// it.
//
// tls.NewListener would leave the handshake to net/http, which runs it on
// the connection's serving goroutine, and over HTTP/2 that goroutine then
// runs the connection's frame loop for as long as the connection is open.
// A handshake with a client certificate to verify takes the goroutine's
// stack to 32 KB; the runtime halves an idle goroutine's stack at a
// collection only while it uses under a quarter of it, which HTTP/2's
// loop (about 3.6 KB deep while it waits) stops at 16 KB. Started after
// the handshake, the loop's goroutine stays at 8 KB: 8 KB less for each
// connection an idle agent holds (TestIdleTLSConnsCostLittleMemory).
//
// What net/http did with a failed handshake is done here: a client that
// spoke plain HTTP is answered so (internal/client explains that answer),
// and the failure is logged.
//
// A connection whose handshake chose the link (internal/link: an agent's)
// is served by links instead, on a goroutine started for it; closing the
// listener leaves it to links (Server's Shutdown drains it, Close cuts
// it).
func newHandshakeListener(ln net.Listener, cfg *tls.Config, timeout time.Duration, log *slog.Logger, links *link.Server) net.Listener {
	l := &handshakeListener{
		Listener: ln, cfg: cfg, timeout: timeout, log: log, links: links,
		ready: make(chan net.Conn), errc: make(chan error), closed: make(chan struct{}),
		pending: map[net.Conn]struct{}{},
	}
	go l.acceptLoop()
	return l
}

type handshakeListener struct {
	net.Listener
	cfg     *tls.Config
	timeout time.Duration
	log     *slog.Logger
	links   *link.Server

	ready  chan net.Conn // connections whose handshake is done
	errc   chan error    // the inner listener's errors, for Accept to return
	closed chan struct{}
	once   sync.Once

	mu      sync.Mutex
	pending map[net.Conn]struct{} // connections in their handshake
}

// Accept returns the next connection whose handshake is done, or the
// inner listener's next error. An error that net/http retries (running
// out of descriptors) is retried: acceptLoop waits until it is taken.
func (l *handshakeListener) Accept() (net.Conn, error) {
	select {
	case <-l.closed:
		return nil, net.ErrClosed
	default:
	}
	select {
	case c := <-l.ready:
		return c, nil
	case err := <-l.errc:
		return nil, err
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

// Close closes the listener and the connections still in their
// handshake. Links are not closed: http.Server.Shutdown closes its
// listeners first, and a link is drained as its other connections are
// (Server.Shutdown).
func (l *handshakeListener) Close() error {
	err := l.Listener.Close()
	l.once.Do(func() {
		close(l.closed)
		l.mu.Lock()
		defer l.mu.Unlock()
		for c := range l.pending {
			c.Close()
		}
	})
	return err
}

func (l *handshakeListener) acceptLoop() {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			select {
			case l.errc <- err:
			case <-l.closed:
				return
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if !l.hold(c) {
			c.Close()
			return
		}
		go l.handshake(c)
	}
}

// hold notes c as in its handshake, unless the listener is closed: Close
// closes what it holds.
func (l *handshakeListener) hold(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.closed:
		return false
	default:
	}
	l.pending[c] = struct{}{}
	return true
}

// release takes c out of the handshakes.
func (l *handshakeListener) release(c net.Conn) {
	l.mu.Lock()
	delete(l.pending, c)
	l.mu.Unlock()
}

func (l *handshakeListener) handshake(c net.Conn) {
	defer l.release(c)
	nc := c
	if l.links != nil {
		nc = link.WrapConn(c) // an agent's link is read only when it has bytes
	}
	tc := tls.Server(nc, l.cfg)
	ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
	defer cancel()
	c.SetDeadline(time.Now().Add(l.timeout))
	if err := tc.HandshakeContext(ctx); err != nil {
		reason := err.Error()
		var re tls.RecordHeaderError
		if errors.As(err, &re) && re.Conn != nil && looksLikeHTTP(re.RecordHeader) {
			io.WriteString(re.Conn, "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")
			reason = "client sent an HTTP request to an HTTPS server"
		}
		c.Close()
		select {
		case <-l.closed: // closed by Close: not the client's failure
		default:
			l.log.Warn("TLS handshake failed", "remote", c.RemoteAddr().String(), "err", reason)
		}
		return
	}
	c.SetDeadline(time.Time{})
	if l.links != nil && tc.ConnectionState().NegotiatedProtocol == link.Proto {
		// On a goroutine of its own (ServeConn says why); links closes
		// it when it is shut down, and closes at once one that arrives
		// after. Out of the handshakes first: the link may serve
		// requests before this goroutine runs again, and the listener's
		// Close must not cut it then.
		l.release(c)
		go l.links.ServeConn(tc)
		return
	}
	select {
	case l.ready <- tc:
	case <-l.closed:
		c.Close()
	}
}

// looksLikeHTTP says whether the first five bytes a client sent are those
// of a plain HTTP request.
func looksLikeHTTP(hdr [5]byte) bool {
	switch string(hdr[:]) {
	case "GET /", "HEAD ", "POST ", "PUT /", "OPTIO", "DELET", "PATCH":
		return true
	}
	return false
}
