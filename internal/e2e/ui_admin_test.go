package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/spec"
	"github.com/drover-org/drover/internal/testbin"
)

// TestWebUIACLPages drives the ACL page as dev's management token: a
// policy applied through the page is the API's, with its rules; a client
// token created through the page with that policy is listed by
// GET /v1/acl/tokens, its secret shown once on the page works against the
// API (and only as far as the policy grants), and no list on the page
// holds a secret; the token and the policy deleted through the page are
// gone from the API. A policy with rules the server refuses keeps the
// typed text and says why. Then that token, logged in, sees the page
// refused with the reason.
func TestWebUIACLPages(t *testing.T) {
	dir := t.TempDir()
	d := startDev(t, dir)
	b := newBrowser(t, d)
	c := d.client()
	ctx := context.Background()
	b.step("log in", chromedp.Navigate(devLoginLink(t, d)), chromedp.WaitVisible(`#main[data-key]`))

	// A policy through the page.
	rules := "namespace \"default\" { capabilities = [\"read\"] }\nnode { capabilities = [\"read\"] }\n"
	b.step("the ACL page", b.open("#/acl"), chromedp.WaitVisible(`#policy-form`),
		typeInto(`#policy-name`, "ui-reader"), typeInto(`#policy-description`, "made in the browser"), typeInto(`#policy-rules`, rules))
	b.act("Apply policy", `Apply policy "ui-reader"`)
	p, err := c.ACLPolicy(ctx, "ui-reader")
	if err != nil {
		t.Fatalf("the policy applied through the page: %v", err)
	}
	if p.Rules != rules || p.Description != "made in the browser" {
		t.Errorf("the API's policy is %+v; want the rules and description typed", p)
	}

	// Rules the server refuses: the page says why and keeps the text.
	b.step("bad rules", b.open("#/acl"), chromedp.WaitVisible(`#policy-form`),
		typeInto(`#policy-name`, "broken"), typeInto(`#policy-rules`, `namespace "default" { capabilities = ["fly"] }`))
	var flash, kept string
	b.step("apply the bad rules",
		clickJS(`#policy-form button[data-action]`), chromedp.WaitVisible(`#confirm`), chromedp.Click(`#confirm-ok`),
		chromedp.WaitVisible(`#flash.error`), chromedp.Text(`#flash`, &flash),
		chromedp.Evaluate(`document.getElementById("policy-rules").value`, &kept))
	if !strings.Contains(flash, "fly") || !strings.Contains(kept, `"fly"`) {
		t.Errorf("bad rules: the page said %q and kept %q", flash, kept)
	}
	if _, err := c.ACLPolicy(ctx, "broken"); !client.IsStatus(err, http.StatusNotFound) {
		t.Errorf("a refused policy exists in the API: %v", err)
	}

	b.step("hide the message", chromedp.Evaluate(`document.getElementById("flash").hidden = true`, nil))

	// A client token with that policy.
	b.step("the ACL page again", b.open("#/acl"), chromedp.WaitVisible(`#token-form`), chromedp.WaitVisible(`input[data-token-policy="ui-reader"]`),
		clickJS(`input[data-token-policy="ui-reader"]`), typeInto(`#token-name`, "ui-made"))
	// Enter in the name field asks, as the Create token button does.
	var question string
	b.step("Enter in the token's name", chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(`#confirm`), chromedp.Text(`#confirm-text`, &question),
		chromedp.Click(`#confirm-ok`), chromedp.WaitVisible(`#flash`), chromedp.Text(`#flash`, &flash))
	if !strings.Contains(question, `Create client token "ui-made" with policies ui-reader`) || !strings.Contains(flash, `Token "ui-made" created`) {
		t.Errorf("creating the token asked %q and said %q", question, flash)
	}
	var secret string
	b.step("the secret, once", chromedp.WaitVisible(`#new-token-secret`), chromedp.Text(`#new-token-secret`, &secret))
	b.screenshot("ui-acl")
	secret = strings.TrimSpace(secret)
	toks, err := c.ACLTokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var made *spec.ACLToken
	for _, tk := range toks {
		if tk.Name == "ui-made" {
			made = tk
		}
	}
	if made == nil || made.Type != "client" || strings.Join(made.Policies, ",") != "ui-reader" {
		t.Fatalf("GET /v1/acl/tokens has no client token ui-made with policy ui-reader: %+v", made)
	}
	var table string
	b.step("the token table", chromedp.Text(`#token-table`, &table))
	if !strings.Contains(table, made.AccessorID) || strings.Contains(table, secret) {
		t.Errorf("the token table lacks the accessor %s or holds the secret:\n%s", made.AccessorID, table)
	}
	// The secret works, as far as its policy goes.
	tc, err := client.Config{Addresses: []string{d.addr}, TLSDir: d.tlsDir, Token: secret}.Resolve().Client()
	if err != nil {
		t.Fatal(err)
	}
	self, err := tc.ACLSelf(ctx)
	if err != nil || self.AccessorID != made.AccessorID {
		t.Fatalf("the secret the page showed is not token ui-made's: %+v %v", self, err)
	}
	if _, _, err := tc.Jobs(ctx, nil); err != nil {
		t.Errorf("ui-made may not read jobs: %v", err)
	}
	if _, err := tc.ACLTokens(ctx); !client.IsStatus(err, http.StatusForbidden) {
		t.Errorf("ui-made (a reader) listed tokens: %v", err)
	}
	// Another page, and back: the secret is not shown again.
	var again int
	b.step("the secret is gone", b.open("#/jobs"), b.open("#/acl"), chromedp.WaitVisible(`#token-table`),
		chromedp.Evaluate(`document.body.innerText.includes(`+jsString(secret)+`) ? 1 : 0`, &again))
	if again != 0 {
		t.Errorf("the ACL page shows the secret again after leaving it")
	}

	// That token, logged in: the page refuses with the reason.
	out, stderr, code := d.cliWith([]string{"DROVER_TOKEN=" + secret}, "", "ui")
	link := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(link, d.addr+"/ui/#login=") {
		t.Fatalf("drover ui as ui-made: %q %s", out, stderr)
	}
	var why string
	b.step("log in as ui-made", chromedp.Click(`#logout`), chromedp.WaitVisible(`#login`), chromedp.Navigate(link), chromedp.WaitVisible(`#main[data-key]`),
		b.open("#/acl"), chromedp.WaitVisible(`#acl-denied`), chromedp.Text(`#acl-denied`, &why))
	if !strings.Contains(why, `token "ui-made"`) || !strings.Contains(why, "only a management token") {
		t.Errorf("as ui-made the ACL page says %q", why)
	}
	b.step("back as dev's token", chromedp.Click(`#logout`), chromedp.WaitVisible(`#login`),
		chromedp.Navigate(devLoginLinkFresh(t, d)), chromedp.WaitVisible(`#main[data-key]`), b.open("#/acl"), chromedp.WaitVisible(`#token-table`))

	// Delete the token, then the policy.
	b.step("find ui-made's row", chromedp.Evaluate(`{const r = [...document.querySelectorAll("#token-table tr")].find(r => r.innerText.includes(`+
		jsString(made.AccessorID)+`)); r.querySelector("button[data-action]").textContent = "Delete ui-made"}`, nil))
	b.act("Delete ui-made", `Delete token "ui-made"`)
	if _, err := tc.ACLSelf(ctx); !client.IsStatus(err, http.StatusForbidden) && !client.IsStatus(err, http.StatusUnauthorized) {
		t.Errorf("the deleted token still works: %v", err)
	}
	toks, err = c.ACLTokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range toks {
		if tk.AccessorID == made.AccessorID {
			t.Errorf("GET /v1/acl/tokens still lists the deleted token %s", tk.AccessorID)
		}
	}
	b.step("find ui-reader's row", chromedp.WaitVisible(`#policy-table`), chromedp.Evaluate(`{const r = [...document.querySelectorAll("#policy-table tbody tr")].find(r => r.cells[0].innerText === "ui-reader"); r.querySelector("button[data-action]").textContent = "Delete ui-reader"}`, nil))
	b.act("Delete ui-reader", `Delete policy "ui-reader"`)
	if _, err := c.ACLPolicy(ctx, "ui-reader"); !client.IsStatus(err, http.StatusNotFound) {
		t.Errorf("the deleted policy is still in the API: %v", err)
	}
}

// devLoginLinkFresh is a new one-time login link for dev's own token
// (drover ui, as the CLI finds dev's token).
func devLoginLinkFresh(t *testing.T, d *devProc) string {
	t.Helper()
	return uiLoginLink(t, d, nil)
}

// uiLoginLink is the one-time login link `drover ui` prints with env
// (DROVER_TOKEN=... for another token than dev's).
func uiLoginLink(t *testing.T, d *devProc, env []string) string {
	t.Helper()
	out, stderr, code := d.cliWith(env, "", "ui")
	link := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(link, d.addr+"/ui/#login=") {
		t.Fatalf("drover ui: %q %s", out, stderr)
	}
	return link
}

// restrictedLoginLink applies policy name with rules, makes a token of
// that policy alone, and returns the token's login link.
func restrictedLoginLink(t *testing.T, d *devProc, name, rules string) string {
	t.Helper()
	policy := writeTemp(t, name+".hcl", rules)
	if _, stderr, code := d.cli("", "acl", "policy", "apply", name, policy); code != 0 {
		t.Fatalf("acl policy apply: %s", stderr)
	}
	out, stderr, code := d.cli("", "acl", "token", "create", "--name", name, "--policy", name, "-o", "json")
	var tok spec.ACLToken
	if code != 0 || json.Unmarshal([]byte(out), &tok) != nil {
		t.Fatalf("acl token create: %s %s", out, stderr)
	}
	return uiLoginLink(t, d, []string{"DROVER_TOKEN=" + tok.SecretID})
}

// TestWebUIKeyboardPhoneDarkUsage checks what issue 21 asks of the page
// beyond its actions: a job stopped with the keyboard alone (Tab to its
// Stop button, Enter, Enter in the dialog; the API says it is stopped),
// Escape closing a dialog with nothing done, "/" reaching the search box;
// at a phone's 390 px every page is as wide as the screen (tables scroll
// in their own box); the system's dark mode changes the page's colours;
// a node's usage chart holds samples that its agent gave
// (GET /v1/nodes/{id}/usage read beside it); and the node's drain form
// sets the deadline and ignore_system_jobs the API then shows.
func TestWebUIKeyboardPhoneDarkUsage(t *testing.T) {
	dir := t.TempDir()
	d := startDev(t, dir, "../../examples/hello.hcl")
	b := newBrowser(t, d)
	c := d.client()
	ctx := context.Background()
	b.step("log in", chromedp.Navigate(devLoginLink(t, d)), chromedp.WaitVisible(`a[href="#/jobs/hello"]`))

	// Keyboard only: Tab from the top of the job's page to its Stop button.
	b.step("hello's page", b.open("#/jobs/hello"), chromedp.WaitVisible(`#progress`),
		chromedp.Evaluate(`document.activeElement.blur(); window.focus()`, nil))
	var focused string
	found := false
	for range 60 {
		b.step("Tab", chromedp.KeyEvent(kb.Tab), chromedp.Evaluate(`document.activeElement.textContent.trim()`, &focused))
		if focused == "Stop" {
			found = true
			break
		}
	}
	if !found {
		t.Fatalf("Tab never reached the Stop button (last focused %q)", focused)
	}
	var outline string
	b.step("the focus shows", chromedp.Evaluate(`getComputedStyle(document.activeElement).outlineStyle`, &outline))
	if outline == "none" || outline == "" {
		t.Errorf("the focused Stop button shows no outline (%q)", outline)
	}
	// Escape first: the dialog closes, the job keeps running.
	var open bool
	b.step("Enter opens the dialog, Escape closes it", chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(`#confirm`),
		chromedp.KeyEvent(kb.Escape), chromedp.Sleep(300*time.Millisecond), chromedp.Evaluate(`document.getElementById("confirm").open`, &open))
	if open {
		t.Errorf("Escape left the dialog open")
	}
	time.Sleep(time.Second)
	if st := d.jobStatus("hello"); st.Job.Stopped {
		t.Fatalf("Escape stopped the job")
	}
	var question string
	b.step("Enter, then Enter on the dialog's OK", chromedp.Evaluate(`document.activeElement.textContent.trim()`, &focused))
	if focused != "Stop" {
		// The focus returns to the button the dialog was opened from.
		t.Fatalf("after Escape the focus is on %q, not Stop", focused)
	}
	b.step("stop with Enter", chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(`#confirm`), chromedp.Text(`#confirm-text`, &question),
		chromedp.KeyEvent(kb.Enter), chromedp.WaitVisible(`#flash`))
	if !strings.Contains(question, "Stop job hello") {
		t.Errorf("the dialog asked %q", question)
	}
	eventually(t, "hello stopped through the keyboard", func() (bool, string) {
		st, _, err := c.Job(ctx, "hello", nil)
		return err == nil && st.Job.Stopped, fmt.Sprint(err)
	})

	// "/" goes to the search box.
	var searchFocused bool
	b.step("slash", b.open("#/jobs"), chromedp.WaitVisible(`#job-table`), chromedp.Evaluate(`document.activeElement.blur()`, nil),
		chromedp.KeyEvent("/"), chromedp.Evaluate(`document.activeElement.id === "search"`, &searchFocused))
	if !searchFocused {
		t.Errorf(`"/" did not focus the search box`)
	}
	b.step("leave the search box", chromedp.KeyEvent(kb.Escape))

	// The node's usage: samples as its agent gives them.
	nodes, _, err := c.Nodes(ctx, nil)
	if err != nil || len(nodes) != 1 {
		t.Fatalf("nodes: %v %v", nodes, err)
	}
	node := nodes[0]
	hog := jobFile(t, "hog", fmt.Sprintf(`job "hog" {
  group "hog" {
    network {
      port "http" {}
    }
    task "hog" {
      driver = "raw_exec"
      config {
        command = %q
        args    = ["-alloc-mb", "48"]
      }
      kill_timeout = "2s"
      resources {
        cpu    = 20
        memory = 128
      }
    }
  }
}
`, buildTestapp(t, dir)))
	t.Cleanup(func() { testbin.KillTasks(t, "hog", dir) })
	if _, stderr, code := d.cli("", "run", "--detach", hog); code != 0 {
		t.Fatalf("drover run hog: %s", stderr)
	}
	eventually(t, "hog running, holding 48 MB", func() (bool, string) {
		u, err := c.NodeUsage(ctx, node.ID)
		return err == nil && u.Tasks.MemoryMB >= 40, fmt.Sprintf("%+v %v", u, err)
	})
	var raw string
	b.step("the node's usage", b.open("#/nodes/"+node.ID), chromedp.WaitVisible(`#usage-memory`),
		chromedp.Poll(`JSON.parse(document.getElementById("usage-memory").dataset.samples).length >= 2`, nil, chromedp.WithPollingTimeout(25*time.Second)),
		chromedp.Evaluate(`document.getElementById("usage-memory").dataset.samples`, &raw))
	u, err := c.NodeUsage(ctx, node.ID)
	if err != nil {
		t.Fatal(err)
	}
	var samples [][2]float64
	if err := json.Unmarshal([]byte(raw), &samples); err != nil {
		t.Fatal(err)
	}
	last := samples[len(samples)-1]
	if last[0] <= samples[0][0] || last[1] < 40 || last[1] > float64(node.Resources.MemoryMB) {
		t.Errorf("the memory chart's samples are %v (node memory %d MB)", samples, node.Resources.MemoryMB)
	}
	// hog's 48 MB: the agent's figure now and the page's last are within
	// a few MB (the same processes, sampled seconds apart).
	if diff := last[1] - float64(u.Tasks.MemoryMB); diff > 8 || diff < -8 {
		t.Errorf("the chart's last memory sample is %v MB; the API says %d MB now", last[1], u.Tasks.MemoryMB)
	}
	b.screenshot("ui-node-usage")

	// The drain form's options: a deadline, and system jobs left running.
	b.step("drain options", chromedp.WaitVisible(`#drain-deadline`), typeInto(`#drain-deadline`, "30m"), clickJS(`#drain-ignore-system`))
	b.act("Drain", "leaving its system jobs' instances running")
	eventually(t, "the node draining for 30m, system jobs left", func() (bool, string) {
		n, err := c.Node(ctx, node.ID)
		if err != nil || n.Drain == nil {
			return false, fmt.Sprint(err)
		}
		d := n.Drain.Deadline.Sub(n.Drain.StartedAt)
		return d == 30*time.Minute && n.Drain.IgnoreSystemJobs, fmt.Sprintf("%+v", n.Drain)
	})
	b.step("the drain shown", chromedp.WaitVisible(`#drain-system`))
	b.act("End drain", "End the drain")
	eventually(t, "the drain ended", func() (bool, string) {
		n, err := c.Node(ctx, node.ID)
		return err == nil && n.Drain == nil && n.Eligible(), fmt.Sprintf("%+v %v", n, err)
	})

	// Dark mode follows the system.
	bg := func() string {
		var s string
		b.step("background", chromedp.Evaluate(`getComputedStyle(document.body).backgroundColor`, &s))
		return s
	}
	light := bg()
	b.step("dark", emulation.SetEmulatedMedia().WithFeatures([]*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}))
	dark := bg()
	if light == dark {
		t.Errorf("the background is %s in light and dark mode alike", light)
	}
	b.step("the jobs page, dark", b.open("#/jobs"), chromedp.WaitVisible(`#job-table`))
	b.screenshot("ui-dark")
	b.step("light again", emulation.SetEmulatedMedia().WithFeatures([]*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "light"}}))

	// A phone: no page is wider than the screen.
	b.step("a phone's width", emulation.SetDeviceMetricsOverride(390, 844, 2, true))
	for _, page := range []string{"#/jobs", "#/jobs/hog", "#/nodes", "#/nodes/" + node.ID, "#/events", "#/acl", "#/topology", "#/allocs/" + d.jobStatus("hog").Allocations[0].ID} {
		var sw, iw int
		b.step("phone "+page, b.open(page), chromedp.Sleep(300*time.Millisecond),
			chromedp.Evaluate(`document.documentElement.scrollWidth`, &sw), chromedp.Evaluate(`window.innerWidth`, &iw))
		if iw != 390 || sw > iw {
			t.Errorf("at a phone's width %s is %d px wide in a window of %d", page, sw, iw)
		}
		if page == "#/jobs/hog" {
			b.screenshot("ui-phone")
		}
	}
}
