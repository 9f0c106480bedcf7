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
	// Nodes is the cluster's nodes: where system jobs run. The rules read
	// node loss from the allocs themselves (Alloc.NodeDown, set by the
	// leader from node liveness after its grace period); a system job's
	// instance is placed on a node only while the node is ready.
	Nodes []*spec.Node
	// Deployments is every deployment in the registry, with operators'
	// requests merged in (deploy.go).
	Deployments []*spec.Deployment
	// NodeAllocs returns every alloc on a node, when Allocs holds only
	// some jobs': what the node rules (move.go) count, read only for the
	// nodes they look at. Nil: Allocs.
	NodeAllocs func(node string) []*spec.Alloc
	// Node returns a node of Nodes by ID, or nil: so that a pass looks up
	// the nodes it needs without indexing all of them. Nil: Nodes.
	Node func(id string) *spec.Node
	// MemoryHighPercent, when > 0, is the share of a node's memory its
	// tasks may use before its lowest-priority service instance moves
	// elsewhere, at most one per MemoryMoveInterval per node (move.go).
	MemoryHighPercent  int
	MemoryMoveInterval time.Duration
	// Now is the time the decisions are made at; delayed replacements that
	// are due at or before Now are placed.
	Now time.Time
}

// Place asks for one new instance.
type Place struct {
	Job   *spec.Job
	Group *spec.Group
	Index int
	// Cause is why the instance is placed, as the alloc records it;
	// Reason says it in words.
	Cause    spec.DesiredCause
	Reason   string
	Previous string // the alloc this one replaces, or ""
	// AvoidNode is the node of the alloc this one replaces after it failed,
	// was lost or was evicted, or "": the scheduler prefers any other node
	// that fits.
	AvoidNode string
	// Node pins the instance to one node ID, or is "": a system job's
	// instance runs on the node it is for, or nowhere (then AvoidNode is
	// "").
	Node string
	// Deployment is the running deployment the instance belongs to, or
	// nil; a new one has no ID yet (the leader gives it one). Canary: the
	// instance runs beside Previous, which keeps running.
	Deployment *spec.Deployment
	Canary     bool
	// Update, when set, is the strategy by which the instance's agent
	// judges its health: a move waits on that verdict (move.go).
	Update *spec.UpdateStrategy
	// WaitFor is an alloc of the same instance that was told to stop and
	// may still be running (its node is up and its agent has not said it
	// ended), or "". The leader places this instance only once WaitFor has
	// ended, or its node is down, or stopWait has passed since the stop,
	// so that an instance never runs twice; `drover plan` shows it
	// placed.
	WaitFor string
}

// Stop asks for one alloc to be stopped.
type Stop struct {
	Alloc  *spec.Alloc
	Cause  spec.DesiredCause
	Reason string
}

// Result is every change the reconciler wants made.
type Result struct {
	Place []Place  // sorted by job, group, index
	Stop  []Stop   // sorted by alloc ID
	GC    []string // alloc IDs to delete from the registry, sorted
	// Deployments are the deployments created or changed, sorted by job;
	// DeleteDeployments the IDs to forget, sorted; Reverts the jobs to
	// revert after a failed deployment, sorted by job.
	Deployments       []*spec.Deployment
	DeleteDeployments []string
	Reverts           []Revert
	// Unmatched are the system jobs' groups that no node may run, sorted
	// by job and group: nothing is placed for them, and nothing waits.
	Unmatched []Unmatched
	// NextRun is zero, or the earliest time after Now at which a delayed
	// replacement becomes due or a deployment's deadline passes; the
	// leader should reconcile again then.
	NextRun time.Time
}

// Unmatched says why no node may run a system job's group: its failure
// has NoNodeMatched set.
type Unmatched struct {
	Job string
	spec.PlacementFailure
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
	groups := map[[2]string][]*spec.Alloc{} // a system job's instances are per node, not per index
	for _, a := range in.Allocs {
		k := slot{a.Job, a.Group, a.Index}
		slots[k] = append(slots[k], a)
		groups[[2]string{a.Job, a.Group}] = append(groups[[2]string{a.Job, a.Group}], a)
	}
	for _, as := range slots {
		slices.SortFunc(as, oldestFirst)
	}

	r := &reconciler{now: in.Now, deployments: map[string]*spec.Deployment{}}
	for _, d := range in.Deployments {
		r.deployments[d.ID] = d
	}
	r.view = newNodeView(in)
	r.wakeAt(r.view.memoryVictims(in, jobs))
	deps := deploymentsByJob(in.Deployments)
	for name, ds := range deps {
		r.gcDeployments(jobs[name], ds)
	}
	for k, as := range slots {
		j := jobs[k.job]
		if j == nil {
			r.purged(as)
			continue
		}
		g := j.Group(k.group)
		if j.Type.PerNode() && !j.Stopped && g != nil {
			continue // see system
		}
		var counted []*spec.Alloc
		if !j.Stopped && g != nil && k.index >= 0 && k.index < g.Count {
			counted = assess(j, g, as).counted
		}
		r.gc(as, counted)
		r.stopLost(as)
		switch {
		case j.Stopped:
			r.stopLive(as, spec.CauseJobStopped, "job stopped")
		case j.IsTemplate():
			r.stopLive(as, spec.CauseJobStopped, "job became periodic or parameterized: its children run instead")
		case g == nil:
			r.stopLive(as, spec.CauseGroupRemoved, fmt.Sprintf("group %s removed from the job", k.group))
		case k.index >= g.Count || k.index < 0:
			r.stopLive(as, spec.CauseCountReduced, fmt.Sprintf("count reduced to %d", g.Count))
		}
		// In-range instances are handled below, with the ones that have
		// no allocs at all.
	}
	for _, j := range in.Jobs {
		ro := r.startRollout(j, deps[j.Name])
		if j.Stopped || j.IsTemplate() {
			continue // a template's children run, not the template
		}
		byGroup := map[string][]*spec.Alloc{}
		for _, g := range j.Groups {
			byGroup[g.Name] = groups[[2]string{j.Name, g.Name}]
		}
		if ro != nil {
			ro.tally(j, byGroup, r.now)
		}
		for _, g := range j.Groups {
			if j.Type.PerNode() {
				r.system(j, g, byGroup[g.Name], in.Nodes)
				continue
			}
			r.enterGroup(ro, g)
			for i := range g.Count {
				r.instance(j, g, i, "", slots[slot{j.Name, g.Name, i}])
			}
			if r.gr != nil {
				r.rollGroup(j, g, ro, r.gr)
			}
			r.rollMoves(j, g, byGroup[g.Name])
			r.enterGroup(nil, nil)
		}
		r.finish(j, ro, stableVersion(deps[j.Name], j.Version))
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
	slices.SortFunc(res.Unmatched, func(a, b Unmatched) int {
		return cmp.Or(strings.Compare(a.Job, b.Job), strings.Compare(a.Group, b.Group))
	})
	slices.SortFunc(res.Deployments, func(a, b *spec.Deployment) int {
		return cmp.Or(strings.Compare(a.Job, b.Job), a.CreateTime.Compare(b.CreateTime), strings.Compare(a.ID, b.ID))
	})
	slices.Sort(res.DeleteDeployments)
	slices.SortFunc(res.Reverts, func(a, b Revert) int { return strings.Compare(a.Job, b.Job) })
	return res
}

type reconciler struct {
	now time.Time
	res Result
	// deployments are the input's, by ID.
	deployments map[string]*spec.Deployment
	// For the group being decided: its running deployment (placements
	// join it) and the rollout's view of the group, or nil; hold is true
	// when the deployment of the job's version failed, so that no more
	// old instances are replaced.
	dep  *spec.Deployment
	gr   *groupRollout
	hold bool
	// view is the cluster's nodes as the move rules see them; moves are
	// the current group's (move.go).
	view  *nodeView
	moves []move
	// waitFor is, for the instance being decided, its alloc that is
	// stopping (see Place.WaitFor), or "", and waitDue when that wait
	// ends.
	waitFor string
	waitDue time.Time
}

// enterGroup sets what the rules for group g's instances need to know of
// the job's deployment ro (nil: none, or leaving the group).
func (r *reconciler) enterGroup(ro *rollout, g *spec.Group) {
	r.dep, r.gr, r.hold = nil, nil, false
	switch {
	case ro == nil || g == nil:
	case ro.running():
		r.dep = ro.d
		r.gr = ro.groups[g.Name] // nil: this group has no update block
	case ro.failure != "" || ro.d.Status == spec.DeploymentFailed:
		r.hold = ro.d.Groups[g.Name] != nil
	}
}

func (r *reconciler) stop(a *spec.Alloc, cause spec.DesiredCause, reason string) {
	r.res.Stop = append(r.res.Stop, Stop{Alloc: a, Cause: cause, Reason: reason})
}

// place asks for j.g[index] on node pin, or where the scheduler likes
// (preferring any node but avoid) when pin is "".
func (r *reconciler) place(j *spec.Job, g *spec.Group, index int, pin string, cause spec.DesiredCause, reason, previous, avoid string) {
	if pin != "" {
		avoid = ""
	}
	r.res.Place = append(r.res.Place, Place{Job: j, Group: g, Index: index, Cause: cause, Reason: reason, Previous: previous, AvoidNode: avoid, Node: pin,
		Deployment: r.dep, WaitFor: r.waitFor})
	if r.waitFor != "" {
		r.wakeAt(r.waitDue) // in case the stopping alloc's end is never heard of
	}
	if r.gr != nil {
		delete(r.gr.pending, index) // replaced: its successor takes its place
		r.gr.undecided++            // every placement of a deployment needs a verdict
	}
}

// replace stops old and places its successor in old's slot, which waits
// for old to end unless old's node is down (Place.WaitFor).
func (r *reconciler) replace(j *spec.Job, g *spec.Group, index int, pin string, cause spec.DesiredCause, reason string, old *spec.Alloc) {
	r.stop(old, cause, reason)
	savedFor, savedDue := r.waitFor, r.waitDue
	if !old.NodeDown {
		r.waitFor, r.waitDue = old.ID, stopDue(old, r.now)
	}
	r.place(j, g, index, pin, cause, reason, old.ID, "")
	r.waitFor, r.waitDue = savedFor, savedDue
}

func (r *reconciler) stopLive(as []*spec.Alloc, cause spec.DesiredCause, reason string) {
	for _, a := range as {
		if live(a) {
			r.stop(a, cause, reason)
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
			r.stop(a, spec.CauseJobPurged, "job purged")
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
			r.stop(a, spec.CauseNodeDown, "node "+a.NodeName+" is down (no heartbeat)")
		}
	}
}

// stoppedLost reports whether a was told to stop because its node went
// down. A record without a cause is not: see spec.DesiredCause.
func stoppedLost(a *spec.Alloc) bool {
	return a.DesiredStatus == spec.DesiredStop && a.DesiredCause == spec.CauseNodeDown
}

// isEvicted reports whether a was stopped to make room for other work:
// the instance did nothing wrong and is placed again at once, without
// counting as a reschedule.
func isEvicted(a *spec.Alloc) bool {
	return a.DesiredStatus == spec.DesiredStop && a.Evicted()
}

// gc forgets all but the newest keepTerminal terminal allocs of one
// instance, and never the ones its reschedule policy is counting (at most
// attempts+1 within the interval), so that a limit above keepTerminal still
// holds. as is sorted oldest first.
func (r *reconciler) gc(as []*spec.Alloc, counted []*spec.Alloc) {
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
		if ended(a) && !slices.Contains(counted, a) {
			r.res.GC = append(r.res.GC, a.ID)
			terminal--
		}
	}
}

// instance decides for one wanted instance j.g[index]; as are its allocs,
// oldest first. pin is the node a system job's instance is for, or "".
func (r *reconciler) instance(j *spec.Job, g *spec.Group, index int, pin string, as []*spec.Alloc) {
	// An alloc of this instance told to stop may still run: what is
	// placed here waits for it.
	if a, due := stopping(as, r.now); a != nil {
		r.waitFor, r.waitDue = a.ID, due
	}
	defer func() { r.waitFor, r.waitDue = "", time.Time{} }()
	// The instance to keep is the oldest live alloc of the job's current
	// tasks, else the oldest live one. A canary not yet promoted runs
	// beside it; a canary of a deployment that ended unpromoted is
	// stopped.
	var kept *spec.Alloc
	var others []*spec.Alloc
	for _, a := range as {
		switch {
		case !live(a):
		case r.unpromotedCanary(a):
			if r.dep != nil && a.DeploymentID == r.dep.ID {
				if r.gr == nil {
					break
				}
				if rs, ok := r.gr.pending[a.Index]; ok && rs.last == a && !r.depPaused() {
					// Unhealthy: stopped once its reschedule policy's
					// delay has passed, and rollGroup places another
					// (not while paused: it places nothing then).
					if !rs.due.After(r.now) {
						r.stop(a, spec.CauseUnhealthy, "unhealthy: "+verdict(a).Reason)
						break
					}
					r.wakeAt(rs.due)
				}
				r.gr.canaries = append(r.gr.canaries, a)
			} else {
				r.stop(a, spec.CauseCanaryUnpromoted, "canary of a deployment that ended unpromoted")
			}
		case kept == nil:
			kept = a
		case outdated(j, g, kept) && !outdated(j, g, a):
			others = append(others, kept)
			kept = a
		default:
			others = append(others, a)
		}
	}
	for _, a := range others {
		if outdated(j, g, a) && !outdated(j, g, kept) {
			r.stop(a, spec.CauseDuplicate, "replaced by "+spec.ShortID(kept.ID))
		} else {
			r.stop(a, spec.CauseDuplicate, "duplicate of "+kept.ID)
		}
	}
	// A singleton on a down node may still be running there until its
	// agent fences itself: nothing new is placed in this slot
	// (a replacement, or an updated copy) before that is certain.
	for _, a := range as {
		if due, wait := singletonWait(a, r.now); wait {
			if r.res.NextRun.IsZero() || due.Before(r.res.NextRun) {
				r.res.NextRun = due
			}
			return
		}
	}

	if kept != nil {
		switch {
		case r.replaceUnhealthy(j, g, index, pin, kept):
		case !outdated(j, g, kept):
			r.considerMove(j, kept)
		case r.hold:
			// The job's deployment failed: kept as it is.
		case r.gr != nil:
			r.gr.old = append(r.gr.old, kept) // rollGroup decides
		default:
			r.replace(j, g, index, pin, spec.CauseUpdate, fmt.Sprintf("job updated to version %d", j.Version), kept)
		}
		return
	}

	// Stopped by the leader for reasons that are not the program's, and
	// nothing has happened to the instance since: place it again at once,
	// without counting an attempt. An evicted instance; or one lost with
	// its node that is back before the replacement could be placed (a
	// system job's instance always is: it is placed again only on its
	// node).
	if n := len(as); n > 0 {
		switch a := as[n-1]; {
		case isEvicted(a):
			r.place(j, g, index, pin, spec.CauseReplaceEvicted, "evicted: "+a.DesiredReason, a.ID, a.NodeID)
			return
		case stoppedLost(a):
			r.place(j, g, index, pin, spec.CauseReplaceLost, lostReason(a), a.ID, a.NodeID)
			return
		case a.DesiredStatus == spec.DesiredStop && outdated(j, g, a):
			// Replaced in an earlier pass (replace), whose new instance
			// waited for this one to end.
			r.place(j, g, index, pin, spec.CauseUpdate, fmt.Sprintf("job updated to version %d", j.Version), a.ID, "")
			return
		}
	}

	// Lost with its node in this pass: replace at once (a batch instance
	// too); the node's failure is not the program's.
	for i := len(as) - 1; i >= 0; i-- {
		// lostNow, or told to stop earlier while its node stays down (a
		// singleton whose wait has just ended).
		if a := as[i]; a.NodeDown && !a.Terminal() {
			r.place(j, g, index, pin, spec.CauseReplaceLost, lostReason(a), a.ID, a.NodeID)
			return
		}
	}

	// No live alloc: what happens next depends on how the newest alloc
	// that ended on its own ended, and on the reschedule policy.
	rs := assess(j, g, as)
	switch {
	case rs.last == nil:
		r.place(j, g, index, pin, spec.CauseNew, "new instance", "", "")
	case rs.done, rs.exhausted:
		// A completed batch instance is done; an instance that used up its
		// reschedule attempts stays down (Summarize says why).
	case rs.lost:
		// Lost: the node went away, not the program's fault. Replace it at
		// once, and do not count it.
		r.place(j, g, index, pin, spec.CauseReplaceLost, "replaces lost alloc "+spec.ShortID(rs.last.ID), rs.last.ID, rs.last.NodeID)
	case j.Type.PerNode():
		// A system job's instance is not rescheduled (assess), so the one
		// that ended here ran an older version: the new one runs in its
		// place at once.
		r.place(j, g, index, pin, spec.CauseUpdate, fmt.Sprintf("job updated to version %d", j.Version), rs.last.ID, "")
	case rs.due.After(r.now):
		if r.res.NextRun.IsZero() || rs.due.Before(r.res.NextRun) {
			r.res.NextRun = rs.due
		}
	default:
		r.place(j, g, index, pin, spec.CauseReschedule, fmt.Sprintf("replaces %s alloc %s (%s)", endedWord(rs.last), spec.ShortID(rs.last.ID), rs.attempt()),
			rs.last.ID, rs.last.NodeID)
	}
}

// replaceUnhealthy replaces a, the live alloc of instance index, when it is
// the running deployment's and was judged unhealthy (tally found it
// pending): stopped and replaced once its reschedule policy's delay has
// passed, as if it had failed. It reports whether a was such an alloc.
func (r *reconciler) replaceUnhealthy(j *spec.Job, g *spec.Group, index int, pin string, a *spec.Alloc) bool {
	if r.gr == nil || a.DeploymentID != r.dep.ID {
		return false
	}
	rs, ok := r.gr.pending[index]
	if !ok || rs.last != a {
		return false
	}
	if r.depPaused() {
		return true // replaced once resumed, as nothing else is meanwhile
	}
	if rs.due.After(r.now) {
		r.wakeAt(rs.due)
		return true
	}
	r.stop(a, spec.CauseUnhealthy, "unhealthy: "+verdict(a).Reason)
	savedFor, savedDue := r.waitFor, r.waitDue
	r.waitFor, r.waitDue = a.ID, stopDue(a, r.now)
	r.place(j, g, index, pin, spec.CauseReschedule, fmt.Sprintf("replaces unhealthy alloc %s (%s)", spec.ShortID(a.ID), rs.attempt()), a.ID, a.NodeID)
	r.waitFor, r.waitDue = savedFor, savedDue
	return true
}

// depPaused reports whether the running deployment of the group being
// decided is paused by an operator.
func (r *reconciler) depPaused() bool {
	return r.dep != nil && r.dep.Request != nil && r.dep.Request.Paused
}

// outdated reports whether a runs other tasks than the job's current
// version of group g, mounts other volumes, or runs them in another
// network mode: it must be replaced for the version to run.
func outdated(j *spec.Job, g *spec.Group, a *spec.Alloc) bool {
	return a.JobVersion != j.Version && (!tasksEqual(a.Tasks, g.Tasks) || !volumesEqual(a.Volumes, g.Volumes) || a.NetworkModeOf() != g.NetworkMode() ||
		!dnsEqual(a.DNS, g.NetworkDNS()) || a.Hostname != g.NetworkHostname())
}

// rescheduling is what the reschedule policy says about an instance that
// has no live alloc.
type rescheduling struct {
	policy *spec.ReschedulePolicy
	// last is the newest alloc that ended on its own, or nil when none did:
	// an alloc that ended because it was told to stop (count reduced, job
	// stopped, replaced) says nothing about the instance's health.
	last *spec.Alloc
	// done: a batch instance that completed.
	done bool
	// lost: last was lost with its node; it is replaced at once and is not
	// counted.
	lost bool
	// failures counts the allocs of the job's current version that ended on
	// their own (failed, or a service that completed) and were not lost,
	// less than the policy's interval before last ended (by their
	// Status.UpdateTime): the replacement being decided would be the
	// failures-th within that interval. Without an interval every kept
	// alloc counts. The window ends at last's end, not at Now, so that a
	// decision not to reschedule does not change as time passes.
	failures int
	// counted are those allocs, newest first, at most attempts+1 of them,
	// under a limited policy only: what gc must keep for the limit to hold.
	counted []*spec.Alloc
	// exhausted: the policy allows no more replacements.
	exhausted bool
	// due is when the replacement may be placed: last's end plus the delay.
	due time.Time
}

// assess applies j's reschedule policy for group g to one instance whose
// allocs, oldest first, are as. An alloc a deployment stopped because it
// was unhealthy (spec.CauseUnhealthy) counts as ended on its own, at its
// verdict.
func assess(j *spec.Job, g *spec.Group, as []*spec.Alloc) rescheduling {
	return assessPending(j, g, as, nil)
}

// assessPending is assess with pending, a live alloc of as that its
// deployment judged unhealthy (or nil), taken as ended at its verdict: what
// the policy says of replacing it.
func assessPending(j *spec.Job, g *spec.Group, as []*spec.Alloc, pending *spec.Alloc) rescheduling {
	rs := rescheduling{policy: j.ReschedulePolicyOf(g)}
	var ended []*spec.Alloc
	for _, a := range as {
		if a == pending || (a.DesiredStatus == spec.DesiredRun && a.Terminal()) || stoppedUnhealthy(a) {
			ended = append(ended, a)
		}
	}
	if len(ended) == 0 {
		return rs
	}
	rs.last = ended[len(ended)-1]
	if j.Type.Completes() {
		for _, a := range ended {
			if a.ClientStatusOr() == spec.ClientComplete {
				rs.done = true
				return rs
			}
		}
	}
	if rs.last.ClientStatusOr() == spec.ClientLost {
		rs.lost = true
		return rs
	}

	attempts, unlimited := rs.policy.Limit()
	end := endTime(rs.last)
	for i := len(ended) - 1; i >= 0; i-- {
		a := ended[i]
		if a.JobVersion != j.Version || a.ClientStatusOr() == spec.ClientLost {
			continue
		}
		if iv := rs.policy.Interval.Std(); iv > 0 && !endTime(a).After(end.Add(-iv)) {
			continue
		}
		rs.failures++
		if !unlimited && len(rs.counted) <= attempts {
			rs.counted = append(rs.counted, a)
		}
	}
	rs.exhausted = !unlimited && rs.failures > attempts
	if j.Type.PerNode() {
		// As Nomad: a system job is not rescheduled. Its tasks' restart
		// policy restarts them on their node; once that is used up, or a
		// task ends on its own, the instance stays down until the job
		// changes.
		rs.exhausted = rs.failures > 0
	}
	rs.due = end.Add(delay(rs.policy, max(rs.failures, 1)))
	return rs
}

// stoppedUnhealthy reports whether a deployment stopped a because it was
// unhealthy.
func stoppedUnhealthy(a *spec.Alloc) bool {
	return a.DesiredStatus == spec.DesiredStop && a.DesiredCause == spec.CauseUnhealthy
}

// endTime is when a, an alloc assess counts, ended: its last report, or
// for one judged unhealthy and not ended on its own, its verdict.
func endTime(a *spec.Alloc) time.Time {
	if a.DesiredStatus == spec.DesiredRun && a.Terminal() {
		return a.Status.UpdateTime
	}
	if h := verdict(a); h != nil {
		return h.Time
	}
	return a.ModifyTime
}

// attempt says which replacement this is: "attempt 2", or "attempt 2 of 3"
// under a limited policy.
func (rs rescheduling) attempt() string {
	k := max(rs.failures, 1)
	if attempts, unlimited := rs.policy.Limit(); !unlimited {
		return fmt.Sprintf("attempt %d of %d", k, attempts)
	}
	return fmt.Sprintf("attempt %d", k)
}

// delay is how long after its k-th counted failure (k >= 1) an instance is
// replaced: Delay, or with the exponential function Delay * 2^(k-1); at
// most MaxDelay either way.
//
// The failures counted, and so the delay, stop growing when the instance's
// history does: keepTerminal allocs, or the attempts allowed.
func delay(p *spec.ReschedulePolicy, k int) time.Duration {
	d, limit := p.Delay.Std(), p.MaxDelay.Std()
	if p.DelayFunction == spec.DelayExponential {
		for i := 1; i < k && d < limit; i++ {
			d *= 2
		}
	}
	return min(d, limit)
}

func lostReason(a *spec.Alloc) string {
	return fmt.Sprintf("replaces alloc %s lost with node %s", spec.ShortID(a.ID), a.NodeName)
}

func endedWord(a *spec.Alloc) string {
	if stoppedUnhealthy(a) || live(a) {
		return "unhealthy"
	}
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

// stopWait bounds how long a placement waits for a stopping alloc of its
// instance to end, beyond that alloc's kill_timeout: an agent reports an
// ended task within a second or two, and one that cannot report is soon
// down, which ends the wait at once.
const stopWait = 10 * time.Second

// stopping returns the newest alloc of as (oldest first) that was told to
// stop and may still be running: not ended, its node up, stopWait past its
// kill_timeout not yet passed since the stop (its ModifyTime). due is when
// the wait ends.
func stopping(as []*spec.Alloc, now time.Time) (a *spec.Alloc, due time.Time) {
	for i := len(as) - 1; i >= 0; i-- {
		a := as[i]
		if a.DesiredStatus != spec.DesiredStop || a.Terminal() || a.NodeDown {
			continue
		}
		if due := stopDue(a, a.ModifyTime); now.Before(due) {
			return a, due
		}
	}
	return nil, time.Time{}
}

// stopDue is when a wait for a, told to stop at from, ends.
func stopDue(a *spec.Alloc, from time.Time) time.Time {
	var kill spec.Duration
	for _, t := range a.Tasks {
		kill = max(kill, t.KillTimeout)
	}
	return from.Add(kill.Std() + stopWait)
}

// fenceMargin is added to a singleton's wait beyond its agent's stop_after
// and kill_timeout, for clock rates and the agent's own timer slack.
const fenceMargin = time.Second

// singletonWait says whether a, an alloc with a disconnect policy on a node
// that is down, may still be running, and until when. Its cut-off agent
// stops it StopAfter after its last contact with a server, and its tasks
// take up to their kill_timeout to go; the node was declared down a node TTL
// after that last contact, so waiting StopAfter + kill_timeout + margin from
// when the leader saw the node down is enough. A zero NodeDownSince (not
// known) counts as now.
func singletonWait(a *spec.Alloc, now time.Time) (time.Time, bool) {
	if !a.NodeDown || a.Terminal() || a.Disconnect == nil || a.Disconnect.StopAfter <= 0 {
		return time.Time{}, false
	}
	since := a.NodeDownSince
	if since.IsZero() {
		since = now
	}
	var kill spec.Duration
	for _, t := range a.Tasks {
		kill = max(kill, t.KillTimeout)
	}
	due := since.Add(a.Disconnect.StopAfter.Std() + kill.Std() + fenceMargin)
	return due, now.Before(due)
}
