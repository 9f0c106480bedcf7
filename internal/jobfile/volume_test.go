package jobfile

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/drover-org/drover/internal/spec"
)

const hostVolumeJob = `job "vols" {
  group "g" {
    volume "data" {
      type      = "host"
      source    = "shared"
      read_only = false
    }
    volume "conf" {
      source    = "etc"
      read_only = true
    }
    task "t" {
      driver = "raw_exec"
      config { command = "/bin/true" }
      volume_mount {
        volume      = "data"
        destination = "local/data"
      }
      volume_mount {
        volume      = "conf"
        destination = "/etc/app"
        read_only   = true
      }
    }
  }
}
`

// TestHostVolumesDecode: group volume blocks and task volume_mount blocks
// become the spec's Volumes and VolumeMounts, and Nomad's JSON API form of
// the same job (Volumes an object by name, VolumeMounts with Volume,
// Destination, ReadOnly and Nomad's default PropagationMode) decodes to
// the same job.
func TestHostVolumesDecode(t *testing.T) {
	fromHCL, err := Decode("vols.hcl", []byte(hostVolumeJob))
	if err != nil {
		t.Fatal(err)
	}
	g := fromHCL.Groups[0]
	want := []*spec.VolumeRequest{{Name: "data", Type: "host", Source: "shared"}, {Name: "conf", Source: "etc", ReadOnly: true}}
	if d := cmp.Diff(want, g.Volumes); d != "" {
		t.Errorf("volumes (-want +got):\n%s", d)
	}
	wantMounts := []*spec.VolumeMount{{Volume: "data", Destination: "local/data"}, {Volume: "conf", Destination: "/etc/app", ReadOnly: true}}
	if d := cmp.Diff(wantMounts, g.Tasks[0].VolumeMounts); d != "" {
		t.Errorf("volume mounts (-want +got):\n%s", d)
	}
	api := `{"Job": {"ID": "vols", "TaskGroups": [{"Name": "g",
  "Volumes": {
    "data": {"Type": "host", "Source": "shared", "ReadOnly": false, "PerAlloc": false, "AccessMode": "", "AttachmentMode": "", "MountOptions": null},
    "conf": {"Name": "conf", "Type": "", "Source": "etc", "ReadOnly": true}
  },
  "Tasks": [{"Name": "t", "Driver": "raw_exec", "Config": {"command": "/bin/true"},
    "VolumeMounts": [
      {"Volume": "data", "Destination": "local/data", "ReadOnly": false, "PropagationMode": "private"},
      {"Volume": "conf", "Destination": "/etc/app", "ReadOnly": true, "PropagationMode": "private"}
    ]}]}]}}`
	fromAPI, warns, err := DecodeWarn("vols.json", []byte(api))
	if err != nil {
		t.Fatal(err)
	}
	if len(warns) != 0 {
		t.Errorf("Nomad's defaults (PropagationMode \"private\") were warned of: %v", warns)
	}
	if d := cmp.Diff(fromHCL, fromAPI); d != "" {
		t.Errorf("the API form differs from the HCL (-hcl +api):\n%s", d)
	}
}

// TestVolumeMountOfUndeclaredVolume: a volume_mount that names a volume
// its group does not declare is an error at the mount's volume line,
// naming the group's volumes; a host volume without a source and an
// unknown type are errors at theirs.
func TestVolumeMountOfUndeclaredVolume(t *testing.T) {
	src := `job "bad" {
  group "g" {
    volume "data" {
      source = "shared"
    }
    volume "nosrc" {
      type = "host"
    }
    volume "odd" {
      type   = "nfs"
      source = "x"
    }
    task "t" {
      driver = "raw_exec"
      config { command = "/bin/true" }
      volume_mount {
        volume      = "dta"
        destination = "/data"
      }
    }
  }
}
`
	_, err := Decode("bad.hcl", []byte(src))
	if err == nil {
		t.Fatal("a mount of an undeclared volume was accepted")
	}
	got := err.Error()
	for _, want := range []string{
		`bad.hcl:17:23: groups[0].tasks[0].volume_mounts[0].volume: task "t" mounts volume "dta", which group "g" does not declare; the group declares "data", "nosrc", "odd"`,
		`bad.hcl:6:5: groups[0].volumes[1].source: volume "nosrc" needs a source`,
		`bad.hcl:10:16: groups[0].volumes[2].type: volume "odd" has type "nfs"; use "host"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("error lacks %q:\n%s", want, got)
		}
	}
}

// TestVolumePerAlloc: per_alloc on a host volume is taken without a
// warning now that instance N mounts host volume source[N]; access_mode
// and attachment_mode are taken without one too. On a CSI volume,
// per_alloc is an error at its line.
func TestVolumePerAlloc(t *testing.T) {
	src := `job "pa" {
  group "g" {
    volume "data" {
      source          = "shared"
      per_alloc       = true
      access_mode     = "single-node-writer"
      attachment_mode = "file-system"
    }
    task "t" {
      driver = "raw_exec"
      config { command = "/bin/true" }
    }
  }
}
`
	job, warns, err := DecodeWarn("pa.hcl", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if v := job.Groups[0].Volumes[0]; !v.PerAlloc || v.AccessMode != "single-node-writer" || v.AttachmentMode != "file-system" || v.SourceFor(1) != "shared[1]" {
		t.Errorf("volume %+v", v)
	}
	if len(warns) != 0 {
		t.Errorf("warnings %v, want none", warns)
	}
	_, _, err = DecodeWarn("csi.hcl", []byte(strings.Replace(src, `source          = "shared"`, `type = "csi"
      source = "shared"`, 1)))
	if err == nil || !strings.Contains(err.Error(), "csi.hcl:6:") || !strings.Contains(err.Error(), "per_alloc applies to host volumes only") {
		t.Errorf("csi with per_alloc: %v, want an error at csi.hcl:6 saying per_alloc is for host volumes", err)
	}
}
