// Package planview writes a plan as drover plan prints it: one function
// for the CLI and for the server, which sends the same text to the web UI
// (POST /v1/jobs/plan?text=1), so that there is one way a plan reads.
package planview

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/drover-org/drover/internal/spec"
)

// Job writes what submitting the job would change: the spec's changed
// fields, the nodes planned as down, then the instances (Changes).
func Job(w io.Writer, p *spec.JobPlan) {
	switch {
	case p.New:
		fmt.Fprintf(w, "+ Job %q (new: version 1)\n", p.Job)
	case len(p.Diff) == 0:
		fmt.Fprintf(w, "  Job %q (unchanged: version %d)\n", p.Job, p.Version)
	default:
		fmt.Fprintf(w, "~ Job %q (would be version %d)\n", p.Job, p.Version)
		for _, d := range p.Diff {
			fmt.Fprintf(w, "    %s\n", d)
		}
	}
	if len(p.Without) > 0 {
		fmt.Fprintf(w, "  as if these nodes were down: %s\n", strings.Join(p.Without, ", "))
	}
	fmt.Fprintln(w)
	Changes(w, &p.PlanChanges)
}

// JobText is Job's text as a string.
func JobText(p *spec.JobPlan) string {
	var b strings.Builder
	Job(&b, p)
	return b.String()
}

// NodeLoss writes where the work on the nodes planned as down would go,
// job by job, and whether everything would be placed elsewhere.
func NodeLoss(w io.Writer, p *spec.NodeLossPlan) {
	nodes := strings.Join(p.Without, ", ")
	if len(p.Jobs) == 0 {
		fmt.Fprintf(w, "Nothing runs on %s: losing it moves nothing.\n", nodes)
		return
	}
	fmt.Fprintf(w, "Without %s:\n", nodes)
	for _, j := range p.Jobs {
		fmt.Fprintf(w, "\nJob %q\n", j.Job)
		Changes(w, &j.PlanChanges)
	}
	fmt.Fprintln(w)
	if p.Fits() {
		fmt.Fprintf(w, "Everything on %s would be placed elsewhere.\n", nodes)
	} else {
		fmt.Fprintf(w, "Some instances would not be placed without %s: add room elsewhere first, or lower what they need.\n", nodes)
	}
}

// NodeLossText is NodeLoss's text as a string.
func NodeLossText(p *spec.NodeLossPlan) string {
	var b strings.Builder
	NodeLoss(&b, p)
	return b.String()
}

// Changes writes one job's changes, as nomad plan shows them: + create,
// - stop, ~ update in place, ! evict another job's instance; then what
// would not be placed, with reasons and hints.
func Changes(w io.Writer, c *spec.PlanChanges) {
	rows := 0
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(cols ...string) { fmt.Fprintln(tw, strings.Join(cols, "\t")) }
	row("", "INSTANCE", "NODE", "REASON")
	add := func(mark string, l []spec.PlannedAlloc) {
		for _, a := range l {
			node := dash(a.Node)
			if a.FromNode != "" && a.FromNode != a.Node {
				node = a.FromNode + " -> " + node
			}
			row(mark, a.Name, node, dash(a.Reason))
			rows++
		}
	}
	add("+", c.Create)
	add("-", c.Stop)
	add("~", c.Update)
	add("!", c.Evict)
	if rows > 0 {
		tw.Flush()
	}
	switch n := len(c.Keep); {
	case n > 0 && rows > 0:
		fmt.Fprintf(w, "  and %d instance(s) unchanged\n", n)
	case n > 0:
		fmt.Fprintf(w, "No changes: %d instance(s) unchanged.\n", n)
	case rows == 0 && len(c.Failures) == 0:
		fmt.Fprintln(w, "No instances.")
	}
	for _, f := range c.Failures {
		hints := f.Hints
		f.Hints = nil // one per line below, not run on after the reasons
		if f.NoNodeMatched {
			fmt.Fprintf(w, "✗ %s\n", FailureLine(f))
			continue
		}
		fmt.Fprintf(w, "✗ %d instance(s) of group %s would not be placed: %s\n", f.Missing, f.Group, f.String())
		for _, h := range hints {
			fmt.Fprintf(w, "    hint: %s\n", h)
		}
	}
}

// FailureLine is one placement failure on one line: what is missing and why.
func FailureLine(f spec.PlacementFailure) string {
	if f.NoNodeMatched {
		return fmt.Sprintf("group %s runs on no node: %s", f.Group, f.String())
	}
	return fmt.Sprintf("%d instance(s) of group %s: %s", f.Missing, f.Group, f.String())
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
