package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// chromium finds Debian's headless-capable browser; without it the test
// skips, unless CI=true (then it fails).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no chromium: CI needs it (apt-get install chromium)")
	}
	t.Skip("no chromium here (apt-get install chromium)")
	return ""
}

// TestWebUIInARealBrowser drives the embedded UI in headless chromium
// against a real drover dev: the jobs page loads with the token, a job
// submitted through the CLI appears without a reload (the page follows
// the event stream), the nodes page shows the node by name with its
// resources, an instance's page streams its live logs, and the events page
// lists the placements. With DROVER_UI_SCREENSHOT=FILE it saves the jobs
// page as a PNG (the README's).
func TestWebUIInARealBrowser(t *testing.T) {
	browser := chromium(t)
	dir := t.TempDir()
	d := startDev(t, dir, "../../examples/hello.hcl")
	tok, err := os.ReadFile(filepath.Join(dir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser),
		chromedp.NoSandbox,                               // CI runs as root
		chromedp.Flag("ignore-certificate-errors", true), // dev's own CA
		chromedp.WindowSize(1280, 800),
	)
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	defer cancel()
	// The page's script errors and console lines go to the test's log.
	chromedp.ListenTarget(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			t.Logf("page exception: %s", ev.ExceptionDetails.Error())
		case *runtime.EventConsoleAPICalled:
			for _, a := range ev.Args {
				t.Logf("page console %s: %s", ev.Type, a.Value)
			}
		}
	})
	// The first Run starts the browser; its context must not time out
	// (chromedp stops the browser with it). Steps get their own timeouts.
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("starting %s: %v", browser, err)
	}

	ui := d.addr + "/ui/"
	step := func(what string, actions ...chromedp.Action) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := chromedp.Run(sctx, actions...); err != nil {
			// Say what the page showed.
			var body string
			dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			chromedp.Run(dctx, chromedp.Evaluate(`document.body.innerText`, &body))
			t.Fatalf("%s: %v\npage:\n%.3000s\n--- dev's output:\n%s", what, err, body, d.out)
		}
	}
	var text string
	step("open the UI and give it the token",
		chromedp.Navigate(ui),
		chromedp.WaitVisible(`#token`),
		chromedp.SendKeys(`#token`, strings.TrimSpace(string(tok))),
		chromedp.Click(`#login-form button[type=submit]`),
		chromedp.WaitVisible(`a[href="#/jobs/hello"]`),
		chromedp.WaitVisible(`#live.on`), // the event stream is open
	)

	// A job submitted through the CLI appears with no reload.
	file := sleepJob(t, "fromcli", "")
	submitted := time.Now()
	if _, stderr, code := d.cli("", "run", "--detach", file); code != 0 {
		t.Fatalf("drover run: %s", stderr)
	}
	step("see the CLI's job appear", chromedp.WaitVisible(`a[href="#/jobs/fromcli"]`))
	t.Logf("job submitted through the CLI -> shown on the open page: %s", time.Since(submitted).Round(time.Millisecond))
	if path := os.Getenv("DROVER_UI_SCREENSHOT"); path != "" {
		var png []byte // quality 100: PNG
		step("screenshot", chromedp.Navigate(ui+"#/jobs/hello"), chromedp.WaitVisible(`a[href^="#/allocs/"]`),
			chromedp.Sleep(time.Second), chromedp.FullScreenshot(&png, 100))
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	host, _ := os.Hostname()
	// The page changes after the hash does: wait for the nodes table's
	// own header, not any table (the jobs page's may still be there).
	step("nodes page", chromedp.Navigate(ui+"#/nodes"),
		chromedp.Poll(`document.querySelector("main") && document.querySelector("main").innerText.toLowerCase().includes("cpu mhz")`, nil,
			chromedp.WithPollingTimeout(20*time.Second)),
		chromedp.Text(`main`, &text))
	for _, want := range []string{"cpu mhz", "ready", "exec"} {
		if !strings.Contains(strings.ToLower(text), want) {
			t.Errorf("nodes page lacks %q:\n%s", want, text)
		}
	}
	if host != "" && !strings.Contains(text, host) {
		t.Errorf("nodes page does not name the node %q:\n%s", host, text)
	}

	step("an instance's live logs",
		chromedp.Navigate(ui+"#/jobs/hello"),
		chromedp.WaitVisible(`a[href^="#/allocs/"]`),
		chromedp.Click(`a[href^="#/allocs/"]`),
		chromedp.WaitVisible(`#logs`),
		chromedp.Poll(`document.getElementById("logs") && document.getElementById("logs").textContent.includes("hello from")`, nil, chromedp.WithPollingTimeout(20*time.Second)),
	)

	step("events page", chromedp.Navigate(ui+"#/events"), chromedp.WaitVisible(`#event-table`), chromedp.Text(`#event-table`, &text))
	for _, want := range []string{"Placed", "hello.hello[0]", "fromcli"} {
		if !strings.Contains(text, want) {
			t.Errorf("events page lacks %q", want)
		}
	}
}
