// Package clustertest runs drover as a real cluster of processes and breaks
// it: leader SIGKILL, leader SIGSTOP past its TTL, clean leader shutdown,
// an agent's server going away, and every server down at once; and it
// restores s1's embedded etcd from a snapshot under the running agents
// (TestSnapshotRestoreEmbedded).
//
// Its tests build the drover binary and start, per test, in their own
// temporary directory:
//
//	s1   drover server --data-dir D --api-only, carrying the embedded etcd
//	     (--etcd-client-addr 127.0.0.1:0, parsed from its "embedded etcd
//	     at URL" line; --etcd-peer-addr a free port chosen once)
//	s2   drover server --etcd-endpoints <s1's etcd>
//	s3   drover server --etcd-endpoints <s1's etcd>
//	aN   drover agent --servers <all three> --data-dir D --http-addr 127.0.0.1:0
//
// every server with --leader-ttl 2s, and every process with one --tls-dir
// (the cluster's CA and certificates, which s1 makes on its first start).
// Once a leader is elected the harness bootstraps the ACLs; its clients
// speak mutual TLS with cli.pem and carry that management token. s1 serves
// the API but never leads, so killing the leader never takes the store
// down with it; the leader is s2 or s3. Each agent's list starts at a
// different server, so the agents do not all talk to the same one.
//
// Every wait has a deadline, and everything a test starts (servers,
// agents and the agents' task processes) is killed in t.Cleanup.
//
// DROVER_OUTAGE_SECONDS sets how long TestAllServersDownTasksKeepRunning
// keeps every server down (default 30 s, the scenario).
package clustertest
