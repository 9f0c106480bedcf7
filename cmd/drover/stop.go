package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-org/drover/internal/client"
)

func newStopCmd(g *globals) *cobra.Command {
	var purge, detach bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "stop JOB",
		Short: "Stop a job's instances (and with --purge, forget the job)",
		Long: `Stop asks every instance of the job to stop (SIGTERM, then SIGKILL after the
task's kill_timeout) and waits until they have. The job stays registered, so
drover status still shows it and drover run starts it again; --purge removes it.`,
		Example: "  drover stop hello\n  drover stop --purge hello",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			name := args[0]
			if _, err := c.StopJob(ctx, name, purge); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			verb := "stopping"
			if purge {
				verb = "stopping and purging"
			}
			fmt.Fprintf(out, "Job %q: %s.\n", name, verb)
			if detach {
				return nil
			}
			var index int64
			for {
				allocs, idx, err := c.Allocs(ctx, name, "", &client.QueryOptions{Index: index, Wait: time.Minute})
				if err != nil {
					if ctx.Err() != nil {
						return fmt.Errorf("timed out after %s waiting for job %q's instances to stop; see drover ps --job %s", timeout, name, name)
					}
					return err
				}
				index = idx
				live := 0
				for _, a := range allocs {
					if !a.Terminal() {
						live++
					}
				}
				if live == 0 {
					fmt.Fprintf(out, "✓ Job %q stopped: no instance is running.\n", name)
					return nil
				}
			}
		},
	}
	cmd.Flags().BoolVar(&purge, "purge", false, "also remove the job and its history")
	cmd.Flags().BoolVarP(&detach, "detach", "d", false, "return without waiting for the instances to stop")
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "how long to wait for the instances to stop")
	return cmd
}
