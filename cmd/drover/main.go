// Command drover is the whole of drover in one binary: the server, the
// agent, the all-in-one dev mode, and the CLI verbs. This package is wiring
// only; each subcommand has its own file.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/pki"
	"github.com/drover-org/drover/internal/spec"
)

// Exit codes, as Nomad's: 0 success, 1 failure, 2 cannot be placed.
const (
	exitFailure     = 1
	exitUnplaceable = 2
)

// exitError carries a specific exit code. silent means the command already
// printed what the user needs.
type exitError struct {
	code   int
	err    error
	silent bool
}

func (e *exitError) Error() string { return e.err.Error() }

func main() {
	root := newRoot()
	if err := execute(root, os.Args[1:]); err != nil {
		code := exitFailure
		var ee *exitError
		if errors.As(err, &ee) {
			code = ee.code
			if ee.silent {
				os.Exit(code)
			}
		}
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(code)
	}
}

// globals are the flags every command has.
type globals struct {
	address string
	output  string
	tlsDir  string
	token   string
	// The TLS files one by one (each wins over --tls-dir's), and the name
	// the server's certificate must carry.
	caCert, clientCert, clientKey, tlsServerName string
	// namespace is --namespace or $DROVER_NAMESPACE: the namespace of a
	// submitted job that names none, and the filter of job lists.
	namespace string
}

// jobNamespace puts a job whose file names no namespace into --namespace;
// a file that names another one is an error rather than a silent move.
func (g *globals) jobNamespace(job *spec.Job) error {
	ns := g.namespace
	if ns == "" {
		ns = os.Getenv("DROVER_NAMESPACE")
	}
	if ns == "" || ns == job.Namespace {
		return nil
	}
	if job.Namespace != "" && job.Namespace != spec.DefaultNamespace {
		return fmt.Errorf("job %q names namespace %q, but --namespace (or DROVER_NAMESPACE) is %q: change one of them", job.Name, job.Namespace, ns)
	}
	job.Namespace = ns
	return nil
}

// listNamespace is the namespace a job list is narrowed to ("" all).
func (g *globals) listNamespace() string {
	if g.namespace != "" {
		return g.namespace
	}
	return os.Getenv("DROVER_NAMESPACE")
}

func newRoot() *cobra.Command {
	g := &globals{}
	var showVersion bool
	root := &cobra.Command{
		Use:   "drover",
		Short: "drover places jobs on machines and keeps them running",
		Long: `drover is a cluster workload orchestrator: declare jobs (services that run
until stopped, batch jobs that run to completion), and drover places them on
machines, restarts what crashes, and says why whenever it cannot.

Start everything on this machine:  drover dev examples/hello.hcl
Then, in another terminal:         drover status hello`,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if showVersion {
				return g.printVersion(cmd)
			}
			return cmd.Help()
		},
		// Args: refuseUnknownCommands sets it, as on every command with subcommands.
		// -o is taken or refused before any command runs.
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error { return checkOutput(cmd, g.output) },
	}
	outputs(root, documents...) // drover --version -o json
	root.Flags().BoolVarP(&showVersion, "version", "v", false, "print the version (as drover version does)")
	root.PersistentFlags().StringVar(&g.address, "address", "", "server address, or a comma-separated list to fail over between (default $DROVER_ADDR or https://"+client.DefaultAddress+"; an address without a scheme is https)")
	root.PersistentFlags().StringVarP(&g.output, "output", "o", "table", "output format: table; json or yaml for the commands that print what they read (status, ps, nodes, ...; logs and events: json, one object per line); others refuse them")
	root.PersistentFlags().StringVar(&g.tlsDir, "tls-dir", "", "directory with ca.pem, cli.pem and cli-key.pem from drover tls init (default $DROVER_TLS_DIR, or what a drover dev on this machine left)")
	root.PersistentFlags().StringVar(&g.caCert, "ca-cert", "", "PEM file of the CA that signed the servers' certificates, the cluster's ca.pem (default $DROVER_CACERT; wins over --tls-dir's)")
	root.PersistentFlags().StringVar(&g.clientCert, "client-cert", "", "PEM client certificate to present, such as cli.pem (default $DROVER_CLIENT_CERT; with --client-key)")
	root.PersistentFlags().StringVar(&g.clientKey, "client-key", "", "PEM private key of --client-cert (default $DROVER_CLIENT_KEY)")
	root.PersistentFlags().StringVar(&g.tlsServerName, "tls-server-name", "", "the name the server's certificate must carry (default $DROVER_TLS_SERVER_NAME, else "+pki.ServerName+", which drover's server certificates carry)")
	root.PersistentFlags().StringVar(&g.namespace, "namespace", "", "namespace of a submitted job whose file names none, and of job lists (default $DROVER_NAMESPACE; lists: every namespace the token may read)")
	root.PersistentFlags().StringVar(&g.token, "token", "", "ACL token (default $DROVER_TOKEN, or a drover dev's own token on this machine)")
	root.AddCommand(
		newRunCmd(g), newPlanCmd(g), newStatusCmd(g), newPsCmd(g), newNodesCmd(g), newNodeCmd(g), newServicesCmd(g), newLogsCmd(g), newStopCmd(g),
		newHistoryCmd(g), newRevertCmd(g), newScaleCmd(g), newRestartCmd(g), newDeploymentCmd(g),
		newDispatchCmd(g), newPeriodicCmd(g),
		newValidateCmd(g), newInitCmd(), newDevCmd(), newServerCmd(), newAgentCmd(), newServersCmd(g),
		newACLCmd(g), newTLSCmd(), newEventsCmd(g), newExecCmd(g), newVersionCmd(g),
		newJobCmd(g), newAllocCmd(g), newOperatorCmd(g), newUICmd(g), newSystemCmd(g), newMonitorCmd(g), newNamespaceCmd(g),
	)
	root.InitDefaultCompletionCmd()
	registerCompletions(root, g)
	refuseUnknownCommands(root)
	return root
}

// clientConfig is where the CLI finds the cluster and its credentials:
// flags, then the environment (DROVER_ADDR, DROVER_TLS_DIR, DROVER_CACERT,
// DROVER_CLIENT_CERT, DROVER_CLIENT_KEY, DROVER_TLS_SERVER_NAME,
// DROVER_TOKEN), then what a drover dev on this machine left for its
// address.
func (g *globals) clientConfig() client.Config {
	return client.Config{Addresses: client.SplitAddrs(g.address), TLSDir: g.tlsDir, Token: g.token,
		CACert: g.caCert, ClientCert: g.clientCert, ClientKey: g.clientKey, ServerName: g.tlsServerName}.Resolve()
}

// client returns an API client for clientConfig; a comma-separated list
// of addresses fails over.
func (g *globals) client() (*client.Client, error) {
	return g.clientConfig().Client()
}

// readCommand is the start of every read command: a client, and a
// context that bounds the call (root has checked -o already).
func (g *globals) readCommand(cmd *cobra.Command) (context.Context, context.CancelFunc, *client.Client, error) {
	c, err := g.client()
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), readTimeout)
	return ctx, cancel, c, nil
}

// readTimeout bounds a read command's calls: every wait has a timeout.
const readTimeout = 30 * time.Second
