package registry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap/zapcore"
)

// Defaults for an embedded member.
const (
	DefaultEmbeddedName = "drover"
	// defaultEmbeddedPeerAddr is where an embedded member listens for
	// peers unless told otherwise.
	defaultEmbeddedPeerAddr = "127.0.0.1:2380"
	// DefaultAutoCompactionRetention keeps this much history (periodic
	// compaction). Watchers further behind than this re-list (KindResync).
	DefaultAutoCompactionRetention = "10m"
	// DefaultQuotaBackendBytes is the backend size at which etcd raises its
	// NOSPACE alarm and refuses writes: 4 GiB (etcd's default is 2 GiB, its
	// suggested maximum 8 GiB).
	DefaultQuotaBackendBytes = 4 << 30
	// embeddedMaxTxnOps lets Leader.Commit batch maxTxnOps ops per txn with
	// room to spare.
	embeddedMaxTxnOps = 1024
	// embeddedSnapshotCount and embeddedCatchUpEntries bound the raft log
	// the member keeps in memory: every entry since its last snapshot,
	// then the catch-up entries a slow follower would need. A member
	// alone has no follower, and its entries are already in its store
	// (and in the server's state): at etcd's defaults (10,000 and 5,000)
	// the log held the last placements whole, about 1 KB per alloc on a
	// cluster of 100,000. A snapshot here is cheap: the data is in the
	// backend already; it saves a small file and trims the log.
	embeddedSnapshotCount  = 1000
	embeddedCatchUpEntries = 100
	embeddedReadyTimeout   = 60 * time.Second
	embeddedCloseTimeout   = 15 * time.Second
)

// EmbeddedConfig configures a single in-process etcd member.
type EmbeddedConfig struct {
	// DataDir holds the member's data (WAL and snapshots). Required.
	DataDir string
	// Name is the member's name; default "drover".
	Name string
	// ClientAddr and PeerAddr are host:port to listen on; port 0 picks a
	// free port. Defaults "127.0.0.1:2379" and "127.0.0.1:2380".
	ClientAddr, PeerAddr string
	// Logger receives etcd's own logs (errors only). Default slog.Default().
	Logger *slog.Logger

	// AutoCompactionRetention is the periodic compaction retention;
	// default DefaultAutoCompactionRetention.
	AutoCompactionRetention string
	// QuotaBackendBytes; default DefaultQuotaBackendBytes.
	QuotaBackendBytes int64
}

// Embedded is a running in-process etcd member.
type Embedded struct {
	etcd      *embed.Etcd
	endpoints []string
	log       *slog.Logger
	closing   *atomic.Bool

	closeOnce sync.Once
	closeErr  error
}

// StartEmbedded starts a single-member etcd in cfg.DataDir (creating a new
// cluster, or restarting the one found there) and waits until it serves.
func StartEmbedded(ctx context.Context, cfg EmbeddedConfig) (*Embedded, error) {
	if cfg.DataDir == "" {
		return nil, fmt.Errorf("registry: embedded etcd needs a data directory: %w", ErrInvalid)
	}
	if cfg.Name == "" {
		cfg.Name = DefaultEmbeddedName
	}
	if cfg.ClientAddr == "" {
		cfg.ClientAddr = "127.0.0.1:2379"
	}
	if cfg.PeerAddr == "" {
		cfg.PeerAddr = defaultEmbeddedPeerAddr
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.AutoCompactionRetention == "" {
		cfg.AutoCompactionRetention = DefaultAutoCompactionRetention
	}
	if cfg.QuotaBackendBytes == 0 {
		cfg.QuotaBackendBytes = DefaultQuotaBackendBytes
	}
	closing := new(atomic.Bool)
	var (
		e                  *embed.Etcd
		clientURL, peerURL *url.URL
		err                error
	)
	// A port chosen for port 0 is free when chosen and may be taken before
	// etcd binds it (another test, another process): then choose again.
	// etcd binds its listeners before it touches the data directory.
	for attempt := 1; ; attempt++ {
		if clientURL, err = pickURL(cfg.ClientAddr); err != nil {
			return nil, fmt.Errorf("registry: embedded etcd client address: %w", err)
		}
		if peerURL, err = pickURL(cfg.PeerAddr); err != nil {
			return nil, fmt.Errorf("registry: embedded etcd peer address: %w", err)
		}
		e, err = embed.StartEtcd(embeddedConfig(cfg, clientURL, peerURL, closing))
		if err == nil {
			break
		}
		if errors.Is(err, syscall.EADDRINUSE) && picksPort(cfg) && attempt < embeddedPortAttempts {
			cfg.Logger.Debug("embedded etcd: chosen port taken before bind, choosing again", "err", err)
			continue
		}
		return nil, fmt.Errorf("registry: start embedded etcd in %s: %w", cfg.DataDir, err)
	}
	timer := time.NewTimer(embeddedReadyTimeout)
	defer timer.Stop()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		closing.Store(true)
		e.Close()
		return nil, fmt.Errorf("registry: embedded etcd failed while starting: %w", err)
	case <-timer.C:
		closing.Store(true)
		e.Server.Stop()
		e.Close()
		return nil, fmt.Errorf("registry: embedded etcd in %s not ready after %s: %w", cfg.DataDir, embeddedReadyTimeout, ErrUnavailable)
	case <-ctx.Done():
		closing.Store(true)
		e.Server.Stop()
		e.Close()
		return nil, fmt.Errorf("registry: start embedded etcd: %w", ctx.Err())
	}
	emb := &Embedded{etcd: e, endpoints: []string{clientURL.String()}, log: cfg.Logger, closing: closing}
	cfg.Logger.Info("embedded etcd ready", "name", cfg.Name, "data_dir", cfg.DataDir,
		"client_url", clientURL.String(), "peer_url", peerURL.String())
	return emb, nil
}

// embeddedPortAttempts bounds how often StartEmbedded chooses new ports for
// port 0 when the chosen ones were taken before etcd bound them.
const embeddedPortAttempts = 5

// picksPort reports whether cfg asks for a port chosen at start.
func picksPort(cfg EmbeddedConfig) bool {
	for _, a := range []string{cfg.ClientAddr, cfg.PeerAddr} {
		if _, port, err := net.SplitHostPort(a); err == nil && port == "0" {
			return true
		}
	}
	return false
}

// embeddedConfig is etcd's configuration for cfg on the given URLs.
func embeddedConfig(cfg EmbeddedConfig, clientURL, peerURL *url.URL, closing *atomic.Bool) *embed.Config {
	ec := embed.NewConfig()
	ec.Name = cfg.Name
	ec.Dir = cfg.DataDir
	ec.ListenClientUrls = []url.URL{*clientURL}
	ec.AdvertiseClientUrls = []url.URL{*clientURL}
	ec.ListenPeerUrls = []url.URL{*peerURL}
	ec.AdvertisePeerUrls = []url.URL{*peerURL}
	ec.InitialCluster = ec.InitialClusterFromName(cfg.Name)
	ec.InitialClusterToken = embeddedClusterToken(cfg.Name)
	ec.ClusterState = embed.ClusterStateFlagNew // ignored when DataDir already holds a member
	ec.AutoCompactionMode = embed.CompactorModePeriodic
	ec.AutoCompactionRetention = cfg.AutoCompactionRetention
	ec.MaxTxnOps = embeddedMaxTxnOps
	ec.SnapshotCount, ec.SnapshotCatchUpEntries = embeddedSnapshotCount, embeddedCatchUpEntries
	ec.QuotaBackendBytes = cfg.QuotaBackendBytes
	ec.UnsafeNoFsync = false // durability: a placement acknowledged is a placement kept
	ec.LogLevel = "error"
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zapToSlog(cfg.Logger.With("component", "etcd"), zapcore.ErrorLevel, closing))

	return ec
}

// embeddedClusterToken is the cluster token of an embedded member named
// name: what it starts with and what a restore for it gives.
func embeddedClusterToken(name string) string { return "drover-" + name }

// pickURL is listenURL; a test replaces it to hand out a taken port.
var pickURL = listenURL

// listenURL turns host:port into http://host:port, choosing a free port for
// port 0.
func listenURL(addr string) (*url.URL, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if port == "0" {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, err
		}
		port = fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
		l.Close()
	}
	return url.Parse("http://" + net.JoinHostPort(host, port))
}

// Endpoints returns the member's client URLs, for Open.
func (e *Embedded) Endpoints() []string { return append([]string(nil), e.endpoints...) }

// Close stops the member, waiting at most about 15 s.
func (e *Embedded) Close() error {
	e.closeOnce.Do(func() {
		e.closing.Store(true) // etcd logs its closed listeners as errors
		done := make(chan struct{})
		go func() {
			e.etcd.Close()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(embeddedCloseTimeout):
			e.closeErr = errors.New("registry: embedded etcd did not stop within " + embeddedCloseTimeout.String())
		}
	})
	return e.closeErr
}
