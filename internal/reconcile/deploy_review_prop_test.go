package reconcile

import (
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/drover-org/drover/internal/spec"
)

// slowPass is world.pass with agents that take their time, as the leader
// sees them: a stopped alloc keeps running (desired stop, not terminal)
// until agentsReport; a placement that waits for a stopping alloc
// (Place.WaitFor) is created only once that alloc has ended, as the
// leader does (a later pass places it again).
func (w *world) slowPass() Result { return w.apply(true) }

// agentsReport ends every alloc told to stop, keeping its verdict.
func (w *world) agentsReport() {
	for _, a := range w.allocs {
		if a.DesiredStatus == spec.DesiredStop && !a.Terminal() {
			a.Status = endedKeepingVerdict(a, w.now)
		}
	}
}

// TestReviewDeploymentTranscriptProperties drives random deployments of a
// 4-instance group through the transcript world: random verdicts (healthy
// or not), failures before a verdict, time passing, operators' promotions;
// with slow agents, stops end only when the agents report. After every
// pass:
//   - no alloc is stopped twice, and no alloc is the Previous of two
//     created reschedule allocs (an unhealthy instance replaced once);
//   - while the deployment runs, at most max_parallel slots are out of
//     service (no live old instance and no live healthy new one);
//   - a successful deployment has every slot served by one live alloc of
//     the new version with a healthy verdict, and no old one.
func TestReviewDeploymentTranscriptProperties(t *testing.T) {
	for _, slow := range []bool{false, true} {
		for _, completes := range []bool{false, true} {
			t.Run(fmt.Sprintf("slow=%v,completes=%v", slow, completes), func(t *testing.T) { reviewDeploymentProperties(t, slow, completes) })
		}
	}
}

func reviewDeploymentProperties(t *testing.T, slow, completes bool) {
	rapid.Check(t, func(rt *rapid.T) {
		const count = 4
		par := rapid.IntRange(1, 2).Draw(rt, "max_parallel")
		canary := rapid.IntRange(0, 2).Draw(rt, "canary")
		autoPromote := rapid.Bool().Draw(rt, "auto_promote")
		u := func() *spec.UpdateStrategy { return upd(par, canary, false, autoPromote) }
		pol := policy(rapid.IntRange(0, 3).Draw(rt, "attempts"), time.Hour, time.Duration(rapid.IntRange(0, 60).Draw(rt, "delay"))*time.Second,
			spec.DelayConstant, time.Hour)
		if rapid.Bool().Draw(rt, "unlimited") {
			pol = nil // the service default: unlimited, 30s doubling
		}
		w := newWorld(t, svc("web", 1, withUpdate(grp("api", count, "v1"), u())))
		w.pass()
		w.judge(true, "")
		w.pass()
		w.update(svc("web", 2, withPolicy(withUpdate(grp("api", count, "v2"), u()), pol)))
		pass := w.pass
		if slow {
			pass = w.slowPass
		}
		stopped := map[string]bool{}
		replaced := map[string]string{}
		for step := range 80 {
			res := pass()
			for _, s := range res.Stop {
				if stopped[s.Alloc.ID] {
					rt.Fatalf("step %d: %s stopped twice", step, s.Alloc.ID)
				}
				stopped[s.Alloc.ID] = true
			}
			for _, a := range w.allocs {
				if a.DesiredCause == spec.CauseReschedule && a.DesiredStatus == spec.DesiredRun {
					// Previous is not on the alloc; the reason names it.
					if by, ok := replaced[a.DesiredReason]; ok && by != a.ID {
						rt.Fatalf("step %d: %q placed twice (%s and %s)", step, a.DesiredReason, by, a.ID)
					}
					replaced[a.DesiredReason] = a.ID
				}
			}
			d := w.latest()
			if d.JobVersion != 2 {
				rt.Fatalf("latest deployment is of version %d", d.JobVersion)
			}
			serving, liveNonCanary := map[int]bool{}, map[int]int{}
			for _, a := range w.live(0) {
				if a.Canary && !d.Groups["api"].Promoted {
					continue
				}
				liveNonCanary[a.Index]++
				h := a.Status.DeploymentHealth
				if a.JobVersion == 1 || (h != nil && h.Healthy) {
					serving[a.Index] = true
				}
			}
			for i, n := range liveNonCanary {
				if n > 1 && !d.Groups["api"].Promoted {
					rt.Fatalf("step %d: slot %d has %d live allocs", step, i, n)
				}
			}
			switch d.Status {
			case spec.DeploymentRunning:
				if out := count - len(serving); out > par {
					rt.Fatalf("step %d: %d slots out of service, max_parallel %d (%s)", step, out, par, d.Description)
				}
			case spec.DeploymentSuccessful:
				good := 0
				for _, a := range w.live(0) {
					if h := a.Status.DeploymentHealth; a.JobVersion != 2 || h == nil || !h.Healthy {
						rt.Fatalf("step %d: successful with live %s (v%d, verdict %+v)", step, a.ID, a.JobVersion, h)
					}
					good++
				}
				if good != count {
					rt.Fatalf("step %d: successful with %d healthy of %d", step, good, count)
				}
				return
			default:
				return
			}
			switch rapid.IntRange(0, 5).Draw(rt, fmt.Sprintf("action%d", step)) {
			case 0, 1:
				for _, a := range w.live(2) {
					if a.DeploymentID != "" && a.Status.DeploymentHealth == nil && rapid.Bool().Draw(rt, "judge") {
						a.Status.DeploymentHealth = &spec.DeploymentHealth{Healthy: rapid.IntRange(0, 2).Draw(rt, "healthy") > 0, Time: w.now, Reason: "r"}
					}
				}
			case 2:
				for _, a := range w.live(2) {
					if a.Status.DeploymentHealth == nil && rapid.IntRange(0, 3).Draw(rt, "fail") == 0 {
						st := spec.ClientFailed
						if completes && rapid.Bool().Draw(rt, "complete") {
							st = spec.ClientComplete // a service's task exited 0 before its verdict
						}
						a.Status = &spec.AllocStatus{ClientStatus: st, UpdateTime: w.now, Description: "exit"}
					}
				}
			case 3:
				w.now = w.now.Add(time.Duration(rapid.IntRange(1, 120).Draw(rt, "advance")) * time.Second)
			case 4:
				if canary > 0 {
					d.Request = &spec.DeploymentRequest{Promote: true, Time: w.now}
				}
			case 5:
				w.agentsReport()
			}
		}
	})
}
