package spec

import (
	"strings"
	"testing"
)

// TestPerAllocVolume: a per_alloc host volume names data[N] for instance
// N; a host volume a node offers may be named so; per_alloc on a CSI
// volume is refused, saying what to write instead.
func TestPerAllocVolume(t *testing.T) {
	v := &VolumeRequest{Name: "d", Source: "data", PerAlloc: true}
	if got := v.SourceFor(2); got != "data[2]" {
		t.Errorf("SourceFor(2) = %q, want data[2]", got)
	}
	v.PerAlloc = false
	if got := v.SourceFor(2); got != "data" {
		t.Errorf("SourceFor(2) without per_alloc = %q, want data", got)
	}
	for name, ok := range map[string]bool{
		"data": true, "data[0]": true, "data[12]": true,
		"data[]": false, "data[x]": false, "data[-1]": false, "data[01]": false, "data[1": false, "[1]": false, "data[1]x": false, "da ta[1]": false,
	} {
		if msg := CheckHostVolumeName(name); (msg == "") != ok {
			t.Errorf("CheckHostVolumeName(%q) = %q, want ok=%v", name, msg, ok)
		}
	}
	for _, c := range []struct {
		vol *VolumeRequest
		err string
	}{
		{&VolumeRequest{Name: "d", Type: VolumeHost, Source: "data", PerAlloc: true}, ""},
		{&VolumeRequest{Name: "d", Type: VolumeCSI, Source: "data", PerAlloc: true}, "groups[0].volumes[0].per_alloc: volume \"d\": per_alloc applies to host volumes only"},
	} {
		j := optionsJob(func(g *Group, _ *Task) { g.Volumes = []*VolumeRequest{c.vol} })
		err := j.Validate().Err()
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s: %v", c.vol.Type, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: got %v, want %q", c.vol.Type, err, c.err)
		}
	}
}
