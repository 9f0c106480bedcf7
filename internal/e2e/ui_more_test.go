package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/spec"
)

// uirunJob is submitted through the UI's Run a job page: it writes to
// stdout and stderr, one line later than the rest (for follow), registers
// a service with a script check, and has an update block (a deployment
// per version).
const uirunJob = `job "uirun" {
  update {
    max_parallel     = 1
    min_healthy_time = "1s"
  }
  group "g" {
    count = 1
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo out-line-1; echo out-line-2; echo err-line >&2; sleep 2; echo late-line; exec sleep 300"]
      }
      service {
        name = "uirun-svc"
        check {
          type     = "script"
          command  = "/bin/true"
          interval = "500ms"
        }
      }
      resources {
        cpu    = 10
        memory = 10
      }
    }
  }
}
`

// TestWebUISubmitInstanceLogsPages drives, in headless chromium against a
// real drover dev, what TestWebUIActions does not: restart and stop of one
// instance; a job submitted from the Run page (a bad file's problems shown
// at their line first, then the plan, the same text drover plan prints,
// then Run) and edited (its JSON, a count changed, planned with the diff,
// run against the planned index); an instance's stdout and stderr, follow,
// search and download; the services, deployments and servers pages; and a
// read-only token seeing the new actions disabled with the reason. Each
// outcome is read back through the API. With DROVER_UI_SCREENSHOTS=DIR it
// saves the pages docs/ui.md shows.
func TestWebUISubmitInstanceLogsPages(t *testing.T) {
	dir := t.TempDir()
	d := startDev(t, dir, "../../examples/hello.hcl")
	b := newBrowser(t, d)
	c := d.client()
	ctx := context.Background()
	b.step("log in", chromedp.Navigate(devLoginLink(t, d)), chromedp.WaitVisible(`a[href="#/jobs/hello"]`))
	var text string

	// Restart one instance of hello: the same alloc, a new process.
	var first *spec.Alloc
	eventually(t, "hello's instances running", func() (bool, string) {
		for _, a := range d.jobStatus("hello").Allocations {
			if ts := a.Status.Tasks["greeter"]; a.ClientStatusOr() == spec.ClientRunning && ts != nil && ts.PID > 0 {
				first = a
				return true, ""
			}
		}
		return false, "none running with a pid"
	})
	pid := first.Status.Tasks["greeter"].PID
	b.step("an instance's page", b.open("#/allocs/"+first.ID), chromedp.WaitVisible(`#logs`))
	b.act("Restart", "Restart every task of "+first.Name)
	eventually(t, first.Name+" runs a new process", func() (bool, string) {
		a, err := c.Alloc(ctx, first.ID)
		if err != nil {
			return false, err.Error()
		}
		ts := a.Status.Tasks["greeter"]
		return ts != nil && ts.State == spec.TaskRunning && ts.PID > 0 && ts.PID != pid, fmt.Sprintf("%+v", ts)
	})

	// Follow: hello greets every 2 s, and the open log grows; without
	// follow it stays as it was, while the task goes on writing.
	greetings := `document.getElementById("logs").textContent.split("hello from").length - 1`
	var n0, n1, n2 int
	b.step("the log as it was", chromedp.Poll(greetings+` > 0`, nil, chromedp.WithPollingTimeout(20*time.Second)), chromedp.Evaluate(greetings, &n0))
	b.step("the log followed", chromedp.Poll(greetings+` > `+fmt.Sprint(n0), nil, chromedp.WithPollingTimeout(20*time.Second)),
		clickJS(`#log-follow`), chromedp.Evaluate(greetings, &n1), chromedp.Sleep(5*time.Second), chromedp.Evaluate(greetings, &n2))
	rc, err := c.Logs(ctx, first.ID, client.LogOptions{Task: "greeter", Tail: -1})
	if err != nil {
		t.Fatal(err)
	}
	all, _ := io.ReadAll(rc)
	rc.Close()
	if n2 != n1 || strings.Count(string(all), "hello from") < n1+2 {
		t.Errorf("without follow the log went from %d to %d greetings; the task wrote %d in all", n1, n2, strings.Count(string(all), "hello from"))
	}

	// Run a job: a typo first, shown at its line, and nothing submitted.
	b.step("the run page", b.open("#/jobs"), chromedp.WaitVisible(`a[href="#/run"]`), clickJS(`a[href="#/run"]`), chromedp.WaitVisible(`#job-source`),
		typeInto(`#job-source`, strings.Replace(uirunJob, "count = 1", "cuont = 1", 1)), clickJS(`#plan-btn`),
		chromedp.WaitVisible(`#problems`), chromedp.Text(`#problems`, &text))
	if !strings.Contains(text, "line 7") || !strings.Contains(text, "cuont = 1") || !strings.Contains(text, "cuont") {
		t.Errorf("the typo's problem is not shown at line 7:\n%s", text)
	}
	var line int
	b.step("go to the problem's line", clickJS(`#problems a[data-line]`),
		chromedp.Evaluate(`{const ta = document.getElementById("job-source"); ta.value.slice(0, ta.selectionStart).split("\n").length}`, &line))
	if line != 7 {
		t.Errorf("the problem's link selects line %d, want 7", line)
	}
	b.screenshot("ui-problems")
	if _, _, err := c.Job(ctx, "uirun", nil); !client.IsStatus(err, http.StatusNotFound) {
		t.Fatalf("a job file with a typo was submitted: %v", err)
	}

	// The right file: its plan is the text drover plan prints.
	file := writeTemp(t, "uirun.hcl", uirunJob)
	cliPlan, stderr, code := d.cli("", "plan", file)
	if code != 0 {
		t.Fatalf("drover plan: %d %s", code, stderr)
	}
	b.step("plan the job", typeInto(`#job-source`, uirunJob), clickJS(`#plan-btn`), chromedp.WaitVisible(`#plan`), chromedp.Text(`#plan`, &text))
	if !strings.Contains(text, `+ Job "uirun" (new: version 1)`) || !strings.Contains(cliPlan, strings.TrimSpace(text)) {
		t.Errorf("the page's plan is not drover plan's:\n%s\n--- drover plan:\n%s", text, cliPlan)
	}
	b.screenshot("ui-run")
	b.act("Run", "Submit the new job uirun")
	eventually(t, "uirun submitted and running", func() (bool, string) {
		st, _, err := c.Job(ctx, "uirun", nil)
		if err != nil {
			return false, err.Error()
		}
		return st.Job.Version == 1 && st.Summary.Running == 1, st.Summary.Shown
	})

	// Edit: its JSON, the count changed, the plan's diff, Run.
	b.step("the edit page", b.open("#/jobs/uirun"), chromedp.WaitVisible(`a[href="#/jobs/uirun/edit"]`), clickJS(`a[href="#/jobs/uirun/edit"]`),
		chromedp.WaitVisible(`#job-source`), chromedp.Value(`#job-source`, &text))
	var def spec.Job
	if err := json.Unmarshal([]byte(text), &def); err != nil || def.Name != "uirun" || def.Groups[0].Count != 1 {
		t.Fatalf("the edit page is not prefilled with the job's JSON (%v):\n%s", err, text)
	}
	def.Groups[0].Count = 2
	edited, _ := json.MarshalIndent(&def, "", "  ")
	cliPlan, stderr, code = d.cli("", "plan", writeTemp(t, "uirun.json", string(edited)))
	if code != 0 {
		t.Fatalf("drover plan of the edit: %d %s", code, stderr)
	}
	b.step("plan the edit", typeInto(`#job-source`, string(edited)), clickJS(`#plan-btn`), chromedp.WaitVisible(`#plan`), chromedp.Text(`#plan`, &text))
	if !strings.Contains(text, "~ groups[g].count: 1 -> 2") || !strings.Contains(cliPlan, strings.TrimSpace(text)) {
		t.Errorf("the edit's plan is not drover plan's:\n%s\n--- drover plan:\n%s", text, cliPlan)
	}
	b.act("Run", "Submit uirun as planned (version 2)")
	eventually(t, "uirun version 2 with 2 instances", func() (bool, string) {
		st := d.jobStatus("uirun")
		return st.Job.Version == 2 && st.Job.Groups[0].Count == 2 && st.Summary.Running == 2, fmt.Sprintf("version %d, %s", st.Job.Version, st.Summary.Shown)
	})

	// A plan made stale by a change in between: Run is refused, and the
	// job is not overwritten.
	b.step("plan a stale edit", b.open("#/jobs/uirun/edit"), chromedp.WaitVisible(`#job-source`), clickJS(`#plan-btn`), chromedp.WaitVisible(`#plan`))
	def.Groups[0].Count = 3
	three, _ := json.Marshal(&def)
	if _, stderr, code := d.cli("", "run", "--detach", writeTemp(t, "uirun3.json", string(three))); code != 0 {
		t.Fatalf("drover run with count 3: %s", stderr)
	}
	var cls string
	b.step("run the stale plan", clickJS(`#run-btn`), chromedp.WaitVisible(`#confirm`), chromedp.Click(`#confirm-ok`),
		chromedp.WaitVisible(`#flash`), chromedp.Text(`#flash`, &text), chromedp.AttributeValue(`#flash`, "class", &cls, nil),
		chromedp.Evaluate(`document.getElementById("flash").hidden = true`, nil))
	if st := d.jobStatus("uirun"); !strings.Contains(cls, "error") || !strings.Contains(text, "changed") || st.Job.Groups[0].Count != 3 {
		t.Errorf("a stale plan's Run: the page says %q (%s); the job's count is %d, want 3", text, cls, st.Job.Groups[0].Count)
	}

	// Logs: stdout, stderr, follow, search and download.
	var inst *spec.Alloc
	eventually(t, "uirun.g[0] running", func() (bool, string) {
		for _, a := range d.jobStatus("uirun").Allocations {
			if a.Index == 0 && a.DesiredStatus == spec.DesiredRun && a.ClientStatusOr() == spec.ClientRunning {
				inst = a
				return true, ""
			}
		}
		return false, "not yet"
	})
	b.step("stdout, followed", b.open("#/allocs/"+inst.ID+"?task=t&type=stdout"),
		chromedp.Poll(`document.getElementById("logs").textContent.includes("late-line")`, nil, chromedp.WithPollingTimeout(20*time.Second)),
		chromedp.Text(`#logs`, &text))
	if strings.Contains(text, "err-line") || !strings.Contains(text, "out-line-1") {
		t.Errorf("stdout shows:\n%s", text)
	}
	var href string
	b.step("search", typeInto(`#log-search`, "LINE-2"), chromedp.Evaluate(`document.getElementById("log-search").dispatchEvent(new Event("input", {bubbles: true}))`, nil),
		chromedp.Text(`#logs`, &text), chromedp.Text(`#log-count`, &cls), chromedp.AttributeValue(`#log-download`, "href", &href, nil))
	if text != "out-line-2" || cls != "1 of 3 lines" {
		t.Errorf("searching LINE-2 shows %q (%q); want out-line-2 (1 of 3 lines)", text, cls)
	}
	b.screenshot("ui-logs")
	var downloaded string
	b.step("download", chromedp.Evaluate(`fetch(`+jsString(href)+`).then(r => r.text())`, &downloaded, func(p *runtime.EvaluateParams) *runtime.EvaluateParams {
		return p.WithAwaitPromise(true)
	}))
	rc, err = c.Logs(ctx, inst.ID, client.LogOptions{Task: "t", Tail: -1})
	if err != nil {
		t.Fatal(err)
	}
	fromAPI, _ := io.ReadAll(rc)
	rc.Close()
	if downloaded != string(fromAPI) || !strings.Contains(downloaded, "late-line") {
		t.Errorf("the download is %q; the API's stdout is %q", downloaded, fromAPI)
	}
	b.step("stderr", clickJS(`#log-stderr`),
		chromedp.Poll(`document.getElementById("logs") && document.getElementById("logs").textContent.includes("err-line")`, nil, chromedp.WithPollingTimeout(20*time.Second)),
		chromedp.Text(`#logs`, &text))
	if strings.Contains(text, "out-line") {
		t.Errorf("stderr shows stdout's lines:\n%s", text)
	}

	// Stop that instance: a replacement takes its place.
	b.act("Stop", "Stop "+inst.Name)
	eventually(t, "a replacement of uirun.g[0]", func() (bool, string) {
		old, err := c.Alloc(ctx, inst.ID)
		if err != nil || old.DesiredStatus != spec.DesiredStop || old.DesiredCause != spec.CauseAllocStop {
			return false, fmt.Sprintf("%v %+v", err, old)
		}
		for _, a := range d.jobStatus("uirun").Allocations {
			if a.Index == 0 && a.ID != inst.ID && a.DesiredStatus == spec.DesiredRun && a.ClientStatusOr() == spec.ClientRunning {
				return true, ""
			}
		}
		return false, "no replacement running"
	})

	// Services: the catalog's instances of uirun-svc, with their checks.
	var ins []spec.ServiceInstance
	eventually(t, "uirun-svc healthy", func() (bool, string) {
		var err error
		ins, _, err = c.Service(ctx, "uirun-svc", true, nil)
		healthy := 0
		for _, i := range ins {
			if i.Health == spec.HealthHealthy {
				healthy++
			}
		}
		return err == nil && healthy == 3 && len(ins) == 3, fmt.Sprintf("%v %d of %d", err, healthy, len(ins))
	})
	b.step("services page", b.open("#/services"), chromedp.WaitVisible(`a[href="#/services/uirun-svc"]`), clickJS(`a[href="#/services/uirun-svc"]`))
	text = b.waitText("the service's page", "3 of 3 healthy")
	for _, i := range ins {
		if !strings.Contains(text, i.AllocName) {
			t.Errorf("the service page lacks instance %s:\n%s", i.AllocName, text)
		}
	}
	if !strings.Contains(text, "passing") {
		t.Errorf("the service page shows no passing check:\n%s", text)
	}
	b.screenshot("ui-service")

	// Deployments: uirun's, newest first, linked to the job.
	deps, _, err := c.Deployments(ctx, nil)
	if err != nil || len(deps) == 0 {
		t.Fatalf("deployments: %v %d", err, len(deps))
	}
	b.step("deployments page", b.open("#/deployments"), chromedp.WaitVisible(`a[href="#/jobs/uirun"]`),
		chromedp.Evaluate(`document.querySelector("main tbody tr .id").textContent`, &text))
	if text != deps[0].ID[:8] {
		t.Errorf("the deployments page's first row is %q; the API's newest is %s", text, deps[0].ID)
	}

	// Servers: who leads.
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b.step("servers page", b.open("#/servers"), chromedp.WaitVisible(`#leader`), chromedp.Text(`#leader`, &text))
	if leader == "" || text != leader {
		t.Errorf("the servers page says %q leads; the API says %q", text, leader)
	}

	// A token that may only read: the instance's actions and Run are
	// disabled, with the reason.
	link := restrictedLoginLink(t, d, "viewer", "namespace \"default\" { capabilities = [\"read\", \"logs\"] }\nnode { capabilities = [\"read\"] }\n")
	b.step("log in as viewer", chromedp.Click(`#logout`), chromedp.WaitVisible(`#login`), chromedp.Navigate(link), chromedp.WaitVisible(`a[href="#/jobs/hello"]`))
	var live int
	for _, page := range []string{"#/allocs/" + first.ID, "#/jobs/uirun/edit"} {
		b.step("as viewer: "+page, b.open(page), chromedp.WaitVisible(`.why`), chromedp.Text(`.why`, &text),
			chromedp.Evaluate(`document.querySelectorAll("main button[data-action], #plan-btn").length`, &live))
		if live != 0 || !strings.Contains(text, `may not submit in namespace "default"`) {
			t.Errorf("as viewer on %s, %d actions are live; the reason shown: %q", page, live, text)
		}
	}
	if os.Getenv("DROVER_UI_SCREENSHOTS") != "" {
		b.step("the viewer's instance page", b.open("#/allocs/"+first.ID), chromedp.WaitVisible(`.why`))
		b.screenshot("ui-instance-denied")
	}
}
