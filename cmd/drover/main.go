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
	}
	root.Flags().BoolVarP(&showVersion, "version", "v", false, "print the version (as drover version does)")
	root.PersistentFlags().StringVar(&g.address, "address", "", "server address, or a comma-separated list to fail over between (default $DROVER_ADDR or "+client.DefaultAddress+")")
	root.PersistentFlags().StringVarP(&g.output, "output", "o", "table", "output format for read commands: table or json")
	root.PersistentFlags().StringVar(&g.tlsDir, "tls-dir", "", "directory with ca.pem, cli.pem and cli-key.pem from drover tls init (default $DROVER_TLS_DIR, or what a drover dev on this machine left)")
	root.PersistentFlags().StringVar(&g.namespace, "namespace", "", "namespace of a submitted job whose file names none, and of job lists (default $DROVER_NAMESPACE; lists: every namespace the token may read)")
	root.PersistentFlags().StringVar(&g.token, "token", "", "ACL token (default $DROVER_TOKEN, or a drover dev's own token on this machine)")
	root.AddCommand(
		newRunCmd(g), newPlanCmd(g), newStatusCmd(g), newPsCmd(g), newNodesCmd(g), newNodeCmd(g), newServicesCmd(g), newLogsCmd(g), newStopCmd(g),
		newHistoryCmd(g), newRevertCmd(g), newRestartCmd(g), newDeploymentCmd(g),
		newValidateCmd(g), newInitCmd(), newDevCmd(), newServerCmd(), newAgentCmd(), newServersCmd(g),
		newACLCmd(g), newTLSCmd(), newEventsCmd(g), newExecCmd(g), newVersionCmd(g),
		newJobCmd(g), newAllocCmd(g), newUICmd(g),
	)
	root.InitDefaultCompletionCmd()
	refuseUnknownCommands(root)
	return root
}

// clientConfig is where the CLI finds the cluster and its credentials:
// flags, then DROVER_ADDR, DROVER_TLS_DIR and DROVER_TOKEN, then what a
// drover dev on this machine left for its address.
func (g *globals) clientConfig() client.Config {
	return client.Config{Addresses: client.SplitAddrs(g.address), TLSDir: g.tlsDir, Token: g.token}.Resolve()
}

// client returns an API client for clientConfig; a comma-separated list
// of addresses fails over.
func (g *globals) client() (*client.Client, error) {
	return g.clientConfig().Client()
}

// readCommand is the start of every read command: a valid -o, a client,
// and a context that bounds the call.
func (g *globals) readCommand(cmd *cobra.Command) (context.Context, context.CancelFunc, *client.Client, error) {
	if err := g.checkOutput(); err != nil {
		return nil, nil, nil, err
	}
	c, err := g.client()
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), readTimeout)
	return ctx, cancel, c, nil
}

// readTimeout bounds a read command's calls: every wait has a timeout.
const readTimeout = 30 * time.Second

func (g *globals) checkOutput() error {
	switch g.output {
	case "table", "json":
		return nil
	}
	return fmt.Errorf("unknown output format %q: use -o table or -o json", g.output)
}
