package registry

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
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
