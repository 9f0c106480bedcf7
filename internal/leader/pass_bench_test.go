package leader

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/drover-org/drover/internal/planner"
	"github.com/drover-org/drover/internal/scheduler"
	"github.com/drover-org/drover/internal/spec"
	"github.com/drover-org/drover/internal/state"
)

// passBench is a store of nodes ready nodes and allocs running allocs of
// 100 jobs, spread evenly.
func passBench(b *testing.B, nodes, allocs int) (*state.Store, int64) {
	s := state.New()
	tx := s.Write()
	rev := int64(1)
	for i := range nodes {
		id := fmt.Sprintf("node-%05d", i)
		tx.PutNodeRecord(id, &spec.Node{ID: id, Name: id, Drivers: []string{"exec"}, Resources: spec.Resources{CPU: 64000, MemoryMB: 256000, DiskMB: 1 << 20}, ModifyIndex: rev})
		tx.SetNodeAlive(id, true)
	}
	const jobs = 100
	per := allocs / jobs
	for j := range jobs {
		job := benchJob(fmt.Sprintf("svc-%03d", j), per)
		rev++
		job.Version, job.ModifyIndex = 1, rev
		tx.PutJob(job)
		for i := range per {
			rev++
			n := fmt.Sprintf("node-%05d", (j*per+i)%nodes)
			a := &spec.Alloc{ID: fmt.Sprintf("%s-%d", job.Name, i), Name: spec.AllocName(job.Name, "g", i), Job: job.Name, JobVersion: 1, JobType: job.Type,
				Group: "g", Index: i, NodeID: n, NodeName: n, Resources: job.Groups[0].Resources(), Tasks: job.Groups[0].Tasks,
				DesiredStatus: spec.DesiredRun}
			tx.PutAlloc(a, rev, rev)
			tx.PutAllocStatus(a.ID, "", "", &spec.AllocStatus{ClientStatus: spec.ClientRunning}, rev)
		}
		rev++
		tx.PutSchedule(&spec.JobSchedule{Job: job.Name, JobVersion: 1})
	}
	tx.Commit(rev)
	return s, rev
}

func benchJob(name string, count int) *spec.Job {
	j := &spec.Job{Name: name, Groups: []*spec.Group{{Name: "g", Count: count, Tasks: []*spec.Task{{
		Name: "t", Driver: "exec", Resources: spec.Resources{CPU: 10, MemoryMB: 16},
		Config: spec.TaskConfig{Command: "/bin/sleep", Args: []string{"infinity"}},
	}}}}}
	j.Canonicalize()
	return j
}

// BenchmarkPassOneJob is the leader's pass for a one-job submission on a
// large cluster: read the pass's state from a snapshot, decide, and
// apply its placement to the store as the watch would.
func BenchmarkPassOneJob(b *testing.B) {
	for _, size := range []struct{ nodes, allocs int }{{1000, 10_000}, {10_000, 100_000}} {
		b.Run(fmt.Sprintf("nodes=%d/allocs=%d", size.nodes, size.allocs), func(b *testing.B) {
			benchPasses(b, size.nodes, size.allocs, func(int) spec.Resources { return spec.Resources{CPU: 10, MemoryMB: 16} }, false)
		})
	}
}

// BenchmarkPassNewShape is the leader's pass for a one-job submission
// whose group no cached scheduler group has seen (its memory differs from
// the previous 4,095 submissions'), so the scheduler places it from its
// use order (no heaps built for one instance): the cold placement, as the node count grows from 500 to 10,000
// (10 allocs per node). Each probe job and its alloc are deleted after
// its pass (untimed), so every iteration sees the same store. shape=seen
// is the same pass for a shape the cache holds, for comparison. Run it
// with -benchtime 300x (b.N is then the same at each size):
//
//	go test ./internal/leader -run XXX -bench PassNewShape -benchtime 300x
func BenchmarkPassNewShape(b *testing.B) {
	shapes := map[string]func(i int) spec.Resources{
		"new":  func(i int) spec.Resources { return spec.Resources{CPU: 10, MemoryMB: 16 + i%4096} },
		"seen": func(int) spec.Resources { return spec.Resources{CPU: 10, MemoryMB: 16} },
	}
	for _, nodes := range []int{500, 10_000} {
		for _, shape := range []string{"new", "seen"} {
			b.Run(fmt.Sprintf("nodes=%d/shape=%s", nodes, shape), func(b *testing.B) {
				benchPasses(b, nodes, 10*nodes, shapes[shape], true)
			})
		}
	}
}

// benchPasses times, per iteration, the leader's pass for a new
// one-instance job of the resources res(i) on a store of passBench(nodes,
// allocs), with one scheduler cache kept across the passes: read the
// pass's state (with markDown and noteDownSince, as schedule does),
// decide, and apply the placement to the store. One pass
// (i = 0) warms the cache first, untimed, as a running leader's is. With
// remove, the job and its alloc are deleted after each pass (untimed).
func benchPasses(b *testing.B, nodes, allocs int, res func(i int) spec.Resources, remove bool) {
	s, rev := passBench(b, nodes, allocs)
	cache := scheduler.NewCache()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	seen := rev
	ls := &leadership{Loop: &Loop{}} // for noteDownSince, which the pass calls as schedule does
	var read, dec, apply time.Duration
	pass := func(i int) {
		name := fmt.Sprintf("probe-%d", i)
		job := benchJob(name, 1)
		job.Groups[0].Tasks[0].Resources = res(i)
		rev++
		job.Version, job.ModifyIndex = 1, rev
		tx := s.Write()
		tx.PutJob(job)
		tx.Commit(rev)

		t0 := time.Now()
		ss := s.Snapshot()
		snap := passFor(ss, map[string]bool{name: true}, cache, seen)
		seen = ss.Rev
		snap.MarkDown()
		ls.noteDownSince(snap, now)
		t1 := time.Now()
		d := planner.Decide(snap, now, cache, planner.Policy{}, uuid.NewString)
		t2 := time.Now()
		if len(d.Scheduler.Placements) != 1 {
			b.Fatalf("placed %d", len(d.Scheduler.Placements))
		}
		rev++
		tx = s.Write()
		for _, a := range d.Plan.Allocs {
			tx.PutAlloc(a, rev, rev)
		}
		tx.Commit(rev)
		read, dec, apply = read+t1.Sub(t0), dec+t2.Sub(t1), apply+time.Since(t2)
		if remove {
			b.StopTimer()
			rev++
			tx = s.Write()
			tx.DeleteJob(name)
			for _, a := range d.Plan.Allocs {
				tx.DeleteAlloc(a.ID)
			}
			tx.Commit(rev)
			b.StartTimer()
		}
	}
	pass(0)
	read, dec, apply = 0, 0, 0
	for i := 1; b.Loop(); i++ {
		pass(i)
	}
	b.ReportMetric(float64(read.Microseconds())/float64(b.N)/1000, "ms-read/op")
	b.ReportMetric(float64(dec.Microseconds())/float64(b.N)/1000, "ms-decide/op")
	b.ReportMetric(float64(apply.Microseconds())/float64(b.N)/1000, "ms-apply/op")
}

// BenchmarkPassFull is the leader's periodic pass over every job, with
// nothing to do, at 10,000 nodes and 100,000 allocs.
func BenchmarkPassFull(b *testing.B) {
	s, _ := passBench(b, 10_000, 100_000)
	cache := scheduler.NewCache()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for b.Loop() {
		snap := passFor(s.Snapshot(), nil, cache, 0)
		snap.MarkDown()
		d := planner.Decide(snap, now, cache, planner.Policy{}, uuid.NewString)
		if len(d.Plan.Allocs) != 0 {
			b.Fatalf("a pass with nothing to do writes %d allocs", len(d.Plan.Allocs))
		}
	}
}

// BenchmarkResyncSlice is the pass of one slice of the periodic resync's
// sweep (sweepSliceAllocs allocs' worth of jobs, here 2 jobs of 1,000),
// with nothing to do, at 10,000 nodes and 100,000 allocs: what a
// submission that comes during a resync waits for, where it waited for
// BenchmarkPassFull before the sweep. Run both:
//
//	go test ./internal/leader -run XXX -bench 'PassFull|ResyncSlice' -count 3
func BenchmarkResyncSlice(b *testing.B) {
	s, rev := passBench(b, 10_000, 100_000)
	cache := scheduler.NewCache()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	snap := passFor(s.Snapshot(), nil, cache, 0) // warm the cache, as the leader's is
	planner.Decide(snap, now, cache, planner.Policy{}, uuid.NewString)
	var sw sweep
	slices := 0
	for b.Loop() {
		if !sw.pending() {
			sw.start(sweepSliceAllocs)
		}
		ss := s.Snapshot()
		only := sw.slice(ss, map[string]bool{})
		snap := passFor(ss, only, cache, rev)
		snap.MarkDown()
		d := planner.Decide(snap, now, cache, planner.Policy{}, uuid.NewString)
		if len(d.Plan.Allocs) != 0 || len(only) != 2 {
			b.Fatalf("a slice of %d jobs with nothing to do writes %d allocs", len(only), len(d.Plan.Allocs))
		}
		sw.passed(0)
		slices++
	}
	b.ReportMetric(float64(slices)/float64(b.N), "slices/op")
}

// BenchmarkPassAfterANodeChange is a one-job pass right after a node
// went down or came back, at 10,000 nodes and 100,000 allocs: the
// scheduler's node index changes, but the use of every other node does
// not.
func BenchmarkPassAfterANodeChange(b *testing.B) {
	s, rev := passBench(b, 10_000, 100_000)
	cache := scheduler.NewCache()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	i, seen := 0, rev
	for b.Loop() {
		i++
		name := fmt.Sprintf("probe-%d", i)
		job := benchJob(name, 1)
		rev++
		job.Version, job.ModifyIndex = 1, rev
		tx := s.Write()
		tx.PutJob(job)
		tx.SetNodeAlive(fmt.Sprintf("node-%05d", i%100), i%200 >= 100) // down, then back
		tx.Commit(rev)

		ss := s.Snapshot()
		snap := passFor(ss, map[string]bool{name: true}, cache, seen)
		seen = ss.Rev
		snap.MarkDown()
		d := planner.Decide(snap, now, cache, planner.Policy{}, uuid.NewString)
		if len(d.Scheduler.Placements) != 1 {
			b.Fatalf("placed %d", len(d.Scheduler.Placements))
		}
		rev++
		tx = s.Write()
		for _, a := range d.Plan.Allocs {
			tx.PutAlloc(a, rev, rev)
		}
		tx.Commit(rev)
	}
}
