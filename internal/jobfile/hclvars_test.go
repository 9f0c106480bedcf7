package jobfile

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/drover-org/drover/internal/spec"
)

// varsJob declares variables of several types and uses each where the
// decoded job shows it.
const varsJob = `
variable "image_tag" {
  type    = string
  default = "latest"
}
variable "count" {
  type    = number
  default = 1
}
variable "dcs" {
  type    = list(string)
  default = ["dc1"]
}
variable "debug" {
  type    = bool
  default = false
}
job "vars" {
  datacenters = var.dcs
  group "g" {
    count = var.count
    task "t" {
      driver = "exec"
      config {
        command = "/bin/echo"
        args    = ["tag=${var.image_tag}", "debug=${var.debug}", "alloc=${NOMAD_ALLOC_ID}", "${attr.kernel.name}"]
      }
    }
  }
}
`

// writeJob writes files into a new folder and returns the folder.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func mustDecodeWith(t *testing.T, path string, o Options) *spec.Job {
	t.Helper()
	job, _, err := DecodeFileWith(path, o)
	if err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
	return job
}

func TestVariablesTakeValuesInNomadsOrder(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"job.nomad":    varsJob,
		"a.hcl":        "image_tag = \"from-a\"\ncount = 2\n",
		"b.json":       `{"image_tag": "from-b", "dcs": ["dc2", "dc3"]}`,
		"partial.hcl":  "debug = true\n",
		"unknown.hcl":  "colour = \"red\"\n",
		"wrongtyp.hcl": "count = \"many\"\n",
	})
	job := filepath.Join(dir, "job.nomad")
	args := func(j *spec.Job) []string { return j.Groups[0].Tasks[0].Config.Args }

	// Defaults alone.
	j := mustDecodeWith(t, job, Options{})
	if got := args(j); !slices.Equal(got, []string{"tag=latest", "debug=false", "alloc=${NOMAD_ALLOC_ID}", "${attr.kernel.name}"}) {
		t.Errorf("defaults: args = %q", got)
	}
	if j.Groups[0].Count != 1 || !slices.Equal(j.Datacenters, []string{"dc1"}) {
		t.Errorf("defaults: count %d, datacenters %q", j.Groups[0].Count, j.Datacenters)
	}

	// Environment, then var files in order, then -var in order.
	o := Options{
		Environ:  []string{"NOMAD_VAR_image_tag=from-nomad-env", "DROVER_VAR_count=4", "NOMAD_VAR_count=3", "NOMAD_VAR_undeclared=x", "PATH=/bin"},
		VarFiles: []string{filepath.Join(dir, "a.hcl"), filepath.Join(dir, "b.json")},
		Vars:     []string{"count=5", "count=6", `dcs=["dc9"]`},
	}
	j = mustDecodeWith(t, job, o)
	if got := args(j)[0]; got != "tag=from-b" {
		t.Errorf("the last var file should win over the environment: %q", got)
	}
	if j.Groups[0].Count != 6 || !slices.Equal(j.Datacenters, []string{"dc9"}) {
		t.Errorf("-var should win, the last one last: count %d, datacenters %q", j.Groups[0].Count, j.Datacenters)
	}

	// The environment alone: DROVER_VAR_ over NOMAD_VAR_, converted to the type.
	j = mustDecodeWith(t, job, Options{Environ: o.Environ})
	if j.Groups[0].Count != 4 || args(j)[0] != "tag=from-nomad-env" {
		t.Errorf("environment: count %d, %q", j.Groups[0].Count, args(j)[0])
	}
	j = mustDecodeWith(t, job, Options{VarFiles: []string{filepath.Join(dir, "partial.hcl")}, Vars: []string{"debug=false", "debug=true"}})
	if args(j)[1] != "debug=true" {
		t.Errorf("bool from -var: %q", args(j)[1])
	}

	// Mistakes in what is passed in say where they are and what to do.
	for _, tc := range []struct {
		o    Options
		want []string
	}{
		{Options{Vars: []string{"colour=red"}}, []string{`command line: -var colour=red: the job file declares no variable "colour" (it has count, dcs, debug, image_tag)`}},
		{Options{Vars: []string{"count"}}, []string{`command line: -var "count" is not NAME=VALUE`}},
		{Options{Vars: []string{"count=lots"}}, []string{`command line: -var count: variable "count" must be number`}},
		{Options{Vars: []string{"dcs=[1,"}}, []string{`command line: -var dcs: variable "dcs" is list(string), and "[1," is not an HCL value of that type`}},
		{Options{VarFiles: []string{filepath.Join(dir, "unknown.hcl")}}, []string{filepath.Join(dir, "unknown.hcl") + `:1:1: the job file declares no variable "colour"`}},
		{Options{VarFiles: []string{filepath.Join(dir, "wrongtyp.hcl")}}, []string{filepath.Join(dir, "wrongtyp.hcl") + `:1:9: variable "count" must be number; the value in`}},
		{Options{VarFiles: []string{filepath.Join(dir, "missing.hcl")}}, []string{"-var-file: reading -var-file: open "}},
		{Options{Environ: []string{"NOMAD_VAR_count=x"}}, []string{`environment: NOMAD_VAR_count: variable "count" must be number`}},
	} {
		_, _, err := DecodeFileWith(job, tc.o)
		if err == nil {
			t.Errorf("%+v: decoded without error", tc.o)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: error %q lacks %q", tc.o, err, w)
			}
		}
	}
}

func TestVarOnANonHCLFileIsAProblem(t *testing.T) {
	dir := writeFiles(t, map[string]string{"job.json": `{"name": "j", "groups": [{"name": "g", "tasks": [{"name": "t", "driver": "exec", "config": {"command": "/bin/true"}}]}]}`})
	_, _, err := DecodeFileWith(filepath.Join(dir, "job.json"), Options{Vars: []string{"a=b"}})
	if err == nil || !strings.Contains(err.Error(), "-var and -var-file set the variables of HCL job files") {
		t.Fatalf("err = %v", err)
	}
	// The environment is only read where a file declares variables.
	if _, _, err := DecodeFileWith(filepath.Join(dir, "job.json"), Options{Environ: []string{"NOMAD_VAR_a=b"}}); err != nil {
		t.Fatal(err)
	}
}

func TestFileFunctionsReadBesideTheJobFile(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"job.hcl": `
job "files" {
  group "g" {
    task "t" {
      driver = "exec"
      config {
        command = trimspace(file("cmd.txt"))
        args    = [filebase64("cmd.txt"), convert(fileexists("nope.txt"), string), yamldecode(file("conf.yaml")).mode]
      }
    }
  }
}`,
		"cmd.txt":   "/bin/sleep\n",
		"conf.yaml": "mode: fast\n",
	})
	// From another working directory: paths are the job file's.
	t.Chdir(t.TempDir())
	j := mustDecodeWith(t, filepath.Join(dir, "job.hcl"), Options{})
	c := j.Groups[0].Tasks[0].Config
	if c.Command != "/bin/sleep" || !slices.Equal(c.Args, []string{"L2Jpbi9zbGVlcAo=", "false", "fast"}) {
		t.Errorf("command %q args %q", c.Command, c.Args)
	}
	if err := os.Remove(filepath.Join(dir, "cmd.txt")); err != nil {
		t.Fatal(err)
	}
	_, _, err := DecodeFileWith(filepath.Join(dir, "job.hcl"), Options{})
	if err == nil || !strings.Contains(err.Error(), "job.hcl:7:") || !strings.Contains(err.Error(), "cmd.txt") {
		t.Errorf("a missing file should be named with the line that reads it: %v", err)
	}
}

// Each family of functions Nomad documents is there, by Nomad's names.
func TestNomadFunctions(t *testing.T) {
	src := `
locals {
  cases = {
    string  = upper(replace(format("%s-%03d", "web", 7), "-", "_"))
    number  = convert(max(ceil(1.2), pow(2, 3), parseint("ff", 16)), string)
    list    = join(",", distinct(concat(["a"], sort(["c", "b"]), ["a"])))
    encode  = base64encode(jsonencode({ a = 1 }))
    hash    = substr(sha256("x"), 0, 12)
    time    = formatdate("YYYY", timeadd("2024-01-01T00:00:00Z", "24h"))
    cidr    = cidrhost(cidrsubnet("10.0.0.0/16", 8, 2), 5)
    convert = try(convert("x", number), "fallback")
    can     = convert(can(regex_replace("a", "[", "b")), string)
    url     = urlencode("a b")
  }
}
job "funcs" {
  meta = local.cases
  group "g" {
    task "t" {
      driver = "exec"
      config { command = "/bin/true" }
    }
  }
}`
	j, err := Decode("funcs.hcl", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"string": "WEB_007", "number": "255", "list": "a,b,c", "encode": "eyJhIjoxfQ==",
		"hash": "2d711642b726", "time": "2024", "cidr": "10.0.2.5", "convert": "fallback",
		"can": "false", "url": "a+b",
	}
	for k, v := range want {
		if j.Meta[k] != v {
			t.Errorf("%s = %q, want %q", k, j.Meta[k], v)
		}
	}
}

func TestQuotedNumbersAndBoolsConvert(t *testing.T) {
	src := `
job "quoted" {
  priority = "70"
  group "g" {
    count = "3"
    rebalance = "true"
    task "t" {
      driver = "exec"
      config { command = "/bin/true" }
      resources {
        cpu    = "200"
        memory = "128"
      }
    }
  }
}`
	j, err := Decode("quoted.hcl", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	g := j.Groups[0]
	if j.Priority != 70 || g.Count != 3 || !g.Rebalance || g.Tasks[0].Resources.CPU != 200 || g.Tasks[0].Resources.MemoryMB != 128 {
		t.Errorf("priority %d count %d rebalance %v resources %+v", j.Priority, g.Count, g.Rebalance, g.Tasks[0].Resources)
	}
	_, err = Decode("quoted.hcl", []byte(strings.Replace(src, `"3"`, `"3.5"`, 1)))
	if err == nil || !strings.Contains(err.Error(), "quoted.hcl:5:13: count must be a whole number, got 3.5") {
		t.Errorf("err = %v", err)
	}
}

// A dynamic block makes as many blocks as its for_each has elements, its
// iterator usable in the content, nested in another, and the runtime
// references in its content are kept as written.
func TestDynamicBlocks(t *testing.T) {
	src := `
variable "tasks" {
  default = {
    web    = ["8080"]
    worker = ["1", "2"]
  }
}
job "dyn" {
  group "g" {
    dynamic "task" {
      for_each = var.tasks
      labels   = [task.key]
      content {
        driver = "raw_exec"
        config {
          command = "/bin/echo"
          args    = concat([task.key, "${NOMAD_TASK_NAME}"], task.value)
        }
        dynamic "constraint" {
          for_each = task.value
          iterator = c
          content {
            attribute = "${meta.slot}"
            value     = "${task.key}-${c.value}"
          }
        }
      }
    }
  }
}`
	j, err := Decode("dyn.hcl", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	tasks := j.Groups[0].Tasks
	if len(tasks) != 2 || tasks[0].Name != "web" || tasks[1].Name != "worker" {
		t.Fatalf("tasks: %+v", tasks)
	}
	if got := tasks[1].Config.Args; !slices.Equal(got, []string{"worker", "${NOMAD_TASK_NAME}", "1", "2"}) {
		t.Errorf("args %q", got)
	}
	var cons []string
	for _, c := range tasks[1].Constraints {
		cons = append(cons, c.Attribute+"="+c.Value)
	}
	if !slices.Equal(cons, []string{"${meta.slot}=worker-1", "${meta.slot}=worker-2"}) {
		t.Errorf("constraints %q", cons)
	}
}

// A sensitive variable's value is not printed by the problems it causes.
func TestSensitiveValuesAreNotPrinted(t *testing.T) {
	dir := writeFiles(t, map[string]string{"job.hcl": `
variable "pw" {
  type      = list(string)
  sensitive = true
}
variable "pin" {
  sensitive = true
  default   = "hunter2"
}
job "s" {
  group "g" {
    count = var.pin
    task "t" {
      driver = "exec"
      config { command = "/bin/true" }
    }
  }
}`})
	_, _, err := DecodeFileWith(filepath.Join(dir, "job.hcl"), Options{Vars: []string{"pw=hunter2"}})
	if err == nil {
		t.Fatal("decoded")
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("the sensitive value is printed:\n%v", err)
	}
	for _, want := range []string{`command line: -var pw: variable "pw" is list(string), and "its value" is not`, "job.hcl:12:13: count must be a number, got a string from a sensitive variable"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}
