package main

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/spec"
)

// Shell completion of names: `drover completion bash|zsh|fish|powershell`
// writes the script; the shell then asks `drover __complete ...`, which
// lists the cluster's job, node, instance and namespace names through the
// API. Each question is bounded (completeTimeout), and a cluster that does
// not answer, or refuses the token, completes nothing and prints nothing.

// completeTimeout bounds one completion's API calls: a shell waits on it.
const completeTimeout = 2 * time.Second

// names is one kind of name to complete, read from the API.
type names func(ctx context.Context, c *client.Client) ([]string, error)

func jobNames(ctx context.Context, c *client.Client) ([]string, error) {
	js, _, err := c.Jobs(ctx, nil)
	var out []string
	for _, j := range js {
		out = append(out, j.Name)
	}
	return out, err
}

func nodeNames(ctx context.Context, c *client.Client) ([]string, error) {
	ns, _, err := c.Nodes(ctx, nil)
	var out []string
	for _, n := range ns {
		out = append(out, n.Name)
	}
	return out, err
}

// allocIDs are the live instances' IDs, shortened as tables show them
// (every command takes a unique prefix), each described by its name.
func allocIDs(ctx context.Context, c *client.Client) ([]string, error) {
	as, _, err := c.Allocs(ctx, "", "", nil)
	var out []string
	for _, a := range as {
		if !a.Terminal() {
			out = append(out, short(a.ID)+"\t"+a.Name)
		}
	}
	return out, err
}

// namespaceNames are the namespaces the token sees jobs in, and default.
func namespaceNames(ctx context.Context, c *client.Client) ([]string, error) {
	js, _, err := c.Jobs(ctx, nil)
	out := []string{spec.DefaultNamespace}
	for _, j := range js {
		out = append(out, spec.NamespaceOf(j.Namespace))
	}
	return out, err
}

// complete returns a completion function offering what list returns for
// the argument at position pos (the first is 0), and nothing after it.
func (g *globals) complete(pos int, list names) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) != pos {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return g.completeNow(cmd, list, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// completeNow asks the API for list's names that start with prefix;
// nothing when it fails.
func (g *globals) completeNow(cmd *cobra.Command, list names, prefix string) []cobra.Completion {
	c, err := g.client()
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), completeTimeout)
	defer cancel()
	all, err := list(ctx, c)
	if err != nil {
		return nil
	}
	var out []cobra.Completion
	for _, n := range all {
		if strings.HasPrefix(n, prefix) && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

func (g *globals) completeAllocs(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) == 1 && cmd.Name() == "signal" {
		var out []cobra.Completion
		for _, s := range spec.Signals {
			if strings.HasPrefix(s, strings.ToUpper(toComplete)) {
				out = append(out, s)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
	return g.complete(0, allocIDs)(cmd, args, toComplete)
}

// completions says which commands complete which names in their first
// argument, by command path below drover. The alloc verbs set theirs.
var completions = map[string]names{
	"status": jobNames, "stop": jobNames, "history": jobNames, "restart": jobNames, "revert": jobNames, "scale": jobNames,
	"logs": jobNames, "exec": jobNames,
	"job status": jobNames, "job stop": jobNames, "job history": jobNames, "job restart": jobNames,
	"job revert": jobNames, "job inspect": jobNames, "job scale": jobNames,
	"deployment status": jobNames, "deployment promote": jobNames, "deployment fail": jobNames,
	"deployment pause": jobNames, "deployment resume": jobNames,
	"nodes": nodeNames, "node status": nodeNames, "node drain": nodeNames, "node eligibility": nodeNames,
}

// registerCompletions gives every command in completions its completion,
// and --namespace the namespaces.
func registerCompletions(root *cobra.Command, g *globals) {
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		path := strings.TrimPrefix(c.CommandPath(), root.Name()+" ")
		if list, ok := completions[path]; ok && c.ValidArgsFunction == nil {
			c.ValidArgsFunction = g.complete(0, list)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	root.RegisterFlagCompletionFunc("namespace", func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return g.completeNow(cmd, namespaceNames, toComplete), cobra.ShellCompDirectiveNoFileComp
	})
}
