package main

import (
	"math"
	"strings"
	"testing"
)

// TestMeanSnapshot: the mean is over the passes between the two scrapes,
// from the histogram's sum and count; no pass between them, or no
// histogram, is an error rather than a figure.
func TestMeanSnapshot(t *testing.T) {
	body := func(sum, count string) string {
		return "# TYPE drover_leader_snapshot_seconds histogram\n" +
			`drover_leader_snapshot_seconds_bucket{le="+Inf"} ` + count + "\n" +
			"drover_leader_snapshot_seconds_sum " + sum + "\n" +
			"drover_leader_snapshot_seconds_count " + count + "\n"
	}
	mean, passes, err := meanSnapshot(body("1.5", "10"), body("1.9", "14"))
	if err != nil || passes != 4 || math.Abs(mean-0.1) > 1e-9 {
		t.Errorf("meanSnapshot = %v over %d passes, %v; want 0.1 over 4", mean, passes, err)
	}
	if _, _, err := meanSnapshot(body("1.5", "10"), body("1.5", "10")); err == nil || !strings.Contains(err.Error(), "no leader pass") {
		t.Errorf("no pass between the scrapes: err = %v", err)
	}
	if _, _, err := meanSnapshot("drover_leader 1\n", body("1.5", "10")); err == nil || !strings.Contains(err.Error(), "drover_leader_snapshot_seconds_sum") {
		t.Errorf("no histogram: err = %v", err)
	}
}
