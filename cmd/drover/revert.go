package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"
)

func newRevertCmd(g *globals) *cobra.Command {
	var detach bool
	var timeout time.Duration
	var checkIndex int64
	var minHealthy time.Duration
	cmd := &cobra.Command{
		Use:   "revert JOB VERSION",
		Short: "Submit an earlier version's spec again, as the job's next version, and follow it",
		Long: `Revert stores the spec of an earlier VERSION of the job (drover history
lists them) as its next version, and follows it as drover run does: its
deployment when the job has an update block, else its instances. When that
spec is the current one, nothing changes.

Exit status: as drover run's.`,
		Example: `  drover history web
  drover revert web 1
  drover revert web 1 --detach`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			version, err := strconv.ParseUint(args[1], 10, 64)
			if err != nil || version == 0 {
				return fmt.Errorf("version %q is not a version number; drover history %s lists them", args[1], name)
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			res, err := c.RevertJob(ctx, name, version, checkIndex)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if res.Changed {
				fmt.Fprintf(out, "Job %q reverted to version %d: now version %d.\n", name, version, res.Job.Version)
			} else {
				fmt.Fprintf(out, "Job %q unchanged: version %d's spec is the current one (version %d).\n", name, version, res.Job.Version)
			}
			if detach {
				fmt.Fprintf(out, "Follow it with: drover status %s\n", name)
				return nil
			}
			return followJob(ctx, c, out, res, isTerminal(os.Stdout), minHealthy)
		},
	}
	cmd.Flags().BoolVarP(&detach, "detach", "d", false, "return after reverting, without following")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long to follow before giving up (the job keeps going)")
	cmd.Flags().Int64Var(&checkIndex, "check-index", 0, "refuse to revert unless the stored job's modify index is this (0: no check)")
	cmd.Flags().DurationVar(&minHealthy, "min-healthy-time", 5*time.Second, "without an update block: a service counts as running once every instance has stayed up this long")
	return cmd
}
