// Package etcdcluster runs drover against an existing, external etcd
// cluster: three real etcd members (Debian's etcd-server, /usr/bin/etcd
// 3.4) on 127.0.0.1 with free ports, two `drover server --etcd-endpoints`
// and three `drover agent` processes, and then takes etcd members away.
// drover runs secure by default: its processes share one --tls-dir (made
// by the first server) and the CLI gets DROVER_TLS_DIR and the token from
// `drover acl bootstrap` as DROVER_TOKEN. That is drover's own API TLS,
// separate from the etcd client TLS TestEtcdTLS is about.
//
// The package has no code of its own, only tests:
//
//   - TestEtcdFollowerKilled and TestEtcdLeaderKilled SIGKILL one etcd
//     member (a follower, or etcd's raft leader found with
//     POST /v3/maintenance/status) under a running service job, and check
//     that no task process dies or restarts, that the first `drover status`
//     answers within a few seconds, that a job sent at the moment of the
//     kill is accepted, and that a job submitted afterwards runs.
//   - TestEtcdTLS starts the members with TLS and client-certificate
//     authentication on their client URLs (a CA and certificates generated
//     in the test) and checks that `drover server --etcd-ca --etcd-cert
//     --etcd-key` works and that a server without a client certificate
//     fails with a clear error.
//   - TestQuorumLossSaysSo kills two of three members and checks that a
//     registry read is a registry.UnavailableError that says etcd did not
//     answer in time and what to check, also when the member left answers
//     in gRPC's words (etcd 3.4: code Unknown, "context deadline
//     exceeded").
//   - TestSnapshotRestoreOnDebianEtcd saves a snapshot with drover
//     operator snapshot save, deletes every member's data, restores each
//     member with drover operator snapshot restore and finds the job (and
//     its processes) back, and the job submitted after the snapshot gone.
//   - TestOperationsGuideThreeHosts follows docs/operations.md on
//     127.N.0.1-3: certificates, etcd with TLS, servers and agents from
//     the guide's config files, ACL bootstrap, a rolling restart, backup
//     and restore.
//
// Without an etcd binary (/usr/bin/etcd, or etcd in PATH) the tests skip,
// except when CI=true, where they fail: .ci/run installs etcd-server.
package etcdcluster
