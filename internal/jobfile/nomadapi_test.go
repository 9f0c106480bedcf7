package jobfile

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The job of testdata/good/nomad-api.json, in Nomad's API form as `nomad
// job run -output` prints it, is the job this HCL file says.
const nomadAPITwin = `
job "api-form" {
  priority    = 60
  datacenters = ["dc1"]
  constraint {
    attribute = "${attr.kernel.name}"
    value     = "linux"
  }
  update {
    max_parallel     = 1
    min_healthy_time = "10s"
    healthy_deadline = "5m"
    auto_revert      = true
  }
  group "cache" {
    count = 1
    migrate {
      max_parallel     = 2
      min_healthy_time = "2s"
    }
    scaling {
      enabled = true
      min     = 1
      max     = 4
      policy {
        cooldown = "1m"
      }
    }
    restart {
      interval = "30m"
      attempts = 2
      delay    = "15s"
      mode     = "fail"
    }
    network {
      port "admin" { static = 19999 }
      port "db" { to = 6379 }
    }
    meta { team = "storage" }
    task "redis" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "sleep 3600", "redis", "--alloc=${NOMAD_ALLOC_ID}"]
      }
      env { PORT = "${NOMAD_PORT_db}" }
      service {
        name = "cache-db"
        tags = ["primary"]
        port = "db"
        check {
          name     = "alive"
          type     = "tcp"
          port     = "db"
          interval = "10s"
          timeout  = "2s"
        }
      }
      resources {
        cpu    = 200
        memory = 128
      }
      kill_timeout = "7s"
    }
  }
}
`

func TestNomadAPIFormIsTheSameJob(t *testing.T) {
	fromAPI, err := decodeTestFile(t, "testdata/good/nomad-api.json")
	if err != nil {
		t.Fatal(err)
	}
	fromHCL, err := Decode("twin.hcl", []byte(nomadAPITwin))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(fromHCL, fromAPI); d != "" {
		t.Errorf("the API form differs from the HCL (-hcl +api):\n%s", d)
	}
	// The server's API takes it too, and a bare job without "Job".
	src, err := os.ReadFile("testdata/good/nomad-api.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeJSONBody(src); err != nil {
		t.Errorf("DecodeJSONBody: %v", err)
	}
	bare := `{"ID": "bare", "TaskGroups": [{"Name": "g", "Tasks": [{"Name": "t", "Driver": "exec", "Config": {"command": "/bin/true"}}]}]}`
	j, err := Decode("-", []byte(bare))
	if err != nil || j.Name != "bare" || j.Groups[0].Tasks[0].Config.Command != "/bin/true" {
		t.Errorf("bare API job: %+v, %v", j, err)
	}
	// Every renamed field names a field that exists.
	for key := range apiRenamed {
		typ, field, _ := strings.Cut(key, ".")
		found := false
		for _, s := range schemas {
			if s.typ.Name() == typ {
				if _, ok := s.typ.FieldByName(field); ok {
					found = true
				}
			}
		}
		if !found {
			t.Errorf("apiRenamed names %s, which no spec struct has", key)
		}
	}
}

// What `nomad job inspect` prints, server-set fields and Nomad's defaults
// included, is taken as the job it describes.
func TestNomadInspectOutputIsAJob(t *testing.T) {
	j, err := decodeTestFile(t, "testdata/good/nomad-inspect.json")
	if err != nil {
		t.Fatal(err)
	}
	g := j.Groups[0]
	task := g.Tasks[0]
	if j.Name != "nightly-report" || j.Type != "batch" || j.Update != nil || j.Meta["owner"] != "data" || j.Version != 0 {
		t.Errorf("job: %+v", j)
	}
	if r := task.Restart; r == nil || *r.Attempts != 3 || r.Interval.String() != "24h0m0s" || r.Mode != "fail" {
		t.Errorf("restart: %+v", task.Restart)
	}
	if r := g.Reschedule; r == nil || *r.Attempts != 1 || r.DelayFunction != "constant" || r.Delay.String() != "5s" {
		t.Errorf("reschedule: %+v", g.Reschedule)
	}
	if task.Config.Args[0] != "report for ${NOMAD_JOB_NAME}" || task.Resources.MemoryMB != 300 {
		t.Errorf("task: %+v", task)
	}
	// LogConfig is the logs block: Nomad's values, as written out, are
	// kept (Nomad keeps 10 files; drover's own default is 4).
	if l := task.Logs; l == nil || l.MaxFiles != 10 || l.MaxFileSizeMB != 10 || l.Disabled {
		t.Errorf("logs: %+v, want Nomad's 10 files of 10 MB as written", task.Logs)
	}
	src, err := os.ReadFile("testdata/good/nomad-inspect.json")
	if err != nil {
		t.Fatal(err)
	}
	j, err = Decode("x.json", []byte(strings.Replace(string(src), `"Disabled": false, "MaxFileSizeMB": 10, "MaxFiles": 10`, `"Disabled": true, "MaxFileSizeMB": 10, "MaxFiles": 3`, 1)))
	if err != nil || j.Groups[0].Tasks[0].Logs.MaxFiles != 3 || !j.Groups[0].Tasks[0].Logs.Disabled {
		t.Errorf("a LogConfig of 3 files, disabled: %v, %+v", err, j)
	}
}

// TestNomadAPIJobKinds: Nomad's API names for the periodic and
// parameterized blocks (Spec, Specs, SpecType, ParameterizedJob,
// DispatchPayload) decode to the job the HCL names say.
func TestNomadAPIJobKinds(t *testing.T) {
	api := `{"Job": {"ID": "k", "Type": "batch",
 "Periodic": {"Enabled": true, "Spec": "*/5 * * * *", "Specs": ["@daily"], "SpecType": "cron", "ProhibitOverlap": true, "TimeZone": "UTC"},
 "TaskGroups": [{"Name": "g", "Count": 1, "Tasks": [{"Name": "t", "Driver": "raw_exec", "Config": {"command": "/bin/true"}}]}]}}`
	hcl := `job "k" {
  type = "batch"
  periodic {
    enabled          = true
    cron             = "*/5 * * * *"
    crons            = ["@daily"]
    prohibit_overlap = true
    time_zone        = "UTC"
  }
  group "g" {
    task "t" {
      driver = "raw_exec"
      config { command = "/bin/true" }
    }
  }
}`
	fromAPI, err := Decode("k.json", []byte(api))
	if err != nil {
		t.Fatal(err)
	}
	fromHCL, err := Decode("k.hcl", []byte(hcl))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(fromHCL, fromAPI); d != "" || fromAPI.Periodic == nil {
		t.Errorf("periodic: API form differs from HCL (-hcl +api):\n%s", d)
	}
	api = strings.NewReplacer(`"Periodic": {"Enabled": true, "Spec": "*/5 * * * *", "Specs": ["@daily"], "SpecType": "cron", "ProhibitOverlap": true, "TimeZone": "UTC"}`,
		`"ParameterizedJob": {"Payload": "required", "MetaRequired": ["a"], "MetaOptional": ["b"]}`,
		`"Config": {"command": "/bin/true"}`, `"Config": {"command": "/bin/true"}, "DispatchPayload": {"File": "in.json"}`).Replace(api)
	j, err := Decode("k.json", []byte(api))
	if err != nil {
		t.Fatal(err)
	}
	if p := j.Parameterized; p == nil || p.Payload != "required" || len(p.MetaRequired) != 1 || len(p.MetaOptional) != 1 ||
		j.Groups[0].Tasks[0].DispatchPayload == nil || j.Groups[0].Tasks[0].DispatchPayload.File != "in.json" {
		t.Errorf("parameterized from the API form: %+v, task %+v", j.Parameterized, j.Groups[0].Tasks[0])
	}
}
