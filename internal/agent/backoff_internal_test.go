package agent

import (
	"testing"
	"time"
)

// A retry waits between half its backoff and all of it, and agents that
// failed together do not all wait the same.
func TestJitterSpreadsRetries(t *testing.T) {
	const d = 4 * time.Second
	seen := map[time.Duration]bool{}
	for range 100 {
		w := jitter(d)
		if w < d/2 || w > d {
			t.Fatalf("jitter(%s) = %s, want between %s and %s", d, w, d/2, d)
		}
		seen[w] = true
	}
	if len(seen) < 50 {
		t.Fatalf("100 retries waited only %d different times", len(seen))
	}
}
