package reconcile

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/spec"
)

// world applies the reconciler's results to a set of allocs and
// deployments, as the leader and instant agents would: a stopped alloc is
// complete at once, a placed one runs with no verdict yet.
type world struct {
	t      *testing.T
	jobs   []*spec.Job
	allocs []*spec.Alloc
	deps   []*spec.Deployment
	now    time.Time
	seq    int
}

func newWorld(t *testing.T, j *spec.Job) *world {
	return &world{t: t, jobs: []*spec.Job{j}, now: now}
}

// keepDeployments stores the deployments a pass wrote, as the leader
// does, giving new ones an ID.
func (w *world) keepDeployments(res Result) {
	for _, d := range res.Deployments {
		if d.ID == "" {
			w.seq++
			d.ID = fmt.Sprintf("dep%d", w.seq)
		}
		i := slices.IndexFunc(w.deps, func(x *spec.Deployment) bool { return x.ID == d.ID })
		if i < 0 {
			w.deps = append(w.deps, d)
		} else {
			w.deps[i] = d
		}
	}
}

func (w *world) pass() Result { return w.apply(false) }

// apply runs one reconcile pass and carries its result out as the leader
// and the agents would: with slow agents, a stopped alloc keeps running
// until agentsReport and a placement waiting for it is left for a later
// pass; otherwise a stop ends the alloc at once, its verdict kept (a
// verdict is final).
func (w *world) apply(slow bool) Result {
	w.t.Helper()
	res := Reconcile(Input{Jobs: w.jobs, Allocs: w.allocs, Deployments: w.deps, Now: w.now})
	w.keepDeployments(res)
	for _, st := range res.Stop {
		a := w.alloc(st.Alloc.ID)
		a.DesiredStatus, a.DesiredReason, a.DesiredCause, a.ModifyTime = spec.DesiredStop, st.Reason, st.Cause, w.now
		if !slow {
			a.Status = endedKeepingVerdict(a, w.now)
		}
	}
	for _, p := range res.Place {
		if slow && p.WaitFor != "" && !w.alloc(p.WaitFor).Terminal() {
			continue
		}
		w.seq++
		a := &spec.Alloc{ID: fmt.Sprintf("a%03d", w.seq), Name: spec.AllocName(p.Job.Name, p.Group.Name, p.Index), Job: p.Job.Name,
			JobVersion: p.Job.Version, Group: p.Group.Name, Index: p.Index, NodeID: "n1", Tasks: p.Group.Tasks, JobType: p.Job.Type,
			DesiredStatus: spec.DesiredRun, DesiredReason: p.Reason, DesiredCause: p.Cause, CreateIndex: int64(w.seq), Canary: p.Canary,
			Status: &spec.AllocStatus{ClientStatus: spec.ClientRunning, UpdateTime: w.now}}
		if p.Deployment != nil {
			a.DeploymentID = p.Deployment.ID
		}
		w.allocs = append(w.allocs, a)
	}
	for _, id := range res.DeleteDeployments {
		w.deps = slices.DeleteFunc(w.deps, func(d *spec.Deployment) bool { return d.ID == id })
	}
	return res
}

// endedKeepingVerdict is a's status once its task ended after a stop: the
// deployment verdict it had stays.
func endedKeepingVerdict(a *spec.Alloc, at time.Time) *spec.AllocStatus {
	var h *spec.DeploymentHealth
	if a.Status != nil {
		h = a.Status.DeploymentHealth
	}
	return &spec.AllocStatus{ClientStatus: spec.ClientComplete, UpdateTime: at, DeploymentHealth: h}
}

func (w *world) alloc(id string) *spec.Alloc {
	for _, a := range w.allocs {
		if a.ID == id {
			return a
		}
	}
	w.t.Fatalf("no alloc %s", id)
	return nil
}

// live returns the live allocs of version v (0: any), canaries included.
func (w *world) live(v uint64) []*spec.Alloc {
	var out []*spec.Alloc
	for _, a := range w.allocs {
		if live(a) && (v == 0 || a.JobVersion == v) {
			out = append(out, a)
		}
	}
	return out
}

// judge gives every undecided live alloc of a deployment the verdict.
func (w *world) judge(healthy bool, reason string) int {
	n := 0
	for _, a := range w.live(0) {
		if a.DeploymentID != "" && a.Status.DeploymentHealth == nil {
			a.Status.DeploymentHealth = &spec.DeploymentHealth{Healthy: healthy, Time: w.now, Reason: reason}
			n++
		}
	}
	return n
}

// healthy counts live allocs that serve: old ones, and new ones judged
// healthy.
func (w *world) healthy() int {
	n := 0
	for _, a := range w.live(0) {
		if h := a.Status.DeploymentHealth; a.DeploymentID == "" || (h != nil && h.Healthy) {
			n++
		}
	}
	return n
}

func (w *world) latest() *spec.Deployment {
	if len(w.deps) == 0 {
		return nil
	}
	return deploymentsByJob(w.deps)[w.deps[0].Job][0]
}

func (w *world) update(j *spec.Job) {
	w.jobs = []*spec.Job{j}
}

func withUpdate(g *spec.Group, u *spec.UpdateStrategy) *spec.Group {
	g.Update = u.WithDefaults(spec.DefaultUpdate())
	return g
}

func upd(parallel, canary int, revert, promote bool) *spec.UpdateStrategy {
	return &spec.UpdateStrategy{MaxParallel: &parallel, Canary: &canary, AutoRevert: &revert, AutoPromote: &promote,
		MinHealthyTime: spec.Duration(time.Second), HealthyDeadline: spec.Duration(time.Minute), ProgressDeadline: new(spec.Duration(10 * time.Minute))}
}

// strict is u with progress_deadline 0, written out: the first unhealthy
// instance fails the deployment.
func strict(u *spec.UpdateStrategy) *spec.UpdateStrategy {
	u.ProgressDeadline = new(spec.Duration(0))
	return u
}

// deployedV1 is a world where version 1 of a 5-instance job rolled out
// and succeeded.
func deployedV1(t *testing.T, u *spec.UpdateStrategy) *world {
	t.Helper()
	w := newWorld(t, svc("web", 1, withUpdate(grp("api", 5, "serve v1"), u)))
	res := w.pass()
	if len(res.Place) != 5 {
		t.Fatalf("version 1 placed %d, want all 5 at once (nothing to replace)", len(res.Place))
	}
	if d := w.latest(); d == nil || d.Status != spec.DeploymentRunning || d.JobVersion != 1 {
		t.Fatalf("deployment of version 1: %+v", d)
	}
	w.judge(true, "")
	w.pass()
	if d := w.latest(); d.Status != spec.DeploymentSuccessful {
		t.Fatalf("version 1 all healthy: deployment %s (%s)", d.Status, d.Description)
	}
	return w
}

func TestRollingUpdateKeepsMinimumHealthy(t *testing.T) {
	w := deployedV1(t, upd(2, 0, false, false))
	w.update(svc("web", 2, withUpdate(grp("api", 5, "serve v2"), upd(2, 0, false, false))))
	minHealthy, maxUndecided := 5, 0
	for step := 0; step < 20; step++ {
		w.pass()
		if d := w.latest(); d.Status == spec.DeploymentSuccessful {
			break
		}
		undecided := 0
		for _, a := range w.live(2) {
			if a.Status.DeploymentHealth == nil {
				undecided++
			}
		}
		maxUndecided = max(maxUndecided, undecided)
		minHealthy = min(minHealthy, w.healthy())
		// A pass without verdicts changes nothing.
		if res := w.pass(); len(res.Place)+len(res.Stop) != 0 {
			t.Fatalf("step %d: a pass with no new verdict placed %d and stopped %d", step, len(res.Place), len(res.Stop))
		}
		w.judge(true, "")
	}
	d := w.latest()
	if d.JobVersion != 2 || d.Status != spec.DeploymentSuccessful {
		t.Fatalf("deployment of version 2: %s (%s)", d.Status, d.Description)
	}
	if n := len(w.live(2)); n != 5 || len(w.live(1)) != 0 {
		t.Fatalf("live: %d of version 2, %d of version 1; want 5 and 0", n, len(w.live(1)))
	}
	if maxUndecided != 2 || minHealthy != 3 {
		t.Fatalf("at most %d replacements undecided at once and %d healthy at least; want 2 and 3", maxUndecided, minHealthy)
	}
	if g := d.Groups["api"]; g.Placed != 5 || g.Healthy != 5 || g.Unhealthy != 0 {
		t.Fatalf("group progress %+v", g)
	}
}

// With progress_deadline 0 the first unhealthy instance fails the
// deployment, and auto_revert brings version 1 back.
func TestBadBuildFailsAndReverts(t *testing.T) {
	w := deployedV1(t, strict(upd(2, 0, true, false)))
	w.jobs[0].ModifyIndex = 40
	v2 := svc("web", 2, withUpdate(grp("api", 5, "serve v2"), strict(upd(2, 0, true, false))))
	v2.ModifyIndex = 41
	w.update(v2)
	w.pass()
	if n := len(w.live(2)); n != 2 {
		t.Fatalf("first batch: %d of version 2, want 2", n)
	}
	w.judge(false, "check http failing")
	res := w.pass()
	d := w.latest()
	if d.Status != spec.DeploymentFailed || d.Failure != spec.FailedUnhealthy || !strings.Contains(d.Description, "unhealthy: check http failing") ||
		!strings.Contains(d.Description, "reverting to version 1") || d.RevertTo != 1 {
		t.Fatalf("after unhealthy replacements: %s (%s), revert to %d", d.Status, d.Description, d.RevertTo)
	}
	if len(res.Place) != 0 || len(res.Stop) != 0 {
		t.Fatalf("a failed deployment went on: placed %d, stopped %d", len(res.Place), len(res.Stop))
	}
	want := []Revert{{Job: "web", ToVersion: 1, CheckIndex: 41, Reason: "deployment " + d.ID + " failed"}}
	if !slices.Equal(res.Reverts, want) {
		t.Fatalf("reverts %+v, want %+v", res.Reverts, want)
	}
	if w.healthy() != 3 {
		t.Fatalf("%d healthy, want 3 (the old ones keep serving)", w.healthy())
	}
	// Until the revert lands, every pass asks for it again and changes nothing.
	if res := w.pass(); !slices.Equal(res.Reverts, want) || len(res.Place)+len(res.Stop) != 0 {
		t.Fatalf("second pass: %+v", res)
	}

	// The revert: version 3 has version 1's tasks. The old instances stay;
	// the bad ones are replaced, two at a time.
	w.update(svc("web", 3, withUpdate(grp("api", 5, "serve v1"), strict(upd(2, 0, true, false)))))
	res = w.pass()
	if len(res.Reverts) != 0 || len(res.Stop) != 2 || len(res.Place) != 2 {
		t.Fatalf("revert pass: %d stops, %d places, reverts %v", len(res.Stop), len(res.Place), res.Reverts)
	}
	for _, s := range res.Stop {
		if s.Alloc.JobVersion != 2 {
			t.Fatalf("revert stopped %s of version %d", s.Alloc.ID, s.Alloc.JobVersion)
		}
	}
	w.judge(true, "")
	w.pass()
	if d := w.latest(); d.JobVersion != 3 || d.Status != spec.DeploymentSuccessful {
		t.Fatalf("version 3: %s (%s)", d.Status, d.Description)
	}
}

func TestFailedWithoutRevertHolds(t *testing.T) {
	w := deployedV1(t, strict(upd(1, 0, false, false)))
	w.update(svc("web", 2, withUpdate(grp("api", 5, "serve v2"), strict(upd(1, 0, false, false)))))
	w.pass()
	w.judge(false, "task main restarted")
	w.pass()
	if d := w.latest(); d.Status != spec.DeploymentFailed || d.RevertTo != 0 || strings.Contains(d.Description, "revert") {
		t.Fatalf("deployment %s (%s), revert to %d", d.Status, d.Description, d.RevertTo)
	}
	for range 3 {
		if res := w.pass(); len(res.Place)+len(res.Stop)+len(res.Reverts) != 0 {
			t.Fatalf("held deployment acted: %+v", res)
		}
	}
	if len(w.live(1)) != 4 || len(w.live(2)) != 1 {
		t.Fatalf("live %d v1 and %d v2, want 4 and 1", len(w.live(1)), len(w.live(2)))
	}
}

func TestCanariesWaitForPromotion(t *testing.T) {
	for _, auto := range []bool{false, true} {
		t.Run(fmt.Sprintf("auto_promote=%v", auto), func(t *testing.T) {
			w := deployedV1(t, upd(2, 2, false, auto))
			w.update(svc("web", 2, withUpdate(grp("api", 5, "serve v2"), upd(2, 2, false, auto))))
			res := w.pass()
			if len(res.Place) != 2 || len(res.Stop) != 0 || !res.Place[0].Canary || !res.Place[1].Canary {
				t.Fatalf("canary pass: %d places (%v), %d stops", len(res.Place), res.Place, len(res.Stop))
			}
			if len(w.live(1)) != 5 {
				t.Fatalf("old instances: %d live, want all 5 beside the canaries", len(w.live(1)))
			}
			w.judge(true, "")
			res = w.pass()
			d := w.latest()
			if !auto {
				if len(res.Place)+len(res.Stop) != 0 || !d.AwaitingPromotion || !strings.Contains(d.Description, "waiting for promotion") {
					t.Fatalf("without promotion: %d places, %d stops, %q (awaiting promotion %v)", len(res.Place), len(res.Stop), d.Description, d.AwaitingPromotion)
				}
				d.Request = &spec.DeploymentRequest{Promote: true, Time: w.now}
				res = w.pass()
			}
			d = w.latest()
			if !d.Groups["api"].Promoted {
				t.Fatalf("not promoted: %q", d.Description)
			}
			// The canaries' old instances go at once; two more are replaced.
			if len(res.Stop) != 4 || len(res.Place) != 2 {
				t.Fatalf("promotion pass: %d stops, %d places; want 4 and 2", len(res.Stop), len(res.Place))
			}
			w.judge(true, "")
			w.pass()
			w.judge(true, "")
			w.pass()
			if d := w.latest(); d.Status != spec.DeploymentSuccessful || len(w.live(2)) != 5 || len(w.live(0)) != 5 {
				t.Fatalf("end: %s (%s), %d live of v2, %d live", d.Status, d.Description, len(w.live(2)), len(w.live(0)))
			}
		})
	}
}

// With progress_deadline 0 an unhealthy canary fails the deployment and is
// stopped; the old instances stay.
func TestUnhealthyCanaryIsStopped(t *testing.T) {
	w := deployedV1(t, strict(upd(1, 1, false, true)))
	w.update(svc("web", 2, withUpdate(grp("api", 5, "serve v2"), strict(upd(1, 1, false, true)))))
	w.pass()
	w.judge(false, "check http failing")
	res := w.pass()
	if d := w.latest(); d.Status != spec.DeploymentFailed || d.Failure != spec.FailedUnhealthy {
		t.Fatalf("deployment %s (%s: %s)", d.Status, d.Failure, d.Description)
	}
	if len(res.Stop) != 1 || !res.Stop[0].Alloc.Canary || len(w.live(1)) != 5 || len(w.live(2)) != 0 {
		t.Fatalf("stops %v; live v1 %d, v2 %d", res.Stop, len(w.live(1)), len(w.live(2)))
	}
}

func TestProgressDeadlineFails(t *testing.T) {
	w := deployedV1(t, upd(1, 0, false, false))
	w.update(svc("web", 2, withUpdate(grp("api", 5, "serve v2"), upd(1, 0, false, false))))
	res := w.pass()
	// The first replacement waits for its old instance to end (at most
	// stopWait, here with no kill_timeout): the leader looks again then.
	if want := w.now.Add(stopWait); !res.NextRun.Equal(want) {
		t.Fatalf("next run %v, want the end of the stop's wait %v", res.NextRun, want)
	}
	w.now = w.now.Add(10 * time.Minute)
	w.pass()
	if d := w.latest(); d.Status != spec.DeploymentFailed || d.Failure != spec.FailedProgressDeadline || !strings.Contains(d.Description, "progress_deadline 10m") {
		t.Fatalf("deployment %s (%s: %s)", d.Status, d.Failure, d.Description)
	}
}

func TestNewVersionCancelsRunningDeployment(t *testing.T) {
	w := deployedV1(t, upd(1, 0, false, false))
	w.update(svc("web", 2, withUpdate(grp("api", 5, "serve v2"), upd(1, 0, false, false))))
	w.pass()
	first := w.latest().ID
	w.update(svc("web", 3, withUpdate(grp("api", 5, "serve v3"), upd(1, 0, false, false))))
	w.pass()
	for _, d := range w.deps {
		if d.ID == first && (d.Status != spec.DeploymentCancelled || d.Description != "superseded by version 3") {
			t.Fatalf("version 2's deployment: %s (%s)", d.Status, d.Description)
		}
	}
	if d := w.latest(); d.JobVersion != 3 || d.Status != spec.DeploymentRunning {
		t.Fatalf("latest %+v", d)
	}
}

func TestCountChangeReplacesNothing(t *testing.T) {
	w := deployedV1(t, upd(1, 0, false, false))
	w.update(svc("web", 2, withUpdate(grp("api", 7, "serve v1"), upd(1, 0, false, false))))
	res := w.pass()
	if len(res.Stop) != 0 || len(res.Place) != 2 {
		t.Fatalf("count 5 -> 7: %d stops, %d places", len(res.Stop), len(res.Place))
	}
	w.judge(true, "")
	w.pass()
	if d := w.latest(); d.JobVersion != 2 || d.Status != spec.DeploymentSuccessful {
		t.Fatalf("deployment %s (%s)", d.Status, d.Description)
	}
}

func TestOperatorFailsDeployment(t *testing.T) {
	w := deployedV1(t, upd(1, 0, true, false))
	w.update(svc("web", 2, withUpdate(grp("api", 5, "serve v2"), upd(1, 0, true, false))))
	w.pass()
	w.latest().Request = &spec.DeploymentRequest{Fail: true, Time: w.now}
	res := w.pass()
	if d := w.latest(); d.Status != spec.DeploymentFailed || d.Failure != spec.FailedByOperator || !strings.HasPrefix(d.Description, "failed by an operator") || len(res.Reverts) != 1 {
		t.Fatalf("deployment %s (%s), reverts %v", d.Status, d.Description, res.Reverts)
	}
}

func TestDeploymentsOfPurgedJobAreForgotten(t *testing.T) {
	w := deployedV1(t, upd(1, 0, false, false))
	id := w.latest().ID
	w.jobs = nil
	res := w.pass()
	if !slices.Equal(res.DeleteDeployments, []string{id}) {
		t.Fatalf("delete %v, want [%s]", res.DeleteDeployments, id)
	}
}

func TestNoUpdateBlockNoDeployment(t *testing.T) {
	w := newWorld(t, svc("web", 1, grp("api", 3, "serve")))
	w.pass()
	w.update(svc("web", 2, grp("api", 3, "serve v2")))
	res := w.pass()
	if len(w.deps) != 0 || len(res.Stop) != 3 || len(res.Place) != 3 {
		t.Fatalf("without update: %d deployments, %d stops, %d places", len(w.deps), len(res.Stop), len(res.Place))
	}
}

// TestPausedDeploymentStartsNoBatch: a paused deployment replaces nothing
// more and does not fail on its progress deadline while paused; resumed,
// it goes on with the next batch, its deadline counted from the resume.
func TestPausedDeploymentStartsNoBatch(t *testing.T) {
	w := deployedV1(t, upd(1, 0, false, false))
	w.update(svc("web", 2, withUpdate(grp("api", 5, "serve v2"), upd(1, 0, false, false))))
	w.pass()
	w.judge(true, "")
	w.latest().Request = &spec.DeploymentRequest{Paused: true, Time: w.now}
	if res := w.pass(); len(res.Place)+len(res.Stop) != 0 {
		t.Fatalf("paused: %d places, %d stops; want none", len(res.Place), len(res.Stop))
	}
	d := w.latest()
	if d.Status != spec.DeploymentRunning || !strings.HasPrefix(d.Description, "paused by an operator") {
		t.Fatalf("paused deployment: %s (%s)", d.Status, d.Description)
	}
	// Long past the 10m progress deadline: still running.
	w.now = w.now.Add(30 * time.Minute)
	w.latest().Request = &spec.DeploymentRequest{Paused: true, Time: w.now}
	w.pass()
	if d := w.latest(); d.Status != spec.DeploymentRunning {
		t.Fatalf("paused past its deadline: %s (%s)", d.Status, d.Description)
	}
	w.latest().Request = &spec.DeploymentRequest{Resumed: w.now, Time: w.now}
	res := w.pass()
	if len(res.Place) != 1 || len(res.Stop) != 1 {
		t.Fatalf("resumed: %d places, %d stops; want the next batch of 1", len(res.Place), len(res.Stop))
	}
	d = w.latest()
	if d.Status != spec.DeploymentRunning || !d.Groups["api"].RequireProgressBy.Equal(w.now.Add(10*time.Minute)) {
		t.Fatalf("resumed: %s (%s), deadline %v; want running, deadline 10m after the resume", d.Status, d.Description, d.Groups["api"].RequireProgressBy)
	}
}

// unhealthy counts the allocs stopped because a deployment judged them
// unhealthy.
func (w *world) stoppedUnhealthy() int {
	n := 0
	for _, a := range w.allocs {
		if a.DesiredStatus == spec.DesiredStop && a.DesiredCause == spec.CauseUnhealthy {
			n++
		}
	}
	return n
}

// With progress_deadline > 0 (10m), as Nomad: an unhealthy instance is
// replaced as the group's reschedule policy says (services: after 30s,
// doubling) and the deployment goes on; while it waits it takes its place
// in max_parallel, so no more old instances go. A replacement that fails
// before its verdict is replaced the same way. Once replacements are
// healthy the deployment succeeds.
func TestUnhealthyIsReplacedBeforeTheDeadline(t *testing.T) {
	w := deployedV1(t, upd(1, 0, false, false))
	w.update(svc("web", 2, withUpdate(grp("api", 5, "serve v2"), upd(1, 0, false, false))))
	w.pass()
	first := w.live(2)[0]
	w.judge(false, "check http failing")
	res := w.pass()
	d := w.latest()
	if d.Status != spec.DeploymentRunning || d.Groups["api"].Unhealthy != 1 {
		t.Fatalf("after one unhealthy instance: %s (%s: %s), group %+v; want running", d.Status, d.Failure, d.Description, d.Groups["api"])
	}
	if len(res.Place)+len(res.Stop) != 0 || !res.NextRun.Equal(w.now.Add(30*time.Second)) {
		t.Fatalf("before the reschedule delay: %d places, %d stops, next run %v; want nothing, and a look 30s after the verdict",
			len(res.Place), len(res.Stop), res.NextRun)
	}
	w.now = w.now.Add(30 * time.Second)
	res = w.pass()
	if len(res.Stop) != 1 || res.Stop[0].Alloc != first || res.Stop[0].Cause != spec.CauseUnhealthy ||
		len(res.Place) != 1 || res.Place[0].Cause != spec.CauseReschedule || res.Place[0].Previous != first.ID ||
		!strings.Contains(res.Place[0].Reason, "replaces unhealthy alloc "+first.ID) || res.Place[0].Deployment == nil {
		t.Fatalf("after the delay: stops %+v, places %+v; want the unhealthy one stopped and replaced within the deployment", res.Stop, res.Place)
	}
	// The replacement fails before a verdict: replaced after 60s (the
	// second failure), the deployment still running.
	second := w.live(2)[0]
	second.Status = &spec.AllocStatus{ClientStatus: spec.ClientFailed, Description: "exit code 1", UpdateTime: w.now}
	res = w.pass()
	if d := w.latest(); d.Status != spec.DeploymentRunning || len(res.Place) != 0 || !res.NextRun.Equal(w.now.Add(time.Minute)) {
		t.Fatalf("replacement failed: %s (%s), %d places, next run %v", d.Status, d.Description, len(res.Place), res.NextRun)
	}
	w.now = w.now.Add(time.Minute)
	if res = w.pass(); len(res.Place) != 1 || res.Place[0].Previous != second.ID || len(res.Stop) != 0 {
		t.Fatalf("after the second delay: places %+v, stops %+v", res.Place, res.Stop)
	}
	for step := 0; step < 10 && w.latest().Status == spec.DeploymentRunning; step++ {
		w.judge(true, "")
		w.now = w.now.Add(time.Second)
		w.pass()
	}
	d = w.latest()
	if d.Status != spec.DeploymentSuccessful || len(w.live(2)) != 5 || len(w.live(1)) != 0 {
		t.Fatalf("end: %s (%s), %d live of v2, %d of v1", d.Status, d.Description, len(w.live(2)), len(w.live(1)))
	}
	if g := d.Groups["api"]; g.Placed != 7 || g.Healthy != 5 || g.Unhealthy != 2 || w.stoppedUnhealthy() != 1 {
		t.Fatalf("group %+v, %d stopped unhealthy; want 7 placed, 5 healthy, 2 unhealthy, 1 stopped for it", g, w.stoppedUnhealthy())
	}
	if w.healthy() != 5 {
		t.Fatalf("%d healthy", w.healthy())
	}
}

// No instance healthy by progress_deadline: the deployment fails with that
// cause, not before, saying the last unhealthy reason; auto_revert goes
// back to version 1.
func TestNoHealthyInstanceByTheDeadlineFails(t *testing.T) {
	w := deployedV1(t, upd(1, 0, true, false))
	w.jobs[0].ModifyIndex = 40
	v2 := svc("web", 2, withUpdate(grp("api", 5, "serve v2"), upd(1, 0, true, false)))
	v2.ModifyIndex = 41
	w.update(v2)
	start := w.now
	var res Result
	for w.now.Before(start.Add(10 * time.Minute)) {
		w.pass()
		w.judge(false, "check http failing")
		if d := w.latest(); d.Status != spec.DeploymentRunning {
			t.Fatalf("at %v: %s (%s: %s), before the deadline", w.now.Sub(start), d.Status, d.Failure, d.Description)
		}
		w.now = w.now.Add(30 * time.Second)
	}
	res = w.pass()
	d := w.latest()
	if d.Status != spec.DeploymentFailed || d.Failure != spec.FailedProgressDeadline ||
		!strings.Contains(d.Description, "within progress_deadline 10m") || !strings.Contains(d.Description, "check http failing") {
		t.Fatalf("at the deadline: %s (%s: %s)", d.Status, d.Failure, d.Description)
	}
	if d.RevertTo != 1 || len(res.Reverts) != 1 || res.Reverts[0].ToVersion != 1 {
		t.Fatalf("revert to %d, reverts %+v; want version 1", d.RevertTo, res.Reverts)
	}
	if w.stoppedUnhealthy() == 0 || len(w.live(1)) != 4 {
		t.Fatalf("%d replaced for being unhealthy, %d of v1 live; want some, and 4 (one replaced at a time)", w.stoppedUnhealthy(), len(w.live(1)))
	}
}

// An instance unhealthy again once its reschedule policy allows no more
// replacements: the group can make no more progress, so the deployment
// fails then, without waiting for its deadline.
func TestRescheduleAttemptsUsedUpFailTheDeployment(t *testing.T) {
	once := policy(1, time.Hour, 5*time.Second, spec.DelayConstant, time.Minute)
	w := deployedV1(t, upd(1, 0, false, false))
	w.update(svc("web", 2, withPolicy(withUpdate(grp("api", 5, "serve v2"), upd(1, 0, false, false)), once)))
	w.pass()
	w.judge(false, "task main restarted")
	w.pass()
	w.now = w.now.Add(5 * time.Second)
	if res := w.pass(); len(res.Place) != 1 || !strings.Contains(res.Place[0].Reason, "attempt 1 of 1") {
		t.Fatalf("first unhealthy: places %+v; want one replacement, attempt 1 of 1", res.Place)
	}
	w.judge(false, "task main restarted")
	res := w.pass()
	d := w.latest()
	if d.Status != spec.DeploymentFailed || d.Failure != spec.FailedRescheduleExhausted || !strings.Contains(d.Description, "attempts = 1") {
		t.Fatalf("second unhealthy: %s (%s: %s)", d.Status, d.Failure, d.Description)
	}
	if len(res.Place)+len(res.Stop) != 0 {
		t.Fatalf("a failed deployment went on: %+v %+v", res.Place, res.Stop)
	}
}

// With progress_deadline > 0 an unhealthy canary is replaced by another
// canary, not promoted; the healthy one is, and the promotion pushes the
// progress deadline back.
func TestUnhealthyCanaryIsReplaced(t *testing.T) {
	w := deployedV1(t, upd(1, 1, false, true))
	w.update(svc("web", 2, withUpdate(grp("api", 5, "serve v2"), upd(1, 1, false, true))))
	w.pass()
	bad := w.live(2)[0]
	w.judge(false, "check http failing")
	if res := w.pass(); len(res.Place)+len(res.Stop) != 0 || w.latest().Groups["api"].Promoted {
		t.Fatalf("unhealthy canary: %+v %+v, promoted %v", res.Place, res.Stop, w.latest().Groups["api"].Promoted)
	}
	w.now = w.now.Add(30 * time.Second)
	res := w.pass()
	if len(res.Stop) != 1 || res.Stop[0].Alloc != bad || res.Stop[0].Cause != spec.CauseUnhealthy ||
		len(res.Place) != 1 || !res.Place[0].Canary || !strings.Contains(res.Place[0].Reason, "replacing unhealthy canary "+bad.ID) {
		t.Fatalf("after the delay: stops %+v, places %+v; want the canary replaced by a canary", res.Stop, res.Place)
	}
	if d := w.latest(); d.Status != spec.DeploymentRunning || d.Groups["api"].Promoted || len(w.live(1)) != 5 {
		t.Fatalf("%s, promoted %v, %d v1 live", d.Status, d.Groups["api"].Promoted, len(w.live(1)))
	}
	w.now = w.now.Add(time.Minute)
	w.judge(true, "")
	w.pass()
	d := w.latest()
	if !d.Groups["api"].Promoted || !d.Groups["api"].RequireProgressBy.Equal(w.now.Add(10*time.Minute)) {
		t.Fatalf("healthy canary: promoted %v, deadline %v; want promoted, deadline 10m from the promotion", d.Groups["api"].Promoted, d.Groups["api"].RequireProgressBy)
	}
	for step := 0; step < 10 && w.latest().Status == spec.DeploymentRunning; step++ {
		w.judge(true, "")
		w.pass()
	}
	if d := w.latest(); d.Status != spec.DeploymentSuccessful || len(w.live(2)) != 5 {
		t.Fatalf("end: %s (%s), %d of v2", d.Status, d.Description, len(w.live(2)))
	}
}
