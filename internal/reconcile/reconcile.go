package reconcile

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/drover-org/drover/internal/spec"
)

// Input is a snapshot of desired and actual state.
type Input struct {
	Jobs []*spec.Job
	// Allocs is every alloc in the registry, terminal ones included, with
	// their Status merged in.
	Allocs []*spec.Alloc
	// Nodes is the cluster's nodes. The rules read node loss from the
	// allocs themselves (Alloc.NodeDown, set by the leader from node
	// liveness after its grace period), so they do not use Nodes yet.
	Nodes []*spec.Node
	// Now is the time the decisions are made at; delayed replacements that
	// are due at or before Now are placed.
	Now time.Time
}

// Place asks for one new instance.
type Place struct {
	Job      *spec.Job
	Group    *spec.Group
	Index    int
	Reason   string
	Previous string // the alloc this one replaces, or ""
}

// Stop asks for one alloc to be stopped.
type Stop struct {
	Alloc  *spec.Alloc
	Reason string
}

// Result is every change the reconciler wants made.
type Result struct {
	Place []Place  // sorted by job, group, index
	Stop  []Stop   // sorted by alloc ID
	GC    []string // alloc IDs to delete from the registry, sorted
	// NextRun is zero, or the earliest time after Now at which a delayed
	// replacement becomes due; the leader should reconcile again then.
	NextRun time.Time
}

// keepTerminal is how many terminal allocs are kept per instance: enough to
// show the recent history of a crashing instance in `drover status`, few
// enough that a crash loop does not fill the registry.
const keepTerminal = 5

// slot identifies one instance: job.group[index].
type slot struct {
	job, group string
	index      int
}

// Reconcile decides what to place, stop and forget so that the allocs match
// the jobs. See the package documentation for the rules.
func Reconcile(in Input) Result {
	jobs := make(map[string]*spec.Job, len(in.Jobs))
	for _, j := range in.Jobs {
		jobs[j.Name] = j
	}
	slots := map[slot][]*spec.Alloc{}
	for _, a := range in.Allocs {
		k := slot{a.Job, a.Group, a.Index}
		slots[k] = append(slots[k], a)
	}
	for _, as := range slots {
		slices.SortFunc(as, oldestFirst)
	}

	r := &reconciler{now: in.Now}
	for k, as := range slots {
		j := jobs[k.job]
		if j == nil {
			r.purged(as)
			continue
		}
		r.gc(as)
		r.stopLost(as)
		g := j.Group(k.group)
		switch {
		case j.Stopped:
			r.stopLive(as, "job stopped")
		case g == nil:
			r.stopLive(as, fmt.Sprintf("group %s removed from the job", k.group))
		case k.index >= g.Count || k.index < 0:
			r.stopLive(as, fmt.Sprintf("count reduced to %d", g.Count))
		}
		// In-range instances are handled below, with the ones that have
		// no allocs at all.
	}
	for _, j := range in.Jobs {
		if j.Stopped {
			continue
		}
		for _, g := range j.Groups {
			for i := range g.Count {
				r.instance(j, g, i, slots[slot{j.Name, g.Name, i}])
			}
		}
	}

	res := r.res
	slices.SortFunc(res.Place, func(a, b Place) int {
		return cmp.Or(
			strings.Compare(a.Job.Name, b.Job.Name),
			strings.Compare(a.Group.Name, b.Group.Name),
			cmp.Compare(a.Index, b.Index),
		)
	})
	slices.SortFunc(res.Stop, func(a, b Stop) int { return strings.Compare(a.Alloc.ID, b.Alloc.ID) })
	slices.Sort(res.GC)
	return res
}

type reconciler struct {
	now time.Time
	res Result
}

func (r *reconciler) stop(a *spec.Alloc, reason string) {
	r.res.Stop = append(r.res.Stop, Stop{Alloc: a, Reason: reason})
}

func (r *reconciler) place(j *spec.Job, g *spec.Group, index int, reason, previous string) {
	r.res.Place = append(r.res.Place, Place{Job: j, Group: g, Index: index, Reason: reason, Previous: previous})
}

func (r *reconciler) stopLive(as []*spec.Alloc, reason string) {
	for _, a := range as {
		if live(a) {
			r.stop(a, reason)
		}
	}
}

// purged handles the allocs of a job that no longer exists: live ones are
// stopped, terminal ones forgotten. An alloc told to stop but not yet
// terminal is waiting for its agent and is left alone until it is.
func (r *reconciler) purged(as []*spec.Alloc) {
	for _, a := range as {
		switch {
		case live(a) || lostNow(a):
			r.stop(a, "job purged")
		case ended(a):
			r.res.GC = append(r.res.GC, a.ID)
		}
	}
}

// stopLost tells every alloc on a down node to stop, so that if its node
// comes back, the agent stops the old copy: the replacement stays (the rule
// is deterministic: work placed after a node was declared down wins).
func (r *reconciler) stopLost(as []*spec.Alloc) {
	for _, a := range as {
		if lostNow(a) {
			r.stop(a, "node "+a.NodeName+" is down (no heartbeat)")
		}
	}
}

// gc forgets all but the newest keepTerminal terminal allocs of one
// instance. as is sorted oldest first.
func (r *reconciler) gc(as []*spec.Alloc) {
	terminal := 0
	for _, a := range as {
		if ended(a) {
			terminal++
		}
	}
	for _, a := range as {
		if terminal <= keepTerminal {
			return
		}
		if ended(a) {
			r.res.GC = append(r.res.GC, a.ID)
			terminal--
		}
	}
}

// instance decides for one wanted instance j.g[index]; as are its allocs,
// oldest first.
func (r *reconciler) instance(j *spec.Job, g *spec.Group, index int, as []*spec.Alloc) {
	var kept *spec.Alloc
	for _, a := range as {
		switch {
		case !live(a):
		case kept == nil:
			kept = a
		default:
			r.stop(a, "duplicate of "+kept.ID)
		}
	}
	if kept != nil {
		if kept.JobVersion != j.Version && !tasksEqual(kept.Tasks, g.Tasks) {
			reason := fmt.Sprintf("job updated to version %d", j.Version)
			r.stop(kept, reason)
			r.place(j, g, index, reason, kept.ID)
		}
		return
	}

	// Lost with its node in this pass: replace at once (a batch instance
	// too); the node's failure is not the program's.
	for i := len(as) - 1; i >= 0; i-- {
		if a := as[i]; lostNow(a) {
			r.place(j, g, index, fmt.Sprintf("replaces alloc %s lost with node %s", shortID(a.ID), a.NodeName), a.ID)
			return
		}
	}

	// No live alloc. Look at the ones that ended on their own: an alloc
	// that ended because it was told to stop (count reduced, job stopped,
	// replaced) says nothing about this instance's health.
	var ended []*spec.Alloc
	for _, a := range as {
		if a.DesiredStatus == spec.DesiredRun && a.Terminal() {
			ended = append(ended, a)
		}
	}
	if len(ended) == 0 {
		r.place(j, g, index, "new instance", "")
		return
	}
	last := ended[len(ended)-1]
	if j.Type == spec.JobBatch {
		for _, a := range ended {
			if a.ClientStatusOr() == spec.ClientComplete {
				return // done
			}
		}
		if last.ClientStatusOr() == spec.ClientFailed {
			return // failed after its restarts; not retried here
		}
		// Lost: the node went away, not the program's fault. Replace it.
	}

	k := 0
	for _, a := range ended {
		if a.JobVersion == j.Version {
			k++
		}
	}
	k = max(k, 1) // the ended allocs may all be of an older version
	due := last.Status.UpdateTime.Add(backoff(k))
	if due.After(r.now) {
		if r.res.NextRun.IsZero() || due.Before(r.res.NextRun) {
			r.res.NextRun = due
		}
		return
	}
	r.place(j, g, index, fmt.Sprintf("replaces %s alloc %s (attempt %d)", endedWord(last), shortID(last.ID), k), last.ID)
}

// Replacement delays: the first replacement of an instance waits
// firstDelay after the failure, each further one twice as long, up to
// maxDelay, so that a crash-looping service costs little while a one-off
// crash is repaired quickly.
//
// With keepTerminal = 5 the count of failures seen, and so the delay, stops
// growing at 6 failures (16 minutes); maxDelay bounds it should that limit
// be raised.
const (
	firstDelay = 30 * time.Second
	maxDelay   = time.Hour
)

// backoff is how long after its k-th failure (k >= 1) an instance is
// replaced: 30s * 2^(k-1), at most 1h.
func backoff(k int) time.Duration {
	d := firstDelay
	for i := 1; i < k && d < maxDelay; i++ {
		d *= 2
	}
	return min(d, maxDelay)
}

// shortID is the first 8 characters of an alloc ID, as shown to users.
func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

func endedWord(a *spec.Alloc) string {
	switch a.ClientStatusOr() {
	case spec.ClientComplete:
		return "completed"
	case spec.ClientLost:
		return "lost"
	}
	return "failed"
}

// live reports whether a is meant to run and may still be running on a
// node that is up.
func live(a *spec.Alloc) bool {
	return a.DesiredStatus == spec.DesiredRun && !a.Terminal() && !a.NodeDown
}

// lostNow reports whether a was meant to run on a node that is now down,
// and has not yet been told to stop.
func lostNow(a *spec.Alloc) bool {
	return a.DesiredStatus == spec.DesiredRun && !a.Terminal() && a.NodeDown
}

// ended reports whether a will not run again here: terminal, or told to
// stop while its node is down (it may never report again). Such allocs
// count toward the history kept per instance and may be forgotten; an
// agent that comes back stops whatever the server no longer lists.
func ended(a *spec.Alloc) bool {
	return a.Terminal() || (a.NodeDown && a.DesiredStatus == spec.DesiredStop)
}

// oldestFirst orders allocs by CreateIndex, then ID.
func oldestFirst(a, b *spec.Alloc) int {
	return cmp.Or(cmp.Compare(a.CreateIndex, b.CreateIndex), strings.Compare(a.ID, b.ID))
}
