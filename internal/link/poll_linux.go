//go:build linux

package link

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// An idle link costs no goroutine. Go's own network poller wakes a
// goroutine blocked in a read; to have no goroutine blocked, the link asks
// the kernel itself: every served connection's socket is in one epoll set
// (the poller's, registered one-shot), whose own readiness Go's poller
// watches on one goroutine. When a socket has bytes, the poller starts a
// goroutine that reads frames until the socket has nothing more
// (pollConn: a read that would wait fails instead, and TLS keeps what it
// had of a record), registers the socket again, and ends.
//
// A socket is registered again only after a read found it empty, and the
// set is level-triggered: bytes that arrive between that read and the
// registration are reported at once. Nothing is missed, and at most one
// goroutine reads a connection at a time (one-shot).

// WrapConn returns c ready to be served as a link without a goroutine
// while it is idle, to be given to tls.Server before the handshake: a
// connection whose handshake chooses the link (ServeConn) is then read
// only when it has bytes. It reads as c does until then, so a connection
// served otherwise (HTTP) sees no difference. c itself when it has no
// socket to watch.
func WrapConn(c net.Conn) net.Conn {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return c
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return c
	}
	return &pollConn{Conn: c, raw: raw}
}

// pollConn is a connection whose reads, once the poller serves it, return
// what the socket has and never wait: errWouldBlock when it has nothing.
type pollConn struct {
	net.Conn
	raw     syscall.RawConn
	polling atomic.Bool
}

func (c *pollConn) Read(p []byte) (int, error) {
	if !c.polling.Load() {
		return c.Conn.Read(p)
	}
	var n int
	var err error
	rerr := c.raw.Read(func(fd uintptr) bool {
		for {
			n, err = syscall.Read(int(fd), p)
			if err != syscall.EINTR {
				return true // done, whatever came: never wait here
			}
		}
	})
	switch {
	case rerr != nil:
		return 0, rerr
	case err == syscall.EAGAIN:
		return 0, errWouldBlock
	case err != nil:
		return 0, &net.OpError{Op: "read", Net: "tcp", Addr: c.LocalAddr(), Err: os.NewSyscallError("read", err)}
	case n == 0 && len(p) > 0:
		return 0, io.EOF
	}
	return n, nil
}

// errWouldBlock: the socket has nothing to read now. A temporary error,
// which crypto/tls returns without failing the connection, keeping the
// part of a record it had read.
var errWouldBlock error = wouldBlock{}

type wouldBlock struct{}

func (wouldBlock) Error() string   { return "link: nothing to read yet" }
func (wouldBlock) Timeout() bool   { return true }
func (wouldBlock) Temporary() bool { return true }

// pollState is what a connection served by the poller keeps.
type pollState struct {
	sc       *serverConn
	pc       *pollConn
	id       uint64       // its key in the poller's set
	added    bool         // in the epoll set (registered once)
	lastRead atomic.Int64 // unix nanoseconds of the last bytes read
	timer    *time.Timer  // the idle check, then the linger after goodbye
	// reading is held while a goroutine reads the connection: one at a
	// time (the socket is registered one-shot, again by the reader), and
	// what one read, the next one's reads see (Go's memory model knows
	// nothing of epoll).
	reading sync.Mutex
}

// pollStart serves sc through the poller when its connection was made by
// WrapConn: reads what has arrived, registers the socket and returns
// true. False (nothing done) when it cannot: ServeConn then reads on its
// goroutine.
func (sc *serverConn) pollStart() bool {
	pc, ok := sc.c.NetConn().(*pollConn)
	if !ok {
		return false
	}
	p, err := thePoller()
	if err != nil {
		return false
	}
	ps := &pollState{sc: sc, pc: pc}
	ps.lastRead.Store(time.Now().UnixNano())
	// In one hold of sc.mu, as end (pollStop) and the goodbye (linger)
	// look at sc.poll: either sees it whole, with its key and timer, or
	// not at all, and then this sees what they did.
	sc.mu.Lock()
	if sc.closed {
		sc.mu.Unlock()
		return true // ended already (Close): nothing to register
	}
	ps.id = p.add(ps)
	if sc.bye { // drained already: the linger's, not the idle check
		ps.timer = time.AfterFunc(lingerAfterBye, sc.end)
	} else {
		ps.timer = time.AfterFunc(sc.idle, ps.idleCheck)
	}
	sc.poll = ps
	sc.mu.Unlock()
	pc.polling.Store(true)
	// The handshake may have read the first frames already; this
	// goroutine (ServeConn's) reads them, and ends.
	ps.readable()
	return true
}

// readable reads the frames that have arrived and acts on them, then
// registers the socket again; it ends the connection when a read fails.
func (ps *pollState) readable() {
	ps.reading.Lock()
	defer ps.reading.Unlock()
	sc := ps.sc
	for {
		typ, id, msg, err := sc.fr.next(sc.c, maxRequestFrame)
		if err == errWouldBlock {
			if err := thePollerMust().arm(ps); err != nil {
				if !errors.Is(err, net.ErrClosed) && sc.srv.Log != nil {
					// The kernel's limit on watched descriptors
					// (fs.epoll.max_user_watches), or worse.
					sc.srv.Log.Warn("link: cannot wait for the link's next bytes; closing it", "remote", sc.c.RemoteAddr().String(), "err", err)
				}
				sc.end()
			}
			return
		}
		if err != nil {
			sc.readFailed(err)
			sc.end()
			return
		}
		ps.lastRead.Store(time.Now().UnixNano())
		if !sc.handle(typ, id, msg) {
			sc.end()
			return
		}
	}
}

// idleCheck ends a connection nothing arrived on for its idle time.
func (ps *pollState) idleCheck() {
	sc := ps.sc
	sc.mu.Lock()
	if sc.bye || sc.closed {
		sc.mu.Unlock()
		return // the linger's timer stands
	}
	left := sc.idle - time.Since(time.Unix(0, ps.lastRead.Load()))
	if left > 0 {
		ps.timer.Reset(left)
		sc.mu.Unlock()
		return
	}
	sc.mu.Unlock()
	sc.end()
}

// linger ends the connection lingerAfterBye after its goodbye, if the
// client has not closed it by then. sc.mu is held.
func (ps *pollState) linger() {
	ps.timer.Stop()
	ps.timer = time.AfterFunc(lingerAfterBye, ps.sc.end)
}

// pollStop takes the connection out of the poller (end).
func (sc *serverConn) pollStop() {
	sc.mu.Lock()
	sc.closed = true // a pollStart under way registers nothing
	ps := sc.poll
	if ps != nil {
		ps.timer.Stop()
	}
	sc.mu.Unlock()
	if ps != nil {
		thePollerMust().remove(ps.id)
	}
}

// poller is the process's epoll set of served connections.
type poller struct {
	epfd int
	raw  syscall.RawConn // the epoll descriptor's, in Go's poller

	mu    sync.Mutex
	next  uint64
	conns map[uint64]*pollState
}

var (
	pollerOnce sync.Once
	pollerP    *poller
	pollerErr  error
)

// thePoller returns the process's poller, made at its first use.
func thePoller() (*poller, error) {
	pollerOnce.Do(func() { pollerP, pollerErr = newPoller() })
	return pollerP, pollerErr
}

// thePollerMust returns the poller a served connection was added to.
func thePollerMust() *poller {
	p, err := thePoller()
	if err != nil {
		panic("link: a connection is served by a poller that could not be made: " + err.Error())
	}
	return p
}

func newPoller() (*poller, error) {
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("setnonblock", err)
	}
	// Non-blocking: Go's poller watches it, and a goroutine waits for it
	// as for a socket.
	f := os.NewFile(uintptr(fd), "link-epoll")
	raw, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	p := &poller{epfd: fd, raw: raw, conns: map[uint64]*pollState{}}
	go p.run(f)
	return p, nil
}

// run starts a reading goroutine for each connection that has bytes. It
// runs for the life of the process (f stays open).
func (p *poller) run(f *os.File) {
	defer f.Close()
	events := make([]unix.EpollEvent, 256)
	for {
		var n int
		var werr error
		err := p.raw.Read(func(fd uintptr) bool {
			n, werr = unix.EpollWait(int(fd), events, 0)
			if werr == unix.EINTR {
				n, werr = 0, nil
				return true
			}
			return n > 0 || werr != nil
		})
		if err == nil && werr != nil {
			err = werr
		}
		if err != nil {
			// Not expected; the connections go on being served by
			// their clients' closing and the idle checks. Said once.
			os.Stderr.WriteString("link: the poller stopped: " + err.Error() + "\n")
			return
		}
		for _, ev := range events[:n] {
			id := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
			p.mu.Lock()
			ps := p.conns[id]
			p.mu.Unlock()
			if ps != nil {
				go ps.readable()
			}
		}
	}
}

// add notes ps under a new key (registered by its first arm).
func (p *poller) add(ps *pollState) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next++
	p.conns[p.next] = ps
	return p.next
}

func (p *poller) remove(id uint64) {
	p.mu.Lock()
	delete(p.conns, id)
	p.mu.Unlock()
}

// arm registers ps's socket, one-shot, for its next bytes (or its end).
func (p *poller) arm(ps *pollState) error {
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLONESHOT,
		Fd: int32(uint32(ps.id)), Pad: int32(uint32(ps.id >> 32))}
	var cerr error
	err := ps.pc.raw.Control(func(fd uintptr) {
		op := unix.EPOLL_CTL_MOD
		if !ps.added {
			op = unix.EPOLL_CTL_ADD
		}
		cerr = unix.EpollCtl(p.epfd, op, int(fd), &ev)
		if cerr == nil {
			ps.added = true
		}
	})
	if err != nil {
		return err
	}
	if cerr != nil {
		return os.NewSyscallError("epoll_ctl", cerr)
	}
	return nil
}
