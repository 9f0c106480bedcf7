package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/planview"
	"github.com/drover-org/drover/internal/spec"
)

// followJob follows what a submit (run, revert) started: the deployment of
// the submitted version when the job rolls out through deployments, else
// its instances until they run (monitor).
func followJob(ctx context.Context, c *client.Client, out io.Writer, res *spec.SubmitResponse, tty bool, minHealthy time.Duration) error {
	j := res.Job
	if !rollsOut(j) {
		return monitor(ctx, c, out, j, tty, minHealthy)
	}
	t := deployTarget{job: j.Name, version: j.Version, since: res.Index}
	if !res.Changed {
		// The version is not new: its deployment may be over already.
		ds, _, err := c.JobDeployments(ctx, j.Name, nil)
		if err != nil {
			return err
		}
		d := deploymentOfVersion(ds, j.Version)
		if d == nil { // forgotten, or never made: the instances tell
			return monitor(ctx, c, out, j, tty, minHealthy)
		}
		if d.Status.Final() {
			fmt.Fprintln(out, deploymentLine(d))
			_, err := deploymentOutcome(out, d)
			return err
		}
	}
	return followDeployment(ctx, c, out, t, tty)
}

// rollsOut reports whether a new version of j rolls out as a deployment.
func rollsOut(j *spec.Job) bool {
	for _, g := range j.Groups {
		if j.UpdateOf(g).Parallel() > 0 {
			return true
		}
	}
	return false
}

// deployTarget is the deployment to follow: job's, for version, which the
// leader creates after registry index since.
type deployTarget struct {
	job     string
	version uint64
	since   int64
}

// followDeployment follows the deployment of t's version with blocking
// queries until it reaches a verdict (deploymentOutcome), and the job's
// status for instances that cannot be placed (exit 2, as monitor). It
// waits for the leader to create the deployment; ctx bounds every wait.
// On a terminal it redraws the per-group table; otherwise it prints one
// timestamped line per change.
func followDeployment(ctx context.Context, c *client.Client, out io.Writer, t deployTarget, tty bool) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	deps := watch(ctx, t.since, true, func(q *client.QueryOptions) (*spec.Deployment, int64, error) {
		return c.LatestDeployment(ctx, t.job, q)
	})
	jobs := watch(ctx, t.since, false, func(q *client.QueryOptions) (*spec.JobStatus, int64, error) {
		return c.Job(ctx, t.job, q)
	})
	timedOut := func() error {
		return &exitError{code: exitFailure, err: fmt.Errorf(
			"timed out following the deployment of job %q version %d; it keeps going: drover deployment status %s", t.job, t.version, t.job)}
	}
	drawn, last := 0, ""
	for {
		select {
		case <-ctx.Done():
			return timedOut()
		case r := <-jobs:
			if r.err != nil {
				if ctx.Err() != nil {
					return timedOut()
				}
				return r.err
			}
			if err := placementFailure(out, r.v); err != nil {
				return err
			}
		case r := <-deps:
			if r.err != nil {
				if ctx.Err() != nil {
					return timedOut()
				}
				return r.err
			}
			d := r.v
			if d.JobVersion < t.version {
				continue // the leader has not created it yet
			}
			if d.JobVersion > t.version {
				// A newer version came (an auto-revert, say) since the
				// last look: ours is over, and says how.
				ds, _, err := c.JobDeployments(ctx, t.job, nil)
				if err != nil {
					return err
				}
				if d = deploymentOfVersion(ds, t.version); d == nil || !d.Status.Final() {
					return &exitError{code: exitFailure, err: fmt.Errorf(
						"job %q was changed again (now version %d) while following version %d's deployment", t.job, r.v.JobVersion, t.version)}
				}
			}
			if tty {
				if drawn > 0 {
					fmt.Fprintf(out, "\x1b[%dA\x1b[J", drawn)
				}
				var b strings.Builder
				fmt.Fprintf(&b, "Deployment %s of job %q version %d: %s: %s\n", short(d.ID), d.Job, d.JobVersion, d.Status, dash(d.Description))
				printDeploymentGroups(&b, d, time.Now())
				drawn = strings.Count(b.String(), "\n")
				io.WriteString(out, b.String())
			} else if line := deploymentLine(d); line != last {
				last = line
				fmt.Fprintf(out, "%s  %s\n", time.Now().UTC().Format(time.RFC3339), line)
			}
			if done, err := deploymentOutcome(out, d); done {
				return err
			}
		}
	}
}

// deploymentOfVersion is the newest of ds (newest first) for version v.
func deploymentOfVersion(ds []*spec.Deployment, v uint64) *spec.Deployment {
	for _, d := range ds {
		if d.JobVersion == v {
			return d
		}
	}
	return nil
}

// deploymentOutcome says whether following d is over, and prints the
// verdict when it is: successful (exit 0); waiting for an operator to
// promote its canaries (0: that is the next step, and it is the
// operator's); failed or cancelled (1, with why, and the revert if any).
func deploymentOutcome(w io.Writer, d *spec.Deployment) (done bool, err error) {
	fail := &exitError{code: exitFailure, err: fmt.Errorf("deployment %s", d.Status), silent: true}
	switch d.Status {
	case spec.DeploymentSuccessful:
		fmt.Fprintf(w, "✓ Deployment %s of job %q version %d successful: %s.\n", short(d.ID), d.Job, d.JobVersion, dash(d.Description))
		return true, nil
	case spec.DeploymentFailed:
		fmt.Fprintf(w, "✗ Deployment %s of job %q version %d failed: %s\n", short(d.ID), d.Job, d.JobVersion, dash(d.Description))
		if d.RevertTo != 0 {
			fmt.Fprintf(w, "Job %q reverted to version %d: that spec is now the job's next version (drover history %s).\n", d.Job, d.RevertTo, d.Job)
		} else {
			fmt.Fprintf(w, "See why: drover status %s; drover logs %s --stderr\n", d.Job, d.Job)
		}
		return true, fail
	case spec.DeploymentCancelled:
		fmt.Fprintf(w, "✗ Deployment %s of job %q version %d cancelled: %s\n", short(d.ID), d.Job, d.JobVersion, dash(d.Description))
		return true, fail
	}
	if waitsForPromotion(d) {
		fmt.Fprintf(w, "canaries healthy; promote with: drover deployment promote %s\n", short(d.ID))
		return true, nil
	}
	return false, nil
}

// waitsForPromotion reports whether d waits for an operator to promote it,
// and none has asked yet (the leader's AwaitingPromotion).
func waitsForPromotion(d *spec.Deployment) bool {
	asked := d.Request != nil && d.Request.Promote
	return d.Status == spec.DeploymentRunning && !asked && d.AwaitingPromotion
}

// answer is one answer of a blocking query.
type answer[T any] struct {
	v   T
	err error
}

// watch runs a blocking query from index since in a loop and sends each
// answer until ctx ends or the query fails (the error is sent last). With
// notFoundWaits, a 404 means "not there yet": the query is asked again
// after a pause, as a 404 carries no index to wait on.
func watch[T any](ctx context.Context, since int64, notFoundWaits bool, query func(*client.QueryOptions) (T, int64, error)) <-chan answer[T] {
	ch := make(chan answer[T])
	go func() {
		index := since
		for {
			v, idx, err := query(&client.QueryOptions{Index: index, Wait: time.Minute})
			if err != nil && notFoundWaits && client.IsStatus(err, http.StatusNotFound) {
				select {
				case <-ctx.Done():
					return
				case <-time.After(notFoundPause):
					continue
				}
			}
			select {
			case ch <- answer[T]{v, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
			if idx > 0 {
				index = idx
			}
		}
	}()
	return ch
}

// notFoundPause spaces the queries for a deployment the leader has not
// created yet: it usually takes one scheduling pass, well under a second.
const notFoundPause = 500 * time.Millisecond

// placementFailure prints why instances of the job cannot be placed, and
// returns the exit status for it (2), or nil when everything is placed.
func placementFailure(out io.Writer, st *spec.JobStatus) error {
	if len(st.Failures) == 0 {
		return nil
	}
	j := st.Job
	var lines []string
	for _, f := range st.Failures {
		lines = append(lines, "  "+planview.FailureLine(f))
	}
	never := true
	for _, f := range st.Failures {
		never = never && f.Never()
	}
	if never {
		// Waiting for room would be waiting forever: no node there is
		// could take it even empty.
		fmt.Fprintf(out, "Job %q cannot be placed on any node there is:\n%s\nNo current node could ever run it as written: change the job (drover plan shows the fit), or add a node that has what it needs. It stays registered until then (drover stop %s withdraws it).\n",
			j.Name, strings.Join(lines, "\n"), j.Name)
	} else {
		fmt.Fprintf(out, "Job %q cannot be placed now:\n%s\nIt stays registered and is placed as soon as a node can take it (drover stop %s withdraws it).\n",
			j.Name, strings.Join(lines, "\n"), j.Name)
	}
	return &exitError{code: exitUnplaceable, err: errors.New("cannot be placed"), silent: true}
}

// followFlags are the flags of a command that submits a new version of a
// job from the server's copy (revert, scale) and follows it as run does.
type followFlags struct {
	detach     bool
	timeout    time.Duration
	checkIndex int64
	minHealthy time.Duration
}

// add declares the flags; verb says what the command does ("revert").
func (f *followFlags) add(fs *pflag.FlagSet, verb string) {
	fs.BoolVarP(&f.detach, "detach", "d", false, "return after the "+verb+", without following")
	fs.DurationVar(&f.timeout, "timeout", 5*time.Minute, "how long to follow before giving up (the job keeps going)")
	fs.Int64Var(&f.checkIndex, "check-index", 0, "refuse the "+verb+" unless the stored job's modify index is this (0: no check)")
	fs.DurationVar(&f.minHealthy, "min-healthy-time", 5*time.Second, "without an update block: a service counts as running once every instance has stayed up this long")
}

// finish prints what the submit did (changed or unchanged), then follows
// it unless --detach.
func (f *followFlags) finish(ctx context.Context, c *client.Client, out io.Writer, res *spec.SubmitResponse, changed, unchanged string) error {
	if res.Changed {
		fmt.Fprintln(out, changed)
	} else {
		fmt.Fprintln(out, unchanged)
	}
	if f.detach {
		fmt.Fprintf(out, "Follow it with: drover status %s\n", res.Job.Name)
		return nil
	}
	return followJob(ctx, c, out, res, isTerminal(os.Stdout), f.minHealthy)
}
