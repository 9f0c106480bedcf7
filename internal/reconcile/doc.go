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
//	           tasks equal: keep it (in-place)
//	  0        nothing ever ran here                 "new instance"
//	           batch completed, or batch failed      nothing (not retried)
//	           service ended (failed/lost/complete), "replaces failed alloc <id> (attempt k)"
//	           batch lost                              after 30s * 2^(k-1), at most 1h
//
// plus: allocs of purged jobs are stopped or forgotten, a stopped job's
// allocs are stopped, allocs beyond a group's count (or of a removed group)
// are stopped, and at most 5 terminal allocs are kept per instance.
//
// The package is pure. Reconcile reads only its Input, including the current
// time, and returns a Result that the leader carries out; it does no I/O and
// reads no clock. The same input therefore always gives the same result, in
// the same order, which is what lets tests compare results whole and lets
// the leader run it as often as it likes: running it again on unchanged
// state changes nothing.
package reconcile
