package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/drover-org/drover/internal/acl"
	"github.com/drover-org/drover/internal/inputlimit"
	"github.com/drover-org/drover/internal/spec"
)

// newACLCmd is `drover acl`: the bootstrap, tokens and policies.
func newACLCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "acl",
		Short: "Manage ACL tokens and policies",
		Long: `A server runs with ACLs on unless started with --acl=false: every operator
request needs a token (--token or $DROVER_TOKEN). Policies grant capabilities
per namespace (read, submit, logs) and on nodes (read, write); a token may do
what its policies grant. A management token may do everything.

Start with "drover acl bootstrap" once per cluster: it prints the first
management token.`,
	}
	token := &cobra.Command{Use: "token", Short: "Create, list and delete tokens"}
	token.AddCommand(newACLTokenCreateCmd(g), newACLTokenListCmd(g), newACLTokenDeleteCmd(g), newACLTokenSelfCmd(g))
	policy := &cobra.Command{Use: "policy", Short: "Apply, list, read and delete policies"}
	policy.AddCommand(newACLPolicyApplyCmd(g), newACLPolicyListCmd(g), newACLPolicyReadCmd(g), newACLPolicyDeleteCmd(g))
	cmd.AddCommand(newACLBootstrapCmd(g), token, policy)
	return cmd
}

func newACLBootstrapCmd(g *globals) *cobra.Command {
	return outputs(&cobra.Command{
		Use:   "bootstrap",
		Short: "Make the cluster's first management token (once)",
		Long: `Bootstrap asks the servers for the first management token. It works once per
cluster; the secret is printed once and never again: keep it safe, then make
narrower tokens for people and tools with "drover acl token create".`,
		Example: "  drover acl bootstrap\n  export DROVER_TOKEN=<the secret it printed>",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel, c, err := g.readCommand(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			t, err := c.ACLBootstrap(ctx)
			if err != nil {
				return err
			}
			if g.output != "table" {
				return g.print(cmd.OutOrStdout(), t)
			}
			printToken(cmd, t)
			fmt.Fprintln(cmd.ErrOrStderr(), "This is a management token: it may do everything. Its secret is shown only now.\nUse it with: export DROVER_TOKEN=<secret>")
			return nil
		},
	}, documents...)
}

func printToken(cmd *cobra.Command, t *spec.ACLToken) {
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "Accessor ID: %s\n", t.AccessorID)
	if t.SecretID != "" {
		fmt.Fprintf(w, "Secret ID:   %s\n", t.SecretID)
	}
	fmt.Fprintf(w, "Name:        %s\n", t.Name)
	fmt.Fprintf(w, "Type:        %s\n", t.Type)
	fmt.Fprintf(w, "Policies:    %s\n", dash(strings.Join(t.Policies, ", ")))
	fmt.Fprintf(w, "Created:     %s\n", t.CreateTime.Format("2006-01-02 15:04:05 MST"))
}

func newACLTokenCreateCmd(g *globals) *cobra.Command {
	var name, typ string
	var policies []string
	cmd := &cobra.Command{
		Use:     "create",
		Short:   "Create a token; its secret is printed once",
		Example: "  drover acl token create --name ci --policy deploy-web\n  drover acl token create --name ops --type management",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel, c, err := g.readCommand(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			t, err := c.CreateACLToken(ctx, &spec.ACLTokenRequest{Name: name, Type: typ, Policies: policies})
			if err != nil {
				return err
			}
			if g.output != "table" {
				return g.print(cmd.OutOrStdout(), t)
			}
			printToken(cmd, t)
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "whose token this is (required)")
	cmd.Flags().StringVar(&typ, "type", spec.TokenClient, "client (may do what its policies grant) or management (may do everything)")
	cmd.Flags().StringSliceVar(&policies, "policy", nil, "policy to attach; repeat or comma-separate")
	cmd.MarkFlagRequired("name")
	return outputs(cmd, documents...)
}

func newACLTokenListCmd(g *globals) *cobra.Command {
	return outputs(&cobra.Command{
		Use:   "list",
		Short: "List tokens (never their secrets)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel, c, err := g.readCommand(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			ts, err := c.ACLTokens(ctx)
			if err != nil {
				return err
			}
			if g.output != "table" {
				return g.print(cmd.OutOrStdout(), ts)
			}
			t := newTable(cmd.OutOrStdout(), "NAME", "TYPE", "POLICIES", "ACCESSOR ID", "CREATED")
			for _, tok := range ts {
				t.row(tok.Name, tok.Type, dash(strings.Join(tok.Policies, ",")), tok.AccessorID, tok.CreateTime.Format("2006-01-02 15:04"))
			}
			t.flush()
			return nil
		},
	}, documents...)
}

func newACLTokenDeleteCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "delete ACCESSOR_ID",
		Short:   "Delete a token: it stops working on every server within a second",
		Example: "  drover acl token delete 6a1f0c2e-...",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel, c, err := g.readCommand(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			if err := c.DeleteACLToken(ctx, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Token %s deleted.\n", args[0])
			return nil
		},
	}
}

func newACLTokenSelfCmd(g *globals) *cobra.Command {
	return outputs(&cobra.Command{
		Use:   "self",
		Short: "Show the token in use",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel, c, err := g.readCommand(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			t, err := c.ACLSelf(ctx)
			if err != nil {
				return err
			}
			if g.output != "table" {
				return g.print(cmd.OutOrStdout(), t)
			}
			printToken(cmd, t)
			return nil
		},
	}, documents...)
}

func newACLPolicyApplyCmd(g *globals) *cobra.Command {
	var description string
	cmd := &cobra.Command{
		Use:   "apply NAME FILE",
		Short: "Create or replace a policy from an HCL file ('-' reads stdin)",
		Long: `Apply stores a policy. Its file grants capabilities per namespace (a name, or
a glob with '*') and on nodes:

  namespace "default" { capabilities = ["read", "submit", "logs", "exec"] }
  namespace "team-*"  { capabilities = ["read"] }
  node { capabilities = ["read"] }

Namespace capabilities: ` + strings.Join(acl.NamespaceCapabilities, ", ") + `. Node capabilities: ` + strings.Join(acl.NodeCapabilities, ", ") + `.
Tokens that carry the policy get the change within a second.`,
		Example: "  drover acl policy apply deploy-web deploy-web.hcl",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var src []byte
			var err error
			if args[1] == "-" {
				src, err = readAllLimited(cmd.InOrStdin())
			} else {
				src, err = os.ReadFile(args[1])
			}
			if err != nil {
				return fmt.Errorf("cannot read policy file: %w", err)
			}
			// Check here first: the error then names the file and line.
			if _, err := acl.Parse(args[1], src); err != nil {
				return err
			}
			ctx, cancel, c, err := g.readCommand(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			p, err := c.PutACLPolicy(ctx, &spec.ACLPolicy{Name: args[0], Description: description, Rules: string(src)})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Policy %q applied (index %d).\n", p.Name, p.ModifyIndex)
			return nil
		},
	}
	cmd.Flags().StringVar(&description, "description", "", "what the policy is for")
	return cmd
}

func newACLPolicyListCmd(g *globals) *cobra.Command {
	return outputs(&cobra.Command{
		Use:   "list",
		Short: "List policies",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel, c, err := g.readCommand(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			ps, err := c.ACLPolicies(ctx)
			if err != nil {
				return err
			}
			if g.output != "table" {
				return g.print(cmd.OutOrStdout(), ps)
			}
			t := newTable(cmd.OutOrStdout(), "NAME", "DESCRIPTION")
			for _, p := range ps {
				t.row(p.Name, dash(p.Description))
			}
			t.flush()
			return nil
		},
	}, documents...)
}

func newACLPolicyReadCmd(g *globals) *cobra.Command {
	return outputs(&cobra.Command{
		Use:   "read NAME",
		Short: "Print a policy's rules",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel, c, err := g.readCommand(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			p, err := c.ACLPolicy(ctx, args[0])
			if err != nil {
				return err
			}
			if g.output != "table" {
				return g.print(cmd.OutOrStdout(), p)
			}
			fmt.Fprint(cmd.OutOrStdout(), p.Rules)
			if !strings.HasSuffix(p.Rules, "\n") {
				fmt.Fprintln(cmd.OutOrStdout())
			}
			return nil
		},
	}, documents...)
}

func newACLPolicyDeleteCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a policy: tokens that carry it lose what it granted",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel, c, err := g.readCommand(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			if err := c.DeleteACLPolicy(ctx, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Policy %q deleted.\n", args[0])
			return nil
		},
	}
}

// readAllLimited reads at most one byte past inputlimit.MaxBytes: enough
// for acl.Parse to refuse a larger policy.
func readAllLimited(r io.Reader) ([]byte, error) {
	return io.ReadAll(io.LimitReader(r, inputlimit.MaxBytes+1))
}
