package main

import (
	"math"
	"os"
	"path/filepath"
	"runtime"
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

// TestMutexProfile: -mutexprofile records while the scenario runs and
// writes a pprof file (gzip) at the end, then stops recording; a path
// that cannot be created fails at once, naming the flag.
func TestMutexProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mutex.prof")
	stop, err := startMutexProfile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := runtime.SetMutexProfileFraction(-1); got != mutexSampling {
		t.Errorf("recording 1 in %d mutex events, want 1 in %d", got, mutexSampling)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := runtime.SetMutexProfileFraction(-1); got != 0 {
		t.Errorf("after stop, recording 1 in %d mutex events, want none", got)
	}
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Errorf("the profile is %d bytes %.2x, %v; want a gzip pprof file", len(b), b[:min(len(b), 2)], err)
	}
	if _, err := startMutexProfile(filepath.Join(t.TempDir(), "no", "such", "dir", "m.prof")); err == nil || !strings.Contains(err.Error(), "-mutexprofile") {
		t.Errorf("a path that cannot be created: err = %v", err)
	}
}
