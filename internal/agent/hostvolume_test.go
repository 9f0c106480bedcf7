package agent_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-org/drover/internal/agent"
	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/spec"
)

// TestHostVolumesCheckedAtStart: an agent refuses to start with a host
// volume whose path is relative, missing or a file, or whose name is
// given twice or holds a bracket that is not an instance index ("data[0]"
// is the host volume of a per_alloc volume's instance 0), saying which
// and what to do; with good ones its node
// record publishes their names and read-only, sorted, not their paths.
func TestHostVolumesCheckedAtStart(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := client.New("127.0.0.1:1") // never reached: New does not call it
	if err != nil {
		t.Fatal(err)
	}
	start := func(vols ...string) (*agent.Agent, error) {
		var hvs []agent.HostVolume
		for _, v := range vols {
			hv, err := agent.ParseHostVolume(v)
			if err != nil {
				t.Fatal(err)
			}
			hvs = append(hvs, hv)
		}
		return agent.New(agent.Config{DataDir: t.TempDir(), Name: "n1", Client: c, HostVolumes: hvs})
	}
	_, err = start("rel=data", "gone="+dir+"/gone", "file="+file+":ro", "twice="+dir, "twice="+dir, "bad[x]="+dir)
	for _, want := range []string{
		`host volume "bad[x]" (bad[x]=` + dir + `): name "bad[x]" has a bracket that is not an instance index`,
		`host volume "rel" (rel=data): path "data" is not absolute`,
		`host volume "gone" (gone=` + dir + `/gone): ` + dir + `/gone does not exist; create the directory`,
		`host volume "file" (file=` + file + `:ro): ` + file + ` is not a directory`,
		`host volume "twice" (twice=` + dir + `): the name is declared twice`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("agent.New: %v\nwant it to say %q", err, want)
		}
	}
	a, err := start("shared="+dir, "certs="+dir+":ro", "data[0]="+dir)
	if err != nil {
		t.Fatal(err)
	}
	got := a.Node().HostVolumes
	if want := []spec.HostVolume{{Name: "certs", ReadOnly: true}, {Name: "data[0]"}, {Name: "shared"}}; len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("node's host volumes %+v, want %+v", got, want)
	}
	if _, err := agent.ParseHostVolume("nopath"); err == nil {
		t.Error("ParseHostVolume took a value without =PATH")
	}
}
