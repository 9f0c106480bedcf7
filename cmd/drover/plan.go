package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/spf13/cobra"

	"github.com/drover-org/drover/internal/planview"
	"github.com/drover-org/drover/internal/spec"
)

func newPlanCmd(g *globals) *cobra.Command {
	var without []string
	var vars jobVars
	cmd := &cobra.Command{
		Use:   "plan [FILE|-] [--without NODE...]",
		Short: "Show what submitting a job, or losing nodes, would do, without doing it",
		Long: `Plan asks a server what the scheduler would do if the job in FILE (HCL, JSON
or YAML; "-" reads stdin) were submitted now: which fields change, which
instances would be created (+), stopped (-), updated in place (~), which other
jobs' instances would be evicted (!), and what would not be placed, with the
reasons and hints, and warns, at their file:line:col, of constraints,
affinities, spreads and interpolations (${attr.x} in env, config, service
names and tags) on node attributes or meta keys that no current node has. Nothing is written. It ends with the drover run command
that submits exactly this plan: if the job changes in between, that run is
refused.

--without NODE (names or IDs; repeat it, or list several) plans as if those
nodes were down. Without a FILE it checks every job: where the instances on
those nodes would go, and what would not fit. Every argument after
--without that is not a file or "-" is taken as one more node.

Exit status: 0 everything would be placed; 1 error; 2 something would not be
placed (as drover run's 2).`,
		Example: `  drover plan examples/hello.hcl
  drover plan examples/hello.hcl --without n1
  drover plan --without n1 n2
  drover plan examples/hello.hcl -o json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			file, more, err := planArgs(args, len(without) > 0)
			if err != nil {
				return err
			}
			without = append(without, more...)
			ctx, cancel, c, err := g.readCommand(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			out := cmd.OutOrStdout()
			if file == "" {
				p, err := c.PlanWithout(ctx, without)
				if err != nil {
					return err
				}
				if g.output != "table" {
					err = g.print(out, p)
				} else {
					planview.NodeLoss(out, p)
				}
				return planVerdict(err, p.Fits())
			}
			// The nodes first: the decoder warns of the node attributes
			// and meta keys the job reads that none of them has.
			nodes, _, err := c.Nodes(ctx, nil)
			if err != nil {
				return err
			}
			opts := vars.options()
			if len(nodes) > 0 {
				opts.NodeHas = func(name string) bool {
					return slices.ContainsFunc(nodes, func(n *spec.Node) bool {
						_, ok := n.Value(name)
						return ok
					})
				}
			}
			job, err := readJob(file, cmd.InOrStdin(), cmd.ErrOrStderr(), opts)
			if err == nil {
				err = g.jobNamespace(job)
			}
			if err != nil {
				return err
			}
			p, err := c.PlanJob(ctx, job, without, true)
			if err != nil {
				return err
			}
			if g.output != "table" {
				err = g.print(out, p)
			} else {
				printJobPlan(out, p, file)
			}
			return planVerdict(err, p.Fits())
		},
	}
	cmd.Flags().StringSliceVar(&without, "without", nil, "plan as if these nodes (names or IDs) were down")
	vars.add(cmd)
	return outputs(cmd, documents...)
}

// planArgs tells the job file from more --without nodes: one file (an
// existing file, or "-") at most, and other arguments only after --without.
func planArgs(args []string, withoutGiven bool) (file string, nodes []string, err error) {
	for _, a := range args {
		if st, err := os.Stat(a); a == "-" || (err == nil && !st.IsDir()) {
			if file != "" {
				return "", nil, fmt.Errorf("plan takes one job file, got %s and %s", file, a)
			}
			file = a
			continue
		}
		if !withoutGiven {
			return "", nil, fmt.Errorf("cannot read job file %s: no such file (to plan without nodes: drover plan --without NODE...)", a)
		}
		nodes = append(nodes, a)
	}
	if file == "" && !withoutGiven {
		return "", nil, errors.New("give a job file to plan, or --without NODE... to check losing nodes")
	}
	return file, nodes, nil
}

// planVerdict is the exit status: 2 when something would not be placed.
func planVerdict(err error, fits bool) error {
	if err != nil || fits {
		return err
	}
	return &exitError{code: exitUnplaceable, err: errors.New("would not be placed"), silent: true}
}

func printJobPlan(w io.Writer, p *spec.JobPlan, file string) {
	planview.Job(w, p)
	fmt.Fprintln(w)
	if p.CheckIndex > 0 {
		fmt.Fprintf(w, "To submit exactly this plan: drover run --check-index %d %s\n", p.CheckIndex, file)
	} else {
		fmt.Fprintf(w, "To submit this plan: drover run %s (the job is new: there is no index to check)\n", file)
	}
	if !p.Fits() {
		fmt.Fprintln(w, "Some instances would not be placed: they would wait until room appears. Lower what they need, or add room.")
	}
}
