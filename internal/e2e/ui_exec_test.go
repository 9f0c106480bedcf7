package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// TestWebUIExec drives the instance page's terminal in headless chromium
// against a real drover dev: Exec opens a shell (the default command) in
// a running task; what is typed on the keyboard runs there; the command's
// terminal has the size of the page's terminal and follows it when the
// window narrows; a file the shell writes is on disk in the task's
// directory with what was typed; and the page shows the exit code, 3. A
// token without exec sees Exec disabled with the reason. With
// DROVER_UI_SCREENSHOTS=DIR it saves the terminal (ui-exec.png).
func TestWebUIExec(t *testing.T) {
	d := startDev(t, t.TempDir(), "../../examples/hello.hcl")
	b := newBrowser(t, d)
	alloc := runningAlloc(t, d, "hello", "greeter")
	b.step("log in", chromedp.Navigate(devLoginLink(t, d)), chromedp.WaitVisible(`a[href="#/jobs/hello"]`))

	page := "#/allocs/" + alloc.ID
	var status string
	b.step("open a terminal", b.open(page), chromedp.WaitVisible(`#exec-open`), chromedp.Click(`#exec-open`),
		chromedp.WaitVisible(`#exec-form`), chromedp.Value(`#exec-cmd`, &status))
	if status != "/bin/sh" {
		t.Errorf("the command offered is %q, want /bin/sh", status)
	}
	b.step("start /bin/sh", chromedp.Click(`#exec-start`),
		chromedp.Poll(`document.getElementById("exec-status").textContent.includes("running")`, nil, chromedp.WithPollingTimeout(20*time.Second)),
		chromedp.WaitVisible(`#exec-term .xterm-screen`))
	// Typed on the keyboard, into the terminal (which has the focus once
	// the command runs): the size the command sees, written to a file.
	b.step("type stty size", typeKeys("stty size > \"$NOMAD_TASK_DIR/size1\"\r"))
	size1 := waitTaskFile(t, d, alloc.ID, "size1")

	// A narrower window: the terminal refits, and the command's terminal
	// follows.
	b.step("narrow the window", chromedp.EmulateViewport(700, 800, chromedp.EmulateScale(1)),
		chromedp.Sleep(500*time.Millisecond)) // the ResizeObserver's refit, then the resize frame
	b.step("type again", typeKeys("stty size > \"$NOMAD_TASK_DIR/size2\"; echo hi-from-browser > \"$NOMAD_TASK_DIR/x\"; exit 3\r"),
		chromedp.Poll(`document.getElementById("exec-status").textContent.includes("exited")`, nil, chromedp.WithPollingTimeout(20*time.Second)),
		chromedp.Text(`#exec-status`, &status))
	if !strings.Contains(status, "exited with code 3") {
		t.Errorf("the page says %q; want exited with code 3", status)
	}
	if got := readTaskFile(t, d, alloc.ID, "x"); got != "hi-from-browser\n" {
		t.Errorf("the file typed in the browser holds %q; want hi-from-browser", got)
	}
	rows1, cols1 := parseSize(t, size1)
	rows2, cols2 := parseSize(t, readTaskFile(t, d, alloc.ID, "size2"))
	if cols1 < 80 || rows1 < 10 || cols2 >= cols1 {
		t.Errorf("the command's terminal was %dx%d, then %dx%d after the window narrowed from 1280 to 700 pixels; want a full-width terminal that narrows", cols1, rows1, cols2, rows2)
	}
	t.Logf("the command's terminal: %d columns x %d rows at 1280 pixels, %d x %d at 700", cols1, rows1, cols2, rows2)
	var screen string
	b.step("the terminal's text", chromedp.Text(`#exec-term .xterm-rows`, &screen))
	if !strings.Contains(screen, "hi-from-browser") {
		t.Errorf("the terminal does not show what was typed:\n%s", screen)
	}
	b.step("the window's own size again", emulation.ClearDeviceMetricsOverride(), chromedp.Sleep(300*time.Millisecond))
	b.screenshot("ui-exec")

	// A token that may read and see logs but not exec: Exec is disabled,
	// with the reason.
	link := restrictedLoginLink(t, d, "noexec", "namespace \"default\" { capabilities = [\"read\", \"logs\", \"submit\"] }\n")
	var reason string
	var panels int
	b.step("as a token without exec", chromedp.Click(`#logout`), chromedp.WaitVisible(`#login`), chromedp.Navigate(link),
		chromedp.WaitVisible(`a[href="#/jobs/hello"]`), b.open(page), chromedp.WaitVisible(`.why`), chromedp.Text(`.why`, &reason),
		chromedp.Evaluate(`document.querySelectorAll("#exec-open, #exec-panel").length`, &panels))
	if panels != 0 || !strings.Contains(reason, `may not exec in namespace "default"`) {
		t.Errorf("as a token without exec: %d exec elements live; the reason shown: %q", panels, reason)
	}
}

// typeKeys types s on the keyboard into the element with the focus, a
// key press per character as a browser reports a real keyboard's: a
// keydown carrying the character's text, then a keyup. (chromedp's
// KeyEvent sends a keydown and a separate char event, which xterm.js
// takes as the character twice.)
func typeKeys(s string) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		for _, r := range s {
			down := input.DispatchKeyEventParams{Type: input.KeyDown, Key: string(r), Text: string(r)}
			if k, ok := kb.Keys[r]; ok {
				down.Key, down.Code, down.WindowsVirtualKeyCode, down.NativeVirtualKeyCode = k.Key, k.Code, k.Windows, k.Native
				if k.Shift {
					down.Modifiers = input.ModifierShift
				}
				if !k.Print {
					down.Text = ""
					if r == '\r' {
						down.Text = "\r"
					}
				}
			}
			up := down
			up.Type, up.Text = input.KeyUp, ""
			if err := down.Do(ctx); err != nil {
				return err
			}
			if err := up.Do(ctx); err != nil {
				return err
			}
		}
		return nil
	})
}

// waitTaskFile waits (20 s) for a task of alloc to write a file named
// name, not empty, and returns what it holds.
func waitTaskFile(t *testing.T, d *devProc, alloc, name string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if got := findTaskFiles(d, alloc, name); len(got) == 1 {
			if s := readTaskFile(t, d, alloc, name); s != "" {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no file %s written by alloc %s within 20s", name, alloc)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// parseSize reads stty size's "ROWS COLS".
func parseSize(t *testing.T, s string) (rows, cols int) {
	t.Helper()
	f := strings.Fields(s)
	if len(f) != 2 {
		t.Fatalf("stty size printed %q", s)
	}
	rows, err1 := strconv.Atoi(f[0])
	cols, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil {
		t.Fatalf("stty size printed %q", s)
	}
	return rows, cols
}
