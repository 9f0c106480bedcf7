package agent

import (
	"testing"
	"time"

	"github.com/drover-org/drover/internal/spec"
)

// TestShouldReport: a node reports its first sample, then only a move of
// 1% of its memory or 5% of its CPU, or after maxAge.
func TestShouldReport(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	capacity := spec.Resources{CPU: 8000, MemoryMB: 16000} // steps: 400 MHz, 160 MB
	last := spec.Usage{CPU: 1000, MemoryMB: 4000}
	for _, c := range []struct {
		name     string
		sent     bool
		now      spec.Usage
		after    time.Duration
		capacity spec.Resources
		want     bool
	}{
		{"first sample", false, spec.Usage{}, 0, capacity, true},
		{"unchanged", true, last, 10 * time.Second, capacity, false},
		{"small moves", true, spec.Usage{CPU: 1399, MemoryMB: 4159}, 10 * time.Second, capacity, false},
		{"memory up 1%", true, spec.Usage{CPU: 1000, MemoryMB: 4160}, 10 * time.Second, capacity, true},
		{"memory down 1%", true, spec.Usage{CPU: 1000, MemoryMB: 3840}, 10 * time.Second, capacity, true},
		{"cpu up 5%", true, spec.Usage{CPU: 1400, MemoryMB: 4000}, 10 * time.Second, capacity, true},
		{"cpu down 5%", true, spec.Usage{CPU: 600, MemoryMB: 4000}, 10 * time.Second, capacity, true},
		{"a minute passed", true, last, time.Minute, capacity, true},
		{"just under a minute", true, last, time.Minute - time.Second, capacity, false},
		{"unknown capacity: any change", true, spec.Usage{CPU: 1000, MemoryMB: 4001}, time.Second, spec.Resources{}, true},
		{"unknown capacity, unchanged", true, last, time.Second, spec.Resources{}, false},
	} {
		if got := shouldReport(c.sent, last, t0, c.now, t0.Add(c.after), c.capacity, time.Minute); got != c.want {
			t.Errorf("%s: shouldReport = %v, want %v", c.name, got, c.want)
		}
	}
}
