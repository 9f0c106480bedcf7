// Package chaos is drover's fault-injection suite: it runs a real cluster
// (etcd, three `drover server`, agents, TLS and ACLs on as by default),
// injects faults while jobs are submitted, updated, scaled and stopped,
// and checks drover's promises from evidence drover does not produce
// itself.
//
// The cluster. On the embedded etcd, the first server carries the etcd
// member and serves the API only; the other two campaign. On an external
// etcd (three members of the system's etcd, Debian's 3.4), all three
// campaign. Every campaigning server reaches etcd through proxies of the
// suite's own (proxy.go), which can silence a connection without closing
// it, as a network partition does. A writer of the suite's own keys loads
// the same etcd (ForeignWrites per second), as a shared production etcd's
// other users do.
//
// The faults, in rounds (faults.go): the leader SIGKILLed and started
// again; the leader SIGSTOPped until another server leads, then SIGCONT;
// an agent SIGKILLed and
// started again within the node TTL; the leader cut off from etcd while
// its process lives; an etcd follower, then the etcd leader, SIGKILLed
// and started again; two of three members (or the embedded member) down
// for 3 s: quorum loss.
//
// The evidence. Every task is chaostask (./chaostask), which appends
// START, STOP and EXIT lines to one file and takes a lock (flock) named
// after its instance, job.group[index]: a second copy of an instance finds
// the lock taken, writes who holds it, blocks until the kernel hands the
// lock over (however the holder died) and writes how long that took. The
// suite reads that file, the process table (which tasks are alive, by a
// marker in their environment) and etcd directly (the jobs drover
// stored), and drover's event history for the last invariant.
//
// The invariants (check.go), after the last fault:
//
//  1. no instance runs twice at once (Result.Overlaps, of them on an
//     update Handovers; copies on a node the cluster declared down are
//     counted apart), and no batch instance runs in a second alloc
//     (BatchReruns);
//  2. every acknowledged submission is in etcd, and runs with its full
//     count, or completed (batch), or is stopped, as acknowledged
//     (Result.Lost); a job whose last operation went unanswered is held to
//     what etcd says it is;
//  3. no task is restarted or stopped unless a change the suite asked for
//     before then explains it (Result.HealthyRestart, HealthyStopped); a
//     task that ended while its agent was killed and ran again when it came
//     back is counted apart (RestartedAfterAgentKill);
//  4. every alloc whose task ran has its Placed event and its Started (or
//     Adopted) event, in that order, and one that ended the event of its
//     end (Result.MissingEvents);
//  5. all of it within Config.Converge of the last fault (Result.Converged).
//
// A leader resumed after a pause longer than its lease finds its writes
// refused (they are fenced on its election) and its pass cancelled; a
// write it made would show as an instance run twice.
//
// go test runs it at its CI size on both etcd kinds (TestChaos);
// `drover-bench chaos` runs it at any size.
package chaos
