package execdriver_test

import (
	"context"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/driver"
	"github.com/drover-org/drover/internal/driver/execdriver"
	"github.com/drover-org/drover/internal/proc"
	"github.com/drover-org/drover/internal/spec"
)

// Measuring n raw_exec tasks in one round reads /proc once, not n times:
// a sample of 1,000 tasks would otherwise read 1,000 process tables.
func TestOneRoundReadsProcOnce(t *testing.T) {
	const n = 20
	d := execdriver.New("raw_exec")
	var hs []driver.Handle
	for range n {
		h, _ := startTask(t, d, spec.Resources{}, "sleep", "30")
		hs = append(hs, h)
	}
	// A process just past exec may show an RSS of 0 for a moment (the
	// kernel counts pages per CPU and /proc reads only the folded total):
	// wait until /proc itself shows each one's memory.
	for _, h := range hs {
		waitForRSS(t, h.PID())
	}
	scans := execdriver.CountProcScans(t)
	for round := 1; round <= 2; round++ {
		r := new(driver.Round)
		for _, h := range hs {
			u, err := h.(driver.Measurer).Usage(context.Background(), r)
			if err != nil {
				t.Fatalf("round %d: task %d: %v", round, h.PID(), err)
			}
			if u.MemoryBytes == 0 {
				t.Fatalf("round %d: task %d: usage %+v, want some memory", round, h.PID(), u)
			}
		}
		// Each round reads anew: a round's table is never reused by the next.
		if got := scans.Load(); got != int64(round) {
			t.Fatalf("after %d rounds of %d tasks: %d passes over /proc, want %d", round, n, got, round)
		}
	}
}

// waitForRSS waits up to 5 s until /proc/PID/stat shows resident memory.
func waitForRSS(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s, err := proc.ReadStat(pid)
		if err == nil && s.RSSPages > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d: no resident memory in /proc after 5s (stat %+v, err %v)", pid, s, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
