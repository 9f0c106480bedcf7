package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
)

// Nomad's CLI is noun-first (nomad job run, nomad alloc logs); drover's
// is verb-first. These groups make Nomad's spelling run drover's command,
// and answer a verb drover has no equivalent for with the one nearest.

func newJobCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "job",
		Short: "Nomad's job commands: job run, status, plan, stop, history, inspect, ... run drover's",
	}
	cmd.AddCommand(newRunCmd(g), newPlanCmd(g), newStatusCmd(g), newStopCmd(g), newHistoryCmd(g),
		newRevertCmd(g), newRestartCmd(g), newValidateCmd(g), newInitCmd(), newJobInspectCmd(g),
		newScaleCmd(g),
		newDispatchCmd(g), newPeriodicCmd(g),
		nearest("deployments", "drover deployment status JOB shows a job's latest deployment; drover deployment list lists them"),
		nearest("allocs", "drover status JOB lists a job's instances; drover ps --job JOB across its versions"),
	)
	return cmd
}

// newJobInspectCmd prints the job's current spec as the API stores it.
func newJobInspectCmd(g *globals) *cobra.Command {
	return outputs(&cobra.Command{
		Use:   "inspect JOB",
		Short: "Print the job's current spec as JSON (drover history JOB lists its versions)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel, c, err := g.readCommand(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			st, _, err := c.Job(ctx, args[0], nil)
			if err != nil {
				return err
			}
			return g.print(cmd.OutOrStdout(), st.Job)
		},
	}, documents...)
}

func newAllocCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "alloc",
		Short: "One instance, by ID or prefix: alloc status, logs, exec, restart, stop, signal",
	}
	cmd.AddCommand(newAllocStatusCmd(g), newAllocLogsCmd(g), newAllocExecCmd(g),
		newAllocRestartCmd(g), newAllocStopCmd(g), newAllocSignalCmd(g))
	return cmd
}

func newAllocLogsCmd(g *globals) *cobra.Command {
	var f logFlags
	cmd := &cobra.Command{
		Use:   "logs ALLOC [TASK]",
		Short: "Print one instance's task output, by ID or prefix (drover logs JOB[/TASK] by name)",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			task := ""
			if len(args) == 2 {
				task = args[1]
			}
			f.json = g.output == "json"
			streams, err := logStreams(ctx, c, "/"+task, args[0])
			if err != nil {
				return err
			}
			return f.print(ctx, c, cmd.OutOrStdout(), streams)
		},
	}
	f.register(cmd)
	return outputs(cmd, "json")
}

func newAllocExecCmd(g *globals) *cobra.Command {
	var f execFlags
	var task string
	cmd := &cobra.Command{
		Use:   "exec ALLOC -- COMMAND [ARG...]",
		Short: "Run a command in one instance, by ID or prefix (drover exec --alloc ID JOB)",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 1 {
				return fmt.Errorf("give the instance, then -- and the command: drover alloc exec ALLOC -- COMMAND [ARG...]")
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), readTimeout)
			defer cancel()
			a, err := c.Alloc(ctx, args[0])
			if err != nil {
				return err
			}
			f.allocID = a.ID
			return f.run(cmd, g, a.Job, task, args[1:])
		},
	}
	cmd.Flags().StringVar(&task, "task", "", "the task to run in (default: the instance's first)")
	f.register(cmd)
	return cmd
}

// newNodeStatusCmd is drover nodes under Nomad's name.
func newNodeStatusCmd(g *globals) *cobra.Command {
	cmd := newNodesCmd(g)
	cmd.Use = "status [NODE]"
	cmd.Aliases = nil
	return cmd
}

// nearest is a Nomad verb drover has no equivalent for: it exits 1 naming
// what drover does instead, whatever it was given.
func nearest(verb, instead string) *cobra.Command {
	return &cobra.Command{
		Use:                verb,
		Short:              instead,
		Hidden:             true,
		DisableFlagParsing: true,
		RunE:               func(*cobra.Command, []string) error { return fmt.Errorf("%s", instead) },
	}
}
