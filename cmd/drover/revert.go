package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"
)

func newRevertCmd(g *globals) *cobra.Command {
	var f followFlags
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
			ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
			defer cancel()
			res, err := c.RevertJob(ctx, name, version, f.checkIndex)
			if err != nil {
				return err
			}
			return f.finish(ctx, c, cmd.OutOrStdout(), res,
				fmt.Sprintf("Job %q reverted to version %d: now version %d.", name, version, res.Job.Version),
				fmt.Sprintf("Job %q unchanged: version %d's spec is the current one (version %d).", name, version, res.Job.Version))
		},
	}
	f.add(cmd.Flags(), "revert")
	return cmd
}
