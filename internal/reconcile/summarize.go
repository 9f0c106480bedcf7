package reconcile

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/drover-org/drover/internal/spec"
)

// Summarize says how a job is doing, for `drover status`: how many
// instances it wants, what state each one is in, the job's overall state,
// and why it is not where it should be. allocs are the job's allocs; nodes
// are the cluster's nodes (a system job wants an instance of each group on
// every eligible node, and none elsewhere); sched is the leader's record of
// the job's placement failures, or nil when the leader has not scheduled
// the job yet.
//
// Each wanted instance is represented by one alloc: the live one (the oldest
// if there are several), else the newest that ended on its own, else none,
// which counts as pending. Allocs that ended because they were told to stop
// do not represent an instance.
func Summarize(job *spec.Job, allocs []*spec.Alloc, nodes []*spec.Node, sched *spec.JobSchedule) spec.JobSummary {
	s := summarize(job, allocs, nodes, sched)
	s.SetProgress()
	return s
}

func summarize(job *spec.Job, allocs []*spec.Alloc, nodes []*spec.Node, sched *spec.JobSchedule) spec.JobSummary {
	if job.Stopped {
		return summarizeStopped(job.Name, allocs)
	}
	if job.IsTemplate() {
		// Its children are jobs of their own, each with its summary.
		why := "parameterized: runs only when dispatched (drover job dispatch " + job.Name + ")"
		if job.Periodic != nil {
			why = "periodic: launches a child job at each tick of its schedule"
			if !job.Periodic.On() {
				why = "periodic, disabled (enabled = false): launches only when forced (drover job periodic force " + job.Name + ")"
			}
		}
		return spec.JobSummary{State: spec.JobRunning, Reason: why}
	}

	var s spec.JobSummary
	var bad []*spec.Alloc     // current allocs that ended and will be replaced, in group and index order
	var final []rescheduling  // instances whose reschedule policy is used up, in the same order
	var evicted []*spec.Alloc // evicted allocs of instances waiting to be placed again, in the same order
	for _, g := range job.Groups {
		wanted := instances(job, g, allocs, nodes)
		s.Desired += len(wanted)
		for _, as := range wanted {
			a := current(as)
			if a == nil && len(as) > 0 && isEvicted(as[len(as)-1]) {
				evicted = append(evicted, as[len(as)-1])
			}
			switch {
			case a != nil && a.NodeDown && !a.Terminal():
				s.Lost++
			case a == nil || a.ClientStatusOr() == spec.ClientPending:
				s.Pending++
			case a.ClientStatusOr() == spec.ClientRunning:
				s.Running++
			case a.ClientStatusOr() == spec.ClientComplete:
				s.Complete++
			case a.ClientStatusOr() == spec.ClientFailed:
				s.Failed++
			case a.ClientStatusOr() == spec.ClientLost:
				s.Lost++
			}
			if a != nil && a.Terminal() && (!job.Type.Completes() || a.ClientStatusOr() != spec.ClientComplete) {
				switch rs := assess(job, g, as); {
				case rs.exhausted:
					final = append(final, rs)
				case !rs.done:
					bad = append(bad, a)
					due := rs.due
					if rs.lost {
						due = a.Status.UpdateTime // replaced at once
					}
					if s.NextReplacement == nil || due.Before(*s.NextReplacement) {
						s.NextReplacement = &due
					}
				}
			}
		}
	}

	if sched == nil || sched.JobVersion < job.Version {
		s.State, s.Reason = spec.JobPending, "waiting for the scheduler"
		return s
	}
	var reasons []string
	switch {
	case job.Type.Completes() && s.Complete == s.Desired:
		s.State = spec.JobComplete
		return s
	case len(final) > 0:
		// An instance that used up its reschedule attempts stays down
		// until the job changes.
		s.State = spec.JobFailed
		s.Reason = notRescheduledReason(final)
		return s
	case len(bad) > 0:
		// Replaced after the reschedule policy's delay (lost: at once).
		s.State = spec.JobPending
		reasons = append(reasons, endedReason(bad, ", will be replaced"))
	case s.Pending == 0 && !noNodeMatched(sched, job):
		// Every instance is running, except batch instances already done.
		s.State = spec.JobRunning
		return s
	default:
		s.State = spec.JobPending
	}
	if len(evicted) > 0 {
		a := evicted[0]
		reason := fmt.Sprintf("%s evicted (%s), will be placed again", spec.AllocName(a.Job, a.Group, a.Index), a.DesiredReason)
		if len(evicted) > 1 {
			reason += fmt.Sprintf(" (+%d more)", len(evicted)-1)
		}
		reasons = append(reasons, reason)
	}
	if sched.JobVersion == job.Version {
		for _, f := range sched.Failures {
			if f.NoNodeMatched {
				reasons = append(reasons, fmt.Sprintf("group %s runs on no node: %s", f.Group, f))
				continue
			}
			reasons = append(reasons, fmt.Sprintf("%d %s of group %s waiting for room: %s", f.Missing, plural(f.Missing, "instance"), f.Group, f))
		}
	}
	s.Reason = strings.Join(reasons, "; ")
	return s
}

// instances returns the allocs of each instance of group g that job wants,
// oldest first: one instance per index below the count, or for a system
// job one per eligible node (see eligibility), in node ID order.
func instances(job *spec.Job, g *spec.Group, allocs []*spec.Alloc, nodes []*spec.Node) [][]*spec.Alloc {
	var out [][]*spec.Alloc
	var at map[string]int // node ID -> position in out
	if job.Type.PerNode() {
		at = map[string]int{}
		states := eligibility(job, g, nodes)
		ids := make([]string, 0, len(states))
		for id, st := range states {
			if st.eligible() {
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
		for i, id := range ids {
			at[id] = i
		}
		out = make([][]*spec.Alloc, len(ids))
	} else {
		out = make([][]*spec.Alloc, max(g.Count, 0))
	}
	for _, a := range allocs {
		if a.Job != job.Name || a.Group != g.Name {
			continue
		}
		i, ok := a.Index, a.Index >= 0 && a.Index < len(out)
		if at != nil {
			i, ok = at[a.NodeID]
		}
		if ok {
			out[i] = append(out[i], a)
		}
	}
	for _, as := range out {
		slices.SortFunc(as, oldestFirst)
	}
	return out
}

// InstanceAllocs returns the alloc that represents each instance of job
// among allocs, as Summarize counts it (see current): the live one, else
// the newest that ended on its own; an instance being placed again after
// an eviction or a lost node has none. A failed alloc whose replacement has
// been placed no longer represents its instance. Instances are told apart
// by group and index, or for a system or sysbatch job by group and node,
// whether or not the node is still eligible. The result is sorted by name,
// then node name.
func InstanceAllocs(job *spec.Job, allocs []*spec.Alloc) []*spec.Alloc {
	type instance struct {
		group string
		index int
		node  string
	}
	byInstance := map[instance][]*spec.Alloc{}
	for _, a := range allocs {
		if a.Job != job.Name {
			continue
		}
		k := instance{group: a.Group, index: a.Index}
		if job.Type.PerNode() {
			k = instance{group: a.Group, node: a.NodeID}
		}
		byInstance[k] = append(byInstance[k], a)
	}
	var out []*spec.Alloc
	for _, as := range byInstance {
		slices.SortFunc(as, oldestFirst)
		if a := current(as); a != nil {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b *spec.Alloc) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.NodeName, b.NodeName), oldestFirst(a, b))
	})
	return out
}

// summarizeStopped counts the allocs of a stopped job that have not yet
// ended: they are being shut down.
func summarizeStopped(job string, allocs []*spec.Alloc) spec.JobSummary {
	s := spec.JobSummary{State: spec.JobStopped}
	for _, a := range allocs {
		if a.Job != job {
			continue
		}
		switch a.ClientStatusOr() {
		case spec.ClientPending:
			s.Pending++
		case spec.ClientRunning:
			s.Running++
		}
	}
	if n := s.Pending + s.Running; n > 0 {
		s.Reason = fmt.Sprintf("%d %s still shutting down", n, plural(n, "instance"))
	}
	return s
}

// current picks the alloc that represents an instance; see Summarize. as
// is sorted oldest first. An instance whose newest alloc was evicted or
// lost with its node, and not yet replaced, is represented by none: it is
// being placed again, whatever happened to it before.
func current(as []*spec.Alloc) *spec.Alloc {
	var newestEnded *spec.Alloc
	var oldestLive *spec.Alloc
	for _, a := range as {
		switch {
		case live(a):
			if oldestLive == nil || oldestFirst(a, oldestLive) < 0 {
				oldestLive = a
			}
		case a.DesiredStatus == spec.DesiredRun && (a.Terminal() || a.NodeDown):
			if newestEnded == nil || oldestFirst(a, newestEnded) > 0 {
				newestEnded = a
			}
		}
	}
	if oldestLive != nil {
		return oldestLive
	}
	if n := len(as); n > 0 && (isEvicted(as[n-1]) || stoppedLost(as[n-1])) {
		return nil
	}
	return newestEnded
}

// endedReason describes the first of the ended allocs, and counts the rest:
// "web.api[1] failed: exit code 1, will be replaced (+2 more)".
func endedReason(ended []*spec.Alloc, suffix string) string {
	a := ended[0]
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", spec.AllocName(a.Job, a.Group, a.Index), endedWord(a))
	if d := a.Status.Description; d != "" {
		b.WriteString(": " + d)
	}
	b.WriteString(suffix)
	if len(ended) > 1 {
		fmt.Fprintf(&b, " (+%d more)", len(ended)-1)
	}
	return b.String()
}

// notRescheduledReason describes the first instance whose reschedule
// policy is used up, and counts the rest: "web.api[1] failed 3 times within
// 1h; not rescheduled (reschedule attempts = 2); last: exit code 1 (+1 more)".
func notRescheduledReason(final []rescheduling) string {
	rs := final[0]
	a := rs.last
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s ", spec.AllocName(a.Job, a.Group, a.Index), endedWord(a))
	if rs.failures == 1 {
		b.WriteString("once")
	} else {
		fmt.Fprintf(&b, "%d times", rs.failures)
	}
	if rs.policy.Interval > 0 {
		fmt.Fprintf(&b, " within %s", rs.policy.Interval.Short())
	}
	if a.JobType.PerNode() {
		fmt.Fprintf(&b, "; not rescheduled (%s jobs are not): it runs there again when the job changes", a.JobType)
	} else {
		attempts, _ := rs.policy.Limit()
		fmt.Fprintf(&b, "; not rescheduled (reschedule attempts = %d)", attempts)
	}
	if d := a.Status.Description; d != "" {
		b.WriteString("; last: " + d)
	}
	if len(final) > 1 {
		fmt.Fprintf(&b, " (+%d more)", len(final)-1)
	}
	return b.String()
}

// noNodeMatched reports whether the leader found that no node may run one
// of job's groups (a system job's) in its current version.
func noNodeMatched(sched *spec.JobSchedule, job *spec.Job) bool {
	return sched.JobVersion == job.Version && slices.ContainsFunc(sched.Failures, func(f spec.PlacementFailure) bool { return f.NoNodeMatched })
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
