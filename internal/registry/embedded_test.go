package registry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestEmbeddedKeepsLittleOfItsLogInMemory: an embedded member does not
// hold what it wrote in memory a second time. 64 MB written in 4,000
// entries leave the process's heap less than 32 MB larger (14 to 20 MB
// with etcd 3.7). With etcd 3.5's raft log at its default snapshot count
// (10,000 entries) all 64 stayed; etcd 3.7 keeps about as little at that
// count as at the member's 1,000, so this now guards against anything
// else keeping the values written (a cache of drover's, the client's).
func TestEmbeddedKeepsLittleOfItsLogInMemory(t *testing.T) {
	e := startEtcd(t)
	r := open(t, e)
	before := liveHeap()
	const entries, size, writers = 4000, 16 << 10, 16
	value := strings.Repeat("x", size)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := w; i < entries; i += writers {
				// The same few keys: the backend holds only the last
				// values, so that what stays is the log's.
				if _, err := r.cli.Put(ctx, fmt.Sprintf("/test/log/%d", i%writers), value); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// What the member keeps, not what it holds for a moment (a snapshot
	// being made, the last writes' buffers): the least of the heaps over
	// the next two seconds.
	after := liveHeap()
	for range 10 {
		time.Sleep(200 * time.Millisecond)
		after = min(after, liveHeap())
	}
	grew := after - before
	t.Logf("heap grew %d MB after %d MB written", grew>>20, entries*size>>20)
	if grew > 32<<20 {
		t.Fatalf("the heap grew %d MB after %d MB written in %d entries: the member keeps its raft log in memory", grew>>20, entries*size>>20, entries)
	}
}

// liveHeap is the heap in use after full collections: two, so that
// what sync.Pools held is gone too.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// A port chosen for port 0 can be taken before etcd binds it; the start
// chooses again instead of failing. The first choice here is a port a
// listener of the test holds.
func TestEmbeddedChoosesAgainWhenItsChosenPortIsTaken(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	taken := held.Addr().String()
	picks := 0
	pickURL = func(addr string) (*url.URL, error) {
		picks++
		if picks == 1 {
			return url.Parse("http://" + taken)
		}
		return listenURL(addr)
	}
	t.Cleanup(func() { pickURL = listenURL })
	e := startEtcd(t)
	if got := e.Endpoints()[0]; got == "http://"+taken {
		t.Fatalf("embedded etcd reports the held address %s", got)
	}
	if picks < 4 {
		t.Fatalf("ports chosen %d times, want a second choice for the client address (4 or more)", picks)
	}
}

// A fixed address that is taken fails the start, saying so.
func TestEmbeddedOnATakenFixedPortFails(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = StartEmbedded(ctx, EmbeddedConfig{DataDir: t.TempDir(), ClientAddr: held.Addr().String(), PeerAddr: "127.0.0.1:0", Logger: testLogger(t)})
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("start on a taken client address: %v, want EADDRINUSE", err)
	}
}
