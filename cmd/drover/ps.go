package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-org/drover/internal/spec"
)

func newPsCmd(g *globals) *cobra.Command {
	var all bool
	var job string
	cmd := &cobra.Command{
		Use:     "ps",
		Short:   "List running instances (allocations) across jobs",
		Example: "  drover ps\n  drover ps --all --job hello -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel, c, err := g.readCommand(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			allocs, _, err := c.Allocs(ctx, job, "", nil)
			if err != nil {
				return err
			}
			if !all {
				live := allocs[:0]
				for _, a := range allocs {
					if !a.Terminal() {
						live = append(live, a)
					}
				}
				allocs = live
			}
			if g.output != "table" {
				if allocs == nil {
					allocs = []*spec.Alloc{}
				}
				return g.print(cmd.OutOrStdout(), allocs)
			}
			if len(allocs) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "No instances running. drover ps --all shows finished ones too.")
				return nil
			}
			printAllocTable(cmd.OutOrStdout(), allocs, time.Now(), true)
			return nil
		},
	}
	cmd.Flags().BoolVarP(&all, "all", "a", false, "include finished instances")
	cmd.Flags().StringVar(&job, "job", "", "only this job's instances")
	return outputs(cmd, documents...)
}
