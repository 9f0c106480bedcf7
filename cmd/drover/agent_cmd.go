package main

import (
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/drover-org/drover/internal/agent"
	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/driver/dockerdriver"
	"github.com/drover-org/drover/internal/flagfile"
	"github.com/drover-org/drover/internal/httpapi"
	"github.com/drover-org/drover/internal/spec"
)

func newAgentCmd() *cobra.Command {
	var dataDir, httpAddr, logLevel, name, networkIP, datacenter, nodeClass, nodePool string
	var driverNames, serverAddrs []string
	var meta map[string]string
	var docker dockerdriver.Config
	var ports portFlags
	var arts artifactFlags
	var vols hostVolumes
	var tlsF tlsFlags
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run an agent: register this machine and run the tasks placed on it",
		Long: `Agent registers this machine with a server and runs what is placed on it. It
speaks only the servers' HTTP API; given several (--servers a,b,c), it moves
to the next when one cannot be reached. Stopping the agent leaves its tasks
running.`,
		Example: "  drover agent --servers 10.0.0.1:4646,10.0.0.2:4646 --data-dir /var/lib/drover-agent --tls-dir /etc/drover/tls --meta rack=r1",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			log, err := newLogger(logLevel)
			if err != nil {
				return err
			}
			files := raiseFileLimit(log)
			if dataDir == "" {
				return fmt.Errorf("--data-dir is required: the agent keeps its node ID and task directories there")
			}
			if err := ports.check(); err != nil {
				return err
			}
			if err := arts.check(); err != nil {
				return err
			}
			if networkIP != "" && net.ParseIP(networkIP) == nil {
				return fmt.Errorf("--network-ip %q is not an IP address; give the address this node's ports are reached at, such as 10.0.0.5", networkIP)
			}
			drv, err := drivers(driverNames, docker, log)
			if err != nil {
				return err
			}
			defer closeDrivers(drv, log)
			addrs := client.SplitAddrs(serverAddrs...)
			if len(addrs) == 0 {
				addrs = client.SplitAddrs(os.Getenv("DROVER_ADDR"))
			}
			var serveTLS *tls.Config
			opts := client.Options{Link: true} // with TLS: internal/link
			if tlsF.on {
				if serveTLS, opts.TLS, err = agentTLS(tlsF.dirOr(filepath.Join(dataDir, "tls"))); err != nil {
					return err
				}
			}
			c, err := client.NewWithOptions(addrs, opts)
			if err != nil {
				return err
			}
			if name == "" {
				name = nodeName()
			}
			ln, err := listen(httpAddr)
			if err != nil {
				return err
			}
			ag, err := agent.New(agent.Config{DataDir: dataDir, Name: name, Address: tlsF.scheme() + ln.Addr().String(),
				NetworkIP: networkIP, Meta: meta, Datacenter: datacenter, NodeClass: nodeClass, NodePool: nodePool, Drivers: drv, Client: c, Logger: log, Monitor: monitorHub, ReleaseStartupPages: true,
				MinDynamicPort: ports.min, MaxDynamicPort: ports.max, ArtifactTimeout: arts.timeout, ArtifactMaxBytes: arts.maxMB << 20,
				HostVolumes: vols.list(), Bridge: ports.bridge})
			if err != nil {
				return err
			}
			maxConns := connLimit(httpapi.DefaultMaxConns, files, log)
			httpSrv := serveHTTP(ln, ag.Handler(), httpapi.Limits{TLS: serveTLS, MaxConns: maxConns}, log)
			defer shutdownHTTP(httpSrv)
			fmt.Fprintf(os.Stderr, "drover agent %s (node %s): servers %s\n", name, ag.NodeID(), strings.Join(c.Addresses(), ","))
			return ag.Run(signalContext(cmd.Context()))
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "directory for the node ID and task directories")
	tlsF.add(cmd.Flags(), "directory with ca.pem, agent.pem and agent-key.pem from the cluster's TLS directory (default DATA-DIR/tls)")
	cmd.Flags().StringSliceVar(&serverAddrs, "servers", nil, "server addresses, comma-separated or repeated; --server is an alias (default $DROVER_ADDR or "+client.DefaultAddress+")")
	// --server is the same flag under its old name.
	cmd.Flags().SetNormalizeFunc(func(f *pflag.FlagSet, name string) pflag.NormalizedName {
		if name == "server" {
			name = "servers"
		}
		return pflag.NormalizedName(name)
	})
	cmd.Flags().StringVar(&httpAddr, "http-addr", "127.0.0.1:4647", "this agent's HTTP address (serves task logs to the servers)")
	ports.add(cmd.Flags())
	arts.add(cmd.Flags())
	cmd.Flags().StringVar(&networkIP, "network-ip", "", "IP address tasks' ports are reached at (default: the --http-addr host if it is an IP, else the first IPv4 address of an interface)")
	cmd.Flags().StringVar(&name, "name", "", "node name (default: hostname)")
	cmd.Flags().Var(flagfile.NewStringMap(&meta), "meta", "node metadata key=value (repeatable)")
	cmd.Flags().StringVar(&datacenter, "datacenter", spec.DefaultDatacenter, "this node's datacenter: jobs name the datacenters they run in")
	cmd.Flags().StringVar(&nodeClass, "node-class", "", "this node's class, for constraints on ${node.class}")
	cmd.Flags().StringVar(&nodePool, "node-pool", spec.DefaultNodePool, "this node's pool: only jobs of this pool (or of pool \"all\") run here")
	vols.add(cmd.Flags())
	cmd.Flags().StringSliceVar(&driverNames, "drivers", []string{"exec", "raw_exec"}, "task drivers to offer; docker is offered besides when its daemon answers")
	cmd.Flags().StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	dockerFlags(cmd.Flags(), &docker)
	return withConfigFiles(cmd)
}

// artifactFlags bound the fetch of each task artifact on an agent.
type artifactFlags struct {
	timeout time.Duration
	maxMB   int64
}

func (a *artifactFlags) add(fs *pflag.FlagSet) {
	fs.DurationVar(&a.timeout, "artifact-timeout", agent.DefaultArtifactTimeout, "longest a task artifact's fetch may take")
	fs.Int64Var(&a.maxMB, "artifact-max-mb", agent.DefaultArtifactMaxBytes>>20, "most MB a task artifact may download, and an archive unpack to")
}

func (a *artifactFlags) check() error {
	if a.timeout <= 0 || a.maxMB <= 0 {
		return fmt.Errorf("--artifact-timeout %s and --artifact-max-mb %d: give both above 0 (default %s and %d)", a.timeout, a.maxMB, agent.DefaultArtifactTimeout, agent.DefaultArtifactMaxBytes>>20)
	}
	return nil
}
