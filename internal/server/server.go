// Package server is drover's control plane: the HTTP API (/v1) over the
// registry and the server's one copy of it, which it keeps and which the
// leader's scheduling loop (internal/leader) reads.
//
// Any server answers the API; only the one holding the etcd election
// schedules, and every write it makes is fenced on that election
// (registry.Leader.Commit), so a deposed leader cannot place anything.
package server

import (
	"cmp"
	"context"
	"crypto/tls"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/drover-org/drover/internal/dns"
	"github.com/drover-org/drover/internal/httpapi"
	"github.com/drover-org/drover/internal/leader"
	"github.com/drover-org/drover/internal/logstream"
	"github.com/drover-org/drover/internal/metrics"
	"github.com/drover-org/drover/internal/planner"
	"github.com/drover-org/drover/internal/registry"
	"github.com/drover-org/drover/internal/state"
	"github.com/drover-org/drover/internal/ui"
)

// Config is what a server needs.
type Config struct {
	Registry *registry.Registry
	// ID names this server in the election; unique per server.
	ID string
	// LeaderTTL is the election lease's TTL: how long a crashed leader
	// blocks scheduling. Explicit and short (never etcd's 60 s default).
	LeaderTTL time.Duration
	// Resync is how often the leader re-reads everything even when no
	// change arrived: the level-triggered safety net.
	Resync time.Duration
	// NodeTTL is how long a node may go without a heartbeat before it is
	// down and its allocations are replaced. Agents heartbeat 5 times per TTL.
	// With many nodes a server gives each a longer one (heartbeatTiming).
	NodeTTL time.Duration
	// MaxHeartbeatsPerSecond bounds the heartbeats one server takes: past
	// MaxHeartbeatsPerSecond x NodeTTL/5 nodes, it gives its nodes an
	// interval (and a TTL five times it) that keeps them under the bound.
	// Default DefaultMaxHeartbeatsPerSecond.
	MaxHeartbeatsPerSecond int
	// NodeGrace is how long a newly elected leader waits before it acts on
	// nodes being down, so that agents cut off by a control-plane outage
	// can register again first. Default 2 x NodeTTL.
	NodeGrace time.Duration
	Logger    *slog.Logger
	// Monitor is the process's log stream, for GET /v1/agent/monitor;
	// nil: the endpoint answers that there is none.
	Monitor *logstream.Hub
	// APIOnly serves the API but never campaigns, so this server never
	// leads (fleet's disable_engine): for a server that carries the
	// embedded etcd, whose loss would stop every server anyway.
	APIOnly bool
	// DNSAddr is where to serve the service catalog over DNS (UDP and
	// TCP, internal/dns); "" serves none. An address that cannot be bound
	// fails Run, unless DNSOptional, which only logs a warning: drover
	// dev's default port may be taken by another dev instance.
	DNSAddr     string
	DNSOptional bool
	// MemoryHighPercent, when > 0, is the share of a node's memory its
	// tasks may use before the leader moves the node's lowest-priority
	// service instance elsewhere, at most one per MemoryMoveInterval per
	// node (default DefaultMemoryMoveInterval). 0: never.
	MemoryHighPercent  int
	MemoryMoveInterval time.Duration
	// EventRetention and EventMaxRecords bound the cluster's event
	// history (defaults DefaultEventRetention and DefaultEventMaxRecords):
	// the leader deletes records older than the one or beyond the other.
	EventRetention  time.Duration
	EventMaxRecords int
	// AgentTLS dials agents (for logs, exec and usage) when their address
	// is https: a client configuration with this server's certificate
	// that verifies pki.AgentName (pki.ClientConfig).
	AgentTLS *tls.Config
	// ACL makes every operator request carry a token whose policies allow
	// it (auth.go). Off, anyone who reaches the API may do anything: the
	// drover server command turns it on unless told --acl=false.
	ACL bool
}

// Event history bounds: a week, and at most this many records (a record
// is the events of one write: a plan, a status batch, a submit).
const (
	DefaultEventRetention  = 7 * 24 * time.Hour
	DefaultEventMaxRecords = 100_000
)

// DefaultMemoryMoveInterval is how often at most one instance moves off a
// node under memory pressure.
const DefaultMemoryMoveInterval = time.Minute

// movePolicy is what a pass needs of the server's configuration.
func (s *Server) movePolicy() planner.Policy {
	return planner.Policy{MemoryHighPercent: s.cfg.MemoryHighPercent, MemoryMoveInterval: cmp.Or(s.cfg.MemoryMoveInterval, DefaultMemoryMoveInterval)}
}

// DefaultLeaderTTL is the shortest lease etcd grants with its default
// timing (1.5 x the 1 s election timeout, rounded up to 2 s): a crashed
// leader blocks scheduling for at most about this long plus etcd's expiry
// check (every 500 ms), inside the 3 s failover target. The session renews
// it every TTL/3; a leader that misses renewals only loses leadership, and
// its writes are fenced, so a short TTL costs at worst a needless election.
const DefaultLeaderTTL = 2 * time.Second

// DefaultResync is the leader's full re-read period when nothing changes.
const DefaultResync = 5 * time.Second

// DefaultNodeTTL: with a heartbeat every second, five missed in a row mark
// a node down, which keeps machine loss -> replacement running under the
// 8 s target while riding out a few slow heartbeats on a loaded machine.
const DefaultNodeTTL = 5 * time.Second

// DefaultMaxHeartbeatsPerSecond keeps the default node TTL up to 1,000
// nodes per server (a heartbeat a second each); 10,000 nodes heartbeat
// every 10 s with a TTL of 50 s. A heartbeat costs etcd nothing, but each
// is a request the server and its agents pay for on the same cores.
const DefaultMaxHeartbeatsPerSecond = 1000

// Server serves the API and, while leader, schedules.
type Server struct {
	cfg       Config
	reg       *registry.Registry
	log       *slog.Logger
	hub       *hub
	ready     atomic.Bool
	agentHTTP *http.Client // dials agents, for logs, exec and usage
	// loop campaigns and, while it leads, schedules (internal/leader).
	loop *leader.Loop
	// allocLists shares the answers of GET /v1/allocations among the
	// queries that ask at the same time.
	allocLists sharedLists
	// state is this server's one copy of the registry, which mirror
	// keeps current from Run on; every reader reads it.
	state  *state.Store
	mirror atomic.Pointer[registry.Mirror]
	// catalog is the service catalog last built, for the API and DNS.
	catalog catalogCache
	// dns serves the catalog once ListenDNS bound it; dnsTried says
	// ListenDNS ran. Both are set before Run.
	dns      *dns.Server
	dnsTried bool
	// metrics are exported at /metrics with gatherers (AddMetrics).
	metrics    *metrics.Server
	gatherers  []prometheus.Gatherer
	readyExtra []metrics.Check
	// ui holds the web UI's login codes and sessions.
	ui *uiSessions
}

// New returns a server; Handler serves its API and Run starts its loops.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.LeaderTTL <= 0 {
		cfg.LeaderTTL = DefaultLeaderTTL
	}
	if cfg.Resync <= 0 {
		cfg.Resync = DefaultResync
	}
	if cfg.NodeTTL <= 0 {
		cfg.NodeTTL = DefaultNodeTTL
	}
	if cfg.MaxHeartbeatsPerSecond <= 0 {
		cfg.MaxHeartbeatsPerSecond = DefaultMaxHeartbeatsPerSecond
	}
	if cfg.NodeGrace <= 0 {
		cfg.NodeGrace = 2 * cfg.NodeTTL
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = cfg.AgentTLS
	// HTTP/1.1 to agents: exec upgrades the connection, which HTTP/2
	// cannot, and a server makes few calls to any one agent.
	tr.Protocols = new(http.Protocols)
	tr.Protocols.SetHTTP1(true)
	s := &Server{cfg: cfg, reg: cfg.Registry, log: cfg.Logger, hub: newHub(0), agentHTTP: &http.Client{Transport: tr}, state: state.New(), ui: newUISessions()}
	s.metrics = s.newMetrics()
	s.loop = leader.New(leader.Config{
		ID: cfg.ID, LeaderTTL: cfg.LeaderTTL, Resync: cfg.Resync, NodeTTL: cfg.NodeTTL, NodeGrace: cfg.NodeGrace, Policy: s.movePolicy(),
		EventRetention: cmp.Or(cfg.EventRetention, DefaultEventRetention), EventMaxRecords: cmp.Or(cfg.EventMaxRecords, DefaultEventMaxRecords),
		Elector: leader.Elect(cfg.Registry), Registry: cfg.Registry, State: leaderState{s}, Metrics: s.metrics, Logger: cfg.Logger,
	})
	return s
}

// Run watches the registry and takes part in the election until ctx ends.
func (s *Server) Run(ctx context.Context) error {
	dnsDone, err := s.startDNS(ctx)
	if err != nil {
		return err
	}
	defer func() { <-dnsDone }()
	// One watch feeds the server: the mirror applies each batch to the
	// state store, then publishes it to the alloc index and the hub, so
	// that a woken reader finds what woke it.
	m, err := s.reg.NewMirror(ctx, s.cfg.ID, s.state, s.publish)
	if err != nil {
		return err
	}
	s.mirror.Store(m)
	s.ready.Store(true)
	if s.cfg.APIOnly {
		<-ctx.Done()
	} else {
		s.loop.Run(ctx)
	}
	s.ready.Store(false)
	return nil
}

// publish takes a batch of changes the mirror applied to the store: the
// wake-ups of what they concern, which the store already holds.
func (s *Server) publish(batch []registry.Change) { s.hub.publish(batch) }

// read returns the server's state once it holds every change the server
// has published (so that what woke a blocking query is in it) and every
// write this server made (so that a client reads what it wrote through
// it), waiting at most readWait. An agent on a link has a session of its
// own (LinkContext): its reads wait for its own writes, not for every
// other agent's.
//
// A request with ?consistent reads as readCurrent does: every write
// acknowledged before it, through any server.
func (s *Server) read(ctx context.Context) (*state.Snapshot, error) {
	if httpapi.ConsistentRead(ctx) {
		return s.readCurrent(ctx)
	}
	return s.readAt(ctx, max(s.hub.seenRev(), s.reg.WrittenBy(ctx)))
}

// LinkContext is the context of an agent's link, which each of its
// requests starts from: a session of its own (registry.Session), which
// has seen every write this server made before the link came.
func (s *Server) LinkContext(ctx context.Context) context.Context {
	return registry.WithSession(ctx, registry.NewSession(s.reg.Written()))
}

// readCurrent returns the server's state once it holds every write
// acknowledged before the call (etcd's revision now, read linearizably):
// for an answer that must show the request's own write, and a check that
// must not miss another's.
func (s *Server) readCurrent(ctx context.Context) (*state.Snapshot, error) {
	rev, err := s.reg.Revision(ctx)
	if err != nil {
		return nil, err
	}
	return s.readAt(ctx, rev)
}

// readAt returns the server's state once it is at revision rev or later.
func (s *Server) readAt(ctx context.Context, rev int64) (*state.Snapshot, error) {
	if ctx.Err() != nil {
		// The request ended (a blocking query whose token was deleted):
		// its cause is the answer.
		return nil, context.Cause(ctx)
	}
	m := s.mirror.Load()
	if m == nil {
		return nil, &httpapi.Error{Status: http.StatusServiceUnavailable, Message: "the server is starting: it has not read the registry yet; retry in a moment"}
	}
	ctx, cancel := context.WithTimeout(ctx, readWait)
	defer cancel()
	return m.Snapshot(ctx, rev)
}

// readWait bounds how long a read waits for the server's state.
const readWait = 10 * time.Second

// leaderState is the leader's loop's view of this server: the store its
// mirror keeps (running before the loop starts), and the hub's wake-ups.
type leaderState struct{ s *Server }

func (ls leaderState) Snapshot(ctx context.Context, atLeast int64) (*state.Snapshot, error) {
	return ls.s.mirror.Load().Snapshot(ctx, atLeast)
}
func (ls leaderState) SeenRev() int64                              { return ls.s.hub.seenRev() }
func (ls leaderState) TakeDirty() (jobs map[string]bool, all bool) { return ls.s.hub.takeDirty() }
func (ls leaderState) Kick() <-chan struct{}                       { return ls.s.hub.kick }

// Handler returns the API. agent, when not nil, serves this process's own
// node endpoints (/v1/client/), as in drover dev.
func (s *Server) Handler(agent http.Handler) http.Handler {
	mux := http.NewServeMux()
	s.routes(mux)
	if agent != nil {
		mux.Handle("/v1/client/", agent)
	}
	mux.HandleFunc("GET /livez", metrics.Livez)
	mux.HandleFunc("GET /readyz", metrics.Readyz(s.readyChecks))
	mux.Handle("GET /metrics", needCertificate(s.metricsHandler()))
	mux.Handle("GET /ui/", ui.Handler())
	mux.Handle("GET /{$}", http.RedirectHandler("/ui/", http.StatusFound))
	return httpapi.LogRequests(s.log, mux)
}
