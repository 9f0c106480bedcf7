package link

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"runtime"
	"testing"
	"time"
)

// hookServer is a link server whose ConnContext says when a connection
// is tracked and then waits for release: the test acts on the server
// between a connection's tracking and its registration with the poller.
func hookServer(t *testing.T) (s *Server, addr string, agent *tls.Config, tracked, release, served chan struct{}) {
	tracked, release, served = make(chan struct{}, 10), make(chan struct{}), make(chan struct{}, 10)
	s = &Server{WriteTimeout: 5 * time.Second, Handler: http.NotFoundHandler(),
		ConnContext: func(ctx context.Context) context.Context {
			tracked <- struct{}{}
			select {
			case <-release:
			case <-time.After(20 * time.Second):
			}
			return ctx
		}}
	addr, agent, _ = linkServer(t, nil, func(c *tls.Conn) {
		s.ServeConn(c)
		served <- struct{}{}
	})
	return s, addr, agent, tracked, release, served
}

func waitChan(t *testing.T, c chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: not within 10s", what)
	}
}

// A Shutdown that comes while a link is being set up (tracked, not yet
// served) ends that link within lingerAfterBye of its goodbye, as it does
// any other, even when its client stays.
func TestShutdownWhileALinkStartsDoesNotWaitForever(t *testing.T) {
	s, addr, agent, tracked, release, _ := hookServer(t)
	l := dialRaw(t, addr, agent)
	waitChan(t, tracked, "the link tracked")
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
		defer cancel()
		done <- s.Shutdown(ctx)
	}()
	// The goodbye is said during the set-up; the client reads it, and
	// stays (does not close).
	l.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, _, _, err := l.read(); !errors.Is(err, io.EOF) {
		t.Fatalf("the link when the server shuts down: %v, want EOF (close_notify)", err)
	}
	close(release)
	start := time.Now()
	if err := <-done; err != nil {
		t.Fatalf("Shutdown with a client that stays, the link drained while it started: %v after %s, want nil after about %s",
			err, time.Since(start).Round(time.Millisecond), lingerAfterBye)
	}
}

// A link cut by Close while it is being set up leaves nothing behind in
// the poller.
func TestCloseWhileALinkStartsLeavesNothingInThePoller(t *testing.T) {
	if runtime.GOOS != "linux" || plainConns {
		t.Skip("the poller is Linux's")
	}
	s, addr, agent, tracked, release, served := hookServer(t)
	l := dialRaw(t, addr, agent)
	waitChan(t, tracked, "the link tracked")
	s.Close()
	close(release)
	waitChan(t, served, "ServeConn returned")
	l.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := l.c.Read(make([]byte, 1)); err == nil {
		t.Fatal("the link cut by Close reads on")
	}
	waitFor(t, "the cut link out of the poller", func() bool {
		return pollerHolds(s) == 0
	})
}
