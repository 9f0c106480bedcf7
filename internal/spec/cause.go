package spec

// DesiredCause is why the leader placed or stopped an alloc, as data
// (Alloc.DesiredCause). The decisions that read an alloc back go by it;
// DesiredReason says the same in words, for people, and may be reworded
// freely.
//
// Records written before causes existed have none (""), and neither has one
// written by a newer server with a cause this one does not know: every
// reader takes such an alloc for a plain stop or placement, the most
// common kind (see Alloc.Evicted for the one exception). After an upgrade
// in place that costs little and only for the allocs stopped just before
// it: an instance stopped with its node and not yet replaced is placed
// again as a new instance (not avoiding its old node), and a node short of
// memory may move one more instance before its interval has passed.
type DesiredCause string

// Why an instance is placed.
const (
	CauseNew            DesiredCause = "new"             // it had no alloc
	CauseReschedule     DesiredCause = "reschedule"      // its alloc failed, or a service's completed
	CauseReplaceLost    DesiredCause = "replace-lost"    // its alloc was lost with its node
	CauseReplaceEvicted DesiredCause = "replace-evicted" // its alloc was evicted
	CauseCanary         DesiredCause = "canary"          // a deployment's canary, beside the old version
)

// Why an instance moves: its alloc is stopped and its successor placed,
// both with the same cause.
const (
	CauseUpdate    DesiredCause = "update"     // the job's tasks changed
	CauseDrain     DesiredCause = "drain"      // its node drains
	CauseMemory    DesiredCause = "memory"     // its node's tasks use too much of its memory
	CauseRestart   DesiredCause = "restart"    // an operator asked for the job's restart
	CauseAllocStop DesiredCause = "alloc-stop" // an operator asked for this instance to stop
	CauseRebalance DesiredCause = "rebalance"  // its group's instances are spread unevenly
)

// Why an alloc is stopped.
const (
	CauseJobStopped       DesiredCause = "job-stopped"
	CauseJobPurged        DesiredCause = "job-purged"
	CauseGroupRemoved     DesiredCause = "group-removed"
	CauseCountReduced     DesiredCause = "count-reduced"
	CauseDuplicate        DesiredCause = "duplicate" // another alloc runs the same instance
	CauseCanaryUnpromoted DesiredCause = "canary-unpromoted"
	// CauseUnhealthy: a running deployment's instance was judged unhealthy
	// and is replaced as its group's reschedule policy says; it counts as
	// a failure of the instance, as if it had failed on its own.
	CauseUnhealthy      DesiredCause = "unhealthy"
	CauseNodeDown       DesiredCause = "node-down" // its node stopped heartbeating
	CauseNodeGone       DesiredCause = "node-gone" // a system job's node is no longer registered
	CauseNodeIneligible DesiredCause = "node-ineligible"
	// Evictions make room for other work: the instance did nothing wrong,
	// so it is placed again at once and not counted as a reschedule.
	CausePreempted DesiredCause = "preempted" // by higher-priority work
	CauseDisplaced DesiredCause = "displaced" // by a job's replaces rule
)

// Evicted reports whether c stops an alloc to make room for other work.
func (c DesiredCause) Evicted() bool {
	return c == CausePreempted || c == CauseDisplaced
}
