package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"
)

func newScaleCmd(g *globals) *cobra.Command {
	var f followFlags
	var message string
	cmd := &cobra.Command{
		Use:   "scale JOB [GROUP] COUNT",
		Short: "Set a group's count, as the job's next version, and follow it",
		Long: `Scale stores the job's current spec with GROUP's count set to COUNT as its
next version (GROUP may be left out when the job has one group), and
follows it as drover run does. A group with a scaling block is held to its
min and max; a system job has no count. Instances added start at once;
instances removed are stopped, the highest index first. When COUNT is the
current count, nothing changes.

Exit status: as drover run's.`,
		Example: `  drover scale web 5
  drover scale web api 2 --message "quiet hours"
  drover job scale web 3 --detach`,
		Args: cobra.RangeArgs(2, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, group, countArg := args[0], "", args[len(args)-1]
			if len(args) == 3 {
				group = args[1]
			}
			count, err := strconv.Atoi(countArg)
			if err != nil || count < 0 {
				return fmt.Errorf("count %q is not a number of instances (0 or more)", countArg)
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
			defer cancel()
			res, err := c.ScaleJob(ctx, name, group, count, message, f.checkIndex)
			if err != nil {
				return err
			}
			return f.finish(ctx, c, cmd.OutOrStdout(), res,
				fmt.Sprintf("Job %q scaled to %d: now version %d.", name, count, res.Job.Version),
				fmt.Sprintf("Job %q unchanged: the count is %d already (version %d).", name, count, res.Job.Version))
		},
	}
	f.add(cmd.Flags(), "scale")
	cmd.Flags().StringVarP(&message, "message", "m", "", "why, kept in the version's Submitted event")
	return cmd
}
