package link

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// ErrParked is what a handler returns when it parked its request (Park):
// it has answered nothing, and the link runs the request again later.
var ErrParked = errors.New("link: request parked")

// maxInFlight bounds the requests one connection may have running or
// parked; beyond it a request is answered 503 at once.
const maxInFlight = 64

// Server serves links: HTTP requests arriving over connections whose
// handshake chose Proto.
type Server struct {
	Handler http.Handler
	Log     *slog.Logger
	// WriteTimeout bounds one frame's write: a client that does not read
	// its answers loses its connection.
	WriteTimeout time.Duration
	// IdleTimeout closes a connection nothing arrived on for that long
	// (default 60s; a live client pings before).
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's header section, as
	// http.Server's (default 1 MB, http.DefaultMaxHeaderBytes).
	MaxHeaderBytes int
	// ConnContext, when set, gives the context a connection's requests
	// start from, made once per connection from context.Background() (as
	// http.Server's ConnContext): what a handler keeps per client.
	ConnContext func(context.Context) context.Context

	mu       sync.Mutex
	conns    map[*serverConn]struct{} // being served
	shutdown bool                     // Shutdown or Close called: no new connection is served
	drained  chan struct{}            // closed once conns is empty after Shutdown
}

// lingerAfterBye bounds how long a drained connection is read after its
// last answer and the server's close_notify, for the client to close its
// end first: a server that closed a connection with bytes of the client's
// unread would reset it, and a reset may drop answers the client has not
// read yet. A client closes as soon as it reads the close_notify.
const lingerAfterBye = time.Second

// Shutdown drains every link, as http.Server.Shutdown drains its
// connections: a connection being served keeps serving the requests it
// has, refuses those that arrive after (frameRefused: not run, to be sent
// to another server), runs its parked requests once more at once (Woken:
// they answer what is there now, as a wait that ran out does), writes
// their answers, and closes once the last is written. A connection that
// arrives after is closed at once. Shutdown returns once every connection
// has closed, or with ctx's error when ctx ends first; the connections
// still open are then left to Close, which cuts them.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.shutdown = true
	if s.drained == nil {
		s.drained = make(chan struct{})
		if len(s.conns) == 0 {
			close(s.drained)
		}
	}
	drained := s.drained
	conns := make([]*serverConn, 0, len(s.conns))
	for sc := range s.conns {
		conns = append(conns, sc)
	}
	s.mu.Unlock()
	for _, sc := range conns {
		sc.drain()
	}
	select {
	case <-drained:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close closes every link at once, as http.Server.Close does its
// connections: requests running are canceled and get no answer (their
// client sees the connection end), parked ones are taken back. A
// connection that arrives after is closed at once.
func (s *Server) Close() error {
	s.mu.Lock()
	s.shutdown = true
	conns := make([]*serverConn, 0, len(s.conns))
	for sc := range s.conns {
		conns = append(conns, sc)
	}
	s.mu.Unlock()
	for _, sc := range conns {
		sc.cut()
	}
	return nil
}

// track notes sc as served; false once the server is shut down.
func (s *Server) track(sc *serverConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shutdown {
		return false
	}
	if s.conns == nil {
		s.conns = map[*serverConn]struct{}{}
	}
	s.conns[sc] = struct{}{}
	return true
}

// untrack takes sc out once it has closed; the last one out ends a
// Shutdown's wait.
func (s *Server) untrack(sc *serverConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, sc)
	if len(s.conns) == 0 && s.drained != nil {
		select {
		case <-s.drained:
		default:
			close(s.drained)
		}
	}
}

// ServeConn serves c until it closes or goes silent. c's handshake is
// done.
//
// A connection made ready by WrapConn before its handshake is served
// without a goroutine of its own: ServeConn reads what has arrived,
// returns, and the connection's next bytes start a goroutine that reads
// them (poller). An idle agent then costs no goroutine and no stack.
// Another connection is served on the goroutine that called ServeConn,
// which it keeps until the connection ends: call it on a goroutine of its
// own that has done nothing else, since a goroutine's stack only ever
// shrinks to what it has needed (a handshake's grew it to 32 KB).
//
// Only clients with a certificate (agents) are served: the link is theirs,
// and a connection without one is closed, as is one that arrives once
// the server is shut down (Shutdown, Close).
func (s *Server) ServeConn(c *tls.Conn) {
	if len(c.ConnectionState().PeerCertificates) == 0 {
		if s.Log != nil {
			s.Log.Warn("link: a client without a certificate; closing the connection (the link is for agents)", "remote", c.RemoteAddr().String())
		}
		c.Close()
		return
	}
	// What a connection keeps is this and its calls: no context, no
	// copy of its TLS state (each request gets its own), no buffer.
	sc := &serverConn{srv: s, c: c, base: context.Background()}
	if !s.track(sc) {
		c.NetConn().Close()
		return
	}
	if s.ConnContext != nil {
		sc.base = s.ConnContext(sc.base)
	}
	sc.idle = s.IdleTimeout
	if sc.idle <= 0 {
		sc.idle = serverIdle
	}
	if sc.pollStart() {
		return
	}
	defer sc.end()
	for {
		sc.mu.Lock()
		if !sc.bye { // after it, the linger's deadline stands (goodbye)
			c.SetReadDeadline(time.Now().Add(sc.idle))
		}
		sc.mu.Unlock()
		typ, id, msg, err := sc.fr.next(c, maxRequestFrame)
		if err != nil {
			sc.readFailed(err)
			return
		}
		if !sc.handle(typ, id, msg) {
			return
		}
	}
}

// readFailed logs why reading the connection failed, unless it ended as
// connections do.
func (sc *serverConn) readFailed(err error) {
	if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && sc.srv.Log != nil {
		sc.srv.Log.Debug("link closed", "remote", sc.c.RemoteAddr().String(), "err", err)
	}
}

// handle acts on one frame read; false when the connection is to end.
func (sc *serverConn) handle(typ byte, id uint64, msg []byte) bool {
	switch typ {
	case framePing:
		if sc.saidBye() {
			return true // nothing more is written; the client closes
		}
		return sc.write(framePong, id, nil) == nil
	case frameRequest:
		sc.start(id, msg)
	case frameCancel:
		sc.cancel(id)
	default:
		if sc.srv.Log != nil {
			sc.srv.Log.Warn("link: unknown frame type; closing the connection", "remote", sc.c.RemoteAddr().String(), "type", typ)
		}
		return false
	}
	return true
}

// end closes the connection and ends what it had running or parked; the
// first call does, later ones nothing.
func (sc *serverConn) end() {
	sc.endOnce.Do(func() {
		sc.pollStop()
		sc.c.Close()
		sc.closeCalls()
		sc.srv.untrack(sc)
	})
}

// cut ends the connection without a word (no close_notify, which could
// wait on a client that does not read).
func (sc *serverConn) cut() {
	sc.c.NetConn().Close()
	sc.end()
}

type serverConn struct {
	srv *Server
	c   *tls.Conn
	fr  frameReader // the frame being read
	// idle: a connection nothing arrives on for this long is closed.
	idle    time.Duration
	endOnce sync.Once
	poll    *pollState // served without a goroutine (pollStart); nil: not
	// base is what each request's context starts from (ConnContext).
	base context.Context

	wmu sync.Mutex // one frame written at a time

	mu     sync.Mutex
	closed bool
	// draining: the server is shutting down (Server.Shutdown); new
	// requests are refused, and none is parked.
	draining bool
	// bye: drained, the last answer written and close_notify sent
	// (goodbye); what still arrives is read until the client closes.
	bye   bool
	calls []*call // running or parked; a few at a time
	// orphans are calls given up while their handler ran: out of calls,
	// but still counted against maxInFlight until the handler returns.
	orphans int
	// answering counts calls out of calls whose answer is being written:
	// a draining connection says goodbye only after the last is written.
	answering int
}

// call is one request, from its frame to its answer.
type call struct {
	id  uint64
	msg []byte // the request as it came, to be read again when it wakes

	// Under serverConn.mu:
	cancel   context.CancelFunc // while it runs
	parked   bool
	stop     func() // while parked: takes its wake-up back
	canceled bool
	orphan   bool // given up while running (serverConn.orphans)
	// answering: out of the calls, its answer being written
	// (serverConn.answering) until its run ends.
	answering bool
}

func (sc *serverConn) start(id uint64, msg []byte) {
	sc.mu.Lock()
	if sc.find(id) >= 0 || sc.closed || sc.bye {
		// After the goodbye nothing is answered: the client, once it
		// reads it, sees this request's link end unanswered, and sends
		// it elsewhere.
		sc.mu.Unlock()
		return
	}
	if sc.draining {
		sc.mu.Unlock()
		sc.write(frameRefused, id, nil) // failing, the link is ending anyway
		return
	}
	if len(sc.calls)+sc.orphans >= maxInFlight {
		sc.mu.Unlock()
		sc.answer(id, http.StatusServiceUnavailable, fmt.Sprintf("more than %d requests in flight on this connection", maxInFlight))
		return
	}
	cl := &call{id: id, msg: msg}
	sc.calls = append(sc.calls, cl)
	sc.mu.Unlock()
	go sc.run(cl, false)
}

// readers read requests out of their frames: one per running request,
// back to the pool once its handler returned (the body is read from it),
// instead of a 4 KB buffer made for each. A request's frame is in memory
// already, so the buffer needs to hold no more than a header line (a
// longer one is read in pieces; a body larger than it bypasses it), and
// thousands of requests running at once each hold one.
var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, readerSize) }}

const readerSize = 512

// run serves cl: parses it, runs the handler, and answers, or parks it
// when the handler did. woken says it is being run again after a wait: it
// is not parked again.
func (sc *serverConn) run(cl *call, woken bool) {
	defer sc.ended(cl)
	maxHeader := sc.srv.MaxHeaderBytes
	if maxHeader <= 0 {
		maxHeader = http.DefaultMaxHeaderBytes
	}
	if end := bytes.Index(cl.msg, []byte("\r\n\r\n")); end < 0 || end > maxHeader {
		sc.finish(cl)
		sc.answer(cl.id, http.StatusRequestHeaderFieldsTooLarge, fmt.Sprintf("the request's header section is missing or larger than %d bytes", maxHeader))
		return
	}
	br := readers.Get().(*bufio.Reader)
	br.Reset(bytes.NewReader(cl.msg))
	defer func() {
		br.Reset(nil) // the message goes with its call, not with the pool
		readers.Put(br)
	}()
	req, err := http.ReadRequest(br)
	if err != nil {
		sc.finish(cl)
		sc.answer(cl.id, http.StatusBadRequest, "malformed request: "+err.Error())
		return
	}
	req.RemoteAddr = sc.c.RemoteAddr().String()
	// Made for each request, not kept for the connection: a parked
	// query's connection keeps nothing of its own. The connection's end
	// cancels the request (closeCalls).
	state := sc.c.ConnectionState()
	req.TLS = &state
	ctx, cancel := context.WithCancel(sc.base)
	p := &parking{woken: woken}
	ctx = context.WithValue(ctx, parkingKey{}, p)
	sc.mu.Lock()
	if cl.canceled || sc.closed {
		sc.mu.Unlock()
		cancel()
		return
	}
	cl.cancel = cancel
	sc.mu.Unlock()

	w := &responseWriter{header: http.Header{}}
	func() {
		defer func() {
			if v := recover(); v != nil && v != http.ErrAbortHandler {
				if sc.srv.Log != nil {
					sc.srv.Log.Error("panic in handler", "path", req.URL.Path, "panic", v)
				}
				w = &responseWriter{header: http.Header{}, status: http.StatusInternalServerError}
				w.body.WriteString("internal error\n")
			}
		}()
		sc.srv.Handler.ServeHTTP(w, req.WithContext(ctx))
	}()
	cancel()
	if p.register != nil && w.status == 0 && w.body.Len() == 0 {
		sc.park(cl, p.register)
		return
	}
	if !sc.finish(cl) {
		return // canceled: nobody waits for the answer
	}
	if w.tooLarge {
		sc.answer(cl.id, http.StatusInternalServerError, "the answer is larger than a link carries (64 MB)")
		return
	}
	sc.respond(cl.id, w)
}

// ended is the end of one run of cl's handler, its answer written: a
// draining connection may be done.
func (sc *serverConn) ended(cl *call) {
	sc.mu.Lock()
	if cl.orphan {
		cl.orphan = false
		sc.orphans--
	}
	if cl.answering {
		cl.answering = false
		sc.answering--
	}
	bye := sc.byeLocked()
	sc.mu.Unlock()
	if bye {
		sc.sendBye()
	}
}

// park registers cl's wake-up; the request runs again when it fires.
func (sc *serverConn) park(cl *call, register func(wake func()) (stop func())) {
	sc.mu.Lock()
	cl.cancel = nil
	if cl.canceled || sc.closed {
		sc.mu.Unlock()
		return
	}
	if sc.draining {
		// Nothing is parked on a link that is ending: the request
		// answers what is there now.
		sc.mu.Unlock()
		go sc.run(cl, true)
		return
	}
	cl.parked = true
	sc.mu.Unlock()
	stop := register(func() { sc.wake(cl) })
	sc.mu.Lock()
	if cl.parked {
		cl.stop = stop
		sc.mu.Unlock()
		return
	}
	sc.mu.Unlock()
	stop() // woken or canceled already
}

func (sc *serverConn) wake(cl *call) {
	sc.mu.Lock()
	if !cl.parked {
		sc.mu.Unlock()
		return
	}
	cl.parked, cl.stop = false, nil
	sc.mu.Unlock()
	go sc.run(cl, true)
}

// finish takes cl out of the connection's calls, to be answered; false
// when it was canceled (or the connection closed) meanwhile.
func (sc *serverConn) finish(cl *call) bool {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	i := sc.find(cl.id)
	if i < 0 || sc.calls[i] != cl {
		return false
	}
	sc.remove(i)
	if cl.canceled {
		return false
	}
	// Counted until its run ends (ended), in the same hold of the lock
	// that took it out: a drain's goodbye cannot come between.
	cl.answering = true
	sc.answering++
	return true
}

// find returns the index of request id in sc.calls, -1 when it is not
// there. sc.mu is held.
func (sc *serverConn) find(id uint64) int {
	for i, cl := range sc.calls {
		if cl.id == id {
			return i
		}
	}
	return -1
}

// remove takes sc.calls[i] out; the last one out takes the slice with it.
// sc.mu is held.
func (sc *serverConn) remove(i int) {
	last := len(sc.calls) - 1
	sc.calls[i] = sc.calls[last]
	sc.calls[last] = nil
	sc.calls = sc.calls[:last]
	if last == 0 {
		sc.calls = nil
	}
}

// cancel ends request id: the client gave up on it.
func (sc *serverConn) cancel(id uint64) {
	sc.mu.Lock()
	i := sc.find(id)
	if i < 0 {
		sc.mu.Unlock()
		return
	}
	cl := sc.calls[i]
	sc.remove(i)
	stop := sc.endLocked(cl)
	sc.mu.Unlock()
	if stop != nil {
		stop()
	}
	sc.goodbye()
}

// drain starts the connection's end (Server.Shutdown): new requests are
// refused from now on, parked ones run again at once, and the connection
// says goodbye once the last answer is written.
func (sc *serverConn) drain() {
	sc.mu.Lock()
	if sc.draining || sc.closed {
		sc.mu.Unlock()
		return
	}
	sc.draining = true
	var woken []*call
	var stops []func()
	for _, cl := range sc.calls {
		if cl.parked {
			// Its wake-up is taken back: it runs now. One whose
			// registration is under way (park) has no stop yet;
			// park calls it, finding the call no longer parked.
			cl.parked = false
			if cl.stop != nil {
				stops = append(stops, cl.stop)
				cl.stop = nil
			}
			woken = append(woken, cl)
		}
	}
	sc.mu.Unlock()
	for _, stop := range stops {
		stop()
	}
	for _, cl := range woken {
		go sc.run(cl, true)
	}
	sc.goodbye()
}

// goodbye ends a draining connection that has nothing left to answer:
// close_notify tells the client that nothing more comes (it closes its
// end, and sends what it had not had answered elsewhere), and what it
// sent meanwhile is read, unanswered, until it closes or lingerAfterBye
// passes (ServeConn then closes the connection).
func (sc *serverConn) goodbye() {
	sc.mu.Lock()
	bye := sc.byeLocked()
	sc.mu.Unlock()
	if bye {
		sc.sendBye()
	}
}

// byeLocked reports whether the connection says goodbye now, and marks it
// so: it drains, and has no call left, running, given up or being answered. sc.mu is
// held.
func (sc *serverConn) byeLocked() bool {
	if !sc.draining || sc.bye || sc.closed || len(sc.calls) > 0 || sc.orphans > 0 || sc.answering > 0 {
		return false
	}
	sc.bye = true
	if sc.poll != nil {
		sc.poll.linger()
		return true
	}
	// Under sc.mu, as ServeConn sets its idle deadline: that one is not
	// set again after this.
	sc.c.SetReadDeadline(time.Now().Add(lingerAfterBye))
	return true
}

// sendBye writes close_notify (tls.Conn.CloseWrite bounds it by 5s).
func (sc *serverConn) sendBye() {
	sc.wmu.Lock()
	err := sc.c.CloseWrite()
	sc.wmu.Unlock()
	if err != nil {
		sc.cut() // it cannot be said: nothing to wait for
	}
}

func (sc *serverConn) saidBye() bool {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.bye
}

// endLocked marks cl canceled and returns what takes its wake-up back,
// when it is parked. sc.mu is held.
func (sc *serverConn) endLocked(cl *call) (stop func()) {
	cl.canceled = true
	if cl.cancel != nil {
		cl.cancel()
		cl.orphan = true
		sc.orphans++
	}
	if cl.parked {
		cl.parked = false
		stop, cl.stop = cl.stop, nil
	}
	return stop
}

func (sc *serverConn) closeCalls() {
	sc.mu.Lock()
	sc.closed = true
	var stops []func()
	calls := sc.calls
	sc.calls = nil
	for _, cl := range calls {
		if stop := sc.endLocked(cl); stop != nil {
			stops = append(stops, stop)
		}
	}
	sc.mu.Unlock()
	for _, stop := range stops {
		stop()
	}
}

// answer writes a plain-text response to request id.
func (sc *serverConn) answer(id uint64, status int, msg string) {
	w := &responseWriter{header: http.Header{"Content-Type": {"text/plain; charset=utf-8"}}, status: status}
	w.body.WriteString(msg + "\n")
	sc.respond(id, w)
}

func (sc *serverConn) respond(id uint64, w *responseWriter) {
	status := w.status
	if status == 0 {
		status = http.StatusOK
	}
	resp := &http.Response{
		StatusCode: status, ProtoMajor: 1, ProtoMinor: 1, Header: w.header,
		ContentLength: int64(w.body.Len()), Body: io.NopCloser(&w.body),
	}
	var b bytes.Buffer
	b.Grow(256 + w.body.Len())
	if err := resp.Write(&b); err != nil {
		return
	}
	if err := sc.writeRaw(appendFrame(make([]byte, 0, headerLen+b.Len()), frameResponse, id, b.Bytes())); err != nil {
		sc.end()
	}
}

func (sc *serverConn) write(typ byte, id uint64, msg []byte) error {
	return sc.writeRaw(appendFrame(nil, typ, id, msg))
}

func (sc *serverConn) writeRaw(frame []byte) error {
	sc.wmu.Lock()
	defer sc.wmu.Unlock()
	if sc.srv.WriteTimeout > 0 {
		sc.c.SetWriteDeadline(time.Now().Add(sc.srv.WriteTimeout))
	}
	_, err := sc.c.Write(frame)
	return err
}

// responseWriter keeps a handler's answer until it returns.
type responseWriter struct {
	header   http.Header
	status   int
	body     bytes.Buffer
	tooLarge bool // the handler wrote more than a frame carries
}

func (w *responseWriter) Header() http.Header { return w.header }

func (w *responseWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *responseWriter) Write(p []byte) (int, error) {
	if w.tooLarge || w.body.Len()+len(p) > maxResponseFrame-64<<10 {
		w.tooLarge = true
		return 0, errResponseTooLarge
	}
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.body.Write(p)
}

var errResponseTooLarge = errors.New("link: response larger than a frame carries")

// Flush does nothing: the answer goes when the handler returns.
func (w *responseWriter) Flush() {}

type parkingKey struct{}

// parking is what Park leaves for the link to act on once the handler
// returns.
type parking struct {
	woken    bool
	register func(wake func()) (stop func())
}

// Park parks r, a request that came over a link, until what it waits on
// changes: register is called once the handler has returned, with wake,
// to be called once when the request should run again (its wait ran out,
// or what it waits on changed), and returns what takes the wake-up back
// (the client gave up, or the connection closed). The handler must then
// return without answering (ErrParked). Park reports false, and parks
// nothing, for a request that did not come over a link or that is being
// run again after a wake: that handler waits as usual, or, woken, does
// not wait at all (Woken).
func Park(r *http.Request, register func(wake func()) (stop func())) bool {
	p, _ := r.Context().Value(parkingKey{}).(*parking)
	if p == nil || p.woken {
		return false
	}
	p.register = register
	return true
}

// Woken reports whether r is a parked request run again after its wake:
// what it waited for has happened, or its wait ran out.
func Woken(r *http.Request) bool {
	p, _ := r.Context().Value(parkingKey{}).(*parking)
	return p != nil && p.woken
}
