package main

// drover-bench ui: the web UI's jobs page on a large cluster, in headless
// chromium. The simulated cluster of sim.go (one real server, its
// embedded etcd and API in this process; real agent.Agent instances with
// the fake driver, so 10,000 instances are reported running without
// 10,000 processes), then:
//
//   - jobs x instances submitted (8 requests in flight) and waited for
//     until every instance is reported running;
//   - GET /v1/jobs timed from this process (the list the page reads);
//   - the jobs page loaded -loads times, each in a new tab: the figure is the
//     browser's own clock, performance.now() (0 at the navigation's
//     start) when a MutationObserver, installed before the page's
//     scripts run, first sees the jobs table with a row. The page does not
//     time itself. The topology page likewise, to its first instance block;
//   - then, with the jobs page open, -stream-jobs more jobs submitted one
//     every 100 ms (each a burst of events the page follows and redraws
//     on), while a timer in the page measures how late each of its 50 ms
//     ticks fires: the longest, the 99th percentile, and the browser's own
//     long tasks (over 50 ms of script or layout at once, from a
//     PerformanceObserver) in that time.
//
// The page is the one a user gets: embedded in the server and served at
// /ui/, logged in through a one-time code (ACLs are off in the
// simulation, so the session is the anonymous one).

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
)

func init() {
	register(scenario{
		name:  "ui",
		about: "1,000 jobs x 10 instances on simulated agents: the web UI's jobs page load in headless chromium, and its main thread while events stream",
		flags: uiFlags,
	})
}

// uiLoadTarget is issue 21's: the jobs page of 1,000 jobs and 10,000
// instances loads in under a second.
const uiLoadTarget = time.Second

// uiSlotsPerNode: 128 instances fill a simulated node, so 100 agents
// hold 10,000 with room to spare.
const uiSlotsPerNode = 128

func uiFlags(fs *flag.FlagSet, o *options) func() (*report, error) {
	sf := addSimFlags(fs)
	fs.Lookup("agents").DefValue = "100"
	sf.agents = 100
	jobs := fs.Int("jobs", 1000, "jobs (-quick: 50 unless given)")
	instances := fs.Int("instances", 10, "instances per job")
	loads := fs.Int("loads", 5, "page loads timed")
	stream := fs.Int("stream-jobs", 50, "jobs submitted one every 100 ms while the page's main thread is watched")
	return func() (*report, error) {
		return uiBench(sf.count(o), sized(fs, o, "jobs", *jobs, 50), *instances, *loads, *stream, sf.nodeTTL)
	}
}

// drawnScript runs in the page before its own scripts: it records the
// browser's clock when the jobs table first has a row.
// On the topology page: when the boxes have their instances' blocks.
const drawnScript = `(() => {
  const sel = location.hash.startsWith("#/topology") ? ".topo .tblock" : "#job-table tbody tr";
  const seen = () => document.querySelector(sel);
  new MutationObserver((_, obs) => {
    if (window.__drawn === undefined && seen()) { window.__drawn = performance.now(); obs.disconnect(); }
  }).observe(document, { childList: true, subtree: true });
})();`

// lagScript starts the main thread's watch: a 50 ms timer's lateness, and
// the long tasks the browser reports.
const lagScript = `(() => {
  window.__lags = []; window.__long = [];
  new PerformanceObserver((l) => { for (const e of l.getEntries()) window.__long.push(e.duration); }).observe({ type: "longtask" });
  let last = performance.now();
  window.__tick = setInterval(() => { const now = performance.now(); window.__lags.push(now - last - 50); last = now; }, 50);
})();`

func uiBench(agents, jobs, instances, loads, stream int, nodeTTL time.Duration) (*report, error) {
	n := jobs * instances
	if n+stream*instances > agents*uiSlotsPerNode {
		return nil, fmt.Errorf("%d instances do not fit on %d agents of %d slots; raise -agents", n+stream*instances, agents, uiSlotsPerNode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	// chromedp finds the browser (chromium, chromium-browser,
	// google-chrome, ... on the PATH).
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.NoSandbox, chromedp.WindowSize(1280, 800))
	actx, cancelA := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelA()
	bctx, cancelB := chromedp.NewContext(actx)
	defer cancelB()
	if err := chromedp.Run(bctx); errors.Is(err, exec.ErrNotFound) {
		return nil, &unavailableError{fmt.Sprintf("a headless chromium is needed (apt-get install chromium): %v", err)}
	} else if err != nil {
		return nil, fmt.Errorf("starting headless chromium: %w", err)
	}
	c, startup, err := startSimWithAgents(ctx, nodeTTL, agents)
	if err != nil {
		return nil, err
	}
	defer c.close()

	res := instanceSize(uiSlotsPerNode)
	submit := func(names []string, inFlight int) error {
		var wg sync.WaitGroup
		sem := make(chan struct{}, inFlight)
		errs := make(chan error, len(names))
		for _, name := range names {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				sctx, cancel := context.WithTimeout(ctx, time.Minute)
				defer cancel()
				if _, err := c.client.SubmitJob(sctx, simJob(name, instances, res), 0); err != nil {
					errs <- fmt.Errorf("submitting %s: %w", name, err)
				}
			}()
		}
		wg.Wait()
		close(errs)
		return <-errs
	}
	names := make([]string, jobs)
	for i := range names {
		names[i] = fmt.Sprintf("ui-%04d", i)
	}
	t0 := time.Now()
	if err := submit(names, 8); err != nil {
		return nil, err
	}
	err = waitUntil(ctx, time.Minute+time.Duration(n)*10*time.Millisecond, fmt.Sprintf("%d instances to be reported running", n), func() (bool, string) {
		_, running, err := c.obs.counts(names)
		if err != nil {
			return false, err.Error()
		}
		return running == n, fmt.Sprintf("%d of %d running", running, n)
	})
	if err != nil {
		return nil, err
	}
	ready := time.Since(t0)

	// The list the page reads, timed from here: the request and its body.
	var apiTimes []time.Duration
	var body []byte
	for range 5 {
		t := time.Now()
		if body, err = c.get(ctx, "/v1/jobs"); err != nil {
			return nil, err
		}
		apiTimes = append(apiTimes, time.Since(t))
	}
	var list []json.RawMessage
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("GET /v1/jobs: %w", err)
	}
	listed := len(list)

	step := func(what string, timeout time.Duration, actions ...chromedp.Action) error {
		sctx, cancel := context.WithTimeout(bctx, timeout)
		defer cancel()
		if err := chromedp.Run(sctx, actions...); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	}
	if err := step("log in", time.Minute, chromedp.Navigate(c.url+"/ui/#login="+c.srv.UILoginCode("")), chromedp.WaitVisible(`#job-table tbody tr`)); err != nil {
		return nil, err
	}
	// load opens hash in a new tab of the logged-in browser (a tab
	// closed, its connections go with it: over the simulation's plain
	// HTTP/1.1, a browser keeps 6 per server), returns the browser's
	// navigation -> drawn time and count's value, and closes the tab.
	load := func(hash, count string) (time.Duration, int, error) {
		tctx, cancel := chromedp.NewContext(bctx)
		defer cancel()
		sctx, cancelT := context.WithTimeout(tctx, time.Minute)
		defer cancelT()
		var drawn float64
		var k int
		var visible string
		err := chromedp.Run(sctx, chromedp.ActionFunc(func(ctx context.Context) error {
			// The new tab in front, as a user's: a hidden one's timers
			// and frames are throttled.
			if err := target.ActivateTarget(chromedp.FromContext(ctx).Target.TargetID).Do(ctx); err != nil {
				return err
			}
			_, err := page.AddScriptToEvaluateOnNewDocument(drawnScript).Do(ctx)
			return err
		}), chromedp.Navigate(c.url+"/ui/"+hash),
			chromedp.Poll(`window.__drawn !== undefined`, nil, chromedp.WithPollingTimeout(50*time.Second), chromedp.WithPollingInterval(20*time.Millisecond)),
			chromedp.Evaluate(`window.__drawn`, &drawn),
			chromedp.Evaluate(`document.visibilityState`, &visible),
			chromedp.Evaluate(count, &k))
		if err == nil && visible != "visible" {
			err = fmt.Errorf("the tab was %s, not visible", visible)
		}
		if err != nil {
			var text string
			dctx, cancel := context.WithTimeout(tctx, 5*time.Second)
			defer cancel()
			chromedp.Run(dctx, chromedp.Evaluate(`document.body ? document.body.innerText : ""`, &text))
			return 0, 0, fmt.Errorf("loading %s: %w; the page said: %.300q", hash, err, text)
		}
		return time.Duration(drawn * float64(time.Millisecond)), k, nil
	}
	var loadTimes []time.Duration
	var rows int
	for range loads {
		d, k, err := load("#/jobs", `document.querySelectorAll("#job-table tbody tr").length`)
		if err != nil {
			return nil, err
		}
		loadTimes, rows = append(loadTimes, d), k
	}

	// The page shows the jobs' 50 rows of the first page, of as many as
	// the API lists.
	if want := min(jobs, 50); rows != want {
		return nil, fmt.Errorf("the jobs page drew %d rows; want %d (the first page of %d jobs)", rows, want, jobs)
	}
	// The topology: a box per node, a block per instance.
	var topoTimes []time.Duration
	var blocks int
	for range loads {
		d, k, err := load("#/topology", `document.querySelectorAll(".topo .tblock").length`)
		if err != nil {
			return nil, err
		}
		topoTimes, blocks = append(topoTimes, d), k
	}
	if blocks != n {
		return nil, fmt.Errorf("the topology drew %d instance blocks; %d instances run", blocks, n)
	}
	var visible string
	if err := step("back to the jobs page", time.Minute, chromedp.ActionFunc(func(ctx context.Context) error {
		return target.ActivateTarget(chromedp.FromContext(ctx).Target.TargetID).Do(ctx)
	}), chromedp.Navigate(c.url+"/ui/#/jobs"), chromedp.WaitVisible(`#job-table tbody tr`), chromedp.Evaluate(`document.visibilityState`, &visible)); err != nil {
		return nil, err
	}
	if visible != "visible" {
		return nil, fmt.Errorf("the jobs page's tab is %s, not visible: its timers would be throttled", visible)
	}

	// Events streaming into the open page.
	if err := step("watch the main thread", 10*time.Second, chromedp.Evaluate(lagScript, nil)); err != nil {
		return nil, err
	}
	more := make([]string, stream)
	for i := range more {
		more[i] = fmt.Sprintf("ui-stream-%03d", i)
	}
	ts := time.Now()
	for _, name := range more {
		if err := submit([]string{name}, 1); err != nil {
			return nil, err
		}
		time.Sleep(100 * time.Millisecond)
	}
	err = waitUntil(ctx, time.Minute, "the streamed jobs to run", func() (bool, string) {
		_, running, err := c.obs.counts(more)
		if err != nil {
			return false, err.Error()
		}
		return running == stream*instances, fmt.Sprintf("%d of %d running", running, stream*instances)
	})
	if err != nil {
		return nil, err
	}
	time.Sleep(time.Second) // the last redraw
	streamed := time.Since(ts)
	var lagsRaw, longRaw string
	var shownJobs string
	if err := step("read the watch", 10*time.Second,
		chromedp.Evaluate(`clearInterval(window.__tick); JSON.stringify(window.__lags)`, &lagsRaw),
		chromedp.Evaluate(`JSON.stringify(window.__long)`, &longRaw),
		chromedp.Evaluate(`document.querySelector("h1 small").textContent`, &shownJobs)); err != nil {
		return nil, err
	}
	if want := fmt.Sprint(jobs + stream); shownJobs != want {
		return nil, fmt.Errorf("after the stream the jobs page says %q jobs; the API has %s", shownJobs, want)
	}
	var lagsMS, longMS []float64
	if err := json.Unmarshal([]byte(lagsRaw), &lagsMS); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(longRaw), &longMS); err != nil {
		return nil, err
	}
	toDur := func(xs []float64) []time.Duration {
		out := make([]time.Duration, len(xs))
		for i, x := range xs {
			out[i] = time.Duration(x * float64(time.Millisecond))
		}
		return out
	}
	lags, long := toDur(lagsMS), toDur(longMS)
	var longSum time.Duration
	for _, d := range long {
		longSum += d
	}

	rep := newReport("ui")
	rep.linef("ui: %d jobs x %d instances on %d simulated agents; the jobs page in headless chromium", jobs, instances, agents)
	c.clusterLines(rep, agents, startup)
	addRow(rep, "submitted and all reported running", ms(ready), "")
	addRow(rep, "GET /v1/jobs p50 (from this process)", ms(pct(apiTimes, 50)), "")
	rep.linef("    (%d jobs listed, %d bytes of JSON)", listed, len(body))
	addRow(rep, "jobs page: navigation -> table drawn, p50", ms(pct(loadTimes, 50)), "< 1000 ms")
	addRow(rep, "jobs page: navigation -> table drawn, max", ms(slices.Max(loadTimes)), "")
	rep.linef("    (%d loads, each in a new tab, the browser's clock; %d rows drawn of %d jobs)", loads, rows, listed)
	addRow(rep, "topology: navigation -> blocks drawn, p50", ms(pct(topoTimes, 50)), "report")
	addRow(rep, "topology: navigation -> blocks drawn, max", ms(slices.Max(topoTimes)), "")
	each := make([]string, len(topoTimes))
	for i, d := range topoTimes {
		each[i] = fmt.Sprintf("%.0f", float64(d.Microseconds())/1000)
	}
	rep.linef("    (%d boxes with %d instance blocks; each load, ms: %s)", agents, blocks, strings.Join(each, ", "))
	addRow(rep, "while events stream: timer lateness p99", ms(pct(lags, 99)), "report")
	addRow(rep, "while events stream: timer lateness max", ms(slices.Max(lags)), "report")
	addRow(rep, "while events stream: long tasks", fmt.Sprintf("%d, %s in all", len(long), ms(longSum)), "report")
	rep.linef("    (%d jobs submitted one every 100 ms over %s, the page open on the jobs list; it then said %q)", stream, streamed.Round(time.Millisecond), shownJobs)
	c.warningLines(rep)

	rep.set("agents", agents)
	rep.set("jobs", jobs)
	rep.set("instances", instances)
	rep.set("ready_ms", ready)
	rep.set("api_jobs_p50_ms", pct(apiTimes, 50))
	rep.set("api_jobs_bytes", len(body))
	rep.set("load_p50_ms", pct(loadTimes, 50))
	rep.set("load_max_ms", slices.Max(loadTimes))
	rep.set("rows_drawn", rows)
	rep.set("topology_p50_ms", pct(topoTimes, 50))
	rep.set("topology_max_ms", slices.Max(topoTimes))
	rep.set("stream_lag_p99_ms", pct(lags, 99))
	rep.set("stream_lag_max_ms", slices.Max(lags))
	rep.set("stream_long_tasks", len(long))
	rep.set("stream_long_tasks_ms", longSum)
	if p := pct(loadTimes, 50); p >= uiLoadTarget {
		rep.failed = fmt.Errorf("the jobs page took %s (p50) to draw; the target is under %s", ms(p), uiLoadTarget)
	}
	return rep, nil
}

// get reads path from the server's API, within 30 s.
func (c *simCluster) get(ctx context.Context, path string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", c.url+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s: %.200s", path, resp.Status, b)
	}
	return b, err
}
