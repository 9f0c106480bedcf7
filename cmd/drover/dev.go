package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-org/drover/internal/agent"
	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/driver/dockerdriver"
	"github.com/drover-org/drover/internal/httpapi"
	"github.com/drover-org/drover/internal/metrics"
	"github.com/drover-org/drover/internal/registry"
	"github.com/drover-org/drover/internal/server"
	"github.com/drover-org/drover/internal/spec"
)

func newDevCmd() *cobra.Command {
	var dataDir, httpAddr, logLevel, pprofAddr, dnsAddr string
	var memory memoryFlags
	var ports portFlags
	var arts artifactFlags
	var vols hostVolumes
	var nodeTTL time.Duration
	var docker dockerdriver.Config
	var tlsF tlsFlags
	var aclOn bool
	var vars jobVars
	cmd := &cobra.Command{
		Use:   "dev [FILE...]",
		Short: "Run a server, an agent and an embedded etcd in one process, and submit FILEs",
		Long: `Dev runs all of drover in one process: an embedded etcd member, a server and
an agent on this machine, with the exec and raw_exec drivers, and docker when
its daemon answers. It submits the given job files and runs until Ctrl-C or
SIGTERM, which stops the tasks.

Dev is secure as a server is: mutual TLS and ACLs. It makes its certificates
(DATA-DIR/tls) and a management token (DATA-DIR/token) and leaves a note where
the drover CLI on this machine finds both, so "drover status" just works.

Without --data-dir, state lives in a temporary directory removed on exit; with
it, jobs and their instances survive a restart.`,
		Example: "  drover dev examples/hello.hcl\n  drover dev --data-dir /tmp/drover --http-addr 127.0.0.1:0",
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := memory.check(); err != nil {
				return err
			}
			if err := ports.check(); err != nil {
				return err
			}
			if err := arts.check(); err != nil {
				return err
			}
			// Read every file first: a typo should not cost a cluster start.
			var jobs []*spec.Job
			var note client.Local // for the CLI on this machine
			for _, path := range args {
				job, err := readJob(path, cmd.InOrStdin(), cmd.ErrOrStderr(), vars.options())
				if err != nil {
					return &exitError{code: exitFailure, err: err}
				}
				jobs = append(jobs, job)
			}
			log, err := newLogger(logLevel)
			if err != nil {
				return err
			}
			files := raiseFileLimit(log)
			if dataDir == "" {
				tmp, err := os.MkdirTemp("", "drover-dev-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(tmp)
				dataDir = tmp
			}
			ctx := signalContext(cmd.Context())
			if pprofAddr != "" {
				servePprof(pprofAddr, log)
			}
			emb, err := registry.StartEmbedded(ctx, registry.EmbeddedConfig{
				DataDir: filepath.Join(dataDir, "etcd"), Logger: log,
				// Free ports: dev must not collide with an etcd already here.
				ClientAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0",
			})
			if err != nil {
				return fmt.Errorf("starting the embedded etcd in %s: %w", dataDir, err)
			}
			defer emb.Close()
			reg, err := registry.Open(ctx, emb.Endpoints(), log)
			if err != nil {
				return err
			}
			defer reg.Close()

			ln, err := listen(httpAddr)
			if err != nil {
				return err
			}
			addr := tlsF.scheme() + ln.Addr().String()
			// Two clients: the agent's, with an agent certificate, and the
			// operator's (a CLI certificate and a management token) with
			// which dev waits for its node and submits the files.
			limits := httpapi.Limits{MaxConns: connLimit(httpapi.DefaultMaxConns, files, log)}
			agentOpts := client.Options{Link: true} // with TLS: internal/link
			op := client.Config{Addresses: []string{addr}}
			srvCfg := server.Config{Registry: reg, ID: "dev", Logger: log, Monitor: monitorHub, NodeTTL: nodeTTL,
				DNSAddr: dnsAddr, DNSOptional: !cmd.Flags().Changed("dns-addr"),
				MemoryHighPercent: memory.highPercent, MemoryMoveInterval: memory.interval, ACL: aclOn,
				EventRetention: memory.eventRetention, EventMaxRecords: memory.eventMaxRecords}
			if tlsF.on {
				op.TLSDir = tlsF.dirOr(filepath.Join(dataDir, "tls"))
				if limits.TLS, srvCfg.AgentTLS, err = serverTLS(op.TLSDir, httpAddr, true, func(string) {}); err != nil {
					return err
				}
				if _, agentOpts.TLS, err = agentTLS(op.TLSDir); err != nil {
					return err
				}
			}
			c, err := client.NewWithOptions([]string{addr}, agentOpts)
			if err != nil {
				return err
			}
			drv, err := drivers([]string{"exec", "raw_exec"}, docker, log)
			if err != nil {
				return err
			}
			defer closeDrivers(drv, log)
			ag, err := agent.New(agent.Config{
				DataDir: filepath.Join(dataDir, "agent"), Name: nodeName(), Address: addr,
				Drivers: drv, Client: c, Logger: log, Monitor: monitorHub, StopTasksOnExit: true,
				MinDynamicPort: ports.min, MaxDynamicPort: ports.max, ArtifactTimeout: arts.timeout, ArtifactMaxBytes: arts.maxMB << 20, HostVolumes: vols.list(), Bridge: ports.bridge,
			})
			if err != nil {
				return err
			}
			// The default DNS port may be another dev's: then dev runs
			// without DNS (the server warns); a port asked for must work.
			srv := server.New(srvCfg)
			if err := srv.ListenDNS(); err != nil {
				return err
			}
			// One address serves both: the agent's metrics and readiness
			// join the server's.
			srv.AddMetrics(ag.Metrics())
			srv.AddReadyCheck(metrics.Check{Name: "agent registered", Run: func(context.Context) error { return ag.Ready() }})
			if aclOn {
				tokenFile := filepath.Join(dataDir, "token")
				old, _ := os.ReadFile(tokenFile)
				secret, err := srv.EnsureToken(ctx, strings.TrimSpace(string(old)), "dev")
				if err != nil {
					return fmt.Errorf("making dev's management token: %w", err)
				}
				if err := os.WriteFile(tokenFile, []byte(secret+"\n"), 0o600); err != nil {
					return err
				}
				op.Token = secret
				note.TokenFile = tokenFile
			}
			opc, err := op.Client()
			if err != nil {
				return err
			}
			note.Address, note.TLSDir = addr, op.TLSDir
			if err := client.WriteLocal(note); err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "drover dev: cannot leave the CLI a note of the certificates and token (%v); give it --tls-dir %s and --token from %s\n", err, op.TLSDir, note.TokenFile)
			}
			defer client.RemoveLocal(note)
			limits.LinkContext = srv.LinkContext
			httpSrv := serveHTTP(ln, srv.Handler(ag.Handler()), limits, log)

			srvCtx, stopSrv := context.WithCancel(context.WithoutCancel(ctx))
			srvDone := make(chan error, 1)
			go func() { srvDone <- srv.Run(srvCtx) }()
			agentDone := make(chan error, 1)
			go func() { agentDone <- ag.Run(ctx) }()

			// Ready means ready to run work: the node is registered and up
			// before the address is printed and the files are submitted,
			// so that nothing submitted now is refused for want of a node.
			if err := waitNodeReady(ctx, opc, 30*time.Second); err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "drover dev: %v; starting anyway\n", err)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "drover dev: API at %s, data in %s\n", addr, dataDir)
			fmt.Fprintf(out, "  export DROVER_ADDR=%s\n", addr)
			// A one-time login link for dev's own token: opening it logs
			// the browser in; drover ui prints another.
			fmt.Fprintf(out, "  web UI: %s (one-time login link; drover ui prints another)\n", client.UILoginLink(addr, srv.UILoginCode(op.Token)))
			for _, job := range jobs {
				sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				res, err := opc.SubmitJob(sctx, job, 0)
				cancel()
				if err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "submitting job %q: %v\n", job.Name, err)
					continue
				}
				fmt.Fprintf(out, "  submitted job %q (version %d): drover status %s\n", res.Job.Name, res.Job.Version, res.Job.Name)
			}
			fmt.Fprintln(out, "Press Ctrl-C to stop the tasks and exit.")

			var runErr error
			select {
			case <-ctx.Done():
			case runErr = <-agentDone:
				agentDone = nil
			case runErr = <-srvDone:
				srvDone = nil
			}
			fmt.Fprintln(out, "drover dev: stopping tasks...")
			if agentDone != nil {
				select {
				case <-agentDone:
				case <-time.After(60 * time.Second):
					fmt.Fprintln(cmd.ErrOrStderr(), "drover dev: tasks did not stop within 60s")
				}
			}
			stopSrv()
			if srvDone != nil {
				select {
				case <-srvDone:
				case <-time.After(10 * time.Second):
				}
			}
			shutdownHTTP(httpSrv)
			fmt.Fprintln(out, "drover dev: stopped.")
			return runErr
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "keep state here across restarts (default: a temporary directory)")
	cmd.Flags().StringVar(&httpAddr, "http-addr", "127.0.0.1:4646", "HTTP API address (host:port; port 0 picks a free one)")
	cmd.Flags().StringVar(&logLevel, "log-level", "warn", "log level: debug, info, warn, error")
	cmd.Flags().DurationVar(&nodeTTL, "node-ttl", server.DefaultNodeTTL, "a node without a heartbeat this long is down and its work is placed elsewhere")
	memory.add(cmd.Flags())
	vars.add(cmd)
	ports.add(cmd.Flags())
	arts.add(cmd.Flags())
	cmd.Flags().StringVar(&dnsAddr, "dns-addr", "127.0.0.1:8600", "serve the service catalog over DNS (UDP and TCP) here; \"\" for none (the default port, Consul's, is skipped with a warning when taken)")
	cmd.Flags().StringVar(&pprofAddr, "pprof-addr", "", "serve Go profiles (/debug/pprof) on this loopback address")
	cmd.Flags().MarkHidden("pprof-addr")
	dockerFlags(cmd.Flags(), &docker)
	vols.add(cmd.Flags())
	tlsF.add(cmd.Flags(), "where dev keeps its certificates (default DATA-DIR/tls; made when missing)")
	cmd.Flags().BoolVar(&aclOn, "acl", true, "require an ACL token on operator requests (dev makes a management token for the CLI here)")
	return withConfigFiles(cmd)
}

// waitNodeReady waits until some node is registered and ready, at most
// timeout.
func waitNodeReady(ctx context.Context, c *client.Client, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var index int64
	for {
		nodes, idx, err := c.Nodes(ctx, &client.QueryOptions{Index: index, Wait: timeout})
		for _, n := range nodes {
			if n.Status == spec.NodeReady {
				return nil
			}
		}
		if ctx.Err() != nil {
			return fmt.Errorf("the agent's node was not ready within %s", timeout)
		}
		if err != nil {
			select { // the server is still starting
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		index = idx
	}
}
