package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/spec"
)

func newRestartCmd(g *globals) *cobra.Command {
	var detach bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "restart JOB",
		Short: "Replace every instance of a job, a batch at a time, without changing its spec",
		Long: `Restart asks the leader to replace every running instance of the job with a
fresh one, a group's update max_parallel at a time (1 without an update
block), each batch healthy before the next. The spec and its version stay as
they are. Then it follows the instances until none from before the request
is left and every instance runs.

Exit status: 0 every instance replaced and running; 1 a replacement failed,
or the wait timed out (the restart keeps going: drover status JOB).`,
		Example: `  drover restart web
  drover restart web --detach
  drover restart web --timeout 30m`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			name := args[0]
			job, err := c.RestartJob(ctx, name)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "Job %q: restart requested at %s.\n", name, job.RestartRequested.UTC().Format(time.RFC3339))
			if detach {
				fmt.Fprintf(out, "Follow it with: drover status %s\n", name)
				return nil
			}
			return followRestart(ctx, c, out, job, timeout)
		},
	}
	cmd.Flags().BoolVarP(&detach, "detach", "d", false, "return after the request, without following")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "how long to follow before giving up (the restart keeps going)")
	return cmd
}

// followRestart follows job's instances with blocking queries, printing
// one timestamped line each time the progress changes, until the restart
// is over (nil), a replacement fails, or ctx ends (exit 1 for both).
func followRestart(ctx context.Context, c *client.Client, out io.Writer, job *spec.Job, timeout time.Duration) error {
	since := job.RestartRequested
	var index int64
	last := ""
	for {
		st, idx, err := c.Job(ctx, job.Name, &client.QueryOptions{Index: index, Wait: time.Minute})
		if err != nil {
			if ctx.Err() != nil {
				msg := "no progress seen"
				if last != "" {
					msg = last
				}
				return &exitError{code: exitFailure, err: fmt.Errorf(
					"timed out after %s restarting job %q (%s); it keeps going: drover status %s", timeout, job.Name, msg, job.Name)}
			}
			return err
		}
		index = idx
		if st.Job.Stopped {
			return &exitError{code: exitFailure, err: fmt.Errorf("job %q was stopped during its restart", job.Name)}
		}
		// Someone asked again: the newer request is the one to see through.
		if st.Job.RestartRequested.After(since) {
			since = st.Job.RestartRequested
			fmt.Fprintf(out, "%s  restart requested again, at %s\n", time.Now().UTC().Format(time.RFC3339), since.UTC().Format(time.RFC3339))
		}
		p := restartProgressOf(st, since)
		if line := p.String(); line != last {
			last = line
			fmt.Fprintf(out, "%s  %s\n", time.Now().UTC().Format(time.RFC3339), line)
		}
		if len(p.Failed) > 0 {
			for _, f := range p.Failed {
				fmt.Fprintf(out, "✗ %s\n", f)
			}
			fmt.Fprintf(out, "See why: drover status %s; drover logs %s --stderr\n", job.Name, job.Name)
			return &exitError{code: exitFailure, err: fmt.Errorf("restart of job %q: an instance failed", job.Name), silent: true}
		}
		if p.Done() {
			fmt.Fprintf(out, "✓ Job %q restarted: every instance replaced and running.\n", job.Name)
			return nil
		}
	}
}

// restartProgress is how far a restart has got, from one look at the job.
type restartProgress struct {
	// Total is the number of instances the job wants (its summary's
	// desired count).
	Total int
	// Old counts the live allocs (desired run, not terminal) created
	// before the restart was requested: the ones still to replace.
	Old int
	// Running counts the allocs that should run and do, old or new.
	Running int
	// Failed says which replacements (allocs created since the request)
	// failed, and why. An old instance that had failed before the request
	// is not the restart's doing, so only replacements count.
	Failed []string
}

// restartProgressOf computes a restart's progress from the job's status and
// the time of the request. It compares alloc create times, stamped by the
// leader, with the request's, stamped by the server that took it: the
// same comparison the leader makes to pick what to replace.
func restartProgressOf(st *spec.JobStatus, since time.Time) restartProgress {
	p := restartProgress{Total: st.Summary.Desired}
	for _, a := range st.Allocations {
		old := a.CreateTime.Before(since)
		if old && a.DesiredStatus == spec.DesiredRun && !a.Terminal() {
			p.Old++
		}
		if a.DesiredStatus == spec.DesiredRun && a.ClientStatusOr() == spec.ClientRunning {
			p.Running++
		}
		if !old && a.ClientStatusOr() == spec.ClientFailed {
			why := ""
			if a.Status != nil && a.Status.Description != "" {
				why = ": " + a.Status.Description
			}
			p.Failed = append(p.Failed, fmt.Sprintf("%s failed on %s%s", a.Name, dash(a.NodeName), why))
		}
	}
	return p
}

// Replaced is k of "k/n instances replaced": the instances no longer
// served by an alloc from before the request.
func (p restartProgress) Replaced() int {
	return min(max(p.Total-p.Old, 0), p.Total)
}

// Done reports whether the restart is over: no old instance is left and
// every instance runs.
func (p restartProgress) Done() bool {
	return p.Old == 0 && p.Running >= p.Total
}

func (p restartProgress) String() string {
	return fmt.Sprintf("%d/%d instances replaced, %d/%d running", p.Replaced(), p.Total, p.Running, p.Total)
}
