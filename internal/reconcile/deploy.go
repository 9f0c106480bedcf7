package reconcile

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/drover-org/drover/internal/spec"
)

// Deployments: a service job whose groups have an update block rolls each
// new version out as a deployment (spec.Deployment), one per version. For
// each such group, while the deployment runs:
//
//	canary > 0, not promoted   place one canary beside each of the first
//	                           `canary` old instances; replace nothing else.
//	                           Promote when every canary is healthy and
//	                           auto_promote is set, or an operator asked.
//	promoted, or no canary     a promoted canary's old instance is stopped;
//	                           then old instances are replaced in index
//	                           order, so that at most max_parallel of the
//	                           deployment's instances are undecided (no
//	                           health verdict from their agent yet).
//	an instance unhealthy      replaced as the group's reschedule policy
//	(its agent's verdict, or   says (after its delay; a running one is
//	it failed before one),     stopped with cause unhealthy and counts as
//	progress_deadline > 0      a failure); until then it takes a place in
//	                           max_parallel. A canary's replacement is a
//	                           canary. The deployment goes on.
//	  its policy allows no     the deployment fails (reschedule-exhausted),
//	  more replacements        as below: the group can make no more
//	                           progress, so it does not wait for its deadline
//	an instance unhealthy,     the deployment fails (unhealthy): nothing
//	progress_deadline = 0      more is replaced, unpromoted canaries are
//	                           stopped, and with auto_revert the job goes
//	                           back to its newest version whose deployment
//	                           succeeded
//	no instance healthy by     the deployment fails (progress-deadline), as
//	the group's deadline       above. The deadline is progress_deadline
//	                           after the deployment starts, pushed back to
//	                           progress_deadline after each instance's
//	                           healthy verdict, a promotion and a resume
//	an operator fails it       the deployment fails (operator) at once
//	paused by an operator      no canary is placed and nothing more is
//	                           replaced until resumed; the progress
//	                           deadline runs again from the resume
//	nothing old is left and    the deployment succeeds: its version is
//	every instance it placed   stable, a target for later reverts
//	is healthy
//
// Why a deployment failed is data (spec.Deployment.Failure, in brackets
// above); its description says it in words. Every instance placed while
// the deployment runs (replacements, new instances, replacements of failed
// or unhealthy ones) belongs to it and needs a verdict. A newer version
// cancels a running deployment, as does a stop. A version without update
// blocks has no deployment, and its changed instances are replaced at
// once.

// Revert asks the leader to store version ToVersion's spec as the job's next
// version, if the job's ModifyIndex is still CheckIndex.
type Revert struct {
	Job        string
	ToVersion  uint64
	CheckIndex int64
	Reason     string
}

// keepDeployments is how many final deployments are kept per job, besides
// its newest successful one (the revert target).
const keepDeployments = 10

// rollout is one job's deployment as this pass sees and changes it.
type rollout struct {
	d    *spec.Deployment // a copy; compared with orig at the end
	orig *spec.Deployment // as read, or nil when new in this pass
	// failure is why it fails in this pass, or ""; why says it in words.
	failure spec.DeploymentFailure
	why     string
	groups  map[string]*groupRollout
	// canariesReady: every group that waits for a promotion has all its
	// canaries live and healthy; autoPromote: every such group has
	// auto_promote. As Nomad, a deployment's groups are promoted together.
	canariesReady, autoPromote bool
}

// fail notes the first reason the deployment fails in this pass.
func (ro *rollout) fail(cause spec.DeploymentFailure, why string) {
	if ro.failure == "" {
		ro.failure, ro.why = cause, why
	}
}

// groupRollout is what one pass knows of one group in a running deployment.
type groupRollout struct {
	u  *spec.UpdateStrategy
	dg *spec.DeploymentGroup
	// undecided counts the deployment's live instances without a verdict,
	// those placed in this pass included.
	undecided int
	// old are the live instances to replace, by index.
	old []*spec.Alloc
	// pending are the group's instances whose newest alloc of the
	// deployment is unhealthy (still running, or failed, or stopped for
	// it) and that wait for a replacement, by index: what the reschedule
	// policy says of each. Each takes one of max_parallel's places until
	// its replacement is placed (which takes it over).
	pending map[int]rescheduling
	// canaries are the live unpromoted canaries of this deployment.
	canaries []*spec.Alloc
}

// deploymentsByJob returns each job's deployments, newest first.
func deploymentsByJob(ds []*spec.Deployment) map[string][]*spec.Deployment {
	out := map[string][]*spec.Deployment{}
	for _, d := range ds {
		out[d.Job] = append(out[d.Job], d)
	}
	for _, l := range out {
		slices.SortFunc(l, func(a, b *spec.Deployment) int {
			return cmp.Or(b.CreateTime.Compare(a.CreateTime), cmp.Compare(b.JobVersion, a.JobVersion), strings.Compare(b.ID, a.ID))
		})
	}
	return out
}

// managed reports whether any group of j rolls out through deployments.
func managed(j *spec.Job) bool {
	for _, g := range j.Groups {
		if j.UpdateOf(g).Parallel() > 0 {
			return true
		}
	}
	return false
}

// startRollout finds or creates the deployment of j's current version, and
// cancels an older one that still runs; ds are j's deployments, newest
// first. It returns nil when j's version has no deployment.
func (r *reconciler) startRollout(j *spec.Job, ds []*spec.Deployment) *rollout {
	var latest *spec.Deployment
	if len(ds) > 0 {
		latest = ds[0]
	}
	cancel := func(why string) {
		if latest != nil && latest.Status == spec.DeploymentRunning {
			d := cloneDeployment(latest)
			d.Status, d.Description, d.ModifyTime = spec.DeploymentCancelled, why, r.now
			clearDeadlines(d)
			r.res.Deployments = append(r.res.Deployments, d)
		}
	}
	switch {
	case j.Stopped:
		cancel("job stopped")
		return nil
	case !managed(j):
		if latest != nil && latest.JobVersion != j.Version {
			cancel(fmt.Sprintf("superseded by version %d, which has no update block", j.Version))
		}
		return nil
	case latest != nil && latest.JobVersion == j.Version:
		if latest.Status != spec.DeploymentRunning {
			return &rollout{d: latest, orig: latest}
		}
		return &rollout{d: cloneDeployment(latest), orig: latest, groups: map[string]*groupRollout{}}
	}
	cancel(fmt.Sprintf("superseded by version %d", j.Version))
	d := &spec.Deployment{Job: j.Name, Namespace: j.Namespace, JobVersion: j.Version, Status: spec.DeploymentRunning,
		Description: running, Groups: map[string]*spec.DeploymentGroup{}, CreateTime: r.now, ModifyTime: r.now}
	for _, g := range j.Groups {
		if u := j.UpdateOf(g); u.Parallel() > 0 {
			d.Groups[g.Name] = &spec.DeploymentGroup{Desired: g.Count, AutoRevert: u.Reverts(), AutoPromote: u.Promotes(),
				RequireProgressBy: deadline(r.now, u)}
		}
	}
	return &rollout{d: d, groups: map[string]*groupRollout{}}
}

// running is a running deployment's description unless it waits for
// something in particular.
const running = "deployment is running"

// paused reports whether an operator paused the deployment.
func (ro *rollout) paused() bool {
	return ro.d.Request != nil && ro.d.Request.Paused
}

// deadline is when a group with strategy u must have made progress, counted
// from t: zero with progress_deadline 0 (no deadline).
func deadline(t time.Time, u *spec.UpdateStrategy) time.Time {
	if pd := u.Progress(); pd > 0 {
		return t.Add(pd.Std())
	}
	return time.Time{}
}

// running reports whether ro is a deployment that still acts.
func (ro *rollout) running() bool {
	return ro != nil && ro.d.Status == spec.DeploymentRunning && ro.failure == ""
}

// tally counts, before any decision, what the deployment's instances of
// each group say, and fails the deployment when it can make no more
// progress: an instance unhealthy in a group without a progress deadline;
// one unhealthy whose reschedule policy allows no more replacements; or
// no instance healthy by the group's progress deadline. Other unhealthy
// instances are pending: replaced as their reschedule policy says.
// groupAllocs are the job's allocs by group.
func (ro *rollout) tally(j *spec.Job, groupAllocs map[string][]*spec.Alloc, now time.Time) {
	if !ro.running() {
		return
	}
	d := ro.d
	d.Description = running
	d.AwaitingPromotion = false
	if req := d.Request; req != nil && req.Fail {
		ro.fail(spec.FailedByOperator, "failed by an operator")
	}
	ro.canariesReady, ro.autoPromote = true, true
	for _, g := range j.Groups {
		u := j.UpdateOf(g)
		if u.Parallel() == 0 {
			continue
		}
		dg := d.Groups[g.Name]
		if dg == nil {
			dg = &spec.DeploymentGroup{AutoRevert: u.Reverts(), AutoPromote: u.Promotes(), RequireProgressBy: deadline(now, u)}
			d.Groups[g.Name] = dg
		}
		dg.Desired = g.Count
		gr := &groupRollout{u: u, dg: dg, pending: map[int]rescheduling{}}
		ro.groups[g.Name] = gr
		healthy, unhealthy, placed := 0, 0, 0
		var lastHealthy time.Time
		var canaries []string
		var lastBad *spec.Alloc // the latest judged unhealthy, for the deadline's reason
		slots := map[int][]*spec.Alloc{}
		for _, a := range groupAllocs[g.Name] {
			slots[a.Index] = append(slots[a.Index], a)
			if a.DeploymentID != d.ID {
				continue
			}
			placed++
			if a.Canary {
				canaries = append(canaries, a.ID)
			}
			h := verdict(a)
			switch {
			case h != nil && h.Healthy:
				healthy++
				if h.Time.After(lastHealthy) {
					lastHealthy = h.Time
				}
			case h != nil:
				unhealthy++
				if u.Progress() == 0 {
					ro.fail(spec.FailedUnhealthy, fmt.Sprintf("%s unhealthy: %s", a.Name, h.Reason))
				}
				if lastBad == nil || h.Time.After(verdict(lastBad).Time) {
					lastBad = a
				}
			case live(a):
				gr.undecided++
			}
		}
		slices.Sort(canaries)
		if u.Canaries() > 0 && !dg.Promoted && dg.DesiredCanaries > 0 {
			ready := 0
			for _, a := range groupAllocs[g.Name] {
				if h := verdict(a); a.DeploymentID == d.ID && a.Canary && live(a) && h != nil && h.Healthy {
					ready++
				}
			}
			ro.canariesReady = ro.canariesReady && ready == dg.DesiredCanaries
			ro.autoPromote = ro.autoPromote && u.Promotes()
		}
		dg.Placed, dg.Unhealthy, dg.PlacedCanaries = placed, unhealthy, canaries
		if u.Progress() > 0 {
			ro.pending(j, g, gr, slots)
		}
		if healthy > dg.Healthy && !lastHealthy.IsZero() && u.Progress() > 0 {
			dg.RequireProgressBy = deadline(lastHealthy, u)
		}
		dg.Healthy = healthy
		// A pause stops the clock; a resume starts it again.
		if req := d.Request; req != nil && !req.Resumed.IsZero() && !dg.RequireProgressBy.IsZero() {
			if by := deadline(req.Resumed, u); by.After(dg.RequireProgressBy) {
				dg.RequireProgressBy = by
			}
		}
		// A group with nothing left to do (every instance served by a
		// live alloc of the version: unchanged, or placed by the
		// deployment and healthy) has no deadline to meet, as Nomad's
		// deployments skip done groups.
		if !ro.paused() && !dg.RequireProgressBy.IsZero() && !now.Before(dg.RequireProgressBy) && !groupDone(j, g, d, dg, slots) {
			why := fmt.Sprintf("no instance of group %s became healthy within progress_deadline %s", g.Name, u.Progress().Short())
			if lastBad != nil {
				why += fmt.Sprintf(" (last unhealthy: %s: %s)", lastBad.Name, verdict(lastBad).Reason)
			}
			ro.fail(spec.FailedProgressDeadline, why)
		}
	}
}

// groupDone reports whether every wanted instance of group g is served by
// a live alloc that stays: one of the job's current tasks that the
// deployment did not place, or one it placed that is healthy (a canary
// only once promoted). slots are the group's allocs by index.
func groupDone(j *spec.Job, g *spec.Group, d *spec.Deployment, dg *spec.DeploymentGroup, slots map[int][]*spec.Alloc) bool {
	for i := range g.Count {
		ok := false
		for _, a := range slots[i] {
			if !live(a) || outdated(j, g, a) || (a.Canary && !dg.Promoted) {
				continue
			}
			if a.DeploymentID != d.ID {
				ok = true
				continue
			}
			if h := verdict(a); h == nil || !h.Healthy {
				ok = false
				break
			}
			ok = true
		}
		if !ok {
			return false
		}
	}
	return true
}

// pending finds group g's instances whose newest alloc of the deployment
// is unhealthy and not yet replaced, and what their reschedule policy says;
// one whose policy allows no more replacements fails the deployment (the
// group can make no more progress there, so it does not wait for its
// deadline, as Nomad does). slots are the group's allocs by index.
func (ro *rollout) pending(j *spec.Job, g *spec.Group, gr *groupRollout, slots map[int][]*spec.Alloc) {
	indexes := slices.Sorted(maps.Keys(slots))
	for _, i := range indexes {
		as := slots[i]
		slices.SortFunc(as, oldestFirst)
		var newest *spec.Alloc
		for _, a := range as {
			if a.DeploymentID == ro.d.ID {
				newest = a
			}
		}
		if newest == nil {
			continue
		}
		h := verdict(newest)
		if h == nil || h.Healthy || newest.NodeDown {
			continue
		}
		var rs rescheduling
		switch {
		case live(newest):
			rs = assessPending(j, g, as, newest)
		case newest.DesiredStatus == spec.DesiredRun && newest.Terminal(), newest.DesiredCause == spec.CauseUnhealthy:
			rs = assess(j, g, as)
		default:
			continue // stopped for another reason: the rules for that apply
		}
		if rs.exhausted {
			attempts, _ := rs.policy.Limit()
			ro.fail(spec.FailedRescheduleExhausted, fmt.Sprintf("%s unhealthy: %s; not replaced: its reschedule policy allows no more (attempts = %d)",
				newest.Name, h.Reason, attempts))
			continue
		}
		gr.pending[i] = rs
	}
}

// verdict is an alloc's deployment health: its agent's verdict, or an
// unhealthy one when it failed before giving one. An alloc lost with its
// node, or stopped by the leader, has none.
func verdict(a *spec.Alloc) *spec.DeploymentHealth {
	if a.Status != nil && a.Status.DeploymentHealth != nil {
		return a.Status.DeploymentHealth
	}
	// A service that completes on its own failed as a service (assess
	// reschedules it as a failure): unhealthy too.
	completed := a.ClientStatusOr() == spec.ClientComplete && !a.JobType.Completes()
	if a.DesiredStatus == spec.DesiredRun && (a.ClientStatusOr() == spec.ClientFailed || completed) {
		why := "failed"
		if completed {
			why = "completed"
		}
		if a.Status.Description != "" {
			why += ": " + a.Status.Description
		}
		return &spec.DeploymentHealth{Healthy: false, Time: a.Status.UpdateTime, Reason: why}
	}
	return nil
}

// unpromotedCanary reports whether a is a canary whose deployment has not
// promoted its group: it runs beside the instance it may replace.
func (r *reconciler) unpromotedCanary(a *spec.Alloc) bool {
	if !a.Canary {
		return false
	}
	d := r.deployments[a.DeploymentID]
	if d == nil {
		return false
	}
	dg := d.Groups[a.Group]
	return dg == nil || !dg.Promoted
}

// rollGroup carries out a running deployment for group g once its
// instances have been looked at: canaries, promotion, then replacements
// within max_parallel.
func (r *reconciler) rollGroup(j *spec.Job, g *spec.Group, ro *rollout, gr *groupRollout) {
	dg, u := gr.dg, gr.u
	if ro.paused() {
		ro.wait("paused by an operator: no new batch until drover deployment resume " + spec.ShortID(ro.d.ID))
		return
	}
	if c := u.Canaries(); c > 0 && !dg.Promoted {
		if len(gr.old) == 0 && len(gr.canaries) == 0 && dg.DesiredCanaries == 0 {
			// Nothing of the group changed: no canary is needed.
			return
		}
		if dg.DesiredCanaries == 0 {
			dg.DesiredCanaries = min(c, len(gr.old))
		}
		have := map[int]bool{}
		for _, a := range gr.canaries {
			have[a.Index] = true
		}
		placed := len(gr.canaries)
		for _, a := range gr.old {
			if placed >= dg.DesiredCanaries {
				break
			}
			if have[a.Index] {
				continue
			}
			reason := fmt.Sprintf("canary for version %d", j.Version)
			if rs, ok := gr.pending[a.Index]; ok {
				// Its canary failed or was unhealthy: replaced as the
				// reschedule policy says.
				if rs.due.After(r.now) {
					r.wakeAt(rs.due)
					placed++
					continue
				}
				reason += fmt.Sprintf(", replacing %s canary %s (%s)", endedWord(rs.last), spec.ShortID(rs.last.ID), rs.attempt())
			}
			r.placeCanary(j, g, a.Index, reason, a.ID)
			placed++
		}
		healthy := 0
		for _, a := range gr.canaries {
			if h := verdict(a); h != nil && h.Healthy {
				healthy++
			}
		}
		ready := healthy == dg.DesiredCanaries && len(gr.canaries) == dg.DesiredCanaries
		asked := ro.d.Request != nil && ro.d.Request.Promote
		switch {
		case ready && !ro.canariesReady:
			ro.wait(fmt.Sprintf("group %s: %d canaries healthy, waiting for the other groups' canaries", g.Name, healthy))
			return
		case ready && (ro.autoPromote || asked):
			// Nomad's rule: a promotion pushes the progress deadline back.
			dg.Promoted = true
			if by := deadline(r.now, u); by.After(dg.RequireProgressBy) {
				dg.RequireProgressBy = by
			}
		case ready:
			ro.d.AwaitingPromotion = true
			ro.wait(fmt.Sprintf("group %s: %d canaries healthy, waiting for promotion (drover deployment promote %s)", g.Name, healthy, spec.ShortID(ro.d.ID)))
			return
		case asked:
			ro.wait(fmt.Sprintf("group %s: promotion asked, waiting for %d of %d canaries to be healthy", g.Name, dg.DesiredCanaries-healthy, dg.DesiredCanaries))
			return
		default:
			return
		}
	}
	// Promoted canaries replace their slot's old instance at once: they
	// are healthy already.
	promoted := map[int]*spec.Alloc{}
	for _, a := range gr.canaries {
		promoted[a.Index] = a
	}
	gr.canaries = nil
	budget := u.Parallel() - gr.undecided - len(gr.pending)
	var left []*spec.Alloc
	for _, a := range gr.old {
		if c := promoted[a.Index]; c != nil {
			r.stop(a, spec.CauseUpdate, "replaced by canary "+spec.ShortID(c.ID)+" (deployment promoted)")
			continue
		}
		left = append(left, a)
	}
	gr.old = left
	for len(gr.old) > 0 && budget > 0 {
		a := gr.old[0]
		gr.old = gr.old[1:]
		r.replace(j, g, a.Index, "", spec.CauseUpdate, fmt.Sprintf("job updated to version %d", j.Version), a)
		budget--
	}
}

// wait notes why the deployment waits for an operator (the first group's
// reason, when several wait).
func (ro *rollout) wait(why string) {
	if ro.d.Description == running {
		ro.d.Description = why
	}
}

// placeCanary places a canary of version j in slot index, beside the old
// instance previous.
func (r *reconciler) placeCanary(j *spec.Job, g *spec.Group, index int, reason, previous string) {
	r.place(j, g, index, "", spec.CauseCanary, reason, previous, "")
	r.res.Place[len(r.res.Place)-1].Canary = true
}

// finish settles a running deployment after this pass's decisions: failed
// (with a revert when asked for), successful, or still running; and
// records it when it changed. stable is the newest version whose
// deployment succeeded before this one, or 0.
func (r *reconciler) finish(j *spec.Job, ro *rollout, stable uint64) {
	if ro == nil {
		return
	}
	d := ro.d
	switch {
	case d.Status == spec.DeploymentFailed:
		// Already failed: revert (again) until the job's version moves.
		if d.RevertTo != 0 && j.Version == d.JobVersion {
			r.res.Reverts = append(r.res.Reverts, Revert{Job: j.Name, ToVersion: d.RevertTo, CheckIndex: j.ModifyIndex,
				Reason: fmt.Sprintf("deployment %s failed", spec.ShortID(d.ID))})
		}
	case d.Status != spec.DeploymentRunning:
	case ro.failure != "":
		d.Status, d.Failure, d.Description = spec.DeploymentFailed, ro.failure, ro.why
		revert := false
		for _, dg := range d.Groups {
			revert = revert || dg.AutoRevert
		}
		switch {
		case revert && stable != 0:
			d.RevertTo = stable
			d.Description += fmt.Sprintf("; reverting to version %d", stable)
			r.res.Reverts = append(r.res.Reverts, Revert{Job: j.Name, ToVersion: stable, CheckIndex: j.ModifyIndex,
				Reason: fmt.Sprintf("deployment %s failed", spec.ShortID(d.ID))})
		case revert:
			d.Description += "; no earlier version succeeded, so there is nothing to revert to"
		}
		clearDeadlines(d)
	case ro.done():
		d.Status, d.Description = spec.DeploymentSuccessful, "every instance is healthy"
		clearDeadlines(d)
	default:
		for _, dg := range d.Groups {
			if !dg.RequireProgressBy.IsZero() {
				r.wakeAt(dg.RequireProgressBy)
			}
		}
	}
	if ro.orig == nil || !sameDeployment(ro.orig, d) {
		d.ModifyTime = r.now
		r.res.Deployments = append(r.res.Deployments, d)
	}
}

// done reports whether every group of a running deployment is done: nothing
// old left, canaries promoted, every instance it placed healthy.
func (ro *rollout) done() bool {
	for _, gr := range ro.groups {
		if len(gr.old) > 0 || len(gr.canaries) > 0 || gr.undecided > 0 || len(gr.pending) > 0 {
			return false
		}
		if gr.dg.DesiredCanaries > 0 && !gr.dg.Promoted {
			return false
		}
	}
	return true
}

func (r *reconciler) wakeAt(t time.Time) {
	if t.After(r.now) && (r.res.NextRun.IsZero() || t.Before(r.res.NextRun)) {
		r.res.NextRun = t
	}
}

// stableVersion is the newest version below v whose deployment succeeded.
func stableVersion(ds []*spec.Deployment, v uint64) uint64 {
	var best uint64
	for _, d := range ds {
		if d.Status == spec.DeploymentSuccessful && d.JobVersion < v && d.JobVersion > best {
			best = d.JobVersion
		}
	}
	return best
}

// gcDeployments forgets the deployments of jobs that no longer exist, and
// all but the newest keepDeployments final ones of a job (never its newest
// successful one). ds is newest first.
func (r *reconciler) gcDeployments(job *spec.Job, ds []*spec.Deployment) {
	if job == nil {
		for _, d := range ds {
			r.res.DeleteDeployments = append(r.res.DeleteDeployments, d.ID)
		}
		return
	}
	kept, stableKept := 0, false
	for _, d := range ds {
		if !d.Status.Final() {
			continue
		}
		if d.Status == spec.DeploymentSuccessful && !stableKept {
			stableKept = true
			continue
		}
		if kept++; kept > keepDeployments {
			r.res.DeleteDeployments = append(r.res.DeleteDeployments, d.ID)
		}
	}
}

func clearDeadlines(d *spec.Deployment) {
	for _, dg := range d.Groups {
		dg.RequireProgressBy = time.Time{}
	}
}

func cloneDeployment(d *spec.Deployment) *spec.Deployment {
	c := *d
	c.Groups = make(map[string]*spec.DeploymentGroup, len(d.Groups))
	for name, dg := range d.Groups {
		g := *dg
		g.PlacedCanaries = slices.Clone(dg.PlacedCanaries)
		c.Groups[name] = &g
	}
	return &c
}

// sameDeployment compares what the leader stores of a deployment.
func sameDeployment(a, b *spec.Deployment) bool {
	if a.Status != b.Status || a.Failure != b.Failure || a.Description != b.Description || a.AwaitingPromotion != b.AwaitingPromotion || a.RevertTo != b.RevertTo || len(a.Groups) != len(b.Groups) {
		return false
	}
	return maps.EqualFunc(a.Groups, b.Groups, func(x, y *spec.DeploymentGroup) bool {
		return x.Desired == y.Desired && x.DesiredCanaries == y.DesiredCanaries && slices.Equal(x.PlacedCanaries, y.PlacedCanaries) &&
			x.Promoted == y.Promoted && x.AutoPromote == y.AutoPromote && x.AutoRevert == y.AutoRevert &&
			x.Placed == y.Placed && x.Healthy == y.Healthy && x.Unhealthy == y.Unhealthy && x.RequireProgressBy.Equal(y.RequireProgressBy)
	})
}
