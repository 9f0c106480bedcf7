package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/jobfile"
	"github.com/drover-org/drover/internal/spec"
)

// manyJob is a batch job of 55 instances that exit at once: its page's
// instance table has two pages.
const manyJob = `job "many" {
  type = "batch"
  group "g" {
    count = 55
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
      resources {
        cpu    = 10
        memory = 10
      }
    }
  }
}
`

// cells reads the text of column col of each row of table sel.
func cells(sel string, cols ...int) string {
	return fmt.Sprintf(`JSON.stringify([...document.querySelectorAll(%s)].map((r) => %s.map((i) => r.cells[i].textContent.trim()).join("|")))`,
		jsString(sel+" tbody tr"), strings.ReplaceAll(fmt.Sprint(cols), " ", ","))
}

// TestWebUIPagingSearchEvents drives, in headless chromium against a real
// drover dev holding 112 jobs: the jobs table 50 rows a page, each page
// the API's jobs in the API's order; a job's 55 instances on two pages,
// together the API's; the events page filtered by topic and job (through
// its form) and paged, each page the API's events of that filter, newest
// first; and the search box finding the jobs and instances the API lists
// whose names contain what was typed.
func TestWebUIPagingSearchEvents(t *testing.T) {
	dir := t.TempDir()
	d := startDev(t, dir, "../../examples/hello.hcl")
	b := newBrowser(t, d)
	c := d.client()
	ctx := context.Background()
	b.step("log in", chromedp.Navigate(devLoginLink(t, d)), chromedp.WaitVisible(`a[href="#/jobs/hello"]`))

	for i := range 110 {
		job, _, err := jobfile.DecodeWith("p.hcl", fmt.Appendf(nil, `job "p%03d" {
  group "g" {
    count = 0
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
    }
  }
}`, i), jobfile.Options{})
		if err == nil {
			_, err = c.SubmitJob(ctx, job, 0)
		}
		if err != nil {
			t.Fatalf("job p%03d: %v", i, err)
		}
	}
	if _, stderr, code := d.cli("", "run", "--detach", jobFile(t, "many", manyJob)); code != 0 {
		t.Fatalf("drover run many: exit %d\n%s", code, stderr)
	}
	var jobs []*spec.JobListEntry
	eventually(t, "112 jobs", func() (bool, string) {
		var err error
		jobs, _, err = c.Jobs(ctx, nil)
		return err == nil && len(jobs) == 112, fmt.Sprintf("%d jobs, %v", len(jobs), err)
	})
	var names []string
	for _, j := range jobs {
		names = append(names, j.Name)
	}

	// The jobs table, a page at a time.
	read := func(what, js string) []string {
		t.Helper()
		var raw string
		b.step(what, chromedp.Evaluate(js, &raw))
		var out []string
		if err := json.Unmarshal([]byte(raw), &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	// until reads js until it gives want: the page is live, and may show
	// what it read before the last change for a moment.
	until := func(what, js string, want []string) []string {
		t.Helper()
		var got []string
		deadline := time.Now().Add(20 * time.Second)
		for {
			if got = read(what, js); slices.Equal(got, want) || time.Now().After(deadline) {
				return got
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	b.step("the jobs page", b.open("#/jobs"), chromedp.WaitVisible(`#pager-page`))
	for page, want := range [][]string{names[:50], names[50:100], names[100:]} {
		if page > 0 {
			b.step(fmt.Sprintf("jobs page %d", page+1), clickJS(`#pager-page a.next`),
				chromedp.Poll(fmt.Sprintf(`document.getElementById("main").dataset.key === "#/jobs?page=%d"`, page+1), nil, chromedp.WithPollingTimeout(20*time.Second)))
		}
		if got := until("the jobs' names", cells("#job-table", 0), want); !slices.Equal(got, want) {
			t.Errorf("jobs page %d shows\n%v\nthe API's jobs %d to %d are\n%v", page+1, got, page*50+1, page*50+len(want), want)
		}
	}
	var pager string
	b.step("the last page's pager", chromedp.Text(`#pager-page`, &pager, chromedp.ByID))
	if !strings.Contains(pager, "101–112 of 112") || !strings.Contains(pager, "page 3 of 3") {
		t.Errorf("the last jobs page's pager says %q", pager)
	}
	b.screenshot("ui-jobs-paged")

	// A job's instances: two pages, together the API's.
	var allocs []*spec.Alloc
	eventually(t, "many's 55 instances", func() (bool, string) {
		var err error
		allocs, _, err = c.Allocs(ctx, "many", "", nil)
		return err == nil && len(allocs) == 55, fmt.Sprintf("%d, %v", len(allocs), err)
	})
	var wantAllocs []string
	for _, a := range allocs {
		wantAllocs = append(wantAllocs, a.Name)
	}
	b.step("many's page", b.open("#/jobs/many"), chromedp.WaitVisible(`#pager-ipage`))
	first := read("many's first instances", cells("#instance-table", 0))
	b.step("many's next instances", clickJS(`#pager-ipage a.next`),
		chromedp.Poll(`document.getElementById("main").dataset.key === "#/jobs/many?ipage=2"`, nil, chromedp.WithPollingTimeout(20*time.Second)))
	second := read("many's last instances", cells("#instance-table", 0))
	both := append(slices.Clone(first), second...)
	slices.Sort(both)
	slices.Sort(wantAllocs)
	if len(first) != 50 || len(second) != 5 || !slices.Equal(both, wantAllocs) {
		t.Errorf("many's instance pages show %d and %d: %v\nthe API's: %v", len(first), len(second), both, wantAllocs)
	}

	// Events: the form's filter, then each page the API's, newest first.
	b.step("the events page", b.open("#/events"), chromedp.WaitVisible(`#events-form`),
		chromedp.SetValue(`#events-topic`, "job", chromedp.ByID), typeInto(`#events-job`, ""),
		chromedp.Evaluate(`document.getElementById("events-form").requestSubmit()`, nil),
		chromedp.Poll(`document.getElementById("main").dataset.key === "#/events?topic=job"`, nil, chromedp.WithPollingTimeout(20*time.Second)))
	events := func(o client.EventOptions) []string {
		o.Since = 24 * time.Hour
		evs, _, err := c.Events(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range slices.Backward(evs) {
			subject := e.Job
			if e.Alloc != "" {
				subject = e.Alloc
				if e.Task != "" {
					subject += "/" + e.Task
				}
			}
			out = append(out, fmt.Sprintf("%s|%s|%s|%s", e.Topic, e.Type, subject, e.Message))
		}
		return out
	}
	for _, tc := range []struct {
		hash string
		o    client.EventOptions
		from int
	}{
		{"#/events?topic=job", client.EventOptions{Topics: []string{"job"}}, 0},
		{"#/events?topic=job&page=2", client.EventOptions{Topics: []string{"job"}}, 50},
		{"#/events?topic=alloc&job=many", client.EventOptions{Topics: []string{"alloc"}, Job: "many"}, 0},
		{"#/events?topic=alloc&job=many&page=2", client.EventOptions{Topics: []string{"alloc"}, Job: "many"}, 50},
	} {
		// Events go on coming (many's instances finish): the page and the
		// API are read again until they agree.
		var got, want []string
		deadline := time.Now().Add(30 * time.Second)
		for {
			b.step("events "+tc.hash, b.open(tc.hash), chromedp.WaitVisible(`#event-table`))
			got = read("the events", cells("#event-table", 1, 2, 3, 4))
			all := events(tc.o)
			want = all[min(tc.from, len(all)):min(tc.from+50, len(all))]
			if slices.Equal(got, want) && len(got) > 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		if !slices.Equal(got, want) || len(got) == 0 {
			t.Errorf("%s shows\n%s\nthe API's\n%s", tc.hash, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	b.screenshot("ui-events")

	// Search: what is typed in the header's box, across the lists.
	for _, q := range []string{"p10", "many.g[5"} {
		b.step("search "+q, chromedp.Evaluate(`{const i = document.getElementById("search"); i.focus(); i.value = `+jsString(q)+`;
			i.dispatchEvent(new Event("input"))}`, nil),
			chromedp.Poll(`document.getElementById("main").dataset.key === "#/search?q=" + encodeURIComponent(`+jsString(q)+`)`, nil, chromedp.WithPollingTimeout(20*time.Second)))
		wantJobs, wantInst := []string{}, []string{}
		for _, n := range names {
			if strings.Contains(n, q) {
				wantJobs = append(wantJobs, n)
			}
		}
		all, _, err := c.Allocs(ctx, "", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range all {
			if strings.Contains(a.Name, q) || strings.Contains(a.ID, q) || strings.Contains(a.NodeName, q) {
				wantInst = append(wantInst, a.Name)
			}
		}
		gotJobs := read("found jobs", cells("#search-jobs", 0))
		gotInst := read("found instances", cells("#search-instances", 0))
		slices.Sort(gotInst)
		slices.Sort(wantInst)
		if len(wantJobs)+len(wantInst) == 0 || !slices.Equal(gotJobs, wantJobs) || !slices.Equal(gotInst, wantInst) {
			t.Errorf("search %q found jobs %v and instances %v; the API's lists hold %v and %v", q, gotJobs, gotInst, wantJobs, wantInst)
		}
	}
	b.screenshot("ui-search")
}
