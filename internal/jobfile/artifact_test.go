package jobfile

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/drover-org/drover/internal/spec"
)

// An artifact written in HCL as Nomad's job files write it (options and
// headers as blocks, archive as a bool) and in Nomad's API form
// (GetterSource, RelativeDest, GetterMode, GetterOptions, GetterHeaders)
// decodes to the same job.
func TestArtifactHCLAndAPIFormAreTheSameJob(t *testing.T) {
	const hcl = `
job "arts" {
  group "g" {
    task "t" {
      driver = "raw_exec"
      config { command = "/bin/true" }
      artifact {
        source      = "https://example.com/app-${NOMAD_META_v}.tar.gz"
        destination = "local/app"
        options {
          checksum = "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
        }
        headers {
          X-Channel = "stable"
        }
      }
      artifact {
        source = "/srv/app.tar.gz"
        mode   = "file"
        destination = "local/app.tar.gz"
        options { archive = false }
        chown  = true
      }
    }
  }
}
`
	const api = `{"Job": {"ID": "arts", "TaskGroups": [{"Name": "g", "Tasks": [{"Name": "t", "Driver": "raw_exec",
  "Config": {"command": "/bin/true"},
  "Artifacts": [
    {"GetterSource": "https://example.com/app-${NOMAD_META_v}.tar.gz", "RelativeDest": "local/app",
     "GetterOptions": {"checksum": "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"},
     "GetterHeaders": {"X-Channel": "stable"}},
    {"GetterSource": "/srv/app.tar.gz", "GetterMode": "file", "RelativeDest": "local/app.tar.gz",
     "GetterOptions": {"archive": "false"}, "Chown": true}
  ]}]}]}}`
	fromHCL, err := Decode("arts.hcl", []byte(hcl))
	if err != nil {
		t.Fatal(err)
	}
	fromAPI, err := Decode("arts.json", []byte(api))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(fromHCL, fromAPI); d != "" {
		t.Errorf("the API form differs from the HCL (-hcl +api):\n%s", d)
	}
	arts := fromHCL.Groups[0].Tasks[0].Artifacts
	want := []*spec.Artifact{
		{Source: "https://example.com/app-${NOMAD_META_v}.tar.gz", Destination: "local/app",
			Options: map[string]string{"checksum": "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"},
			Headers: map[string]string{"X-Channel": "stable"}},
		{Source: "/srv/app.tar.gz", Mode: "file", Destination: "local/app.tar.gz", Options: map[string]string{"archive": "false"}, Chown: true},
	}
	if d := cmp.Diff(want, arts); d != "" {
		t.Errorf("artifacts (-want +got):\n%s", d)
	}
}

// A bad artifact is refused where it is written, saying what to write.
func TestArtifactProblemsAtTheirLines(t *testing.T) {
	const hcl = `job "bad" {
  group "g" {
    task "t" {
      driver = "raw_exec"
      config { command = "/bin/true" }
      artifact {
        source = "git::https://example.com/repo.git"
      }
      artifact {
        source      = "https://example.com/a"
        mode        = "folder"
        destination = "../outside"
        options {
          checksum = "sha256:abc"
          ref      = "main"
        }
      }
      artifact {
        destination = "local/x"
      }
    }
  }
}
`
	_, err := Decode("bad.hcl", []byte(hcl))
	if err == nil {
		t.Fatal("a job with bad artifacts decoded")
	}
	for _, want := range []string{
		`bad.hcl:7:18: groups[0].tasks[0].artifacts[0].source: task "t": artifact 1: source "git::https://example.com/repo.git": drover fetches http:// and https:// URLs and files on the node`,
		`bad.hcl:11:23: groups[0].tasks[0].artifacts[1].mode: task "t": artifact 2: unknown mode "folder"; use "any", "file" or "dir"`,
		`bad.hcl:12:23: groups[0].tasks[0].artifacts[1].destination: task "t": artifact 2: destination "../outside" leaves the task's directory`,
		`groups[0].tasks[0].artifacts[1].options.checksum: task "t": artifact 2: checksum "sha256:abc": a sha256 checksum is 64 hex digits`,
		`groups[0].tasks[0].artifacts[1].options.ref: task "t": artifact 2: unknown option "ref"`,
		`groups[0].tasks[0].artifacts[2].source: task "t": artifact 3: needs a source`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks\n%s\nin\n%v", want, err)
		}
	}
}
