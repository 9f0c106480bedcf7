// Package registry is drover's store: jobs, allocations, nodes and schedules
// kept in etcd, and the leader election over the same etcd. It is the only
// package in drover that imports etcd; everything
// else sees spec structs, sentinel errors and revisions.
//
// # Key layout
//
// The complete table, every key with its one writer, is in
// docs/architecture.md (internal/archtest fails when it misses a key
// prefix declared here). The main ones:
//
// Every key lives under the prefix "/drover/". Values are the JSON encoding
// of the spec structs (encoding/json); registry revisions (CreateIndex,
// ModifyIndex) are never stored, they are filled in from etcd on read.
//
//	jobs/<name>                  current spec.Job (API writes; optimistic txn on the key's mod revision)
//	job_versions/<name>/<%020d>  every submitted version of the job, by Version (history for `job history`/revert)
//	allocs/<id>                  spec.Alloc, desired half only (Status stripped); written only by the leader, fenced
//	alloc_status/<id>            spec.AllocStatus, written by the API on behalf of the alloc's agent;
//	                             the object also carries "job" and "node_id" (copied from the alloc) so
//	                             that watchers learn whom a status change concerns
//	nodes/<id>                   spec.Node (Status is not stored: it is read from node_alive/)
//	node_alive/<id>              empty, under the node's liveness lease (see nodealive.go): present = ready
//	node_ctl/<id>                spec.NodeControl: an operator's eligibility and drain (see nodectl.go);
//	                             absent = eligible, not draining; merged into spec.Node on read
//	node_usage/<id>              spec.NodeUsage without Allocs: the agent's last usage report; merged on read
//	node_secrets/<id>            hex SHA-256 of the node's secret (see nodesecret.go); never returned by the API
//	schedules/<job>              spec.JobSchedule (leader-written, fenced)
//	leader/<lease id, hex>       election keys (concurrency.Election); the value is the server's id
//
// Every key segment is checked with spec.CheckName before use and refused
// with ErrInvalid otherwise, so that "/", ".." or an empty name can never
// address another key.
//
// # Writers
//
// Jobs and nodes are written by the API on behalf of operators and agents;
// a node's control by the API on behalf of operators only, its usage on
// behalf of its agent only.
// The desired half of an alloc (allocs/) and schedules are written only by the
// leader, through Leader.Commit. The observed half of an alloc
// (alloc_status/) is written only through PutAllocStatus, which refuses a
// node that does not own the alloc and a terminal status that would move.
//
// # Leadership and fencing
//
// Campaign creates an etcd session (a lease) with an explicit, short TTL and
// campaigns on leader/. The election key's create revision is the leader's
// epoch. Every transaction Leader.Commit sends is
//
//	If(CreateRevision(electionKey) == epoch).Then(ops...)
//
// so once the lease is lost (expired, revoked, or resigned) the key is gone
// and etcd itself refuses the write: the deposed leader gets ErrNotLeader and
// nothing it sends is applied, even if it has not noticed yet. A plan too
// large for one transaction is sent as several, each complete in itself (an
// alloc with its events, a deployment before the allocs that name it), so
// a leader deposed between two leaves a part that the next one's pass
// finishes.
//
// # Changes
//
// A server's Mirror is its one watch: it applies each batch of events to
// the server's state store (internal/state) and then tells the server what
// changed (kind, id, job, node) for its wake-ups; after a compaction or a
// broken watch it reads everything again and says KindResync. Watch
// reports the same changes from etcd's previous values, for tools outside
// the server (drover-bench's observer).
package registry
