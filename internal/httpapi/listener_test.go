package httpapi

import (
	"errors"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/testkit"
)

// accepted is one Accept's result.
type accepted struct {
	c   net.Conn
	err error
}

// acceptOne calls Accept in the background.
func acceptOne(ln net.Listener) <-chan accepted {
	ch := make(chan accepted, 1)
	go func() {
		c, err := ln.Accept()
		ch <- accepted{c, err}
	}()
	return ch
}

// The limit listener admits n connections; the next Accept waits (and the
// log says the limit is reached) until one of them closes, however many
// times it is closed; closing the listener ends a waiting Accept.
func TestLimitListenerWaitsPastNAndAdmitsAfterAClose(t *testing.T) {
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	log := make(logged, 100)
	ln := newLimitListener(tcp, 2, slog.New(log))
	t.Cleanup(func() { ln.Close() })
	for range 4 {
		testkit.Dial(t, tcp.Addr().String())
	}
	var open []net.Conn
	for i := range 2 {
		select {
		case a := <-acceptOne(ln):
			if a.err != nil {
				t.Fatalf("connection %d of 2: %v", i+1, a.err)
			}
			open = append(open, a.c)
		case <-time.After(5 * time.Second):
			t.Fatalf("connection %d of 2 was not accepted within 5s", i+1)
		}
	}
	third := acceptOne(ln)
	waitsAtTheLimit(t, log, third, "a third connection, while 2 were open")
	// Closed twice, a connection frees one slot, not two.
	open[0].Close()
	open[0].Close()
	select {
	case a := <-third:
		if a.err != nil {
			t.Fatalf("the third connection, after one closed: %v", a.err)
		}
		open = append(open, a.c)
	case <-time.After(5 * time.Second):
		t.Fatal("the third connection was not accepted within 5s of one closing")
	}
	l := ln.(*limitListener)
	l.mu.Lock()
	l.warned = time.Time{} // so that it says again when the next waits
	l.mu.Unlock()
	fourth := acceptOne(ln)
	waitsAtTheLimit(t, log, fourth, "a fourth connection, after one of 2 closed twice")
	ln.Close()
	select {
	case a := <-fourth:
		if a.c != nil || !errors.Is(a.err, net.ErrClosed) {
			t.Errorf("the fourth Accept, the listener closed: %v %v; want net.ErrClosed", a.c, a.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("closing the listener did not end a waiting Accept within 5s")
	}
	for _, c := range open {
		c.Close()
	}
}

// waitsAtTheLimit checks that the Accept whose result comes on ch waits at
// the limit: the log says so before it returns.
func waitsAtTheLimit(t *testing.T, log logged, ch <-chan accepted, what string) {
	t.Helper()
	select {
	case a := <-ch:
		t.Fatalf("%s was accepted past the limit of 2 (%v)", what, a.err)
	case m := <-log:
		if m != "HTTP connection limit reached; new connections wait until one closes" {
			t.Fatalf("%s: the log said %q", what, m)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("%s neither waited at the limit nor was accepted within 5s", what)
	}
	select {
	case a := <-ch:
		t.Fatalf("%s was accepted past the limit of 2 (%v)", what, a.err)
	default:
	}
}
