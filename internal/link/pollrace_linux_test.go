//go:build linux

package link

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// pollerHolds counts the connections of s the poller has in its set.
func pollerHolds(s *Server) int {
	p, err := thePoller()
	if err != nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, ps := range p.conns {
		if ps.sc.srv == s {
			n++
		}
	}
	return n
}

// holdPoller holds the poller's set, and returns what lets it go once a
// goroutine waits for it in add (a connection being registered).
func holdPoller(t *testing.T) (waitAdding func(), letGo func()) {
	p, err := thePoller()
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	var once sync.Once
	letGo = func() { once.Do(p.mu.Unlock) }
	t.Cleanup(letGo)
	waitAdding = func() {
		t.Helper()
		buf := make([]byte, 1<<20)
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			if strings.Contains(string(buf[:runtime.Stack(buf, true)]), "link.(*poller).add(") {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("no connection registering with the poller within 10s")
			}
		}
	}
	return waitAdding, letGo
}

// Close and Shutdown, coming while a link registers with the poller, end
// it without a panic.
func TestEndingALinkWhileItRegistersDoesNotPanic(t *testing.T) {
	for _, how := range []string{"Close", "Shutdown"} {
		t.Run(how, func(t *testing.T) {
			s, addr, agent, tracked, release, served := hookServer(t)
			dialRaw(t, addr, agent)
			waitChan(t, tracked, "the link tracked")
			waitAdding, letGo := holdPoller(t)
			close(release)
			waitAdding()
			// Called while the link registers (on a goroutine: it may
			// wait for the registration), then the poller let go.
			ended := make(chan any, 1)
			go func() {
				defer func() { ended <- recover() }()
				if how == "Close" {
					s.Close()
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
				defer cancel()
				s.Shutdown(ctx)
			}()
			time.Sleep(20 * time.Millisecond)
			letGo()
			select {
			case v := <-ended:
				if v != nil {
					t.Fatalf("%s while a link registers: panic: %v", how, v)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s while a link registers: not returned within 10s", how)
			}
			waitChan(t, served, "ServeConn returned")
		})
	}
}
