package registry

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.etcd.io/etcd/client/pkg/v3/types"
	clientv3 "go.etcd.io/etcd/client/v3"
	clientsnapshot "go.etcd.io/etcd/client/v3/snapshot"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// An etcd snapshot is a copy of etcd's whole keyspace at one revision (the
// member's bbolt database with a SHA-256 at its end), as `etcdctl snapshot
// save` writes it. SaveEtcdSnapshot takes one from a running cluster
// through etcd's snapshot API; RestoreEtcdSnapshot makes a new member's
// data directory from one, offline, as `etcdutl snapshot restore` does:
// both are etcd's own code (client/v3/snapshot and etcdutl/v3/snapshot).

// SnapshotInfo describes a snapshot file.
type SnapshotInfo struct {
	// Endpoint is the member the snapshot was taken from ("" when the
	// file was only read).
	Endpoint string `json:"endpoint,omitempty"`
	// EtcdVersion is that member's version, as it said it ("" when it
	// did not: etcd before 3.6 does not send it with the snapshot).
	EtcdVersion string `json:"etcd_version,omitempty"`
	Path        string `json:"path"`
	Revision    int64  `json:"revision"`
	Keys        int    `json:"keys"`
	Bytes       int64  `json:"bytes"`
	Hash        uint32 `json:"hash"`
}

// SaveEtcdSnapshot writes a snapshot of the etcd cluster at opts.Endpoints
// to path: from the first member, in the order given, that answers. It is
// written to path.part, synced and renamed, so that path never holds half
// a snapshot; an existing path is refused rather than overwritten.
func SaveEtcdSnapshot(ctx context.Context, opts Options, path string, log *slog.Logger) (SnapshotInfo, error) {
	if log == nil {
		log = slog.Default()
	}
	if len(opts.Endpoints) == 0 {
		return SnapshotInfo{}, fmt.Errorf("registry: no etcd endpoints to take a snapshot from: %w", ErrInvalid)
	}
	if _, err := os.Stat(path); err == nil {
		return SnapshotInfo{}, fmt.Errorf("snapshot file %s already exists: give a new file name (a snapshot is never written over another): %w", path, ErrInvalid)
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = dialTimeout
	}
	if opts.TLS == nil && slices.ContainsFunc(opts.Endpoints, func(ep string) bool { return strings.HasPrefix(ep, "https://") }) {
		// As etcdctl does (and OpenWithOptions): https:// without a CA
		// trusts the system's roots.
		opts.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	zl := zapToSlog(log.With("component", "etcd-snapshot"), zapcore.ErrorLevel, nil)
	var errs []error
	for _, ep := range opts.Endpoints {
		cfg := clientv3.Config{Endpoints: []string{ep}, DialTimeout: opts.DialTimeout, TLS: opts.TLS, Context: ctx}
		// A member that does not answer its status in DialTimeout is
		// passed over: the snapshot's own call would wait for ctx.
		status, err := memberStatus(ctx, cfg, zl)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", ep, err))
			if ctx.Err() != nil {
				break
			}
			continue
		}
		version, err := clientsnapshot.SaveWithVersion(ctx, zl, cfg, path)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", ep, err))
			if ctx.Err() != nil {
				break
			}
			continue
		}
		info, err := EtcdSnapshotStatus(path)
		if err != nil {
			return SnapshotInfo{}, fmt.Errorf("snapshot saved to %s from %s, but it cannot be read back: %w", path, ep, err)
		}
		if version == "" {
			version = status // etcd before 3.6 sends none with the snapshot
		}
		info.Endpoint, info.EtcdVersion = ep, version
		return info, nil
	}
	return SnapshotInfo{}, fmt.Errorf("registry: no etcd member gave a snapshot (check that the endpoints are etcd's client URLs and that it is up): %w: %w", ErrUnavailable, errors.Join(errs...))
}

// memberStatus asks the one member in cfg.Endpoints for its version,
// waiting at most cfg.DialTimeout.
func memberStatus(ctx context.Context, cfg clientv3.Config, zl *zap.Logger) (string, error) {
	cfg.Logger = zl
	cli, err := clientv3.New(cfg)
	if err != nil {
		return "", err
	}
	defer cli.Close()
	sctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	st, err := cli.Status(sctx, cfg.Endpoints[0])
	if err != nil {
		return "", fmt.Errorf("no answer within %s: %w", cfg.DialTimeout, err)
	}
	return st.Version, nil
}

// EtcdSnapshotStatus reads a snapshot file: its revision, how many keys it
// holds, its size and its hash.
func EtcdSnapshotStatus(path string) (SnapshotInfo, error) {
	if _, err := os.Stat(path); err != nil {
		return SnapshotInfo{}, fmt.Errorf("snapshot file: %w", err)
	}
	st, err := snapshot.NewV3(zapToSlog(slog.Default(), zapcore.ErrorLevel, nil)).Status(path)
	if err != nil {
		return SnapshotInfo{}, fmt.Errorf("snapshot file %s is not an etcd snapshot (%v): %w", path, err, ErrInvalid)
	}
	return SnapshotInfo{Path: path, Revision: st.Revision, Keys: st.TotalKey, Bytes: st.TotalSize, Hash: st.Hash}, nil
}

// RestoreConfig says which member's data directory to make from a
// snapshot. Every member of the restored cluster gets its own, made from
// the same file with the same InitialCluster and InitialClusterToken.
type RestoreConfig struct {
	// SnapshotPath is the file SaveEtcdSnapshot (or etcdctl snapshot
	// save) wrote.
	SnapshotPath string
	// DataDir is the member's new data directory: it must not exist, or
	// be empty.
	DataDir string
	// Name is the member's name (etcd --name).
	Name string
	// PeerURL is the member's peer URL (etcd
	// --initial-advertise-peer-urls).
	PeerURL string
	// InitialCluster is every member of the restored cluster as
	// name=peerURL,... (etcd --initial-cluster); default Name=PeerURL.
	InitialCluster string
	// InitialClusterToken names the restored cluster (etcd
	// --initial-cluster-token).
	InitialClusterToken string
	// RevisionBump raises the restored revision by this much and marks
	// the revisions below it compacted, so that a client watching from a
	// revision it saw before the restore is told to re-read instead of
	// waiting for revisions that were already used (0: keep the
	// snapshot's revision).
	RevisionBump uint64
	// SkipHashCheck restores a database file copied out of a data
	// directory, which has no hash at its end.
	SkipHashCheck bool
}

// EmbeddedRestoreConfig is the RestoreConfig for the member that
// StartEmbedded runs with the default name, listening for peers at
// peerAddr (host:port; "" for the default 127.0.0.1:2380), with its data in
// dataDir.
func EmbeddedRestoreConfig(snapshotPath, dataDir, peerAddr string) (RestoreConfig, error) {
	if peerAddr == "" {
		peerAddr = defaultEmbeddedPeerAddr
	}
	if _, port, err := net.SplitHostPort(peerAddr); err == nil && port == "0" {
		return RestoreConfig{}, fmt.Errorf("embedded etcd peer address %q: a restored member needs the port its server will listen on (the server's --etcd-peer-addr), not 0: %w", peerAddr, ErrInvalid)
	}
	peer, err := listenURL(peerAddr)
	if err != nil {
		return RestoreConfig{}, fmt.Errorf("embedded etcd peer address %q: %w", peerAddr, err)
	}
	return RestoreConfig{SnapshotPath: snapshotPath, DataDir: dataDir, Name: DefaultEmbeddedName,
		PeerURL: peer.String(), InitialClusterToken: embeddedClusterToken(DefaultEmbeddedName)}, nil
}

// RestoreEtcdSnapshot makes cfg.DataDir, a member's data directory holding
// the snapshot's keyspace as a new cluster (new cluster and member IDs,
// the membership InitialCluster says). Start etcd (or drover server's
// embedded member) on it with the same name and peer URL.
func RestoreEtcdSnapshot(cfg RestoreConfig, log *slog.Logger) (SnapshotInfo, error) {
	if log == nil {
		log = slog.Default()
	}
	if cfg.DataDir == "" || cfg.Name == "" || cfg.PeerURL == "" {
		return SnapshotInfo{}, fmt.Errorf("registry: restoring a snapshot needs the new data directory, the member's name and its peer URL: %w", ErrInvalid)
	}
	if entries, err := os.ReadDir(cfg.DataDir); err == nil && len(entries) > 0 {
		return SnapshotInfo{}, fmt.Errorf("data directory %s is not empty: move it aside (it is what a restore replaces) or give a new one: %w", cfg.DataDir, ErrInvalid)
	}
	if _, err := types.NewURLs([]string{cfg.PeerURL}); err != nil {
		return SnapshotInfo{}, fmt.Errorf("peer URL %q: %v (give it as http://host:port): %w", cfg.PeerURL, err, ErrInvalid)
	}
	if cfg.InitialCluster == "" {
		cfg.InitialCluster = cfg.Name + "=" + cfg.PeerURL
	}
	urls, err := types.NewURLsMap(cfg.InitialCluster)
	if err != nil {
		return SnapshotInfo{}, fmt.Errorf("initial cluster %q: %v (give it as name=http://host:port,...): %w", cfg.InitialCluster, err, ErrInvalid)
	}
	if !slices.Contains(urls[cfg.Name].StringSlice(), cfg.PeerURL) {
		return SnapshotInfo{}, fmt.Errorf("initial cluster %q does not list member %s=%s: give every member, this one included: %w", cfg.InitialCluster, cfg.Name, cfg.PeerURL, ErrInvalid)
	}
	info, err := EtcdSnapshotStatus(cfg.SnapshotPath)
	if err != nil {
		return SnapshotInfo{}, err
	}
	if err := os.MkdirAll(filepath.Dir(filepath.Clean(cfg.DataDir)), 0o700); err != nil {
		return SnapshotInfo{}, err
	}
	zl := zapToSlog(log.With("component", "etcd-restore"), zapcore.ErrorLevel, nil)
	err = snapshot.NewV3(zl).Restore(snapshot.RestoreConfig{
		SnapshotPath:        cfg.SnapshotPath,
		Name:                cfg.Name,
		OutputDataDir:       cfg.DataDir,
		PeerURLs:            []string{cfg.PeerURL},
		InitialCluster:      cfg.InitialCluster,
		InitialClusterToken: cfg.InitialClusterToken,
		SkipHashCheck:       cfg.SkipHashCheck,
		RevisionBump:        cfg.RevisionBump,
		MarkCompacted:       cfg.RevisionBump > 0,
	})
	if err != nil {
		return SnapshotInfo{}, fmt.Errorf("restore %s into %s: %w", cfg.SnapshotPath, cfg.DataDir, err)
	}
	info.Revision += int64(cfg.RevisionBump)
	return info, nil
}
