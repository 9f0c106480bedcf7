package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/drover-org/drover/internal/httpapi"
	"github.com/drover-org/drover/internal/netbridge"
	"github.com/drover-org/drover/internal/registry"
	"github.com/drover-org/drover/internal/server"
	"github.com/drover-org/drover/internal/spec"
)

func newServerCmd() *cobra.Command {
	var dataDir, httpAddr, logLevel, name string
	var etcdClientAddr, etcdPeerAddr, etcdNote, dnsAddr string
	var memory memoryFlags
	var apiOnly, aclOn bool
	var tlsF tlsFlags
	var maxConns, maxBeats int
	var etcdTLS etcdTLSFlags
	var endpoints []string
	var leaderTTL time.Duration
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run a server: the HTTP API and, while leader, the scheduler",
		Long: `Server serves the HTTP API and takes part in the leader election; the leader
schedules. State lives in etcd: an embedded member in --data-dir by default,
or an existing etcd cluster given with --etcd-endpoints.

It speaks mutual TLS with the certificates in --tls-dir (the first server
makes a CA and every certificate there when it finds none) and requires an
ACL token on every operator request: run "drover acl bootstrap" once for the
first one. docs/security.md has the details.`,
		Example: "  drover server --data-dir /var/lib/drover\n  drover server --etcd-endpoints http://10.0.0.1:2379 --name s1 --tls-dir /etc/drover/tls",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			log, err := newLogger(logLevel)
			if err != nil {
				return err
			}
			files := raiseFileLimit(log)
			if err := memory.check(); err != nil {
				return err
			}
			if maxConns < 1 {
				return fmt.Errorf("--http-max-conns must be at least 1, got %d", maxConns)
			}
			if maxBeats < 1 {
				return fmt.Errorf("--max-heartbeats-per-second must be at least 1, got %d", maxBeats)
			}
			ctx := signalContext(cmd.Context())
			if len(endpoints) == 0 && etcdTLS.set() {
				return fmt.Errorf("--etcd-ca, --etcd-cert and --etcd-key are for an existing etcd cluster: give --etcd-endpoints too")
			}
			if len(endpoints) == 0 {
				if dataDir == "" {
					return fmt.Errorf("--data-dir is required with the embedded etcd (or give --etcd-endpoints)")
				}
				emb, err := registry.StartEmbedded(ctx, registry.EmbeddedConfig{DataDir: filepath.Join(dataDir, "etcd"), Logger: log,
					ClientAddr: etcdClientAddr, PeerAddr: etcdPeerAddr})
				if err != nil {
					return err
				}
				defer emb.Close()
				endpoints = emb.Endpoints()
				etcdNote = "embedded etcd at " + strings.Join(endpoints, ",")
			} else {
				etcdNote = "etcd at " + strings.Join(endpoints, ",")
			}
			reg, err := openRegistry(ctx, endpoints, etcdTLS, log)
			if err != nil {
				return err
			}
			defer reg.Close()
			if name == "" {
				name = nodeName()
			}
			limits := httpapi.Limits{MaxConns: connLimit(maxConns, files, log)}
			cfg := server.Config{Registry: reg, ID: name, LeaderTTL: leaderTTL, Logger: log, Monitor: monitorHub, APIOnly: apiOnly, DNSAddr: dnsAddr, MaxHeartbeatsPerSecond: maxBeats,
				MemoryHighPercent: memory.highPercent, MemoryMoveInterval: memory.interval, ACL: aclOn,
				EventRetention: memory.eventRetention, EventMaxRecords: memory.eventMaxRecords}
			if tlsF.on {
				dir := tlsF.dirOr(filepath.Join(dataDir, "tls"))
				if tlsF.dir == "" && dataDir == "" {
					return fmt.Errorf("--tls-dir is required with --etcd-endpoints and no --data-dir: give the directory with ca.pem, server.pem and server-key.pem (drover tls init makes them), or --tls=false")
				}
				say := func(s string) { fmt.Fprintf(os.Stderr, "drover server %s: %s\n", name, s) }
				if limits.TLS, cfg.AgentTLS, err = serverTLS(dir, httpAddr, false, say); err != nil {
					return err
				}
			} else {
				log.Warn("serving plain HTTP (--tls=false): traffic is readable and node identities can be spoofed by anyone on the network")
			}
			if !aclOn {
				log.Warn("ACLs are off (--acl=false): anyone who reaches the API may do anything")
			}
			ln, err := listen(httpAddr)
			if err != nil {
				return err
			}
			srv := server.New(cfg)
			if err := srv.ListenDNS(); err != nil {
				return err
			}
			limits.LinkContext = srv.LinkContext
			httpSrv := serveHTTP(ln, srv.Handler(nil), limits, log)
			// One parseable line: other servers join with --etcd-endpoints.
			fmt.Fprintf(os.Stderr, "drover server %s: API at %s%s, %s\n", name, tlsF.scheme(), ln.Addr(), etcdNote)
			if aclOn {
				if booted, err := reg.Bootstrapped(ctx); err == nil && !booted {
					fmt.Fprintf(os.Stderr, "drover server %s: ACLs are on and not bootstrapped: run drover acl bootstrap (once) for the first management token\n", name)
				}
			}
			err = srv.Run(ctx)
			shutdownHTTP(httpSrv)
			return err
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "directory for the embedded etcd's data")
	cmd.Flags().StringVar(&httpAddr, "http-addr", "127.0.0.1:4646", "HTTP API address")
	cmd.Flags().IntVar(&maxConns, "http-max-conns", httpapi.DefaultMaxConns, "most HTTP connections open at once: an agent holds 1 over TLS, 2 over plain HTTP, so the default admits 10,000 agents with room for operators; more wait until one closes. Fewer when the open-file limit leaves less (the log says)")
	cmd.Flags().IntVar(&maxBeats, "max-heartbeats-per-second", server.DefaultMaxHeartbeatsPerSecond, "most heartbeats a second this server takes from its nodes: past that many nodes per node TTL/5, each is told to heartbeat less often and given a TTL five times its interval")
	memory.add(cmd.Flags())
	cmd.Flags().StringVar(&dnsAddr, "dns-addr", "", "serve the service catalog over DNS (UDP and TCP) at this host:port, e.g. 127.0.0.1:8600 (default: no DNS)")
	cmd.Flags().StringSliceVar(&endpoints, "etcd-endpoints", nil, "use this etcd cluster instead of the embedded one")
	etcdTLS.register(cmd.Flags())
	cmd.Flags().StringVar(&name, "name", "", "server name in the leader election; unique per server (default: hostname)")
	cmd.Flags().StringVar(&etcdClientAddr, "etcd-client-addr", "127.0.0.1:2379", "embedded etcd's client address (host:port; port 0 picks a free one)")
	cmd.Flags().StringVar(&etcdPeerAddr, "etcd-peer-addr", "127.0.0.1:2380", "embedded etcd's peer address (host:port; port 0 picks a free one)")
	tlsF.add(cmd.Flags(), "directory with ca.pem, server.pem and server-key.pem (default DATA-DIR/tls; the first server makes a CA and every certificate there when it has none)")
	cmd.Flags().BoolVar(&aclOn, "acl", true, "require an ACL token on every operator request (--acl=false: anyone who reaches the API may do anything)")
	cmd.Flags().BoolVar(&apiOnly, "api-only", false, "serve the API but never lead (for a server whose embedded etcd others use)")
	cmd.Flags().DurationVar(&leaderTTL, "leader-ttl", server.DefaultLeaderTTL, "leader election lease TTL")
	cmd.Flags().StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	return withConfigFiles(cmd)
}

// memoryFlags are the server's memory-pressure and event-history
// settings, for server and dev.
type memoryFlags struct {
	highPercent     int
	interval        time.Duration
	eventRetention  time.Duration
	eventMaxRecords int
}

func (m *memoryFlags) add(fs *pflag.FlagSet) {
	fs.DurationVar(&m.eventRetention, "event-retention", server.DefaultEventRetention, "keep the event history (drover events) this long")
	fs.IntVar(&m.eventMaxRecords, "event-max-records", server.DefaultEventMaxRecords, "and at most this many records of it (a record is one write's events)")
	fs.IntVar(&m.highPercent, "memory-high-percent", 90, "when a node's tasks use more than this % of its memory, move its lowest-priority service instance elsewhere (0: never)")
	fs.DurationVar(&m.interval, "memory-move-interval", server.DefaultMemoryMoveInterval, "at most one such move per node per this interval")
}

func (m *memoryFlags) check() error {
	if m.highPercent < 0 || m.highPercent > 100 {
		return fmt.Errorf("--memory-high-percent %d is out of range; use 1 to 100, or 0 for never", m.highPercent)
	}
	if m.eventRetention <= 0 || m.eventMaxRecords <= 0 {
		return fmt.Errorf("--event-retention and --event-max-records must be positive, got %s and %d", m.eventRetention, m.eventMaxRecords)
	}
	if m.interval <= 0 {
		return fmt.Errorf("--memory-move-interval must be positive, got %s", m.interval)
	}
	return nil
}

// portFlags are an agent's dynamic port range and the bridge of its
// groups in network mode bridge, for agent and dev.
type portFlags struct {
	min, max              int
	bridgeName, bridgeNet string
	bridge                netbridge.Config // from bridgeName and bridgeNet, by check
}

func (p *portFlags) add(fs *pflag.FlagSet) {
	fs.IntVar(&p.min, "min-dynamic-port", spec.DynamicPortMin, "lowest port the scheduler picks for this node's dynamic ports")
	fs.IntVar(&p.max, "max-dynamic-port", spec.DynamicPortMax, "highest port the scheduler picks for this node's dynamic ports")
	fs.StringVar(&p.bridgeName, "bridge-network-name", netbridge.DefaultBridge, "Linux bridge of the groups in network mode bridge (made if missing)")
	fs.StringVar(&p.bridgeNet, "bridge-network-subnet", netbridge.DefaultSubnet, "IPv4 subnet the bridge-mode allocs' addresses are taken from; the bridge has its first address")
}

func (p *portFlags) check() error {
	if p.min < 1024 || p.max > 65535 || p.min > p.max {
		return fmt.Errorf("--min-dynamic-port %d and --max-dynamic-port %d: give 1024 <= min <= max <= 65535", p.min, p.max)
	}
	cfg, err := netbridge.ParseConfig(p.bridgeName, p.bridgeNet)
	if err != nil {
		return fmt.Errorf("--bridge-network-name/--bridge-network-subnet: %w", err)
	}
	p.bridge = cfg
	return nil
}
