package chaos

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestTheEvidenceShowsAnInstanceRunTwice: two real chaostask processes
// for one instance; the second finds the lock taken, and the suite's
// checks count one overlap of about as long as the first one ran on, and,
// when nothing asked for it, the first one's stop as a healthy task
// stopped. The detector must be able to fail.
func TestTheEvidenceShowsAnInstanceRunTwice(t *testing.T) {
	dir := t.TempDir()
	task := filepath.Join(dir, "chaostask")
	if out, err := exec.Command("go", "build", "-o", task, "./chaostask").CombinedOutput(); err != nil {
		t.Fatalf("build chaostask: %v\n%s", err, out)
	}
	r := &run{id: "self-test", evidence: filepath.Join(dir, "evidence.log"), locks: filepath.Join(dir, "locks"),
		jobs: map[string]*jobRecord{}, lostAgt: map[string]bool{}, agentDown: map[string][][2]time.Time{}}
	if err := os.MkdirAll(r.locks, 0o755); err != nil {
		t.Fatal(err)
	}
	start := func(alloc, node string) *exec.Cmd {
		cmd := exec.Command(task, "-evidence", r.evidence, "-locks", r.locks)
		cmd.Env = []string{"DROVER_JOB_NAME=web", "DROVER_GROUP_NAME=g", "DROVER_ALLOC_INDEX=0", "DROVER_ALLOC_ID=" + alloc,
			"DROVER_NODE_NAME=" + node, "DROVER_JOB_VERSION=1", "CHAOS_GEN=1", "CHAOS_RUN=" + r.id}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	waitFor := func(what string, cond func([]line) bool) []line {
		deadline := time.Now().Add(10 * time.Second)
		for {
			evs, err := readEvidence(r.evidence)
			if err != nil {
				t.Fatal(err)
			}
			if cond(evs) {
				return evs
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %s in the evidence within 10s: %v", what, evs)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	has := func(kind, alloc string) func([]line) bool {
		return func(evs []line) bool {
			return slices.ContainsFunc(evs, func(l line) bool { return l.kind == kind && l.alloc == alloc })
		}
	}
	first := start("a1", "n1")
	waitFor("START of a1", has("START", "a1"))
	time.Sleep(50 * time.Millisecond) // a1 takes the lock and names itself in it
	start("a2", "n2")
	waitFor("WAIT of a2", has("WAIT", "a2"))
	time.Sleep(200 * time.Millisecond)
	first.Process.Signal(syscall.SIGTERM) // a1 stops; a2 gets the lock
	first.Wait()
	evs := waitFor("OVERLAP of a2", has("OVERLAP", "a2"))

	r.jobs["web"] = &jobRecord{name: "web", count: 1, gen: 1, version: 1, tried: []tried{{at: time.Now().Add(-time.Minute), count: 1, gen: 1}}}
	r.order = []string{"web"}
	seen := observe(evs, liveTasks(r.id))
	r.overlaps(evs, seen)
	r.healthy(seen)
	if r.res.Overlaps != 1 || r.res.MaxOverlapMS < 200 || r.res.MaxOverlapMS > 5000 {
		t.Errorf("overlaps %d (max %.0f ms); want 1 of at least the 200 ms a1 ran on", r.res.Overlaps, r.res.MaxOverlapMS)
	}
	if r.res.HealthyStopped != 1 {
		t.Errorf("healthy stopped %d; want 1 (a1 was stopped and nothing asked for it)", r.res.HealthyStopped)
	}
	if want := "ran twice"; !slices.ContainsFunc(r.res.Problems, func(p string) bool { return strings.Contains(p, want) }) {
		t.Errorf("problems %q: none says %q", r.res.Problems, want)
	}
	// a2 holds the instance alone now: converged, as one instance.
	if why, _, _ := r.unconverged(seen, nil); len(why) != 1 || !strings.Contains(why[0], "missing from etcd") {
		t.Errorf("unconverged %q; want only the job missing from etcd (none here)", why)
	}

	// A stop asked for before the task stopped explains it; one asked
	// for after does not.
	for _, c := range []struct {
		at   time.Duration // after a1's STOP
		stop int
	}{{-time.Millisecond, 0}, {time.Second, 1}} {
		var stopAt time.Time
		for _, l := range evs {
			if l.kind == "STOP" && l.alloc == "a1" {
				stopAt = l.t
			}
		}
		r.res = Result{}
		r.jobs["web"].tried = []tried{{at: stopAt.Add(-time.Minute), count: 1, gen: 1}, {at: stopAt.Add(c.at), stop: true}}
		r.healthy(seen)
		if r.res.HealthyStopped != c.stop {
			t.Errorf("stop asked %s after a1 stopped: healthy stopped %d, want %d", c.at, r.res.HealthyStopped, c.stop)
		}
	}
}
