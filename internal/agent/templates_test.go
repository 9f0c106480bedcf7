package agent_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/spec"
	"github.com/drover-org/drover/internal/testkit"
)

// TestTemplatesRenderBeforeTheStart: a task's templates are in its
// directory when it starts, rendered from the runtime variables and the
// node's attributes, with their perms; an env = true template's variables
// are in its environment.
func TestTemplatesRenderBeforeTheStart(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startAgent(t.TempDir(), true)
	task := shTask("t", `cat local/app.conf; echo "FOO=$FOO QUOTED=$QUOTED"; stat -c %a secrets/env`)
	task.Templates = []*spec.Template{
		{Data: "alloc={{ env \"NOMAD_ALLOC_ID\" }}\nkernel={{ env \"attr.kernel.name\" }}\nmissing=[{{ env \"NOPE\" }}]\nupper={{ toUpper (envOrDefault \"NOPE\" \"dflt\") }}\n",
			Destination: "local/app.conf"},
		{Data: "# from a template\nFOO=bar\nQUOTED=\"a b\"\n", Destination: "${NOMAD_SECRETS_DIR}/env", Env: true, Perms: "0600"},
	}
	c.submit(job("tmpl", spec.JobBatch, task))
	a := c.alloc("tmpl", 10*time.Second, "alloc complete", clientStatus(spec.ClientComplete))
	out := logs(t, c.client, a.ID, "t", false)
	want := "alloc=" + a.ID + "\nkernel=linux\nmissing=[]\nupper=DFLT\nFOO=bar QUOTED=a b\n600\n"
	if out != want {
		t.Errorf("task printed\n%s\nwant\n%s", out, want)
	}
}

// TestTemplateFailureFailsTheStart: a source file that is not there fails
// the start with a Template event naming it.
func TestTemplateFailureFailsTheStart(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startAgent(t.TempDir(), true)
	task := shTask("t", "true")
	task.Templates = []*spec.Template{{Source: "local/missing.tpl", Destination: "local/out"}}
	task.Restart = restart(0, time.Minute, 100*time.Millisecond, spec.RestartFail)
	c.submit(job("tmplfail", spec.JobBatch, task))
	a := c.alloc("tmplfail", 10*time.Second, "alloc failed", clientStatus(spec.ClientFailed))
	ev := events(taskState(a, "t"), spec.EventTemplate)
	if len(ev) != 1 || !strings.Contains(ev[0].Message, "template 1 (local/out): cannot read its source") || !strings.Contains(ev[0].Message, "missing.tpl") {
		t.Errorf("Template events %+v, want one saying the source cannot be read", ev)
	}
}

// backendJob is a service job whose task registers service "backend" on a
// static port.
func backendJob(t *testing.T, port int) *spec.Job {
	task := shTask("b", "exec sleep 1000")
	task.Services = []*spec.Service{{Name: "backend", PortLabel: "http"}}
	j := job("backend", spec.JobService, task)
	j.Groups[0].Network = &spec.Network{Ports: []spec.Port{{Label: "http", Static: port}}}
	return j
}

const backendTemplate = `{{ range service "backend" }}{{ .Address }}:{{ .Port }}
{{ end }}`

// TestTemplateSignalsOnCatalogChange: a template that reads the catalog
// is rendered again when its service gets an instance, and the task gets
// its change_signal, without a restart.
func TestTemplateSignalsOnCatalogChange(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startAgent(t.TempDir(), true)
	front := shTask("f", `trap 'echo HUP; cat local/up' HUP; echo start; cat local/up; while :; do sleep 0.05; done`)
	front.Templates = []*spec.Template{{Data: backendTemplate, Destination: "local/up", ChangeMode: spec.ChangeSignal, ChangeSignal: "SIGHUP"}}
	c.submit(job("front", spec.JobService, front))
	a := c.alloc("front", 10*time.Second, "front running", running("f"))
	waitFor(t, 5*time.Second, "front to print start", func() bool { return strings.Contains(logs(t, c.client, a.ID, "f", false), "start") })

	port := testkit.FreePort(t)
	c.submit(backendJob(t, port))
	waitFor(t, 30*time.Second, "front to be signalled with the backend's address", func() bool {
		return strings.Contains(logs(t, c.client, a.ID, "f", false), "HUP\n127.0.0.1:"+strconv.Itoa(port)+"\n")
	})
	a = c.alloc("front", 5*time.Second, "the Template event", func(a *spec.Alloc) bool {
		return len(events(taskState(a, "f"), spec.EventTemplate)) > 0
	})
	ts := taskState(a, "f")
	if n := len(events(ts, spec.EventStarted)); n != 1 || ts.Restarts != 0 {
		t.Errorf("front started %d times, %d restarts; want 1 and 0\n%s", n, ts.Restarts, describe(a))
	}
	ev := events(ts, spec.EventTemplate)
	if len(ev) == 0 || !strings.Contains(ev[0].Message, "local/up rendered again (service backend changed); sent SIGHUP") {
		t.Errorf("Template events %+v", ev)
	}
}

// TestTemplateRestartsOnCatalogChange: with change_mode restart (the
// default), the task is restarted at once, not counted as a restart of
// its policy, and its new run reads the new rendering; so does an env
// template's variable.
func TestTemplateRestartsOnCatalogChange(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startAgent(t.TempDir(), true)
	front := shTask("f", `echo "run UP=$UP"; exec sleep 1000`)
	front.Templates = []*spec.Template{{Data: `UP="{{ range service "backend" }}{{ .Port }}{{ end }}"`, Destination: "local/env", Env: true}}
	front.Restart = restart(0, time.Minute, 10*time.Second, spec.RestartFail)
	c.submit(job("front-restart", spec.JobService, front))
	a := c.alloc("front-restart", 10*time.Second, "front running", running("f"))

	port := testkit.FreePort(t)
	c.submit(backendJob(t, port))
	want := "run UP=\nrun UP=" + strconv.Itoa(port) + "\n"
	waitFor(t, 30*time.Second, "front to run again with the backend's port", func() bool {
		return logs(t, c.client, a.ID, "f", false) == want
	})
	a = c.alloc("front-restart", 5*time.Second, "front started again", func(a *spec.Alloc) bool {
		return len(events(taskState(a, "f"), spec.EventStarted)) == 2 && taskState(a, "f").State == spec.TaskRunning
	})
	ts := taskState(a, "f")
	if n := len(events(ts, spec.EventStarted)); n != 2 || ts.Restarts != 0 || a.ClientStatusOr() != spec.ClientRunning {
		t.Errorf("front started %d times, %d restarts; want 2 and 0 (attempts = 0 would have failed it)\n%s", n, ts.Restarts, describe(a))
	}
}

// TestTemplateInSharedAllocDir: a template whose destination is Nomad's
// "../alloc/app.conf" is rendered into the alloc's shared alloc/
// directory, where a real exec task reads it through $NOMAD_ALLOC_DIR;
// the file is there on disk, and nothing is written in an alloc/ of the
// task's own directory.
func TestTemplateInSharedAllocDir(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	dataDir := t.TempDir()
	c.startAgent(dataDir, true)
	task := shTask("t", `cat "$NOMAD_ALLOC_DIR/app.conf"`)
	task.Driver = "exec"
	task.Templates = []*spec.Template{{Data: "alloc={{ env \"NOMAD_ALLOC_ID\" }}\n", Destination: "../alloc/app.conf"}}
	task.Restart = restart(0, time.Minute, 100*time.Millisecond, spec.RestartFail)
	c.submit(job("tmplshared", spec.JobBatch, task))
	a := c.alloc("tmplshared", 10*time.Second, "alloc complete", func(a *spec.Alloc) bool {
		if a.ClientStatusOr() == spec.ClientFailed {
			t.Fatalf("task failed:\n%s", describe(a))
		}
		return a.ClientStatusOr() == spec.ClientComplete
	})
	want := "alloc=" + a.ID + "\n"
	if out := logs(t, c.client, a.ID, "t", false); out != want {
		t.Errorf("task printed %q, want %q", out, want)
	}
	allocDir := filepath.Join(dataDir, "allocs", a.ID)
	if b, err := os.ReadFile(filepath.Join(allocDir, "alloc", "app.conf")); err != nil || string(b) != want {
		t.Errorf("alloc/app.conf in the alloc's directory: %q, %v; want %q", b, err, want)
	}
	if _, err := os.Stat(filepath.Join(allocDir, "t", "alloc")); !os.IsNotExist(err) {
		t.Errorf("the task's directory has an alloc/ (stat: %v); the template belongs in the alloc's shared one", err)
	}
}
