// Package reconcile compares what the operator asked for (jobs) with what
// exists (allocs) and decides what to change: which instances to place,
// which allocs to stop, which old allocs to forget, and when to look again.
// Every decision carries a reason that reaches the user.
//
// For each instance of each group, job.group[index], the rules are:
//
//	live allocs (desired run, not terminal)
//	  >1       keep the oldest, stop the rest        "duplicate of <id>"
//	  1, old   tasks changed: stop it, place anew    "job updated to version N"
//	           once it has ended (Place.WaitFor)
//	           tasks equal: keep it (in-place)
//	  0        nothing ever ran here                 "new instance"
//	           newest alloc evicted (stopped with    "evicted: preempted by ..." at once,
//	           "preempted by"/"replaced by")         not counted
//	           lost with its node (down now, or      "replaces alloc <id> lost with node <n>",
//	           reported lost, or stopped as lost)    "replaces lost alloc <id>": at once, not counted
//	           batch completed                       nothing (done)
//	           failed (a service: or completed),     "replaces failed alloc <id> (attempt k of N)"
//	           k failures within the reschedule      after the policy's delay: constant, or
//	           interval, k <= attempts or unlimited  delay * 2^(k-1); at most max_delay
//	           k > attempts                          nothing; Summarize says why
//
// The reschedule policy is the group's, else the job's, else the job type's
// default (spec.Job.ReschedulePolicyOf): services are replaced without
// limit after 30s, doubling up to 1h; batch instances once within 24h,
// after 5s. Failures are counted by the ended allocs' Status.UpdateTime,
// within the interval before the newest failure, at the job's current
// version; a replacement asks the scheduler to avoid the failed alloc's
// node (Place.AvoidNode) when another node fits.
//
// plus: allocs of purged jobs are stopped or forgotten, a stopped job's
// allocs are stopped, allocs beyond a group's count (or of a removed group)
// are stopped, and at most 5 terminal allocs are kept per instance (more
// when a reschedule limit needs them: at most attempts+1 within the
// interval).
//
// A system job (type "system") runs one instance of each group on every
// eligible node: ready, with every driver the group's tasks need, meeting
// every constraint that depends on the node alone (the scheduler checks
// distinct_* and colocate/conflicts/replaces when it places). Its count is
// ignored. Its instances are per (group, node) rather than per index, and
// the rules above apply to each, with every placement pinned to its node
// (Place.Node) and no AvoidNode. In addition:
//
//	node ready, not eligible       stop           "node no longer eligible: constraint ... not met"
//	node down                      stop (lost),   placed again on it when it is back
//	                               not replaced elsewhere
//	node no longer registered      stop, forget   "node <n> is no longer registered"
//
// An instance keeps its index (see system.go); a new one takes the smallest
// index no other node holds.
//
// Two more sets of rules replace instances that are running: a service
// job with update blocks rolls each new version out as a deployment, a few
// instances at a time gated on their health (deploy.go); and instances
// move when a restart is requested, their node drains or runs short of
// memory, or their group rebalances (move.go).
//
// The package is pure. Reconcile reads only its Input, including the current
// time, and returns a Result that the leader carries out; it does no I/O and
// reads no clock. The same input therefore always gives the same result, in
// the same order, which is what lets tests compare results whole and lets
// the leader run it as often as it likes: running it again on unchanged
// state changes nothing.
package reconcile
