package link

import (
	"context"
	"net"
	"testing"
	"time"
)

// A client that half-closes its TCP connection (a FIN, no close_notify),
// a request parked, ends its link: the request is taken back and
// Shutdown does not wait for it.
func TestHalfClosedLinkEnds(t *testing.T) {
	h := newParkingHandler()
	s := &Server{Handler: h, WriteTimeout: 5 * time.Second}
	addr, agent, _ := linkServer(t, nil, s.ServeConn)
	l := dialRaw(t, addr, agent)
	l.get(1, "/wait")
	h.waitParked(t, 1)
	if err := l.c.NetConn().(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the parked request taken back", func() bool { h.mu.Lock(); defer h.mu.Unlock(); return h.stopped == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown after the half-closed link: %v", err)
	}
}
