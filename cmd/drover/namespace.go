package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/spec"
)

// drover's namespaces need no registration: a job's namespace attribute
// puts it in one, and ACL policies grant capabilities per namespace name
// or glob (docs/security.md). So namespace list is what the jobs say;
// apply checks the name and stores nothing (a script that applies a
// namespace before running jobs in it works); delete succeeds for a
// namespace without jobs and refuses, naming them, one with jobs.

func newNamespaceCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "namespace",
		Aliases: []string{"namespaces"},
		Short:   "List the namespaces jobs are in (a job's namespace attribute makes one)",
	}
	cmd.AddCommand(newNamespaceListCmd(g), newNamespaceApplyCmd(), newNamespaceDeleteCmd(g),
		nearest("status", "drover namespace list shows each namespace's jobs; drover status --namespace NAME lists them"),
		nearest("inspect", "drover namespace list shows each namespace's jobs; drover status --namespace NAME lists them"),
	)
	return cmd
}

// namespaceEntry is one line of namespace list.
type namespaceEntry struct {
	Name    string `json:"name"`
	Jobs    int    `json:"jobs"`
	Running int    `json:"running"`
}

func newNamespaceListCmd(g *globals) *cobra.Command {
	return outputs(&cobra.Command{
		Use:   "list",
		Short: "List the namespaces the token may read jobs in, with their jobs and running instances",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel, c, err := g.readCommand(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			jobs, _, err := c.Jobs(ctx, nil)
			if err != nil {
				return err
			}
			by := map[string]*namespaceEntry{spec.DefaultNamespace: {Name: spec.DefaultNamespace}}
			for _, j := range jobs {
				ns := spec.NamespaceOf(j.Namespace)
				e := by[ns]
				if e == nil {
					e = &namespaceEntry{Name: ns}
					by[ns] = e
				}
				e.Jobs++
				e.Running += j.Summary.Running
			}
			var list []*namespaceEntry
			for _, e := range by {
				list = append(list, e)
			}
			slices.SortFunc(list, func(a, b *namespaceEntry) int { return strings.Compare(a.Name, b.Name) })
			out := cmd.OutOrStdout()
			if g.output != "table" {
				return g.print(out, list)
			}
			t := newTable(out, "NAMESPACE", "JOBS", "RUNNING")
			for _, e := range list {
				t.row(e.Name, strconv.Itoa(e.Jobs), strconv.Itoa(e.Running))
			}
			t.flush()
			fmt.Fprintln(out, "\nA job's namespace attribute puts it in a namespace; ACL policies grant capabilities per namespace.")
			return nil
		},
	}, documents...)
}

func newNamespaceApplyCmd() *cobra.Command {
	var description string
	cmd := &cobra.Command{
		Use:   "apply NAME",
		Short: "Check a namespace's name; drover stores nothing: a job submitted in it makes it",
		Long: `drover's namespaces need no registration: a job with namespace = "NAME" in
its job block (or drover run --namespace NAME) is in it, and drover acl
policy apply grants capabilities in it. apply checks that NAME is a valid
namespace name and exits 0, so a script that applies a namespace before
running jobs in it works; nothing is stored (a description is not kept).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if msg := spec.CheckName(args[0]); msg != "" {
				return fmt.Errorf("namespace name %s", msg)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Namespace %q needs no registration: jobs submitted with namespace = %q are in it; nothing was stored.\n", args[0], args[0])
			if description != "" {
				fmt.Fprintln(cmd.ErrOrStderr(), "warning: drover keeps no namespace description; --description was not stored")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&description, "description", "", "accepted for Nomad's scripts; not kept")
	return cmd
}

func newNamespaceDeleteCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Succeed for a namespace without jobs; refuse, naming them, one with jobs",
		Long: `A drover namespace exists while jobs are in it. delete exits 0 when NAME
has no jobs (there is nothing to delete), and 1 naming the jobs when it
has some: purge them first (drover stop --purge JOB). The default
namespace cannot be deleted.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if name == spec.DefaultNamespace {
				return fmt.Errorf("the %s namespace cannot be deleted", spec.DefaultNamespace)
			}
			ctx, cancel, c, err := g.readCommand(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			jobs, _, err := c.Jobs(ctx, &client.QueryOptions{Namespace: name})
			if err != nil {
				return err
			}
			var names []string
			for _, j := range jobs {
				if spec.NamespaceOf(j.Namespace) == name {
					names = append(names, j.Name)
				}
			}
			if len(names) > 0 {
				slices.Sort(names)
				return fmt.Errorf("namespace %q has %d job(s): %s; purge them first (drover stop --purge JOB)", name, len(names), strings.Join(names, ", "))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Namespace %q has no jobs this token may read: nothing to delete.\n", name)
			return nil
		},
	}
}
