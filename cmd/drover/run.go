package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/reconcile"
	"github.com/drover-org/drover/internal/spec"
)

func newRunCmd(g *globals) *cobra.Command {
	var detach bool
	var timeout time.Duration
	var checkIndex int64
	var minHealthy time.Duration
	var vars jobVars
	cmd := &cobra.Command{
		Use:   "run FILE|-",
		Short: "Submit a job and follow it until it runs, completes or fails",
		Long: `Run applies a job file (HCL, JSON, YAML, or a fleet .service unit as in docs/fleet.md; "-" reads stdin). Applying the
same spec again changes nothing. Then it follows the job until every instance
runs (a batch job: completes), or something fails. A service job with an
update block rolls each new version out as a deployment: run follows that
deployment until it succeeds, fails (and perhaps reverts), or waits for its
canaries to be promoted (drover deployment promote).

Exit status: 0 success (or canaries waiting for promotion); 1 failure (an
instance or the deployment failed, or the wait timed out); 2 the job cannot
be placed now (the reasons are printed; it stays registered and is placed as
soon as room appears).`,
		Example: `  drover run examples/hello.hcl
  drover run --detach examples/batch.hcl
  drover run -var count=3 -var-file prod.hcl job.nomad
  drover status hello -o json | drover run -`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			job, err := readJob(args[0], cmd.InOrStdin(), cmd.ErrOrStderr(), vars.options())
			if err == nil {
				err = g.jobNamespace(job)
			}
			if err != nil {
				return &exitError{code: exitFailure, err: err}
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			res, err := c.SubmitJob(ctx, job, checkIndex)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if res.Changed {
				fmt.Fprintf(out, "Job %q submitted: version %d.\n", res.Job.Name, res.Job.Version)
			} else {
				fmt.Fprintf(out, "Job %q unchanged (version %d): nothing to do.\n", res.Job.Name, res.Job.Version)
			}
			switch j := res.Job; {
			case j.Periodic != nil:
				// A template runs nothing itself: there is nothing to follow.
				fmt.Fprintf(out, "Periodic job: the leader launches %s@periodic-<unix> at each tick; drover status %s shows the next launch, drover periodic force %s launches one now.\n", j.Name, j.Name, j.Name)
				return nil
			case j.Parameterized != nil:
				fmt.Fprintf(out, "Parameterized job: it runs when dispatched: drover dispatch %s [-meta KEY=VALUE]... [PAYLOAD-FILE|-]\n", j.Name)
				return nil
			case detach:
				fmt.Fprintf(out, "Follow it with: drover status %s\n", res.Job.Name)
				return nil
			}
			return followJob(ctx, c, out, res, isTerminal(os.Stdout), minHealthy)
		},
	}
	cmd.Flags().BoolVarP(&detach, "detach", "d", false, "return after submitting, without following")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long to follow before giving up (the job keeps going)")
	cmd.Flags().Int64Var(&checkIndex, "check-index", 0, "refuse to submit unless the stored job's modify index is this (0: no check)")
	cmd.Flags().DurationVar(&minHealthy, "min-healthy-time", 5*time.Second, "a service counts as running once every instance has stayed up this long")
	vars.add(cmd)
	return cmd
}

// monitor follows a job with blocking queries until it reaches a verdict.
// On a terminal it redraws the instance table in place; otherwise it prints
// one timestamped line per change, which reads well in CI logs.
func monitor(ctx context.Context, c *client.Client, out io.Writer, job *spec.Job, tty bool, minHealthy time.Duration) error {
	var index int64
	wait := time.Minute
	seen := map[string]string{} // alloc ID -> last printed state
	noted := map[string]bool{}  // failed instances said to be replaced
	drawn := 0
	announced := false
	for {
		st, idx, err := c.Job(ctx, job.Name, &client.QueryOptions{Index: index, Wait: wait})
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
				return &exitError{code: exitFailure, err: fmt.Errorf(
					"timed out waiting for job %q; it keeps going: drover status %s", job.Name, job.Name)}
			}
			return err
		}
		index = idx
		if st.Job.Version > job.Version {
			return &exitError{code: exitFailure, err: fmt.Errorf("job %q was changed again (now version %d) while following it", job.Name, st.Job.Version)}
		}
		current := currentAllocs(st)
		if tty {
			if drawn > 0 {
				fmt.Fprintf(out, "\x1b[%dA\x1b[J", drawn)
			}
			var b strings.Builder
			fmt.Fprintf(&b, "%s: %s\n", st.Summary.State, summaryCounts(st.Summary))
			printAllocTable(&b, current, time.Now(), false)
			drawn = strings.Count(b.String(), "\n")
			io.WriteString(out, b.String())
		} else {
			// Every alloc that was meant to run, a failed one whose
			// replacement is placed too: each change is a line.
			for _, a := range wantedAllocs(st) {
				s := string(a.ClientStatusOr())
				if seen[a.ID] != s {
					seen[a.ID] = s
					fmt.Fprintf(out, "%s  %s  %s on %s\n", time.Now().UTC().Format(time.RFC3339), a.Name, s, dash(a.NodeName))
				}
			}
		}
		done, recheck, err := verdict(out, st, minHealthy, time.Now(), noted)
		if done {
			return err
		}
		if recheck > 0 && st.Summary.State == spec.JobRunning && !announced {
			announced = true
			fmt.Fprintf(out, "All instances running; checking they stay up for %s (--min-healthy-time).\n", minHealthy)
			drawn = 0 // keep the line: redraw below it
		}
		wait = time.Minute
		if recheck > 0 {
			wait = recheck
		}
	}
}

// currentAllocs are the job's instances, each by the alloc that represents
// it (reconcile.InstanceAllocs): a failed alloc whose reschedule policy has
// placed its replacement is no longer one.
func currentAllocs(st *spec.JobStatus) []*spec.Alloc {
	return reconcile.InstanceAllocs(st.Job, st.Allocations)
}

// wantedAllocs are the allocs meant to run, by name, replaced ones too.
func wantedAllocs(st *spec.JobStatus) []*spec.Alloc {
	var out []*spec.Alloc
	for _, a := range st.Allocations {
		if a.DesiredStatus == spec.DesiredRun {
			out = append(out, a)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// replacementWait is how soon a failed instance's replacement must be due
// for `drover run` to wait for it (verdict).
const replacementWait = 10 * time.Second

// verdict says whether following is over, with the exit status. A service
// is declared running only once every instance has stayed up minHealthy
// since its last start: a task that crashes at once must not pass. recheck
// says when to look again if nothing changes.
//
// noted holds the failed instances already said to be replaced.
func verdict(out io.Writer, st *spec.JobStatus, minHealthy time.Duration, now time.Time, noted map[string]bool) (done bool, recheck time.Duration, err error) {
	j, s := st.Job, st.Summary
	if err := placementFailure(out, st); err != nil {
		return true, 0, err
	}
	// An instance of this version failed (its failed alloc still stands
	// for it: no replacement is placed yet). Its replacement, when the
	// reschedule policy makes one within replacementWait (Nomad's batch
	// default is 5 s), is waited for: the job may yet run. One due later
	// (the service default's first is 30 s, then doubling), or none, ends
	// the follow now rather than after the delay: a crashing service is
	// said at once (drover status shows its replacement coming).
	for _, a := range currentAllocs(st) {
		if a.DesiredStatus == spec.DesiredRun && a.JobVersion == j.Version && a.ClientStatusOr() == spec.ClientFailed {
			desc := ""
			if a.Status != nil {
				desc = a.Status.Description
			}
			if next := s.NextReplacement; s.State == spec.JobPending && next != nil && next.Sub(now) <= replacementWait {
				if !noted[a.ID] {
					noted[a.ID] = true
					fmt.Fprintf(out, "Instance %s failed: %s; its reschedule policy replaces it in %s.\n", a.Name, dash(desc), max(next.Sub(now), 0).Round(time.Second))
				}
				return false, max(next.Sub(now), 0) + time.Second, nil
			}
			return true, 0, &exitError{code: exitFailure, err: fmt.Errorf("job %q: instance %s failed: %s (%s)", j.Name, a.Name, dash(desc), failureHint(j.Name, a))}
		}
	}
	switch s.State {
	case spec.JobRunning:
		if j.Type.Completes() {
			return false, 0, nil // a batch job is done when it completes
		}
		if left := untilHealthy(st, minHealthy, now); left > 0 {
			return false, left, nil
		}
		fmt.Fprintf(out, "✓ Job %q version %d: %d/%d instances running.\n", j.Name, j.Version, s.Running, s.Desired)
		return true, 0, nil
	case spec.JobComplete:
		fmt.Fprintf(out, "✓ Job %q version %d: %d/%d instances completed.\n", j.Name, j.Version, s.Complete, s.Desired)
		return true, 0, nil
	case spec.JobFailed:
		return true, 0, &exitError{code: exitFailure, err: fmt.Errorf("job %q failed: %s (drover status %s; drover logs %s)", j.Name, dash(s.Reason), j.Name, j.Name)}
	case spec.JobStopped:
		return true, 0, &exitError{code: exitFailure, err: fmt.Errorf("job %q was stopped while following it", j.Name)}
	}
	if s.Desired == 0 && s.State != spec.JobPending {
		fmt.Fprintf(out, "✓ Job %q version %d: no instances wanted.\n", j.Name, j.Version)
		return true, 0, nil
	}
	return false, 0, nil
}

// failureHint is the command that shows more of why instance a of job
// failed: its tasks' output when one ran, else its events (a task that
// never started wrote nothing).
func failureHint(job string, a *spec.Alloc) string {
	if a.Status != nil {
		for _, ts := range a.Status.Tasks {
			if !ts.StartedAt.IsZero() {
				return "drover logs " + job + " --stderr"
			}
		}
	}
	return "it never started; drover status " + job + " shows its events"
}

// untilHealthy is how long until every running instance has been up
// minHealthy since its tasks' latest start; 0 when they all have.
func untilHealthy(st *spec.JobStatus, minHealthy time.Duration, now time.Time) time.Duration {
	var left time.Duration
	for _, a := range currentAllocs(st) {
		if a.Status == nil {
			return minHealthy
		}
		for _, ts := range a.Status.Tasks {
			if ts.State != spec.TaskRunning {
				return minHealthy
			}
			left = max(left, ts.StartedAt.Add(minHealthy).Sub(now))
		}
	}
	return left
}
