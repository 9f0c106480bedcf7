package httpapi

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/drover-org/drover/internal/link"
)

// Limits on what one client can hold of a daemon's HTTP server (the API
// server's and the agent's alike): slow or idle connections are closed,
// and the number of open connections is bounded, so that thousands of
// stalled clients cannot starve the agents and operators (reliability
// case 39, CVE-2020-7218). There is deliberately no http.Server
// WriteTimeout or ReadTimeout: a blocking query (?index=&wait=, up to
// maxQueryWait) and a log follow (drover logs -f) hold a request open for
// minutes, and those server-wide deadlines would cut them. The body read
// and each response write get their own deadline instead (limitHandler).
const (
	// DefaultReadHeaderTimeout bounds the request line and headers: a few
	// hundred bytes that any client sends at once. A slowloris client
	// trickling them is closed after this.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultBodyReadTimeout bounds reading a request body, from the
	// moment the handler starts: the largest body (inputlimit.MaxBytes, 1 MiB)
	// needs only 35 KB/s to arrive in time.
	DefaultBodyReadTimeout = 30 * time.Second
	// DefaultWriteStallTimeout bounds each write of a response: a client
	// that stops reading (its TCP window closed) is cut off after this.
	// Time between writes is free, so a long poll and a follow are not.
	DefaultWriteStallTimeout = 30 * time.Second
	// DefaultIdleTimeout closes a keep-alive connection with no request
	// for this long. Longer than Go's client default (90 s), so that a
	// client usually closes first and never races a request against our
	// close.
	DefaultIdleTimeout = 2 * time.Minute
	// DefaultMaxHeaderBytes: our requests carry a handful of short headers
	// (a node secret, later a token); net/http's default is 1 MiB.
	DefaultMaxHeaderBytes = 64 << 10
	// DefaultMaxConns bounds open connections per listener. An agent
	// holds one to a server over TLS (HTTP/2 carries its assignments'
	// blocking query, heartbeats and status reports), two over plain HTTP;
	// so this admits 10,000 agents over TLS with 6,384 to spare for
	// operators, the web UI and agents whose old connection has not closed
	// yet (8,000 agents over plain HTTP). Past it, new connections wait in
	// the kernel's accept queue until one closes. A process serves fewer
	// when its open-file limit is lower (cmd/drover connLimit); the
	// server's --http-max-conns changes it.
	DefaultMaxConns = 16384
)

// Limits are the limits of one HTTP server; tests shorten them.
// A zero field takes its default.
type Limits struct {
	// TLS, when set, serves HTTPS with it (pki.ServerConfig: mutual TLS).
	// Not a limit, but every listener's other setting.
	TLS               *tls.Config
	ReadHeaderTimeout time.Duration
	BodyReadTimeout   time.Duration
	WriteStallTimeout time.Duration
	IdleTimeout       time.Duration
	MaxHeaderBytes    int
	MaxConns          int
	// LinkContext, when set, gives the context each link's requests
	// start from (link.Server.ConnContext): not a limit either, but what
	// a server keeps per agent (its session).
	LinkContext func(context.Context) context.Context
}

func (l Limits) withDefaults() Limits {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&l.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	def(&l.BodyReadTimeout, DefaultBodyReadTimeout)
	def(&l.WriteStallTimeout, DefaultWriteStallTimeout)
	def(&l.IdleTimeout, DefaultIdleTimeout)
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if l.MaxConns <= 0 {
		l.MaxConns = DefaultMaxConns
	}
	return l
}

// Serve serves h on ln within lim until the returned server is shut down.
// log hears when the connection limit is reached.
func Serve(ln net.Listener, h http.Handler, lim Limits, log *slog.Logger) *Server {
	s, ln := newServer(ln, h, lim, log)
	go s.Serve(ln)
	return s
}

// Server is an HTTP server with the links it serves (internal/link: its
// agents' connections), which net/http does not know of: its Shutdown
// and Close take both down.
type Server struct {
	*http.Server
	links *link.Server // nil without TLS
}

// Shutdown stops accepting connections and drains those open, within
// ctx: net/http's HTTP/1.1 and HTTP/2 connections (their requests
// finish, idle ones close) and, at the same time, the links (requests
// running finish and parked blocking queries answer what is there now;
// link.Server.Shutdown). It returns once both are done, or with ctx's
// error when ctx ends first: Close then cuts what is left.
//
// Not http.Server.RegisterOnShutdown: net/http runs those hooks on
// goroutines of their own and does not wait for them, so a link's
// answers would race the process's exit.
func (s *Server) Shutdown(ctx context.Context) error {
	if s.links == nil {
		return s.Server.Shutdown(ctx)
	}
	linked := make(chan error, 1)
	go func() { linked <- s.links.Shutdown(ctx) }()
	err := s.Server.Shutdown(ctx)
	if lerr := <-linked; err == nil {
		err = lerr
	}
	return err
}

// Close closes the listeners and every connection, links included, at
// once: requests running get no answer.
func (s *Server) Close() error {
	err := s.Server.Close()
	if s.links != nil {
		s.links.Close()
	}
	return err
}

// hpackTableSize bounds the header compression table of each HTTP/2
// connection's responses: 1 byte, which holds no header (an entry costs
// 32 bytes more than its name and value), as net/http takes 0 for its
// default of 4 KB.
const hpackTableSize = 1

// newServer returns a Server for h within lim, and ln bounded to
// lim.MaxConns connections: serve the one on the other.
func newServer(ln net.Listener, h http.Handler, lim Limits, log *slog.Logger) (*Server, net.Listener) {
	lim = lim.withDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &http.Server{
		Handler:           limitHandler(h, lim.BodyReadTimeout, lim.WriteStallTimeout),
		ReadHeaderTimeout: lim.ReadHeaderTimeout,
		IdleTimeout:       lim.IdleTimeout,
		MaxHeaderBytes:    lim.MaxHeaderBytes,
		// net/http's own complaints (accept errors such as running out of
		// file descriptors, a handler's panic) go to our log.
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	ln = newLimitListener(ln, lim.MaxConns, log)
	if lim.TLS != nil {
		// The handshake runs under ReadHeaderTimeout, before net/http
		// sees the connection (newHandshakeListener says why). Offering h2
		// lets a client's concurrent requests share one connection: an
		// agent's blocking query, heartbeats and status reports. An
		// upgrade (exec) still gets an HTTP/1.1 connection of its own:
		// Go's client asks for one without h2.
		cfg := lim.TLS.Clone()
		// The link first: a client that offers it (an agent) is
		// served by links (internal/link says why).
		cfg.NextProtos = []string{link.Proto, "h2", "http/1.1"}
		s.TLSConfig = cfg // net/http serves HTTP/2 when this offers h2
		// Each connection keeps HPACK tables of the headers it has seen,
		// up to 4 KB each way by default. The responses' table holds
		// nothing: the few headers of an answer are sent whole. The
		// requests' table stays at HTTP/2's default: a client may send
		// requests before it has read the server's SETTINGS, its table
		// at the default until the server's setting is acknowledged, and
		// net/http applies a smaller one at once, so that it went away
		// with COMPRESSION_ERROR from a client whose second request
		// referred to a header its first had added
		// (TestHTTP2RequestsBeforeTheServersSettingsAreRead). An agent's
		// own headers fill a few hundred bytes of it.
		s.HTTP2 = &http.HTTP2Config{MaxEncoderHeaderTableSize: hpackTableSize}
		if cfg.GetConfigForClient == nil && !cfg.SessionTicketsDisabled {
			// No session tickets for a link: an agent holds its one
			// connection for as long as it runs and does not resume
			// (its client keeps no session cache), and a ticket is
			// work and garbage in every handshake (the session it
			// seals holds the agent's certificate), of which 10,000
			// agents connecting at once leave holes in the heap.
			links := cfg.Clone()
			links.SessionTicketsDisabled = true
			cfg.GetConfigForClient = func(h *tls.ClientHelloInfo) (*tls.Config, error) {
				if slices.Contains(h.SupportedProtos, link.Proto) {
					return links, nil
				}
				return nil, nil
			}
		}
		links := &link.Server{Handler: s.Handler, Log: log, WriteTimeout: lim.WriteStallTimeout, MaxHeaderBytes: lim.MaxHeaderBytes, ConnContext: lim.LinkContext}
		ln = newHandshakeListener(ln, cfg, lim.ReadHeaderTimeout, log, links)
		return &Server{Server: s, links: links}, ln
	}
	return &Server{Server: s}, ln
}

// limitHandler gives each request a deadline for reading its body and each
// response write a deadline of its own. The body deadline is lifted once
// the body is read: net/http then reads the connection in the background
// to notice a client going away, and a deadline passing there would
// cancel the request's context (and with it a long poll).
func limitHandler(h http.Handler, bodyTimeout, writeStall time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if r.Body != nil && r.Body != http.NoBody {
			if rc.SetReadDeadline(time.Now().Add(bodyTimeout)) == nil {
				r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc, timeout: bodyTimeout}
			}
		}
		sw := &stallWriter{ResponseWriter: w, rc: rc, stall: writeStall}
		// No deadline until the first write: one left by the connection's
		// previous request is stale, and over HTTP/2 a deadline is a timer
		// that resets the stream when it fires, even while a blocking
		// query waits with nothing to write.
		rc.SetWriteDeadline(time.Time{})
		h.ServeHTTP(sw, r)
		sw.arm() // for net/http's final flush of what the handler left buffered
	})
}

// deadlineBody lifts the body read deadline at the end of the body. After
// any other error the deadline stays: net/http then fails at once to
// discard the rest of a body the client is still trickling. The deadline
// passing is a bodyTimeoutError.
type deadlineBody struct {
	io.ReadCloser
	rc      *http.ResponseController
	timeout time.Duration
	done    bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == io.EOF && !b.done:
		b.done = true
		b.rc.SetReadDeadline(time.Time{})
	case errors.Is(err, os.ErrDeadlineExceeded):
		err = &bodyTimeoutError{timeout: b.timeout, err: err}
	}
	return n, err
}

// bodyTimeoutError is a request body that did not arrive within timeout.
type bodyTimeoutError struct {
	timeout time.Duration
	err     error
}

func (e *bodyTimeoutError) Error() string {
	return fmt.Sprintf("request body not read within %s: %v", e.timeout, e.err)
}

func (e *bodyTimeoutError) Unwrap() error { return e.err }

// stallWriter sets the connection's write deadline before each write and
// flush and lifts it after, so a write that the client does not take
// within stall fails (and the connection is closed) while waiting between
// writes costs nothing: over HTTP/2 a deadline left armed would reset a
// stream that is only waiting (a log follow with nothing new).
type stallWriter struct {
	http.ResponseWriter
	rc    *http.ResponseController
	stall time.Duration
}

func (w *stallWriter) arm() { w.rc.SetWriteDeadline(time.Now().Add(w.stall)) }

func (w *stallWriter) disarm() { w.rc.SetWriteDeadline(time.Time{}) }

func (w *stallWriter) Write(p []byte) (int, error) {
	w.arm()
	defer w.disarm()
	return w.ResponseWriter.Write(p)
}

// FlushError is what http.ResponseController.Flush calls.
func (w *stallWriter) FlushError() error {
	w.arm()
	defer w.disarm()
	return w.rc.Flush()
}

func (w *stallWriter) Flush() { w.FlushError() }

// Unwrap lets http.ResponseController reach the connection.
func (w *stallWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
