package httpapi

import (
	"errors"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"time"
)

// newLimitListener returns ln accepting at most n connections open at once;
// Accept waits for one to close. (x/net's netutil.LimitListener does the
// same; x/net is only an indirect dependency here.) log hears, at most
// once a minute, that the limit was reached.
func newLimitListener(ln net.Listener, n int, log *slog.Logger) net.Listener {
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
	return &limitConn{Conn: c, l: l}, nil
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
	once sync.Once
	l    *limitListener
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

func (c *limitConn) release() { <-c.l.sem }

// SyscallConn is the socket's, for a link's poller (link.WrapConn).
func (c *limitConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.ErrUnsupported
	}
	return sc.SyscallConn()
}
