package reconcile

import (
	"testing"

	"github.com/drover-org/drover/internal/spec"
)

// TestVolumeChangeReplaces: a new version whose group mounts another host
// volume, or the same read-only, replaces the group's instances; one
// whose tasks and volumes are the same keeps them (an in-place update).
func TestVolumeChangeReplaces(t *testing.T) {
	vols := func(src string, ro bool) []*spec.VolumeRequest {
		return []*spec.VolumeRequest{{Name: "d", Type: spec.VolumeHost, Source: src, ReadOnly: ro}}
	}
	g := grp("api", 1, "serve")
	g.Volumes = vols("data", false)
	j := svc("web", 2, g)
	a := mk("a1", j, "api", 0, 1, spec.ClientRunning)
	a.JobVersion = 1
	a.Tasks = g.Tasks
	for _, tc := range []struct {
		name string
		old  []*spec.VolumeRequest
		want bool
	}{
		{"same volumes", vols("data", false), false},
		{"another host volume", vols("other", false), true},
		{"read-only now", vols("data", true), true},
		{"no volume before", nil, true},
	} {
		a.Volumes = tc.old
		if got := outdated(j, g, a); got != tc.want {
			t.Errorf("%s: outdated = %v, want %v", tc.name, got, tc.want)
		}
	}
}
