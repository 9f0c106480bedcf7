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

// TestHistogramGain: the count, sum and observations above a bucket's
// bound are what the histogram gained between the two scrapes; a bucket
// /metrics does not print is an error that names it.
func TestHistogramGain(t *testing.T) {
	body := func(le025, count, sum string) string {
		return "# TYPE drover_leader_pass_seconds histogram\n" +
			`drover_leader_pass_seconds_bucket{le="0.01"} 1` + "\n" +
			`drover_leader_pass_seconds_bucket{le="0.025"} ` + le025 + "\n" +
			`drover_leader_pass_seconds_bucket{le="+Inf"} ` + count + "\n" +
			"drover_leader_pass_seconds_sum " + sum + "\n" +
			"drover_leader_pass_seconds_count " + count + "\n"
	}
	n, sum, above, err := histogramGain(body("5", "7", "0.5"), body("15", "20", "0.9"), "drover_leader_pass_seconds", "0.025")
	if err != nil || n != 13 || math.Abs(sum-0.4) > 1e-9 || above != 3 {
		t.Errorf("histogramGain = %d, %v, %d above, %v; want 13, 0.4, 3 above", n, sum, above, err)
	}
	if _, _, _, err := histogramGain(body("5", "7", "0.5"), body("15", "20", "0.9"), "drover_leader_pass_seconds", "0.05"); err == nil || !strings.Contains(err.Error(), `drover_leader_pass_seconds_bucket{le="0.05"}`) {
		t.Errorf("a bucket not printed: err = %v", err)
	}
}
