package registry

import (
	"context"
	"sync/atomic"
)

// Session is what one client (an agent on its connection) wrote through
// this registry: the latest revision its writes were answered at. A
// server's reads for that client wait until its state holds the client's
// own writes (WrittenBy), not every write the server made for anyone: with
// thousands of agents reporting, every read waited for the server's newest
// write, and so for its watch to catch up with all of them.
type Session struct{ written atomic.Int64 }

// NewSession starts a session that has seen every write up to rev (the
// server's Written when the client connects: what it wrote on a previous
// connection included).
func NewSession(rev int64) *Session {
	s := new(Session)
	s.written.Store(rev)
	return s
}

type sessionKey struct{}

// WithSession makes the registry's writes under ctx count in s.
func WithSession(ctx context.Context, s *Session) context.Context {
	return context.WithValue(ctx, sessionKey{}, s)
}

func sessionOf(ctx context.Context) *Session {
	s, _ := ctx.Value(sessionKey{}).(*Session)
	return s
}

// WrittenBy is the revision a read under ctx must wait for to show its
// client's own writes: the session's when ctx has one, else Written (every
// write this registry made).
func (r *Registry) WrittenBy(ctx context.Context) int64 {
	if s := sessionOf(ctx); s != nil {
		return s.written.Load()
	}
	return r.Written()
}

// raise moves v up to rev, never down.
func raise(v *atomic.Int64, rev int64) {
	for {
		cur := v.Load()
		if rev <= cur || v.CompareAndSwap(cur, rev) {
			return
		}
	}
}
