package main

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"
)

// spin uses a CPU in this process until stop is set.
func spin(stop *atomic.Bool) {
	for !stop.Load() {
	}
}

// TestWaitQuietWaitsForTheCPUToStop: a process busy for a while (this one,
// a goroutine spinning) is quiet only a quietWindow after it stops, as
// /proc counts its CPU time; one busy throughout makes the wait give up at
// its timeout and say so.
func TestWaitQuietWaitsForTheCPUToStop(t *testing.T) {
	ctx := context.Background()
	var stop atomic.Bool
	go spin(&stop)
	busy := 1500 * time.Millisecond
	time.AfterFunc(busy, func() { stop.Store(true) })
	var w quietWaits
	start := time.Now()
	if err := w.waitQuiet(ctx, os.Getpid(), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < busy+quietWindow-quietPoll {
		t.Errorf("quiet after %v, while the process was busy for %v (window %v)", d, busy, quietWindow)
	}
	if w.n != 1 || w.timeouts != 0 {
		t.Errorf("waits %d, timeouts %d; want 1 and 0", w.n, w.timeouts)
	}

	stop.Store(false)
	go spin(&stop)
	defer stop.Store(true)
	if err := w.waitQuiet(ctx, os.Getpid(), 1500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if w.n != 2 || w.timeouts != 1 {
		t.Errorf("waits %d, timeouts %d; want 2 and 1 (a busy process: the wait gives up)", w.n, w.timeouts)
	}
	if w.max < 1500*time.Millisecond {
		t.Errorf("longest wait %v, want at least the timeout 1.5s", w.max)
	}

	// -quiet-timeout 0: no wait.
	if err := w.waitQuiet(ctx, os.Getpid(), 0); err != nil || w.n != 2 {
		t.Errorf("timeout 0: err %v, waits %d; want no wait", err, w.n)
	}
}
