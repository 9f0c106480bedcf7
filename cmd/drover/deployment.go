package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/spec"
)

func newDeploymentCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "deployment",
		Aliases: []string{"deployments"},
		Short:   "Show, promote or fail the rollouts of new job versions",
		Long: `A deployment rolls out one version of a service job whose groups have an
update block: it replaces max_parallel instances at a time, each only after
the ones before are healthy, and fails when one is unhealthy (then, with
auto_revert, the job goes back to its last stable version). With canary set,
the new version first runs beside the old one until promoted.

A JOB argument means that job's latest deployment; otherwise give a
deployment ID or a unique prefix of at least 4 characters.`,
	}
	cmd.AddCommand(newDeploymentListCmd(g), newDeploymentStatusCmd(g), newDeploymentPromoteCmd(g), newDeploymentFailCmd(g),
		newDeploymentPauseCmd(g, true), newDeploymentPauseCmd(g, false))
	return cmd
}

func newDeploymentStatusCmd(g *globals) *cobra.Command {
	return outputs(&cobra.Command{
		Use:   "status [JOB|ID]",
		Short: "List recent deployments, or show one deployment's progress per group",
		Example: `  drover deployment status
  drover deployment status web
  drover deployment status 6c2f0e1a -o json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel, c, err := g.readCommand(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			out := cmd.OutOrStdout()
			if len(args) == 0 {
				return g.listDeployments(ctx, c, out)
			}
			d, err := findDeployment(ctx, c, args[0])
			if err != nil {
				return err
			}
			if g.output != "table" {
				return g.print(out, d)
			}
			printDeployment(out, d, time.Now())
			return nil
		},
	}, documents...)
}

// newDeploymentListCmd is Nomad's name for what deployment status does
// without an argument.
func newDeploymentListCmd(g *globals) *cobra.Command {
	return outputs(&cobra.Command{
		Use:   "list",
		Short: "List recent deployments (as deployment status without an argument)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel, c, err := g.readCommand(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			return g.listDeployments(ctx, c, cmd.OutOrStdout())
		},
	}, documents...)
}

func (g *globals) listDeployments(ctx context.Context, c *client.Client, out io.Writer) error {
	ds, _, err := c.Deployments(ctx, nil)
	if err != nil {
		return err
	}
	if g.output != "table" {
		return g.print(out, ds)
	}
	printDeploymentList(out, ds)
	return nil
}

func newDeploymentPromoteCmd(g *globals) *cobra.Command {
	var detach bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "promote JOB|ID",
		Short: "Promote a deployment's canaries: replace the rest of the old version",
		Long: `Promote asks the leader to promote a running deployment's canaries once they
are all healthy; the deployment then replaces the remaining old instances.
It follows the deployment until it ends, as drover run does (exit 0
successful, 1 failed, 2 cannot be placed); --detach returns at once.`,
		Example: "  drover deployment promote web\n  drover deployment promote 6c2f0e1a --detach",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			d, err := findDeployment(ctx, c, args[0])
			if err != nil {
				return err
			}
			d, err = c.PromoteDeployment(ctx, d.ID)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "Deployment %s of job %q version %d: promotion requested.\n", short(d.ID), d.Job, d.JobVersion)
			if detach {
				fmt.Fprintf(out, "Follow it with: drover deployment status %s\n", d.Job)
				return nil
			}
			return followDeployment(ctx, c, out, deployTarget{job: d.Job, version: d.JobVersion, since: d.ModifyIndex}, isTerminal(os.Stdout))
		},
	}
	cmd.Flags().BoolVarP(&detach, "detach", "d", false, "return after asking, without following")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long to follow before giving up (the deployment keeps going)")
	return cmd
}

func newDeploymentFailCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "fail JOB|ID",
		Short: "Fail a running deployment (with auto_revert, the job goes back to its last stable version)",
		Long: `Fail asks the leader to fail a running deployment: it replaces nothing more,
stops its unpromoted canaries, and, when its groups have auto_revert, stores
the last stable version's spec as the job's next version.`,
		Example: "  drover deployment fail web",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), readTimeout)
			defer cancel()
			d, err := findDeployment(ctx, c, args[0])
			if err != nil {
				return err
			}
			d, err = c.FailDeployment(ctx, d.ID)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Deployment %s of job %q version %d: failure requested; the leader fails it in its next pass.\nSee it with: drover deployment status %s\n",
				short(d.ID), d.Job, d.JobVersion, d.Job)
			return nil
		},
	}
}

// newDeploymentPauseCmd is deployment pause (pause) or resume.
func newDeploymentPauseCmd(g *globals, pause bool) *cobra.Command {
	use, brief, long, did := "resume JOB|ID", "Resume a paused deployment: the leader starts its next batch",
		`Resume lets the leader go on with a paused deployment: its next batch of
replacements (or its canaries) is placed in the leader's next pass, and its
progress deadline runs again from now.`, "resumed; the leader goes on with its next batch"
	if pause {
		use, brief, long, did = "pause JOB|ID", "Pause a running deployment: the leader starts no new batch until resumed",
			`Pause asks the leader to start no new batch of a running deployment: it places
no canary and replaces no more old instances. What it placed already keeps
running and is still judged; its progress deadline does not run while it is
paused. drover deployment resume goes on.`, "paused; the leader starts no new batch until drover deployment resume"
	}
	return &cobra.Command{
		Use:     use,
		Short:   brief,
		Long:    long,
		Example: "  drover deployment " + strings.Fields(use)[0] + " web",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), readTimeout)
			defer cancel()
			d, err := findDeployment(ctx, c, args[0])
			if err != nil {
				return err
			}
			if pause {
				d, err = c.PauseDeployment(ctx, d.ID)
			} else {
				d, err = c.ResumeDeployment(ctx, d.ID)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Deployment %s of job %q version %d: %s.\nSee it with: drover deployment status %s\n",
				short(d.ID), d.Job, d.JobVersion, did, d.Job)
			return nil
		},
	}
}

// findDeployment reads the deployment arg names: a job's latest, or else
// the one with that ID or unique ID prefix.
func findDeployment(ctx context.Context, c *client.Client, arg string) (*spec.Deployment, error) {
	d, _, err := c.LatestDeployment(ctx, arg, nil)
	if err == nil {
		return d, nil
	}
	if !client.IsStatus(err, http.StatusNotFound) && !client.IsStatus(err, http.StatusBadRequest) {
		return nil, err
	}
	d, _, err = c.Deployment(ctx, arg, nil)
	if err == nil {
		return d, nil
	}
	if client.IsStatus(err, http.StatusNotFound) {
		return nil, fmt.Errorf("no job %q with a deployment, and no deployment with ID or prefix %q (only a service job with an update block makes one; drover deployment status lists them)", arg, arg)
	}
	return nil, err
}

// printDeploymentList renders deployments, newest first.
func printDeploymentList(w io.Writer, ds []*spec.Deployment) {
	if len(ds) == 0 {
		fmt.Fprintln(w, "No deployments. A service job with an update block makes one for each new version.")
		return
	}
	t := newTable(w, "ID", "JOB", "VERSION", "STATUS", "DESCRIPTION")
	for _, d := range ds {
		t.row(short(d.ID), d.Job, strconv.FormatUint(d.JobVersion, 10), string(d.Status), dash(d.Description))
	}
	t.flush()
}

// printDeployment renders one deployment: what it is, where it stands, and
// its progress per group.
func printDeployment(w io.Writer, d *spec.Deployment, now time.Time) {
	fmt.Fprintf(w, "ID           %s\n", d.ID)
	fmt.Fprintf(w, "Job          %s (version %d)\n", d.Job, d.JobVersion)
	fmt.Fprintf(w, "Status       %s\n", d.Status)
	fmt.Fprintf(w, "Description  %s\n", dash(d.Description))
	if d.Failure != "" {
		fmt.Fprintf(w, "Failure      %s\n", failureLine(d.Failure))
	}
	if d.RevertTo != 0 {
		fmt.Fprintf(w, "Reverted     to version %d\n", d.RevertTo)
	}
	if r := d.Request; r != nil && !d.Status.Final() {
		what := ""
		switch {
		case r.Fail:
			what = "failure"
		case r.Promote:
			what = "promotion"
		}
		if what != "" {
			fmt.Fprintf(w, "Requested    %s, %s ago\n", what, age(now, r.Time))
		}
		if r.Paused {
			fmt.Fprintf(w, "Paused       %s ago (drover deployment resume %s)\n", age(now, r.Time), short(d.ID))
		}
	}
	fmt.Fprintf(w, "Started      %s ago\n", age(now, d.CreateTime))
	fmt.Fprintln(w)
	printDeploymentGroups(w, d, now)
}

// failureLine is a failed deployment's typed cause (Deployment.Failure)
// as deployment status shows it: the value, which scripts may match, and
// what it means. A cause this CLI does not know (a newer server's) is
// shown as it is.
func failureLine(f spec.DeploymentFailure) string {
	meaning := ""
	switch f {
	case spec.FailedUnhealthy:
		meaning = "an instance was unhealthy, in a group whose progress_deadline is 0 (the first unhealthy instance fails it)"
	case spec.FailedProgressDeadline:
		meaning = "no instance of a group became healthy within its progress_deadline"
	case spec.FailedRescheduleExhausted:
		meaning = "an instance was unhealthy and its group's reschedule policy allows no more replacements"
	case spec.FailedByOperator:
		meaning = "an operator failed it (drover deployment fail)"
	}
	if meaning == "" {
		return string(f)
	}
	return string(f) + ": " + meaning
}

// printDeploymentGroups is the per-group progress table.
func printDeploymentGroups(w io.Writer, d *spec.Deployment, now time.Time) {
	if len(d.Groups) == 0 {
		fmt.Fprintln(w, "No groups yet.")
		return
	}
	names := make([]string, 0, len(d.Groups))
	for n := range d.Groups {
		names = append(names, n)
	}
	sort.Strings(names)
	t := newTable(w, "GROUP", "DESIRED", "CANARIES", "PLACED", "HEALTHY", "UNHEALTHY", "PROGRESS DEADLINE")
	for _, n := range names {
		dg := d.Groups[n]
		t.row(n, strconv.Itoa(dg.Desired), canaries(dg), strconv.Itoa(dg.Placed), strconv.Itoa(dg.Healthy),
			strconv.Itoa(dg.Unhealthy), deadline(now, dg.RequireProgressBy))
	}
	t.flush()
}

// canaries is "placed/desired", and whether they were promoted.
func canaries(dg *spec.DeploymentGroup) string {
	if dg.DesiredCanaries == 0 {
		return "-"
	}
	s := fmt.Sprintf("%d/%d", len(dg.PlacedCanaries), dg.DesiredCanaries)
	if dg.Promoted {
		s += " promoted"
	}
	return s
}

// deadline says when a group's progress deadline falls: "in 9m".
func deadline(now, t time.Time) string {
	switch {
	case t.IsZero():
		return "-"
	case !t.After(now):
		return "passed"
	}
	return "in " + age(t, now)
}

// deploymentLine is a deployment's progress on one line, for logs: the
// monitor prints it whenever it changes.
func deploymentLine(d *spec.Deployment) string {
	names := make([]string, 0, len(d.Groups))
	for n := range d.Groups {
		names = append(names, n)
	}
	sort.Strings(names)
	var parts []string
	for _, n := range names {
		dg := d.Groups[n]
		p := fmt.Sprintf("%s %d/%d placed, %d healthy, %d unhealthy", n, dg.Placed, dg.Desired, dg.Healthy, dg.Unhealthy)
		if dg.DesiredCanaries > 0 {
			p += ", canaries " + canaries(dg)
		}
		parts = append(parts, p)
	}
	return fmt.Sprintf("deployment %s %s: %s; %s", short(d.ID), d.Status, strings.Join(parts, "; "), dash(d.Description))
}
