package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/drover-org/drover/internal/spec"
)

// drover's namespaces need no registration: a job's namespace attribute
// puts it in one, and ACL policies grant capabilities per namespace name
// or glob (docs/security.md). So namespace list is what the jobs say, and
// apply and delete answer with what does their work.

func newNamespaceCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "namespace",
		Aliases: []string{"namespaces"},
		Short:   "List the namespaces jobs are in (a job's namespace attribute makes one)",
	}
	cmd.AddCommand(newNamespaceListCmd(g),
		nearest("apply", `drover namespaces need no registration: a job with namespace = "NAME" in its job block (or drover run --namespace NAME) makes one, and drover acl policy apply grants capabilities in it`),
		nearest("delete", "drover namespaces need no registration: a namespace is gone once no job is in it (drover stop --purge JOB for each; drover status --namespace NAME lists them)"),
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
