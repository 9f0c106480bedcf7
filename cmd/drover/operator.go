package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-org/drover/internal/registry"
)

// snapshotSaveTimeout bounds a snapshot's download: every wait has a
// timeout, and a 4 GiB keyspace at a modest 20 MB/s takes under 4 min.
const snapshotSaveTimeout = 10 * time.Minute

// defaultRevisionBump is how far a restore raises etcd's revision (as
// etcd's own guide suggests for a cluster whose clients watch): past any
// revision a client saw before the restore, so that none waits for
// revisions that were already used.
const defaultRevisionBump = 1_000_000_000

func newOperatorCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "operator",
		Short: "Cluster maintenance: etcd snapshots (backup and restore)",
	}
	snap := &cobra.Command{
		Use:   "snapshot",
		Short: "Save, inspect and restore snapshots of the etcd cluster that holds drover's state",
		Long: `A snapshot is a copy of etcd's whole keyspace at one revision, taken from a
running member through etcd's snapshot API: every job, version, allocation,
node, deployment, ACL token and policy, and the event history. It is the
file etcdctl snapshot save writes, and etcdctl and etcdutl read it too.

Restoring makes a new etcd data directory from it, offline, for each member
of a new cluster: docs/operations.md has the whole procedure.`,
	}
	snap.AddCommand(newSnapshotSaveCmd(g), newSnapshotInspectCmd(g), newSnapshotRestoreCmd(g))
	cmd.AddCommand(snap)
	return cmd
}

func newSnapshotSaveCmd(g *globals) *cobra.Command {
	var endpoints []string
	var etcdTLS etcdTLSFlags
	cmd := &cobra.Command{
		Use:   "save FILE",
		Short: "Save a snapshot of etcd's keyspace to FILE",
		Long: `Save asks the first etcd member of --etcd-endpoints that answers for a
snapshot and writes it to FILE (through FILE.part, so FILE is whole or
absent). An existing FILE is never overwritten. It talks to etcd, not to a
drover server: give the same --etcd-endpoints and --etcd-ca/--etcd-cert/
--etcd-key as the servers, or nothing for a server's embedded member on this
machine (http://127.0.0.1:2379). Jobs keep running meanwhile.`,
		Example: `  drover operator snapshot save /var/backups/drover-$(date +%F).snap
  drover operator snapshot save --etcd-endpoints https://10.0.0.1:2379,https://10.0.0.2:2379 \
    --etcd-ca /etc/drover/etcd/ca.pem --etcd-cert /etc/drover/etcd/client.pem --etcd-key /etc/drover/etcd/client-key.pem backup.snap`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			log, err := newLogger("warn")
			if err != nil {
				return err
			}
			opts := registry.Options{Endpoints: endpoints}
			if etcdTLS.set() {
				if opts.TLS, err = registry.TLSFromFiles(etcdTLS.ca, etcdTLS.cert, etcdTLS.key); err != nil {
					return err
				}
			}
			ctx, cancel := context.WithTimeout(signalContext(cmd.Context()), snapshotSaveTimeout)
			defer cancel()
			info, err := registry.SaveEtcdSnapshot(ctx, opts, args[0], log)
			if err != nil {
				return err
			}
			if g.output != "table" {
				return g.print(cmd.OutOrStdout(), info)
			}
			version := info.EtcdVersion
			if version == "" {
				version = "version not given"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Saved a snapshot of etcd at %s (etcd %s) to %s\n", info.Endpoint, version, info.Path)
			printSnapshotInfo(cmd.OutOrStdout(), info)
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&endpoints, "etcd-endpoints", []string{"http://127.0.0.1:2379"}, "etcd client URLs; the first that answers gives the snapshot")
	etcdTLS.register(cmd.Flags())
	return outputs(cmd, documents...)
}

func newSnapshotInspectCmd(g *globals) *cobra.Command {
	return outputs(&cobra.Command{
		Use:   "inspect FILE",
		Short: "Print a snapshot file's revision, key count, size and hash",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			info, err := registry.EtcdSnapshotStatus(args[0])
			if err != nil {
				return err
			}
			if g.output != "table" {
				return g.print(cmd.OutOrStdout(), info)
			}
			printSnapshotInfo(cmd.OutOrStdout(), info)
			return nil
		},
	}, documents...)
}

func printSnapshotInfo(w io.Writer, info registry.SnapshotInfo) {
	fmt.Fprintf(w, "Revision  %d\nKeys      %d\nSize      %d bytes\nHash      %08x\n", info.Revision, info.Keys, info.Bytes, info.Hash)
}

func newSnapshotRestoreCmd(g *globals) *cobra.Command {
	var dataDir, name, peerURL, initialCluster, token, embeddedPeer string
	var bump uint64
	var skipHash bool
	cmd := &cobra.Command{
		Use:   "restore FILE --data-dir DIR",
		Short: "Make a new etcd data directory from a snapshot (offline; etcd stopped)",
		Long: `Restore makes DIR, a new etcd member's data directory holding FILE's
keyspace, as etcdutl snapshot restore does (it is etcd's own code). It
talks to nothing: stop the drover servers and etcd first, move the old data
directory aside, restore, then start etcd on DIR and the servers again.

The restored cluster is a new one, with new cluster and member IDs. For an
etcd cluster, run restore once per member, from the same FILE, with that
member's --name and --initial-advertise-peer-urls and the same
--initial-cluster and --initial-cluster-token on every member; then start
each etcd on its DIR with the same name and peer URL.

For the embedded member of "drover server --data-dir D", give
--data-dir D/etcd and nothing else (add --etcd-peer-addr when the server
runs with one).

The revision is raised by --bump-revision and the older ones marked
compacted, so that nothing that watched etcd before waits for revisions
that were used already. Everything written after the snapshot is gone:
jobs submitted since are not there, and allocations placed since are
unknown to the servers; agents stop tasks the servers do not know of.`,
		Example: `  # drover server --data-dir /var/lib/drover (embedded etcd):
  drover operator snapshot restore backup.snap --data-dir /var/lib/drover/etcd

  # member m1 of a three-member etcd cluster:
  drover operator snapshot restore backup.snap --data-dir /var/lib/etcd/restored \
    --name m1 --initial-advertise-peer-urls http://10.0.0.1:2380 \
    --initial-cluster m1=http://10.0.0.1:2380,m2=http://10.0.0.2:2380,m3=http://10.0.0.3:2380 \
    --initial-cluster-token drover-etcd-restored`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if dataDir == "" {
				return fmt.Errorf("--data-dir is required: the new etcd data directory (for drover server --data-dir D: D/etcd, once the old one is moved aside)")
			}
			log, err := newLogger("warn")
			if err != nil {
				return err
			}
			var cfg registry.RestoreConfig
			external := name != "" || peerURL != "" || initialCluster != "" || token != ""
			switch {
			case external && (name == "" || peerURL == ""):
				return fmt.Errorf("restoring a member of an etcd cluster needs its --name and --initial-advertise-peer-urls (and --initial-cluster listing every member); give none of them for a drover server's embedded member")
			case external && cmd.Flags().Changed("etcd-peer-addr"):
				return fmt.Errorf("--etcd-peer-addr is for a drover server's embedded member; for a member of an etcd cluster give --initial-advertise-peer-urls")
			case external:
				if token == "" {
					token = "etcd-cluster" // etcd's own default
				}
				cfg = registry.RestoreConfig{SnapshotPath: args[0], DataDir: dataDir, Name: name, PeerURL: peerURL,
					InitialCluster: initialCluster, InitialClusterToken: token}
			default:
				if cfg, err = registry.EmbeddedRestoreConfig(args[0], dataDir, embeddedPeer); err != nil {
					return err
				}
			}
			cfg.RevisionBump, cfg.SkipHashCheck = bump, skipHash
			info, err := registry.RestoreEtcdSnapshot(cfg, log)
			if err != nil {
				return err
			}
			if g.output != "table" {
				return g.print(cmd.OutOrStdout(), info)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "Restored %s into %s as etcd member %s (%s), revision %d, %d keys\n",
				info.Path, dataDir, cfg.Name, cfg.PeerURL, info.Revision, info.Keys)
			switch others := strings.Count(cfg.InitialCluster, "=") - 1; {
			case external && others > 0:
				fmt.Fprintf(out, "Next: restore the other %d members from the same file the same way, start each etcd on its directory, then the drover servers.\n", others)
			case external:
				fmt.Fprintf(out, "Next: start etcd on %s as member %s, then the drover servers.\n", dataDir, cfg.Name)
			default:
				fmt.Fprintf(out, "Next: start the drover server whose --data-dir holds %s.\n", dataDir)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dataDir, "data-dir", "", "the new etcd data directory (must not exist, or be empty)")
	f.StringVar(&name, "name", "", "etcd cluster member: its name (etcd --name)")
	f.StringVar(&peerURL, "initial-advertise-peer-urls", "", "etcd cluster member: its peer URL, http://host:2380")
	f.StringVar(&initialCluster, "initial-cluster", "", "etcd cluster member: every member as name=peerURL,... (default: this member alone)")
	f.StringVar(&token, "initial-cluster-token", "", "etcd cluster member: the restored cluster's token, the same on every member (default etcd-cluster)")
	f.StringVar(&embeddedPeer, "etcd-peer-addr", "127.0.0.1:2380", "embedded member: the peer address its drover server runs with (--etcd-peer-addr)")
	f.Uint64Var(&bump, "bump-revision", defaultRevisionBump, "raise the restored revision by this much and mark older revisions compacted (0: keep the snapshot's)")
	f.BoolVar(&skipHash, "skip-hash-check", false, "restore a database file copied out of a data directory (member/snap/db), which has no hash")
	return outputs(cmd, documents...)
}
