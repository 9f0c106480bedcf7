package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/spec"
)

func newSystemCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "system",
		Short: "Cluster-wide maintenance: system gc",
	}
	cmd.AddCommand(newSystemGCCmd(g))
	return cmd
}

// defaultGCAge is how long a stopped job is kept before system gc purges
// it, as Nomad's job_gc_threshold.
const defaultGCAge = 4 * time.Hour

func newSystemGCCmd(g *globals) *cobra.Command {
	var olderThan time.Duration
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "Purge the stopped jobs whose instances all ended longer ago than --older-than",
		Long: `GC purges every stopped job (drover stop JOB) none of whose instances runs and
whose last instance ended longer ago than --older-than (default 4h, as
Nomad's job_gc_threshold): as drover stop --purge JOB, the job and its
versions are forgotten and the leader deletes its instances' records.

The leader already forgets the ended instances of running jobs by itself,
in each pass (it keeps the newest few of each instance, and those its
reschedule policy counts); gc does not change that.

Only the jobs the token may submit in are purged; --dry-run lists them.`,
		Example: "  drover system gc\n  drover system gc --older-than 0 --dry-run",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if olderThan < 0 {
				return fmt.Errorf("--older-than must not be negative, got %s", olderThan)
			}
			ctx, cancel, c, err := g.readCommand(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			return systemGC(ctx, c, cmd.OutOrStdout(), time.Now(), olderThan, dryRun)
		},
	}
	cmd.Flags().DurationVar(&olderThan, "older-than", defaultGCAge, "purge a stopped job only once its last instance ended this long ago")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "list what would be purged, purging nothing")
	return cmd
}

// systemGC purges the stopped jobs whose instances all ended before
// now-olderThan, saying what it did.
func systemGC(ctx context.Context, c *client.Client, out io.Writer, now time.Time, olderThan time.Duration, dryRun bool) error {
	jobs, _, err := c.Jobs(ctx, nil)
	if err != nil {
		return err
	}
	purged, kept := 0, 0
	for _, j := range jobs {
		if !j.Stopped {
			continue
		}
		st, _, err := c.Job(ctx, j.Name, nil)
		if err != nil {
			return err
		}
		ended, done := jobEnded(st)
		switch {
		case !done:
			fmt.Fprintf(out, "kept %s: stopped, but an instance still runs\n", j.Name)
			kept++
			continue
		case now.Sub(ended) < olderThan:
			fmt.Fprintf(out, "kept %s: stopped, its last instance ended %s ago (under %s)\n", j.Name, now.Sub(ended).Round(time.Second), olderThan)
			kept++
			continue
		case dryRun:
			fmt.Fprintf(out, "would purge %s: stopped, its last instance ended %s ago\n", j.Name, now.Sub(ended).Round(time.Second))
			purged++
			continue
		}
		if _, err := c.StopJob(ctx, j.Name, true); client.IsStatus(err, http.StatusForbidden) {
			fmt.Fprintf(out, "kept %s: the token may not submit in namespace %s\n", j.Name, spec.NamespaceOf(j.Namespace))
			kept++
			continue
		} else if err != nil {
			return fmt.Errorf("purging job %q: %w", j.Name, err)
		}
		fmt.Fprintf(out, "purged %s\n", j.Name)
		purged++
	}
	what := "purged"
	if dryRun {
		what = "would be purged"
	}
	fmt.Fprintf(out, "%d stopped jobs %s, %d kept.\n", purged, what, kept)
	return nil
}

// jobEnded is when a job's last instance ended (its submission's time when
// it has none), and whether every one has.
func jobEnded(st *spec.JobStatus) (time.Time, bool) {
	ended := st.Job.SubmitTime
	for _, a := range st.Allocations {
		if !a.Terminal() {
			return time.Time{}, false
		}
		t := a.ModifyTime
		if a.Status != nil && a.Status.UpdateTime.After(t) {
			t = a.Status.UpdateTime
		}
		if t.After(ended) {
			ended = t
		}
	}
	return ended, true
}
