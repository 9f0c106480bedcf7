package main

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-org/drover/internal/spec"
)

func newHistoryCmd(g *globals) *cobra.Command {
	var noDiff bool
	cmd := &cobra.Command{
		Use:   "history JOB",
		Short: "List a job's versions, newest first, with their deployments and what each changed",
		Long: `History lists the stored versions of a job, newest first: when each was
submitted, how its deployment went (a version whose deployment succeeded is
stable: auto_revert and drover revert go back to such versions), and under
each version the fields it changed from the one before:

  + a field it added   - a field it removed   ~ a field it changed

Groups, tasks, services and checks are named by name: groups[api].count.`,
		Example: `  drover history web
  drover history web --no-diff
  drover history web -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel, c, err := g.readCommand(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			versions, err := c.JobVersions(ctx, args[0])
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if g.output != "table" {
				return g.print(out, versions)
			}
			deps, _, err := c.JobDeployments(ctx, args[0], nil)
			if err != nil {
				return err
			}
			printHistory(out, versions, deps, time.Now(), !noDiff)
			return nil
		},
	}
	cmd.Flags().BoolVar(&noDiff, "no-diff", false, "list the versions without what each changed")
	return outputs(cmd, documents...)
}

// printHistory renders versions (newest first) with their deployments'
// outcomes and, with diffs, each version's changes from the next older one
// listed. The oldest listed version has nothing to compare with.
func printHistory(w io.Writer, versions []*spec.Job, deps []*spec.Deployment, now time.Time, diffs bool) {
	if len(versions) == 0 {
		fmt.Fprintln(w, "No versions.")
		return
	}
	byVersion := map[uint64]*spec.Deployment{}
	for _, d := range deps { // newest first: keep the first per version
		if byVersion[d.JobVersion] == nil {
			byVersion[d.JobVersion] = d
		}
	}
	// Align the rows as one table, then put each version's changes under
	// its row: tabwriter would end its column block at every change line.
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VERSION\tSUBMITTED\tDEPLOYMENT")
	for _, v := range versions {
		fmt.Fprintf(tw, "%d\t%s\t%s\n", v.Version, age(now, v.SubmitTime)+" ago", historyDeployment(byVersion[v.Version]))
	}
	tw.Flush()
	lines := strings.SplitAfter(b.String(), "\n")
	io.WriteString(w, lines[0])
	for i, v := range versions {
		io.WriteString(w, lines[i+1])
		if !diffs || i+1 == len(versions) {
			continue
		}
		changes := spec.Changes(versions[i+1], v)
		if len(changes) == 0 {
			fmt.Fprintln(w, "  (no change to the spec)")
		}
		for _, c := range changes {
			fmt.Fprintf(w, "  %s\n", c)
		}
	}
}

// historyDeployment is a version's deployment in a word or three.
func historyDeployment(d *spec.Deployment) string {
	switch {
	case d == nil:
		return "-"
	case d.Status == spec.DeploymentSuccessful:
		return "successful (stable)"
	case d.Status == spec.DeploymentFailed && d.RevertTo != 0:
		return fmt.Sprintf("failed (reverted to %d)", d.RevertTo)
	}
	return string(d.Status)
}
