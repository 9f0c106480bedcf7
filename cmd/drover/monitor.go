package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"
)

func newMonitorCmd(g *globals) *cobra.Command {
	var level, node string
	var duration time.Duration
	cmd := &cobra.Command{
		Use:   "monitor",
		Short: "Stream a server's log (or, with --node, an agent's) as it is written",
		Long: `Monitor prints the log records of the server it talks to (with --address, the
first that answers) as they are written, at --log-level whatever level the
server itself logs at; with --node, those of that node's agent, through the
server. It runs until interrupted, or for --duration.

The server keeps at most 1024 lines for a reader: when monitor (or the
terminal behind it) reads too slowly, the oldest are dropped and a line
says how many. Needs a management token: a process's log names every
namespace's jobs.`,
		Example: "  drover monitor\n  drover monitor --log-level debug --node node-a\n  drover monitor --duration 30s",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var l slog.Level
			if err := l.UnmarshalText([]byte(level)); err != nil {
				return fmt.Errorf("unknown --log-level %q: use debug, info, warn or error", level)
			}
			if duration < 0 {
				return fmt.Errorf("--duration must not be negative, got %s", duration)
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if duration > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, duration)
				defer cancel()
			}
			body, err := c.Monitor(ctx, level, node)
			if err != nil {
				return err
			}
			defer body.Close()
			if _, err := io.Copy(cmd.OutOrStdout(), body); err != nil && ctx.Err() == nil {
				return fmt.Errorf("the log stream broke: %w", err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&level, "log-level", "info", "the least level to print: debug, info, warn or error")
	cmd.Flags().StringVar(&node, "node", "", "a node (ID, ID prefix or name) whose agent's log to stream instead of the server's")
	cmd.Flags().DurationVar(&duration, "duration", 0, "stop after this long (default: until interrupted)")
	cmd.RegisterFlagCompletionFunc("node", func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return g.completeNow(cmd, nodeNames, toComplete), cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}
