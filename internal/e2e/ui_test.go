package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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

// browser is a headless chromium with one tab, for one test.
type browser struct {
	t   *testing.T
	ctx context.Context
	d   *devProc
}

// newBrowser starts chromium for d's UI; it stops with the test.
func newBrowser(t *testing.T, d *devProc) *browser {
	t.Helper()
	path := chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,                               // CI runs as root
		chromedp.Flag("ignore-certificate-errors", true), // dev's own CA
		chromedp.WindowSize(1280, 800),
	)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(func() { cancelC(); cancelA() })
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
		t.Fatalf("starting %s: %v", path, err)
	}
	return &browser{t: t, ctx: ctx, d: d}
}

// step runs actions within 30 s, or fails the test saying what the page
// showed.
func (b *browser) step(what string, actions ...chromedp.Action) {
	b.t.Helper()
	sctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Run(sctx, actions...); err != nil {
		var body string
		dctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		defer cancel()
		chromedp.Run(dctx, chromedp.Evaluate(`document.body.innerText`, &body))
		b.t.Fatalf("%s: %v\npage:\n%.3000s\n--- dev's output:\n%.3000s", what, err, body, b.d.out)
	}
}

// text is main's text once it contains want (within 20 s).
func (b *browser) waitText(what, want string) string {
	b.t.Helper()
	var text string
	b.step(what, chromedp.Poll(`document.querySelector("main") && document.querySelector("main").innerText.includes(`+jsString(want)+`)`, nil,
		chromedp.WithPollingTimeout(20*time.Second)), chromedp.Text(`main`, &text))
	return text
}

// screenshot saves the page as docs/NAME.png when DROVER_UI_SCREENSHOTS
// names the docs directory (docs/ui.md shows them).
func (b *browser) screenshot(name string) {
	b.t.Helper()
	dir := os.Getenv("DROVER_UI_SCREENSHOTS")
	if dir == "" {
		return
	}
	var png []byte // quality 100: PNG
	b.step("screenshot "+name, chromedp.Sleep(500*time.Millisecond), chromedp.FullScreenshot(&png, 100))
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

func jsString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\n", `\n`, "\r", `\r`, "\u2028", `\u2028`, "\u2029", `\u2029`).Replace(s) + "'"
}

// loginLink finds the one-time link drover dev printed.
var loginLink = regexp.MustCompile(`web UI: (https://\S+/ui/#login=[0-9a-f]+)`)

func devLoginLink(t *testing.T, d *devProc) string {
	t.Helper()
	m := loginLink.FindStringSubmatch(d.out.String())
	if m == nil {
		t.Fatalf("drover dev printed no login link:\n%s", d.out)
	}
	return m[1]
}

// TestWebUIInARealBrowser drives the embedded UI in headless chromium
// against a real drover dev: before a login the page says how to log in
// and shows no error; dev's one-time link logs in (and works only once);
// a job submitted through the CLI appears without a reload (the page
// follows the event stream); the nodes page shows the node by name with
// its resources, an instance's page streams its live logs, and the events
// page lists the placements. With DROVER_UI_SCREENSHOT=FILE it saves the
// jobs page as a PNG (the README's).
func TestWebUIInARealBrowser(t *testing.T) {
	dir := t.TempDir()
	d := startDev(t, dir, "../../examples/hello.hcl")
	b := newBrowser(t, d)
	ui := d.addr + "/ui/"
	link := devLoginLink(t, d)

	var errors int
	var text string
	b.step("open the UI before a login",
		chromedp.Navigate(ui),
		chromedp.WaitVisible(`#login`),
		chromedp.Text(`#login`, &text),
		chromedp.Evaluate(`document.querySelectorAll(".error").length`, &errors))
	if errors != 0 || !strings.Contains(text, "drover ui") {
		t.Errorf("before a login the page shows %d errors; it says:\n%s", errors, text)
	}
	b.step("open dev's login link",
		chromedp.Navigate(link),
		chromedp.WaitVisible(`a[href="#/jobs/hello"]`),
		chromedp.WaitVisible(`#live.on`), // the event stream is open
		chromedp.Text(`#who`, &text),
		chromedp.Location(&ui))
	if text != "dev (management)" {
		t.Errorf("logged in as %q, want dev (management)", text)
	}
	if strings.Contains(ui, "login=") {
		t.Errorf("the login code stays in the address bar: %s", ui)
	}
	ui = d.addr + "/ui/"

	// A job submitted through the CLI appears with no reload.
	file := sleepJob(t, "fromcli", "")
	submitted := time.Now()
	if _, stderr, code := d.cli("", "run", "--detach", file); code != 0 {
		t.Fatalf("drover run: %s", stderr)
	}
	b.step("see the CLI's job appear", chromedp.WaitVisible(`a[href="#/jobs/fromcli"]`))
	t.Logf("job submitted through the CLI -> shown on the open page: %s", time.Since(submitted).Round(time.Millisecond))
	if path := os.Getenv("DROVER_UI_SCREENSHOT"); path != "" {
		var png []byte // quality 100: PNG
		b.step("screenshot", chromedp.Navigate(ui+"#/jobs/hello"), chromedp.WaitVisible(`a[href^="#/allocs/"]`),
			chromedp.Sleep(time.Second), chromedp.FullScreenshot(&png, 100))
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	host, _ := os.Hostname()
	b.step("nodes page", chromedp.Navigate(ui+"#/nodes"))
	text = b.waitText("nodes page", "Nodes")
	for _, want := range []string{"cpu mhz", "ready", "exec"} {
		if !strings.Contains(strings.ToLower(text), want) {
			t.Errorf("nodes page lacks %q:\n%s", want, text)
		}
	}
	if host != "" && !strings.Contains(text, host) {
		t.Errorf("nodes page does not name the node %q:\n%s", host, text)
	}

	b.step("an instance's live logs",
		chromedp.Navigate(ui+"#/jobs/hello"),
		chromedp.WaitVisible(`a[href^="#/allocs/"]`),
		chromedp.Click(`a[href^="#/allocs/"]`),
		chromedp.WaitVisible(`#logs`),
		chromedp.Poll(`document.getElementById("logs") && document.getElementById("logs").textContent.includes("hello from")`, nil, chromedp.WithPollingTimeout(20*time.Second)),
	)

	b.step("events page", chromedp.Navigate(ui+"#/events"), chromedp.WaitVisible(`#event-table`), chromedp.Text(`#event-table`, &text))
	for _, want := range []string{"Placed", "hello.hello[0]", "fromcli"} {
		if !strings.Contains(text, want) {
			t.Errorf("events page lacks %q", want)
		}
	}

	// Log out: the login screen again, and the session is gone on the
	// server (the API refuses the browser), so dev's used link cannot
	// bring it back.
	// A page still loading when the user logs out must not be drawn over
	// the login screen when its answer comes: the page's reads are held
	// back 1.5 s (the log out's DELETE is not), the user logs out at
	// once, and 2.5 s later the login screen is still what shows.
	var still bool
	b.step("log out while a page loads",
		chromedp.Evaluate(`(() => { const f = window.fetch; window.fetch = (u, o) => (o && o.method && o.method !== "GET") ? f(u, o) : new Promise((r) => setTimeout(r, 1500)).then(() => f(u, o)); })()`, nil),
		chromedp.Evaluate(`location.hash = "#/servers"`, nil), chromedp.Sleep(200*time.Millisecond),
		clickJS(`#logout`), chromedp.WaitVisible(`#login`), chromedp.Sleep(2500*time.Millisecond),
		chromedp.Evaluate(`!!document.getElementById("login")`, &still))
	if !still {
		var body string
		chromedp.Run(b.ctx, chromedp.Evaluate(`document.body.innerText`, &body))
		t.Errorf("a page that finished loading after the log out replaced the login screen:\n%s", body)
	}
	b.step("the used link again", chromedp.Navigate(link), chromedp.WaitVisible(`#login-error`), chromedp.Text(`#login-error`, &text))
	if !strings.Contains(text, "used already") {
		t.Errorf("the used link says %q", text)
	}
}
