package main

import (
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/drover-org/drover/internal/spec"
)

func newServicesCmd(g *globals) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "services [NAME]",
		Short: "List the service catalog, or one service's instances and their checks",
		Long: `Services lists the services tasks register, with how many instances are
healthy. With a NAME it lists that service's healthy instances, the ones DNS
serves as NAME.service.drover; --all adds the pending and unhealthy ones,
with each check's latest output to say why.`,
		Example: "  drover services\n  drover services web --all\n  drover services web -o json",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel, c, err := g.readCommand(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			out := cmd.OutOrStdout()
			if len(args) == 0 {
				sums, _, err := c.Services(ctx, nil)
				if err != nil {
					return err
				}
				if g.output != "table" {
					return g.print(out, sums)
				}
				printServices(out, sums)
				return nil
			}
			// The table reads every instance, to say how many are not shown.
			ins, _, err := c.Service(ctx, args[0], all || g.output == "table", nil)
			if err != nil {
				return err
			}
			if g.output != "table" {
				return g.print(out, ins)
			}
			printInstances(out, args[0], ins, all)
			return nil
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "include pending and unhealthy instances")
	return outputs(cmd, documents...)
}

func printServices(out io.Writer, sums []spec.ServiceSummary) {
	if len(sums) == 0 {
		fmt.Fprintln(out, "No services. A task registers one with a service block; see docs/services.md.")
		return
	}
	t := newTable(out, "NAME", "HEALTHY", "TAGS")
	for _, s := range sums {
		t.row(s.Name, fmt.Sprintf("%d/%d", s.Healthy, s.Instances), dash(strings.Join(s.Tags, ",")))
	}
	t.flush()
}

// printInstances prints ins (every instance); without all, the healthy
// ones and a count of the others.
func printInstances(out io.Writer, name string, ins []spec.ServiceInstance, all bool) {
	var shown []spec.ServiceInstance
	for _, in := range ins {
		if all || in.Health == spec.HealthHealthy {
			shown = append(shown, in)
		}
	}
	if len(shown) > 0 {
		t := newTable(out, "ADDRESS", "HEALTH", "ALLOC", "NODE", "CHECKS")
		for _, in := range shown {
			addr := in.Address
			if in.Port != 0 {
				addr = net.JoinHostPort(in.Address, strconv.Itoa(in.Port))
			}
			t.row(addr, string(in.Health), short(in.AllocID)+" "+in.AllocName, dash(in.NodeName), dash(checksLine(in.Checks)))
		}
		t.flush()
	}
	if hidden := len(ins) - len(shown); hidden > 0 {
		if len(shown) == 0 {
			fmt.Fprintf(out, "No healthy instance of %s: %d pending or unhealthy; see drover services %s --all\n", name, hidden, name)
		} else {
			fmt.Fprintf(out, "\n%d more pending or unhealthy; see --all\n", hidden)
		}
	}
}

// checksLine is each check's status and latest output: "alive passing
// (HTTP 200), port failing (connection refused)".
func checksLine(checks []spec.CheckState) string {
	parts := make([]string, len(checks))
	for i, cs := range checks {
		parts[i] = cs.Check + " " + string(cs.Status)
		if cs.Output != "" {
			parts[i] += " (" + cs.Output + ")"
		}
	}
	return strings.Join(parts, ", ")
}
