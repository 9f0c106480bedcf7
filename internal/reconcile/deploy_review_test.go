package reconcile

import (
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/spec"
)

// A job of two groups, each with its update block: version 2 changes only
// group "slow" (5 instances, one at a time, each taking 4 minutes to get
// healthy); group "fast" is unchanged and has nothing to do. Every healthy
// verdict of "slow" pushes its deadline back, so the deployment makes
// progress all along and must succeed. Group "fast" made no progress
// because it needed none: its deadline must not fail the deployment
// (Nomad skips groups that are done when it checks progress deadlines).
func TestReviewUnchangedGroupDeadlineDoesNotFailProgressingDeployment(t *testing.T) {
	u := func() *spec.UpdateStrategy { return upd(1, 0, false, false) }
	w := newWorld(t, svc("web", 1, withUpdate(grp("fast", 1, "fast v1"), u()), withUpdate(grp("slow", 5, "slow v1"), u())))
	w.pass()
	w.judge(true, "")
	w.pass()
	if d := w.latest(); d.Status != spec.DeploymentSuccessful {
		t.Fatalf("version 1: %s (%s)", d.Status, d.Description)
	}
	w.update(svc("web", 2, withUpdate(grp("fast", 1, "fast v1"), u()), withUpdate(grp("slow", 5, "slow v2"), u())))
	w.progressEvery(4 * time.Minute)
	d := w.latest()
	if d.JobVersion != 2 || d.Status != spec.DeploymentSuccessful {
		t.Fatalf("version 2 made progress every 4 minutes (deadline 10m): %s (%s: %s) at +%v; group fast %+v",
			d.Status, d.Failure, d.Description, w.now.Sub(now), d.Groups["fast"])
	}
}

// The same with both groups changed: group "fast" finishes in a minute and
// is done; group "slow" keeps making progress every 4 minutes. A done
// group's deadline must not fail the deployment.
func TestReviewDoneGroupDeadlineDoesNotFailProgressingDeployment(t *testing.T) {
	u := func() *spec.UpdateStrategy { return upd(1, 0, false, false) }
	w := newWorld(t, svc("web", 1, withUpdate(grp("fast", 1, "fast v1"), u()), withUpdate(grp("slow", 5, "slow v1"), u())))
	w.pass()
	w.judge(true, "")
	w.pass()
	w.update(svc("web", 2, withUpdate(grp("fast", 1, "fast v2"), u()), withUpdate(grp("slow", 5, "slow v2"), u())))
	w.progressEvery(4 * time.Minute)
	d := w.latest()
	if d.JobVersion != 2 || d.Status != spec.DeploymentSuccessful {
		t.Fatalf("version 2 made progress every 4 minutes (deadline 10m): %s (%s: %s) at +%v", d.Status, d.Failure, d.Description, w.now.Sub(now))
	}
}

// A paused deployment replaces nothing more until it is resumed
// (docs/deployments.md: "no canary is placed and nothing more is replaced
// until drover deployment resume; what it placed keeps running and is
// judged"). An instance judged unhealthy while paused must not be stopped
// and replaced before the resume.
func TestReviewPausedDeploymentDoesNotReplaceUnhealthy(t *testing.T) {
	w := deployedV1(t, upd(1, 0, false, false))
	w.update(svc("web", 2, withUpdate(grp("api", 5, "serve v2"), upd(1, 0, false, false))))
	w.pass()
	w.latest().Request = &spec.DeploymentRequest{Paused: true, Time: w.now}
	w.judge(false, "check http failing")
	w.pass()
	w.now = w.now.Add(time.Minute)
	res := w.pass()
	if len(res.Place)+len(res.Stop) != 0 {
		t.Fatalf("paused: stops %v, places %v; want nothing replaced until the resume", stops(res), places(res))
	}
}

// The same for a canary: while paused, an unhealthy canary is stopped but
// no canary takes its place until the resume; it should stay until then
// (or be replaced, but not left with neither).
func TestReviewPausedDeploymentUnhealthyCanary(t *testing.T) {
	w := deployedV1(t, upd(1, 1, false, false))
	w.update(svc("web", 2, withUpdate(grp("api", 5, "serve v2"), upd(1, 1, false, false))))
	w.pass()
	w.latest().Request = &spec.DeploymentRequest{Paused: true, Time: w.now}
	w.judge(false, "check http failing")
	w.pass()
	w.now = w.now.Add(time.Minute)
	res := w.pass()
	if len(res.Stop) != len(res.Place) {
		t.Fatalf("paused: stops %v, places %v; a canary stopped without a successor", stops(res), places(res))
	}
}

// progressEvery runs passes until the deployment ends (at most 20), its
// new instances judged healthy every interval between them.
func (w *world) progressEvery(interval time.Duration) {
	for range 20 {
		w.pass()
		if w.latest().Status != spec.DeploymentRunning {
			return
		}
		w.now = w.now.Add(interval)
		w.judge(true, "")
	}
}

func stops(res Result) []string {
	var out []string
	for _, s := range res.Stop {
		out = append(out, s.Alloc.ID+":"+string(s.Cause)+":"+s.Reason)
	}
	return out
}

func places(res Result) []string {
	var out []string
	for _, p := range res.Place {
		out = append(out, p.Group.Name+"["+string(rune('0'+p.Index))+"]:"+string(p.Cause)+":"+p.Reason)
	}
	return out
}

// Two groups with a canary each. Group b's canary is unhealthy and waits
// for its replacement (reschedule delay 30s); group a's is healthy. The
// deployment must not read "waiting for promotion" (drover run takes that
// for "canaries healthy" and exits 0), and an operator's promotion must
// not promote group a while group b's canary is unhealthy (Nomad promotes
// a deployment only when every group's canaries are healthy, manual or
// auto_promote alike).
func TestReviewPromotionWithAnUnhealthyCanaryInAnotherGroup(t *testing.T) {
	u := func() *spec.UpdateStrategy { return upd(1, 1, false, false) }
	w := newWorld(t, svc("web", 1, withUpdate(grp("a", 2, "a v1"), u()), withUpdate(grp("b", 2, "b v1"), u())))
	w.pass()
	w.judge(true, "")
	w.pass()
	w.update(svc("web", 2, withUpdate(grp("a", 2, "a v2"), u()), withUpdate(grp("b", 2, "b v2"), u())))
	w.pass()
	for _, a := range w.live(2) {
		a.Status.DeploymentHealth = &spec.DeploymentHealth{Healthy: a.Group == "a", Time: w.now, Reason: "check http failing"}
	}
	w.pass()
	d := w.latest()
	if d.AwaitingPromotion || strings.Contains(d.Description, "waiting for promotion") {
		t.Errorf("group b's canary unhealthy, yet the deployment awaits promotion (%v) and reads %q", d.AwaitingPromotion, d.Description)
	}
	d.Request = &spec.DeploymentRequest{Promote: true, Time: w.now}
	res := w.pass()
	if d := w.latest(); d.Groups["a"].Promoted {
		t.Errorf("promoted group a (stops %v, places %v) while group b's canary is unhealthy", stops(res), places(res))
	}
}

// A new instance of a service that ends on its own before its agent's
// verdict is down until its reschedule policy replaces it (30s): it is
// out of service, so it must hold its max_parallel place, and the
// deployment must not succeed meanwhile. verdict() takes a failed alloc
// for unhealthy, but a completed one (exit 0; a service that completes
// is rescheduled as a failure) for neither.
func TestReviewServiceCompletedBeforeVerdictHoldsItsPlace(t *testing.T) {
	w := deployedV1(t, upd(1, 0, false, false))
	w.update(svc("web", 2, withUpdate(grp("api", 5, "serve v2"), upd(1, 0, false, false))))
	w.pass()
	first := w.live(2)[0]
	first.Status = &spec.AllocStatus{ClientStatus: spec.ClientComplete, UpdateTime: w.now, Description: "exit code 0"}
	res := w.pass()
	if len(res.Stop) != 0 {
		t.Errorf("with %s down (completed, replaced in 30s) and max_parallel 1, the pass stopped %v", first.ID, stops(res))
	}
	// The last instance completes the same way: no success before it is back.
	w = deployedV1(t, upd(1, 0, false, false))
	w.update(svc("web", 2, withUpdate(grp("api", 1, "serve v2"), upd(1, 0, false, false))))
	w.pass()
	a := w.live(2)[0]
	a.Status = &spec.AllocStatus{ClientStatus: spec.ClientComplete, UpdateTime: w.now, Description: "exit code 0"}
	w.pass()
	if d := w.latest(); d.Status == spec.DeploymentSuccessful {
		t.Errorf("deployment successful with its only instance down (%d live): %s", len(w.live(0)), d.Description)
	}
}
