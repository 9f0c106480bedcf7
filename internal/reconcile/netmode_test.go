package reconcile

import (
	"testing"

	"github.com/drover-org/drover/internal/spec"
)

// TestNetworkModeChangeReplaces: a new version that changes only the
// group's network mode replaces the instances (they must be set up
// anew); one that changes nothing the instance runs keeps them, whatever
// mode "host" is written as.
func TestNetworkModeChangeReplaces(t *testing.T) {
	g := grp("api", 1, "serve")
	g.Network = &spec.Network{Mode: spec.NetworkBridge}
	web2 := svc("web", 2, g)
	old := mk("old", web2, "api", 0, 1, spec.ClientRunning, func(a *spec.Alloc) { a.JobVersion = 1 }) // host mode, same tasks
	res := Reconcile(Input{Jobs: []*spec.Job{web2}, Allocs: []*spec.Alloc{old}, Now: now})
	if len(res.Stop) != 1 || res.Stop[0].Cause != spec.CauseUpdate || len(res.Place) != 1 {
		t.Fatalf("host to bridge: stops %+v, places %+v; want the instance replaced", res.Stop, res.Place)
	}

	same := mk("same", web2, "api", 0, 1, spec.ClientRunning, func(a *spec.Alloc) { a.JobVersion, a.NetworkMode = 1, spec.NetworkBridge })
	if res := Reconcile(Input{Jobs: []*spec.Job{web2}, Allocs: []*spec.Alloc{same}, Now: now}); len(res.Stop) != 0 || len(res.Place) != 0 {
		t.Errorf("bridge to bridge: stops %+v, places %+v; want it kept", res.Stop, res.Place)
	}

	h := grp("api", 1, "serve")
	h.Network = &spec.Network{Mode: spec.NetworkHost}
	hostJob := svc("web", 3, h)
	plain := mk("plain", hostJob, "api", 0, 1, spec.ClientRunning, func(a *spec.Alloc) { a.JobVersion = 2 })
	if res := Reconcile(Input{Jobs: []*spec.Job{hostJob}, Allocs: []*spec.Alloc{plain}, Now: now}); len(res.Stop) != 0 {
		t.Errorf(`"host" written out: stops %+v; want it kept`, res.Stop)
	}
}
