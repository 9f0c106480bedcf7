package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/registry"
	"github.com/drover-org/drover/internal/spec"
)

// Blocking queries on /v1/allocations (issue 16, item 8: 200 of them took
// a server from 90 to 567 MB): a waiting query holds no copy of the
// answer, and a change that wakes them all builds one answer, not one per
// waiter.
func TestBlockingAllocQueriesCostLittleMemory(t *testing.T) {
	if raceSlowdown > 1 {
		// Its bounds are on heap bytes, which the race detector's shadow
		// memory multiplies; the plain `go test` run holds them.
		t.Skip("memory bounds are for a build without -race")
	}
	const allocs, waiters = 3000, 200
	hs, reg, srv := testServerSrv(t)
	ctx := context.Background()
	node := `{"id":"n1","name":"n1","resources":{"cpu":1000000,"memory":1000000},"drivers":["exec"]}`
	if status, e, _ := do(t, "POST", hs.URL+"/v1/nodes", node); status != 200 {
		t.Fatalf("register node: %d %+v", status, e)
	}
	job := fmt.Sprintf(`{"name":"many","groups":[{"name":"g","count":%d,"tasks":[{"name":"t","driver":"exec","config":{"command":"/bin/sleep","args":["1000"]},"resources":{"cpu":10,"memory":10}}]}]}`, allocs)
	if status, e, _ := do(t, "POST", hs.URL+"/v1/jobs", job); status != 200 {
		t.Fatalf("submit: %d %+v", status, e)
	}
	var placed []*spec.Alloc
	deadline := time.Now().Add(60 * time.Second)
	for len(placed) < allocs {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d allocs placed after 60s", len(placed), allocs)
		}
		time.Sleep(100 * time.Millisecond)
		placed = srv.state.Snapshot().JobAllocs("many")
	}
	// Each instance reports a status with a history, as a running one has.
	var ups []registry.StatusUpdate
	for _, a := range placed {
		ts := &spec.TaskState{State: spec.TaskRunning, PID: 4242, StartedAt: time.Now()}
		for i := range 10 {
			ts.AddEvent(spec.TaskEvent{Time: time.Now(), Type: spec.EventStarted, Message: "pid 4242, event " + strconv.Itoa(i)})
		}
		ups = append(ups, registry.StatusUpdate{ID: a.ID, Status: &spec.AllocStatus{ClientStatus: spec.ClientRunning, Tasks: map[string]*spec.TaskState{"t": ts}}})
	}
	for len(ups) > 0 {
		n := min(len(ups), 100)
		if _, err := reg.PutAllocStatuses(ctx, "n1", ups[:n]); err != nil {
			t.Fatal(err)
		}
		ups = ups[n:]
	}

	// The answer the queries wait past: one that holds every report (the
	// server's state follows the registry's watch, a moment behind).
	written, err := reg.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var size int64
	var index string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		resp, err := http.Get(hs.URL + "/v1/allocations")
		if err != nil {
			t.Fatal(err)
		}
		size, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		index = resp.Header.Get("X-Drover-Index")
		if n, _ := strconv.ParseInt(index, 10, 64); n >= written {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the allocations' index is %s after 10s, not yet the registry's %d", index, written)
		}
	}
	t.Logf("one answer: %d allocs, %d bytes of JSON", allocs, size)

	http.DefaultClient.CloseIdleConnections()
	base := heapAfterGC()
	tr := &http.Transport{MaxIdleConnsPerHost: waiters}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	var wg sync.WaitGroup
	errs := make(chan error, waiters)
	for range waiters {
		wg.Go(func() {
			resp, err := client.Get(hs.URL + "/v1/allocations?wait=60s&index=" + index)
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			if n, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != 200 || n < size/2 {
				errs <- fmt.Errorf("woken query: %d, %d bytes, %v", resp.StatusCode, n, err)
			}
		})
	}
	deadline = time.Now().Add(30 * time.Second)
	for srv.hub.waiting("allocs") < waiters {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d queries waiting after 30s", srv.hub.waiting("allocs"), waiters)
		}
		time.Sleep(10 * time.Millisecond)
	}
	waiting := int64(heapAfterGC()) - int64(base)

	// One status report wakes them all; sample the heap until they are
	// all answered.
	stop, peakc := make(chan struct{}), make(chan uint64)
	go func() { peakc <- samplePeakHeap(stop) }()
	ts := &spec.TaskState{State: spec.TaskRunning, PID: 4343}
	if _, err := reg.PutAllocStatuses(ctx, "n1", []registry.StatusUpdate{{ID: placed[0].ID, Status: &spec.AllocStatus{ClientStatus: spec.ClientRunning, Tasks: map[string]*spec.TaskState{"t": ts}}}}); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	wg.Wait()
	took := time.Since(begin)
	close(stop)
	peak := <-peakc - base
	close(errs)
	failed := 0
	for err := range errs {
		if failed++; failed == 1 {
			t.Errorf("%v (and %d more)", err, len(errs))
		}
	}
	t.Logf("%d blocking queries on %d allocs: %d KB of heap while waiting (%d bytes each, client and server side); waking them all: peak heap +%d MB, all answered in %s",
		waiters, allocs, waiting>>10, waiting/waiters, peak>>20, took.Round(time.Millisecond))
	// Generous bounds: a waiting query (both ends of its connection, in
	// this process) is a few buffers; waking them all builds an answer or
	// two (etcd's, decoded, encoded), not one per query.
	if waiting/waiters > 64<<10 {
		t.Errorf("%d bytes of heap per waiting query, want at most 64 KB", waiting/waiters)
	}
	if limit := 30 * uint64(size); peak > limit {
		t.Errorf("waking %d queries took the heap up by %d MB, want at most %d MB (30 answers' worth, however many queries)", waiters, peak>>20, limit>>20)
	}
}

// heapAfterGC is the live heap after a collection.
func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC() // what finalizers freed
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// samplePeakHeap samples the heap's objects every millisecond until stop
// is closed, and returns the largest figure seen.
func samplePeakHeap(stop <-chan struct{}) uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var peak uint64
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for {
		metrics.Read(s)
		peak = max(peak, s[0].Value.Uint64())
		select {
		case <-stop:
			return peak
		case <-t.C:
		}
	}
}

// waiting is the number of queries waiting on topic.
func (h *hub) waiting(topic string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.waiters[topic])
}
