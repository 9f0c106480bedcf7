package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/drover-org/drover/internal/spec"
)

func newNodesCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "nodes",
		Short:   "List machines with their drivers and what is allocated on them",
		Example: "  drover nodes\n  drover nodes -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel, c, err := g.readCommand(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			nodes, _, err := c.Nodes(ctx, nil)
			if err != nil {
				return err
			}
			if g.output == "json" {
				return printJSON(cmd.OutOrStdout(), nodes)
			}
			if len(nodes) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "No nodes. Start one with drover agent, or use drover dev.")
				return nil
			}
			allocs, _, err := c.Allocs(ctx, "", "", nil)
			if err != nil {
				return err
			}
			used := map[string]spec.Resources{}
			count := map[string]int{}
			for _, a := range allocs {
				if !a.Terminal() {
					used[a.NodeID] = used[a.NodeID].Add(a.Resources)
					count[a.NodeID]++
				}
			}
			t := newTable(cmd.OutOrStdout(), "ID", "NAME", "STATUS", "DRIVERS", "CPU (MHz)", "MEMORY (MB)", "ALLOCS")
			for _, n := range nodes {
				u := used[n.ID]
				t.row(short(n.ID), n.Name, string(n.Status), strings.Join(n.Drivers, ","),
					fmt.Sprintf("%d/%d", u.CPU, n.Resources.CPU), fmt.Sprintf("%d/%d", u.MemoryMB, n.Resources.MemoryMB),
					strconv.Itoa(count[n.ID]))
			}
			t.flush()
			return nil
		},
	}
}
