package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/drover-org/drover/internal/pki"
)

// defaultTLSDir is where drover tls writes when --dir is not given.
const defaultTLSDir = "drover-tls"

func newTLSCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tls",
		Short: "Make the cluster CA and the certificates for mutual TLS",
		Long: `drover servers, agents and the CLI talk mutual TLS. A cluster CA signs one
certificate per role: server, agent and cli. drover tls init makes them all;
drover tls cert makes a new one for a role (rotation).`,
	}
	cmd.AddCommand(newTLSInitCmd(), newTLSCertCmd())
	return cmd
}

func newTLSInitCmd() *cobra.Command {
	var dir string
	var hosts []string
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Make a CA and the server, agent and cli certificates (only what is missing)",
		Long: `Make a CA and a server, agent and cli certificate in --dir. Only what is
missing is made: an existing CA is kept and signs the missing certificates,
and existing certificates are never overwritten.`,
		Example: `  drover tls init
  drover tls init --dir /etc/drover/tls --host 10.0.0.5 --host drover.example.com
  drover tls init --host 10.0.0.5,10.0.0.6,10.0.0.7`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			created, err := pki.Init(dir, pki.InitOptions{Hosts: hosts})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if len(created) == 0 {
				fmt.Fprintf(out, "nothing to do: %s already has a CA and all certificates\n", dir)
			}
			for _, f := range created {
				fmt.Fprintf(out, "Created %s\n", f)
			}
			printTLSNextSteps(out, dir)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", defaultTLSDir, "directory for the CA and certificates")
	cmd.Flags().StringSliceVar(&hosts, "host", nil, "extra DNS name or IP address for the server and agent certificates (repeat it, or give a comma list)")
	return cmd
}

func printTLSNextSteps(w io.Writer, dir string) {
	fmt.Fprintf(w, `
Next steps: copy files from %[1]s to a TLS directory (DIR) on each machine.
  servers:   copy ca.pem, server.pem, server-key.pem; run drover server --tls-dir DIR
  agents:    copy ca.pem, agent.pem, agent-key.pem;   run drover agent --tls-dir DIR
  operators: copy ca.pem, cli.pem, cli-key.pem;       set DROVER_TLS_DIR=DIR or pass --tls-dir DIR
Keep %[2]s offline: whoever has it can make certificates for the cluster.
It is needed only to make certificates: drover tls init and drover tls cert.
`, dir, filepath.Join(dir, pki.CAKeyFile))
}

func newTLSCertCmd() *cobra.Command {
	var dir string
	var hosts []string
	roles := []string{pki.RoleServer, pki.RoleAgent, pki.RoleCLI}
	cmd := &cobra.Command{
		Use:   "cert ROLE",
		Short: "Make a new certificate and key for a role, replacing the old ones (rotation)",
		Long: `Make a new certificate and key for ROLE (server, agent or cli), signed by the
CA in --dir, and replace the role's files. Needs ca-key.pem.

Extra hosts are not remembered from drover tls init: give the same --host
flags again. drover processes notice replaced files within a second and use
the new certificate with no restart.`,
		Example: `  drover tls cert server --host 10.0.0.5
  drover tls cert cli --dir /etc/drover/tls`,
		Args:      cobra.ExactArgs(1),
		ValidArgs: roles,
		RunE: func(cmd *cobra.Command, args []string) error {
			role := args[0]
			if !slices.Contains(roles, role) {
				return fmt.Errorf("unknown role %q: want %s", role, strings.Join(roles, ", "))
			}
			if role == pki.RoleCLI && len(hosts) > 0 {
				return fmt.Errorf("--host applies to server and agent certificates only; a cli certificate carries no hosts")
			}
			if err := pki.Issue(dir, role, pki.InitOptions{Hosts: hosts}); err != nil {
				return err
			}
			f := pki.DirFiles(dir, role)
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "Wrote %s\nWrote %s\n", f.Cert, f.Key)
			// Show the names, as extra hosts are not remembered from init.
			if pair, err := tls.LoadX509KeyPair(f.Cert, f.Key); err == nil && pair.Leaf != nil {
				names := slices.Clone(pair.Leaf.DNSNames)
				for _, ip := range pair.Leaf.IPAddresses {
					names = append(names, ip.String())
				}
				fmt.Fprintf(out, "The certificate is for %s, valid until %s.\n", strings.Join(names, ", "), pair.Leaf.NotAfter.Format("2006-01-02"))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", defaultTLSDir, "directory holding the CA (ca.pem and ca-key.pem)")
	cmd.Flags().StringSliceVar(&hosts, "host", nil, "extra DNS name or IP address for a server or agent certificate (repeat it, or give a comma list)")
	return cmd
}
