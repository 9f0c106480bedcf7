// Package logstream lets a process's log records be followed while it
// runs (drover monitor): a slog.Handler that writes through to the
// process's own handler and copies each record, formatted as slog's text,
// to every subscriber at that subscriber's level, whatever the process's
// own level is.
//
// A subscriber holds at most its buffer's worth of lines: when its reader
// falls behind, the oldest lines are dropped, and the next read says how
// many, so that a slow reader never slows the process that logs.
package logstream

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Hub is the set of subscribers of one process's logs.
type Hub struct {
	mu   sync.Mutex
	subs map[*Sub]struct{}
	// min is the lowest level any subscriber wants (math.MaxInt when
	// none), for Enabled to read without the lock.
	min atomic.Int64
}

// NewHub returns a hub without subscribers.
func NewHub() *Hub {
	h := &Hub{subs: map[*Sub]struct{}{}}
	h.min.Store(int64(noSubscriber))
	return h
}

const noSubscriber = slog.Level(1 << 30)

// Sub is one subscriber: lines at Level and above, oldest first.
type Sub struct {
	hub     *Hub
	level   slog.Level
	max     int
	mu      sync.Mutex
	lines   [][]byte
	dropped int
	ready   chan struct{} // has a value when lines or dropped changed
}

// Subscribe starts copying records at level and above into a new
// subscriber holding at most max lines. Cancel it when done.
func (h *Hub) Subscribe(level slog.Level, max int) *Sub {
	s := &Sub{hub: h, level: level, max: max, ready: make(chan struct{}, 1)}
	h.mu.Lock()
	h.subs[s] = struct{}{}
	h.setMinLocked()
	h.mu.Unlock()
	return s
}

// Cancel stops the subscription.
func (s *Sub) Cancel() {
	h := s.hub
	h.mu.Lock()
	delete(h.subs, s)
	h.setMinLocked()
	h.mu.Unlock()
}

func (h *Hub) setMinLocked() {
	m := noSubscriber
	for s := range h.subs {
		m = min(m, s.level)
	}
	h.min.Store(int64(m))
}

// Ready has a value when Take has something to return.
func (s *Sub) Ready() <-chan struct{} { return s.ready }

// Take returns the lines held, oldest first, and how many were dropped
// since the last Take because the buffer was full.
func (s *Sub) Take() (lines [][]byte, dropped int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	lines, dropped = s.lines, s.dropped
	s.lines, s.dropped = nil, 0
	return lines, dropped
}

func (s *Sub) add(line []byte) {
	s.mu.Lock()
	if len(s.lines) >= s.max {
		n := len(s.lines) - s.max + 1
		s.lines = append(s.lines[:0], s.lines[n:]...)
		s.dropped += n
	}
	s.lines = append(s.lines, line)
	s.mu.Unlock()
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// Handler returns a handler that writes to inner and copies to the hub's
// subscribers.
func (h *Hub) Handler(inner slog.Handler) slog.Handler {
	return &handler{inner: inner, hub: h}
}

type handler struct {
	inner slog.Handler
	hub   *Hub
	// ops are the WithAttrs and WithGroup calls made on this handler, in
	// order, to replay on a subscriber's formatter.
	ops []func(slog.Handler) slog.Handler
}

func (t *handler) Enabled(ctx context.Context, l slog.Level) bool {
	return t.inner.Enabled(ctx, l) || l >= slog.Level(t.hub.min.Load())
}

func (t *handler) Handle(ctx context.Context, r slog.Record) error {
	var err error
	if t.inner.Enabled(ctx, r.Level) {
		err = t.inner.Handle(ctx, r)
	}
	if r.Level < slog.Level(t.hub.min.Load()) {
		return err
	}
	var buf bytes.Buffer
	var f slog.Handler = slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug - 4})
	for _, op := range t.ops {
		f = op(f)
	}
	if f.Handle(ctx, r) != nil {
		return err
	}
	line := buf.Bytes()
	t.hub.mu.Lock()
	for s := range t.hub.subs {
		if r.Level >= s.level {
			s.add(line)
		}
	}
	t.hub.mu.Unlock()
	return err
}

func (t *handler) with(inner slog.Handler, op func(slog.Handler) slog.Handler) *handler {
	return &handler{inner: inner, hub: t.hub, ops: append(t.ops[:len(t.ops):len(t.ops)], op)}
}

func (t *handler) WithAttrs(as []slog.Attr) slog.Handler {
	return t.with(t.inner.WithAttrs(as), func(h slog.Handler) slog.Handler { return h.WithAttrs(as) })
}

func (t *handler) WithGroup(name string) slog.Handler {
	return t.with(t.inner.WithGroup(name), func(h slog.Handler) slog.Handler { return h.WithGroup(name) })
}

// BufferLines is how many lines a monitor's subscriber holds for its
// reader.
const BufferLines = 1024

// ServeHTTP answers a monitor request for the hub: ?log_level= (debug,
// info, warn, error; default info), then the records as text lines,
// flushed as they come, until the client goes away. A line says when
// records were dropped because the client read too slowly.
func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	level := slog.LevelInfo
	if s := r.URL.Query().Get("log_level"); s != "" {
		if err := level.UnmarshalText([]byte(s)); err != nil {
			http.Error(w, fmt.Sprintf("unknown log_level %q: use debug, info, warn or error", s), http.StatusBadRequest)
			return
		}
	}
	sub := h.Subscribe(level, BufferLines)
	defer sub.Cancel()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	rc.SetWriteDeadline(time.Time{}) // a monitor lasts as long as its reader wants
	rc.Flush()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-sub.Ready():
		}
		lines, dropped := sub.Take()
		if dropped > 0 {
			if _, err := fmt.Fprintf(w, "drover monitor: %d log records dropped: this reader fell behind (the newest %d are kept)\n", dropped, BufferLines); err != nil {
				return
			}
		}
		for _, l := range lines {
			if _, err := w.Write(l); err != nil {
				return
			}
		}
		if rc.Flush() != nil {
			return
		}
	}
}
