package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/drover-org/drover/internal/inputlimit"
	"github.com/drover-org/drover/internal/registry"
	"github.com/drover-org/drover/internal/spec"
)

// Blocking queries wait at most this long (default, and cap).
const (
	defaultQueryWait = 5 * time.Minute
	maxQueryWait     = 10 * time.Minute
)

// apiError is an error with its HTTP status: the one place where error kinds
// become statuses.
type apiError struct {
	status   int
	msg      string
	problems []spec.Problem
}

func (e *apiError) Error() string { return e.msg }

func badRequest(format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) *apiError {
	return &apiError{status: http.StatusNotFound, msg: fmt.Sprintf(format, args...)}
}

// statusOf maps an error to its HTTP status. Client mistakes are 4xx; only
// an unexpected failure of ours or of etcd is 5xx.
func statusOf(err error) (int, string, []spec.Problem) {
	var ae *apiError
	var ps spec.Problems
	switch {
	case errors.As(err, &ae):
		return ae.status, ae.msg, ae.problems
	case errors.As(err, &ps):
		return http.StatusUnprocessableEntity, "the job is not valid", ps
	case errors.Is(err, registry.ErrNotFound):
		return http.StatusNotFound, err.Error(), nil
	case errors.Is(err, registry.ErrConflict):
		return http.StatusConflict, err.Error(), nil
	case errors.Is(err, registry.ErrInvalid):
		return http.StatusBadRequest, err.Error(), nil
	case errors.Is(err, registry.ErrTooLarge):
		return http.StatusRequestEntityTooLarge, err.Error(), nil
	case errors.Is(err, registry.ErrUnavailable):
		// registry.UnavailableError says what to check.
		return http.StatusServiceUnavailable, err.Error(), nil
	}
	return http.StatusInternalServerError, err.Error(), nil
}

// handlerFunc is an API handler that returns its error instead of writing it.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// wrap is the single door every API request passes through: panic
// recovery, the authorization hook, and error rendering.
func (s *Server) wrap(a access, h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				s.log.Error("panic in handler", "path", r.URL.Path, "panic", p)
				writeError(w, http.StatusInternalServerError, "internal error", nil)
			}
		}()
		ar, done, err := s.authorize(r, a)
		defer done()
		if ar != nil && ar.URL.Query().Has("consistent") {
			ar = ar.WithContext(context.WithValue(ar.Context(), consistentRead{}, true))
		}
		rw := &answerWriter{ResponseWriter: w}
		if err == nil {
			err = h(rw, ar)
		}
		if err == errHijacked {
			return // the handler took the connection over and has answered
		}
		if ar != nil && context.Cause(ar.Context()) == errTokenRevoked {
			// A blocking query still waiting gets a 403; a stream already
			// answering (drover logs -f) just ends.
			if !rw.answered {
				writeError(w, http.StatusForbidden, errTokenRevoked.Error(), nil)
			}
			return
		}
		if err != nil {
			status, msg, problems := statusOf(err)
			// A body that came too slowly cancels the request's context
			// too (net/http does on any failed read of the connection), but
			// its client is still there to be told.
			if r.Context().Err() != nil && status != http.StatusRequestTimeout {
				return // the client went away (or we are shutting down): nobody to answer
			}
			if status >= 500 {
				s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
			}
			writeError(w, status, msg, problems)
		}
	})
}

// maxProblems bounds the problems an error answer lists.
const maxProblems = 100

func writeError(w http.ResponseWriter, status int, msg string, problems []spec.Problem) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if n := len(problems); n > maxProblems {
		// A generated job with 100,000 bad groups must not get a 13 MB
		// answer: the first ones show what is wrong.
		problems = append(problems[:maxProblems:maxProblems], spec.Problem{Message: fmt.Sprintf("... and %d more problems", n-maxProblems)})
	}
	json.NewEncoder(w).Encode(spec.APIError{Error: msg, Problems: problems})
}

func writeJSON(w http.ResponseWriter, index int64, v any) error {
	w.Header().Set("Content-Type", "application/json")
	if index > 0 {
		w.Header().Set("X-Drover-Index", strconv.FormatInt(index, 10))
	}
	// Compact: indenting doubles the encoding cost of large lists; the CLI
	// pretty-prints its own -o json.
	return json.NewEncoder(w).Encode(v)
}

// readBody reads a request body up to inputlimit.MaxBytes; a larger body is
// a 413, one that does not arrive within the body read timeout a 408.
// Every body the API takes is JSON: one nested deeper than
// inputlimit.MaxDepth is a 400 before anything parses it.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	r.Body = http.MaxBytesReader(w, r.Body, inputlimit.MaxBytes)
	b, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		var late *bodyTimeoutError
		switch {
		case errors.As(err, &mbe):
			return nil, &apiError{status: http.StatusRequestEntityTooLarge,
				msg: fmt.Sprintf("request body is larger than the %d byte limit", inputlimit.MaxBytes)}
		case errors.As(err, &late):
			return nil, &apiError{status: http.StatusRequestTimeout, msg: fmt.Sprintf(
				"the request body did not arrive within %s (%d bytes came); nothing was applied: send the request again, over a faster connection", late.timeout, len(b))}
		}
		return nil, badRequest("cannot read request body: %v", err)
	}
	if err := inputlimit.JSON(b); err != nil {
		return nil, badRequest("the body %v", err)
	}
	return b, nil
}

// decodeStrict decodes a JSON body into v, refusing unknown fields, wrong
// types and data after the object with a 400 that says what was expected
// ("an allocation status update") and where the problem is.
func decodeStrict(body []byte, v any, what string) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("the body is not %s: %s", what, jsonErr(body, err))
	}
	if dec.More() {
		return badRequest("the body has data after the JSON object")
	}
	return nil
}

// pathName reads a path segment that names a job, node or alloc and checks
// it against the allow-list before it can reach a registry key.
func pathName(r *http.Request, key, what string) (string, error) {
	v := r.PathValue(key)
	if msg := spec.CheckName(v); msg != "" {
		return "", badRequest("%s %s", what, msg)
	}
	return v, nil
}

// queryOptions reads ?index=N&wait=D.
func queryOptions(r *http.Request) (int64, time.Duration, error) {
	q := r.URL.Query()
	var index int64
	if s := q.Get("index"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 0 {
			return 0, 0, badRequest("index must be a non-negative integer, got %q", s)
		}
		index = v
	}
	wait := defaultQueryWait
	if s := q.Get("wait"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return 0, 0, badRequest("wait must be a duration such as \"30s\", got %q", s)
		}
		wait = min(d, maxQueryWait)
	}
	return index, wait, nil
}

// blockingQuery waits (when index > 0) for one of topics to change past
// index, then runs read.
func (s *Server) blockingQuery(r *http.Request, read func() error, topics ...string) error {
	index, wait, err := queryOptions(r)
	if err != nil {
		return err
	}
	if index > 0 {
		s.hub.wait(r.Context(), index, wait, topics...)
	}
	return read()
}

func logRequests(log *slog.Logger, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.Debug("request", "method", r.Method, "path", r.URL.Path)
		h.ServeHTTP(w, r)
	})
}

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

// HTTPLimits are the limits of one HTTP server; tests shorten them.
// A zero field takes its default.
type HTTPLimits struct {
	// TLS, when set, serves HTTPS with it (pki.ServerConfig: mutual TLS).
	// Not a limit, but every listener's other setting.
	TLS               *tls.Config
	ReadHeaderTimeout time.Duration
	BodyReadTimeout   time.Duration
	WriteStallTimeout time.Duration
	IdleTimeout       time.Duration
	MaxHeaderBytes    int
	MaxConns          int
}

func (l HTTPLimits) withDefaults() HTTPLimits {
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
func Serve(ln net.Listener, h http.Handler, lim HTTPLimits, log *slog.Logger) *http.Server {
	s, ln := NewHTTPServer(ln, h, lim, log)
	go s.Serve(ln)
	return s
}

// NewHTTPServer returns an http.Server for h within lim, and ln bounded to
// lim.MaxConns connections: serve the one on the other.
func NewHTTPServer(ln net.Listener, h http.Handler, lim HTTPLimits, log *slog.Logger) (*http.Server, net.Listener) {
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
	ln = LimitListener(ln, lim.MaxConns, log)
	if lim.TLS != nil {
		// The handshake runs under ReadHeaderTimeout (net/http bounds it
		// by the shortest of its read and write timeouts). Offering h2
		// lets a client's concurrent requests share one connection: an
		// agent's blocking query, heartbeats and status reports. An
		// upgrade (exec) still gets an HTTP/1.1 connection of its own:
		// Go's client asks for one without h2.
		cfg := lim.TLS.Clone()
		cfg.NextProtos = []string{"h2", "http/1.1"}
		s.TLSConfig = cfg // net/http serves HTTP/2 when this offers h2
		ln = tls.NewListener(ln, cfg)
	}
	return s, ln
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

// LimitListener returns ln accepting at most n connections open at once;
// Accept waits for one to close. (x/net's netutil.LimitListener does the
// same; x/net is only an indirect dependency here.) log hears, at most
// once a minute, that the limit was reached.
func LimitListener(ln net.Listener, n int, log *slog.Logger) net.Listener {
	return &limitListener{Listener: ln, sem: make(chan struct{}, n), closed: make(chan struct{}), log: log}
}

type limitListener struct {
	net.Listener
	sem       chan struct{}
	closed    chan struct{}
	closeOnce sync.Once
	log       *slog.Logger

	mu     sync.Mutex
	warned time.Time
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	default:
		l.full()
		select {
		case l.sem <- struct{}{}:
		case <-l.closed:
			return nil, net.ErrClosed
		}
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
}

func (l *limitListener) full() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now := time.Now(); now.Sub(l.warned) >= time.Minute {
		l.warned = now
		l.log.Warn("HTTP connection limit reached; new connections wait until one closes", "addr", l.Addr(), "max_conns", cap(l.sem))
	}
}

func (l *limitListener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.closed) })
	return err
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// errHijacked is a handler's "I took the connection over" (exec).
var errHijacked = errors.New("connection hijacked")

// answerWriter notes whether a handler began its answer.
type answerWriter struct {
	http.ResponseWriter
	answered bool
}

func (a *answerWriter) WriteHeader(code int) {
	a.answered = true
	a.ResponseWriter.WriteHeader(code)
}

func (a *answerWriter) Write(b []byte) (int, error) {
	a.answered = true
	return a.ResponseWriter.Write(b)
}

// Unwrap lets http.NewResponseController reach the connection (Flush,
// deadlines).
func (a *answerWriter) Unwrap() http.ResponseWriter { return a.ResponseWriter }
