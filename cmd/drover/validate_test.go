package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-org/drover/internal/registry"
)

// runValidate runs drover validate with args, stdin as its input, and
// returns what it printed and the exit code main would give.
func runValidate(t *testing.T, stdin string, args ...string) (string, int) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(append([]string{"validate"}, args...))
	err := root.Execute()
	var ee *exitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &ee):
		return out.String(), ee.code
	}
	t.Fatalf("validate %q: %v, not an exitError", args, err)
	return "", 0
}

func writeFile(t *testing.T, name, src string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestValidateRefusesDeepFiles: a job file of 60,000 nested brackets
// crashed drover validate with "fatal error: stack overflow". It is now
// a problem that names the limit, where the file passes it, and a
// non-zero exit; so is one nested as deep in JSON.
func TestValidateRefusesDeepFiles(t *testing.T) {
	const n = 60000
	cases := []struct{ name, src, want string }{
		{"deep.hcl", "job \"web\" {\n  meta = " + strings.Repeat("[", n) + strings.Repeat("]", n) + "\n}\n",
			"deep.hcl:2:73: the job file nests 60001 levels deep; the limit is 64 (a job needs about ten)\n"},
		{"deep.json", `{"name":"web","meta":` + strings.Repeat("[", n) + strings.Repeat("]", n) + "}\n",
			"deep.json:1:85: the job file nests 60001 levels deep; the limit is 64 (a job needs about ten)\n"},
	}
	for _, c := range cases {
		path := writeFile(t, c.name, c.src)
		out, code := runValidate(t, "", path)
		if code != exitFailure || out != filepath.Dir(path)+"/"+c.want {
			t.Errorf("validate %s: exit %d, printed:\n%s\nwant exit %d and:\n%s", c.name, code, out, exitFailure, c.want)
		}
	}
}

// TestValidateAppliesTheServersLimits: drover validate accepted a 20 MB
// job that a server refuses with a 413, and one whose file is small
// enough but whose job is larger than a registry record. Each is now not
// valid, with the limit the server applies, from a file and from stdin.
func TestValidateAppliesTheServersLimits(t *testing.T) {
	job := func(meta int) string {
		return `job "web" {
  meta { big = "` + strings.Repeat("a", meta) + `" }
  group "g" {
    task "t" {
      driver = "exec"
      config { command = "/bin/true" }
    }
  }
}
`
	}
	huge, record := job(20<<20), job(registry.MaxRecordBytes+10<<10)
	for _, c := range []struct{ what, src, want string }{
		{"a 20 MB job", huge, "the job file is larger than 1048576 bytes (1 MiB), the limit: make it smaller (fewer groups, shorter meta or env)"},
		{"a job larger than a record", record, `registry: job "web" encodes to 650 KiB; a record holds at most 640 KiB: make it smaller (fewer groups, shorter meta or env): too large`},
	} {
		path := writeFile(t, "web.hcl", c.src)
		for _, args := range [][]string{{path}, {"-"}} {
			out, code := runValidate(t, c.src, args...)
			if code != exitFailure || !strings.Contains(out, c.want) {
				t.Errorf("%s, validate %s: exit %d, printed:\n%.500s\nwant exit %d and %q", c.what, args[0], code, out, exitFailure, c.want)
			}
		}
	}
	if out, code := runValidate(t, job(100), writeFile(t, "web.hcl", job(100))); code != 0 {
		t.Errorf("a small job: exit %d, printed:\n%s", code, out)
	}
}

// TestValidateWarnsOfUnpublishedAttributes: a constraint on an attribute
// drover's agents do not publish, or an interpolation of one, validates,
// with a warning that names it and its file:line:col; Nomad's names,
// drover's older ones and meta do not warn.
func TestValidateWarnsOfUnpublishedAttributes(t *testing.T) {
	path := writeFile(t, "attrs.hcl", `job "attrs" {
  constraint {
    attribute = "${attr.kernel.name}"
    value     = "linux"
  }
  constraint {
    attribute = "${attr.consul.version}"
    operator  = "version"
    value     = ">= 1.8"
  }
  group "g" {
    affinity {
      attribute = "${meta.rack}"
      value     = "r1"
    }
    task "t" {
      driver = "raw_exec"
      config { command = "/bin/true" }
      env { ZONE = "${attr.platform.gce.zone}" }
      constraint {
        attribute = "${attr.os}"
        value     = "linux"
      }
      constraint {
        attribute = "${attr.driver.podman}"
        value     = "1"
      }
    }
  }
}
`)
	out, code := runValidate(t, "", path)
	want := `warning: ` + path + `:7:17: constraints[1].attribute: ${attr.consul.version} is Consul's, and drover works without Consul (its own catalog): no node publishes it, so no node matches it but with != or is_not_set; remove it
warning: ` + path + `:19:20: groups[0].tasks[0].env.ZONE: ${attr.platform.gce.zone} is not an attribute drover nodes publish (docs/nomad.md lists those they do), so it is left as written: the task sees the text ${attr.platform.gce.zone}
warning: ` + path + `:25:21: groups[0].tasks[0].constraints[1].attribute: ${attr.driver.podman} is not an attribute drover nodes publish (docs/nomad.md lists those they do), so no node matches it but with != or is_not_set
` + path + `: valid service job "attrs": 1 group(s), 1 instance(s)
`
	if code != 0 || out != want {
		t.Errorf("exit %d, output:\n%s\nwant exit 0 and:\n%s", code, out, want)
	}
}

// TestValidateTakesVariables: -var and -var-file (Nomad's one-dash
// spelling too) and NOMAD_VAR_ set an HCL file's variables; a missing
// one is named with its line and what to do.
func TestValidateTakesVariables(t *testing.T) {
	job := writeFile(t, "job.nomad", `variable "count" {
  type = number
}
variable "cmd" {
  default = "/bin/true"
}
job "vars" {
  group "g" {
    count = var.count
    task "t" {
      driver = "exec"
      config { command = var.cmd }
    }
  }
}
`)
	varFile := writeFile(t, "prod.hcl", "count = 4\n")
	out, code := runDrover(t, "", "validate", "-var", "count=3", job)
	if code != 0 || !strings.Contains(out, `valid service job "vars": 1 group(s), 3 instance(s)`) {
		t.Errorf("-var: exit %d\n%s", code, out)
	}
	out, code = runDrover(t, "", "validate", "-var-file="+varFile, job)
	if code != 0 || !strings.Contains(out, "4 instance(s)") {
		t.Errorf("-var-file: exit %d\n%s", code, out)
	}
	t.Setenv("NOMAD_VAR_count", "5")
	out, code = runDrover(t, "", "validate", job)
	if code != 0 || !strings.Contains(out, "5 instance(s)") {
		t.Errorf("NOMAD_VAR_count: exit %d\n%s", code, out)
	}
	t.Setenv("NOMAD_VAR_count", "")
	out, code = runDrover(t, "", "validate", job)
	if code != exitFailure || !strings.Contains(out, `environment: NOMAD_VAR_count: variable "count" must be number`) {
		t.Errorf("an empty NOMAD_VAR_count: exit %d\n%s", code, out)
	}
	os.Unsetenv("NOMAD_VAR_count")
	out, code = runDrover(t, "", "validate", job)
	if code != exitFailure || !strings.Contains(out, job+`:1:10: variable "count" has no value: set it with -var count=VALUE`) {
		t.Errorf("no value: exit %d\n%s", code, out)
	}
}
