package leader

import (
	"maps"
	"slices"
	"time"

	"github.com/drover-org/drover/internal/state"
)

// A sweep is the periodic resync, a slice at a time. The safety net once
// was one pass over every job: at 100,000 allocs it took about 200 ms,
// during which a job submitted waited for its placement. A sweep instead
// adds the next few jobs, by name, to each pass (sweepSliceAllocs allocs'
// worth, at least one job), and the passes follow one another at once
// until every job was looked at: the same jobs as a full pass, each seen
// in a fresh snapshot, and a change that comes meanwhile waits for one
// slice, not the whole.
//
// The jobs swept are those the snapshot at the sweep's start holds, and
// those that are gone (purged) but have allocs, deployments or a schedule
// record left, which are the leader's to stop or remove. A job submitted after that start is a change, which
// wakes a pass of its own. A full pass meanwhile (a node changed, the
// watch resynced, a failure) looks at every job: the sweep ends there.
type sweep struct {
	// on: started and not finished; names are still to be looked at, and
	// read from the next pass's snapshot when nil.
	on    bool
	names []string
	// inPass: the current pass holds a slice.
	inPass bool
	// work sums the passes that held a slice: what the sweep cost.
	work time.Duration
	// sliceAllocs is sweepSliceAllocs; tests make it smaller.
	sliceAllocs int
}

// sweepSliceAllocs bounds a sweep's slice by the allocs of its jobs: a
// pass reads and reconciles each alloc of its jobs, some 2 µs each on the
// 2-core machine of docs/performance.md, so a slice adds a few
// milliseconds to the pass it rides on.
const sweepSliceAllocs = 2000

// start begins a sweep of slices of about sliceAllocs allocs; its jobs
// are read at the next pass.
func (s *sweep) start(sliceAllocs int) {
	*s = sweep{on: true, sliceAllocs: sliceAllocs}
}

// pending says the sweep has slices left: the loop runs its next pass at
// once.
func (s *sweep) pending() bool { return s.on }

// slice returns only with the sweep's next jobs added (a copy; only is
// not changed). The jobs are read from ss when the sweep has none yet.
func (s *sweep) slice(ss *state.Snapshot, only map[string]bool) map[string]bool {
	s.inPass = false
	if !s.on {
		return only
	}
	if s.names == nil {
		s.names = sweepNames(ss)
	}
	out := maps.Clone(only)
	if out == nil {
		out = map[string]bool{}
	}
	allocs := 0
	for len(s.names) > 0 && (allocs == 0 || allocs < s.sliceAllocs) {
		name := s.names[0]
		s.names = s.names[1:]
		out[name] = true
		allocs += max(ss.JobAllocCount(name), 1)
	}
	s.inPass = true
	return out
}

// passed notes a pass's time, and says whether it finished the sweep, and
// what the whole sweep's passes took then.
func (s *sweep) passed(took time.Duration) (done bool, work time.Duration) {
	if !s.inPass {
		return false, 0
	}
	s.inPass = false
	s.work += took
	if len(s.names) > 0 {
		return false, 0
	}
	work = s.work
	*s = sweep{}
	return true, work
}

// stop ends a sweep a full pass made needless.
func (s *sweep) stop() { *s = sweep{} }

// sweepNames are the jobs a sweep looks at, in order: every job stored,
// and every job that has allocs, deployments or a schedule record (a
// purged job's, which its pass cleans up), as a full pass would.
func sweepNames(ss *state.Snapshot) []string {
	names := ss.AllocJobs()
	for _, j := range ss.Jobs() {
		names = append(names, j.Name)
	}
	for _, d := range ss.Deployments() {
		names = append(names, d.Job)
	}
	for _, js := range ss.Schedules() {
		names = append(names, js.Job)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	if names == nil {
		names = []string{}
	}
	return names
}
