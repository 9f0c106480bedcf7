package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/pki"
	"github.com/drover-org/drover/internal/spec"
)

// toobigJob has a group that fits and one no node could ever hold: it is
// partly placed, and its page says why the rest is not.
const toobigJob = `job "toobig" {
  group "small" {
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "exec sleep 300"]
      }
      resources {
        cpu    = 10
        memory = 10
      }
    }
  }
  group "huge" {
    count = 2
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "exec sleep 300"]
      }
      resources {
        cpu    = 10
        memory = 10000000
      }
    }
  }
}
`

// shownFailure is a placement failure as the page shows it, read from its
// why block; want is the same read from the API's answer.
type shownFailure struct {
	Group string   `json:"group"`
	Text  string   `json:"text"`
	Dims  []string `json:"dims"`
	Hints []string `json:"hints"`
	Never bool     `json:"never"`
}

// readWhy reads the failures of the page's why block under sel.
const readWhy = `JSON.stringify([...document.querySelectorAll(%s)].map((f) => ({
  group: f.dataset.group,
  text: f.querySelector(".ftext").textContent,
  dims: [...f.querySelectorAll("table.dims tbody tr")].map((r) => r.querySelector("td.dim").textContent + "|" +
    (r.querySelector(".status.failed") ? "too small|" : "|") + r.querySelector(".dtext").textContent),
  hints: [...f.querySelectorAll("ul.hints li")].map((l) => l.textContent),
  never: !!f.querySelector(".never"),
})))`

func wantWhy(fs []spec.PlacementFailure) []shownFailure {
	out := []shownFailure{}
	for _, f := range fs {
		w := shownFailure{Group: f.Group, Text: f.Text, Dims: []string{}, Hints: []string{}, Never: f.NeverFits}
		for _, d := range f.Dimensions {
			small := ""
			if d.TooSmall {
				small = "too small"
			}
			w.Dims = append(w.Dims, d.Dimension+"|"+small+"|"+d.Text)
		}
		w.Hints = append(w.Hints, f.Hints...)
		out = append(out, w)
	}
	return out
}

// TestWebUIWhyWhatIfTopology drives, in headless chromium against a real
// drover dev: a partly placed job's page showing why the rest is not
// placed, dimension by dimension, "too small" and "never", exactly as the
// API's placement_failures say it (the words are the server's); the
// what-if page planning the loss of the node, its text the same as
// drover plan --without prints and its failures the API's; and the
// topology page, a box per node the API lists, a block per instance
// holding room there, and the free room the API's numbers leave, by CPU
// and by memory.
func TestWebUIWhyWhatIfTopology(t *testing.T) {
	dir := t.TempDir()
	d := startDev(t, dir, "../../examples/hello.hcl")
	b := newBrowser(t, d)
	c := d.client()
	ctx := context.Background()
	b.step("log in", chromedp.Navigate(devLoginLink(t, d)), chromedp.WaitVisible(`a[href="#/jobs/hello"]`))

	// Why: toobig's huge group waits, and never fits.
	if _, stderr, code := d.cli("", "run", "--detach", jobFile(t, "toobig", toobigJob)); code != 0 {
		t.Fatalf("drover run toobig: exit %d\n%s", code, stderr)
	}
	var st *spec.JobStatus
	eventually(t, "toobig's huge group reported unplaceable", func() (bool, string) {
		st = d.jobStatus("toobig")
		return len(st.Failures) == 1 && st.Failures[0].Group == "huge" && st.Failures[0].Text != "", fmt.Sprintf("%+v", st.Failures)
	})
	if w := wantWhy(st.Failures); !w[0].Never || !strings.Contains(strings.Join(w[0].Dims, "\n"), "memory|too small|memory too small on 1") {
		t.Fatalf("the API's failure is not the one this test expects (never, memory too small): %+v", w)
	}
	// The page is live and so are the hints (the free memory changes as
	// the small group starts): the page and the API are read again until
	// they agree.
	var raw string
	b.step("toobig's page", b.open("#/jobs/toobig"), chromedp.WaitVisible(`#why .failure`))
	var got, want []shownFailure
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		b.step("toobig's why block", chromedp.Evaluate(fmt.Sprintf(readWhy, jsString("#why .failure")), &raw))
		got = nil
		if err := json.Unmarshal([]byte(raw), &got); err != nil {
			t.Fatal(err)
		}
		want = wantWhy(d.jobStatus("toobig").Failures)
		if fmt.Sprint(got) == fmt.Sprint(want) || time.Now().After(deadline) {
			break
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the job page's why block:\n%+v\nthe API's placement_failures:\n%+v", got, want)
	}
	b.screenshot("ui-why")

	// What-if: without the one node, hello's instances would not be placed.
	nodes, _, err := c.Nodes(ctx, nil)
	if err != nil || len(nodes) == 0 {
		t.Fatalf("nodes: %v %v", nodes, err)
	}
	node := nodes[0].Name
	var text string
	b.step("the what-if page, the node picked", b.open("#/whatif"), chromedp.WaitVisible(`#whatif-btn`),
		chromedp.Evaluate(`document.querySelector(`+jsString(`input[data-whatif="`+node+`"]`)+`).checked = true`, nil), clickJS(`#whatif-btn`),
		chromedp.WaitVisible(`#whatif-plan`), chromedp.Text(`#whatif-plan`, &text, chromedp.ByID))
	cliText, stderr, code := d.cli("", "plan", "--without", node)
	if code != 2 {
		t.Errorf("drover plan --without %s: exit %d, want 2 (something would not fit)\n%s", node, code, stderr)
	}
	if strings.TrimSpace(text) != strings.TrimSpace(cliText) || !strings.Contains(text, "hello.hello[") {
		t.Errorf("the what-if page's plan:\n%s\ndrover plan --without %s:\n%s", text, node, cliText)
	}
	var wantIf []shownFailure
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		p, err := c.PlanWithout(ctx, []string{node})
		if err != nil {
			t.Fatal(err)
		}
		wantIf = nil
		for _, j := range p.Jobs {
			wantIf = append(wantIf, wantWhy(j.Failures)...)
		}
		b.step("the what-if failures", chromedp.Evaluate(fmt.Sprintf(readWhy, jsString("#whatif-why .failure")), &raw))
		got = nil
		if err := json.Unmarshal([]byte(raw), &got); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) == fmt.Sprint(wantIf) || time.Now().After(deadline) {
			break
		}
	}
	if len(wantIf) == 0 || fmt.Sprint(got) != fmt.Sprint(wantIf) {
		t.Errorf("the what-if page's failures:\n%+v\nthe API's:\n%+v", got, wantIf)
	}
	b.screenshot("ui-whatif")

	// Topology: a box per node, a block per instance holding room, the
	// free room the API's numbers leave.
	for _, by := range []string{"cpu", "memory"} {
		b.step("the topology by "+by, b.open("#/topology?by="+by), chromedp.WaitVisible(`.tnode`))
		eventually(t, "the topology by "+by+" as the API's nodes and allocations", func() (bool, string) {
			nodes, _, err := c.Nodes(ctx, nil)
			if err != nil {
				return false, err.Error()
			}
			allocs, _, err := c.Allocs(ctx, "", "", nil)
			if err != nil {
				return false, err.Error()
			}
			want := map[string]string{}
			for _, n := range nodes {
				total, held, k := n.Resources.CPU, 0, 0
				if by == "memory" {
					total = n.Resources.MemoryMB
				}
				for _, a := range allocs {
					s := a.ClientStatusOr()
					if a.NodeID != n.ID || a.DesiredStatus != spec.DesiredRun || s == spec.ClientComplete || s == spec.ClientFailed {
						continue
					}
					k++
					if by == "memory" {
						held += a.Resources.MemoryMB
					} else {
						held += a.Resources.CPU
					}
				}
				want[n.ID] = fmt.Sprintf("%d blocks, %d free", k, total-held)
			}
			var page map[string]string
			var raw string
			sctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
			defer cancel()
			if err := chromedp.Run(sctx, chromedp.Evaluate(`JSON.stringify(Object.fromEntries([...document.querySelectorAll(".tnode")].map((n) =>
				[n.dataset.node, n.querySelectorAll(".tblock").length + " blocks, " + n.dataset.free + " free"])))`, &raw)); err != nil {
				return false, err.Error()
			}
			if err := json.Unmarshal([]byte(raw), &page); err != nil {
				return false, err.Error()
			}
			return fmt.Sprint(page) == fmt.Sprint(want), fmt.Sprintf("page %v, API %v", page, want)
		})
	}
	b.screenshot("ui-topology")
}

// TestWebUITopologyThousandNodes registers 1,000 more nodes with dev's
// server over its agent certificate (as agents do; they never heartbeat,
// so they go down, and stay listed) in two datacenters, and checks that
// the topology draws a box for every node the API lists, in the compact
// grid, with each datacenter's summary line counting the API's nodes
// there.
func TestWebUITopologyThousandNodes(t *testing.T) {
	dir := t.TempDir()
	d := startDev(t, dir)
	b := newBrowser(t, d)
	ctx := context.Background()
	tlsCfg, err := pki.ClientConfig(pki.DirFiles(filepath.Join(dir, "tls"), pki.RoleAgent), pki.ServerName)
	if err != nil {
		t.Fatal(err)
	}
	agent, err := client.NewWithOptions([]string{d.addr}, client.Options{TLS: tlsCfg})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		n := &spec.Node{ID: uuid.NewString(), Name: fmt.Sprintf("t%04d", i), Datacenter: []string{"east", "west"}[i%2],
			Address: "https://127.0.0.1:1", Resources: spec.Resources{CPU: 1000, MemoryMB: 1024}, Drivers: []string{"exec"}}
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := agent.RegisterNode(rctx, n)
		cancel()
		if err != nil {
			t.Fatalf("registering node %s: %v", n.Name, err)
		}
	}
	nodes, _, err := d.client().Nodes(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	perDC := map[string]int{}
	for _, n := range nodes {
		perDC[n.Datacenter]++
	}
	if len(nodes) != 1001 {
		t.Fatalf("the API lists %d nodes, want 1001 (dev's and 1,000)", len(nodes))
	}
	var boxes int
	var sums map[string]string
	var raw string
	b.step("log in", chromedp.Navigate(devLoginLink(t, d)), chromedp.WaitVisible(`#main[data-key]`))
	b.step("the topology of 1,001 nodes", b.open("#/topology"), chromedp.WaitVisible(`.topo.compact .tnode`),
		chromedp.Evaluate(`document.querySelectorAll(".topo.compact .tnode").length`, &boxes),
		chromedp.Evaluate(`JSON.stringify(Object.fromEntries([...document.querySelectorAll("section.dc")].map((s) => [s.dataset.dc, s.querySelector(".dcsum").textContent])))`, &raw))
	if err := json.Unmarshal([]byte(raw), &sums); err != nil {
		t.Fatal(err)
	}
	if boxes != len(nodes) {
		t.Errorf("the topology draws %d boxes; the API lists %d nodes", boxes, len(nodes))
	}
	if len(sums) != len(perDC) {
		t.Errorf("the topology has datacenters %v; the API's nodes are in %v", sums, perDC)
	}
	for dc, k := range perDC {
		if !strings.HasPrefix(sums[dc], fmt.Sprintf("%d node", k)) {
			t.Errorf("datacenter %s's summary says %q; the API lists %d nodes there", dc, sums[dc], k)
		}
	}
	b.screenshot("ui-topology-1000")
}
