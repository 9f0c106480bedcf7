package reconcile

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/drover-org/drover/internal/spec"
)

func genReconcileInput(t *rapid.T) Input {
	in := Input{Now: now}
	for _, name := range []string{"a", "b", "c"} {
		if !rapid.Bool().Draw(t, "exists") {
			continue
		}
		j := svc(name, rapid.Uint64Range(1, 3).Draw(t, "version"))
		if rapid.Bool().Draw(t, "batch") {
			j.Type = spec.JobBatch
		}
		j.Stopped = rapid.IntRange(0, 4).Draw(t, "stopped") == 0
		j.Reschedule = genPolicy(t, "jobPolicy")
		for gi := range rapid.IntRange(1, 2).Draw(t, "groups") {
			g := grp(fmt.Sprintf("g%d", gi), rapid.IntRange(0, 3).Draw(t, "count"), rapid.SampledFrom([]string{"x", "y"}).Draw(t, "cmd"))
			g.Reschedule = genPolicy(t, "groupPolicy")
			if rapid.IntRange(0, 2).Draw(t, "singleton") == 0 {
				g.Disconnect = &spec.DisconnectPolicy{StopAfter: spec.Duration(10 * time.Second)}
			}
			j.Groups = append(j.Groups, g)
		}
		in.Jobs = append(in.Jobs, j)
	}
	statuses := rapid.SampledFrom([]spec.ClientStatus{"", spec.ClientPending, spec.ClientRunning, spec.ClientComplete, spec.ClientFailed, spec.ClientLost})
	for i := range rapid.IntRange(0, 25).Draw(t, "allocs") {
		j := svc(rapid.SampledFrom([]string{"a", "b", "c", "d"}).Draw(t, "allocJob"), 1)
		a := mk(fmt.Sprintf("alloc-%02d", i), j, rapid.SampledFrom([]string{"g0", "g1", "g2"}).Draw(t, "allocGroup"),
			rapid.IntRange(0, 4).Draw(t, "allocIndex"), rapid.Int64Range(0, 10).Draw(t, "createIndex"), statuses.Draw(t, "status"),
			ver(rapid.Uint64Range(1, 3).Draw(t, "allocVersion"), rapid.SampledFrom([]string{"x", "y"}).Draw(t, "allocCmd")))
		if rapid.Bool().Draw(t, "stopped") {
			a.DesiredStatus = spec.DesiredStop
			// Picked by position, not drawn, so that the failure files
			// kept in testdata still replay. The third is an eviction
			// recorded before causes were.
			reasons := []string{"", "preempted by x.y[0] (priority 90 > 50)", "replaced by z.w[1]", "node n1 is down (no heartbeat)", "job stopped"}
			causes := []spec.DesiredCause{"", spec.CausePreempted, "", spec.CauseNodeDown, spec.CauseJobStopped}
			a.DesiredReason, a.DesiredCause = reasons[i%len(reasons)], causes[i%len(causes)]
			a.EvictedLegacy = i%len(reasons) == 2
		}
		a.NodeDown = rapid.IntRange(0, 3).Draw(t, "nodeDown") == 0
		if rapid.Bool().Draw(t, "allocSingleton") {
			a.Disconnect = &spec.DisconnectPolicy{StopAfter: spec.Duration(10 * time.Second)}
		}
		if a.NodeDown {
			a.NodeDownSince = now.Add(-time.Duration(rapid.IntRange(0, 30).Draw(t, "downFor")) * time.Second)
		}
		a.NodeID = rapid.SampledFrom([]string{"n1", "n2", "n3"}).Draw(t, "node")
		if a.Status != nil {
			a.Status.UpdateTime = now.Add(time.Duration(rapid.IntRange(-3600, 60).Draw(t, "updated")) * time.Second)
		}
		in.Allocs = append(in.Allocs, a)
	}
	// Failure histories: a run of failures of one instance at its job's
	// current version, as a crash-looping program leaves, so that the
	// reschedule limits are reached often.
	for h := range rapid.IntRange(0, 3).Draw(t, "histories") {
		if len(in.Jobs) == 0 {
			break
		}
		j := rapid.SampledFrom(in.Jobs).Draw(t, "historyJob")
		g := rapid.SampledFrom(j.Groups).Draw(t, "historyGroup")
		index := rapid.IntRange(0, 2).Draw(t, "historyIndex")
		at := now.Add(-time.Duration(rapid.IntRange(0, 7200).Draw(t, "historyStart")) * time.Second)
		for k := range rapid.IntRange(1, 6).Draw(t, "historyLen") {
			a := mk(fmt.Sprintf("h%d-%d", h, k), j, g.Name, index, int64(20+k), spec.ClientFailed, on(rapid.SampledFrom([]string{"n1", "n2", "n3"}).Draw(t, "historyNode")))
			if rapid.IntRange(0, 5).Draw(t, "historyLost") == 0 {
				a.Status.ClientStatus = spec.ClientLost
			}
			a.Status.UpdateTime = at
			if at.After(now) {
				a.Status.UpdateTime = now
			}
			in.Allocs = append(in.Allocs, a)
			at = at.Add(time.Duration(rapid.IntRange(1, 1800).Draw(t, "historyGap")) * time.Second)
		}
	}
	return in
}

// genPolicy is nil (inherit) or a reschedule policy, valid or not, with
// some fields left unset.
func genPolicy(t *rapid.T, label string) *spec.ReschedulePolicy {
	if rapid.Bool().Draw(t, label) {
		return nil
	}
	p := &spec.ReschedulePolicy{
		Interval:      spec.Duration(rapid.SampledFrom([]time.Duration{0, 10 * time.Minute, time.Hour}).Draw(t, label+".interval")),
		Delay:         spec.Duration(rapid.SampledFrom([]time.Duration{0, time.Second, 30 * time.Second, 5 * time.Minute}).Draw(t, label+".delay")),
		DelayFunction: rapid.SampledFrom([]spec.DelayFunction{"", spec.DelayConstant, spec.DelayExponential}).Draw(t, label+".fn"),
		MaxDelay:      spec.Duration(rapid.SampledFrom([]time.Duration{0, 10 * time.Minute, time.Hour}).Draw(t, label+".maxDelay")),
	}
	if rapid.Bool().Draw(t, label+".setAttempts") {
		n := rapid.IntRange(0, 3).Draw(t, label+".attempts")
		p.Attempts = &n
	}
	if rapid.Bool().Draw(t, label+".setUnlimited") {
		u := rapid.Bool().Draw(t, label+".unlimited")
		p.Unlimited = &u
	}
	return p
}

// failuresBefore counts, by the documented rule and independently of
// assess, the failures that a replacement of prev would follow: allocs of
// prev's instance at the job's current version, desired run, ended failed
// (or, for a service, complete) less than the policy's interval before
// prev's end.
func failuresBefore(in Input, j *spec.Job, p *spec.ReschedulePolicy, prev *spec.Alloc) int {
	n := 0
	for _, a := range in.Allocs {
		if a.Job != prev.Job || a.Group != prev.Group || a.Index != prev.Index || a.JobVersion != j.Version ||
			a.DesiredStatus != spec.DesiredRun || a.Status == nil {
			continue
		}
		switch a.Status.ClientStatus {
		case spec.ClientFailed:
		case spec.ClientComplete:
			if j.Type == spec.JobBatch {
				continue
			}
		default:
			continue
		}
		end := prev.Status.UpdateTime
		if p.Interval > 0 && !a.Status.UpdateTime.After(end.Add(-p.Interval.Std())) {
			continue
		}
		n++
	}
	return n
}

func shuffled[T any](t *rapid.T, label string, s []T) []T {
	out := make([]T, len(s))
	for i, k := range rapid.Permutation(seq(len(s))).Draw(t, label) {
		out[i] = s[k]
	}
	return out
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

func TestReconcileProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := genReconcileInput(t)
		res := Reconcile(in)

		again := Reconcile(Input{Jobs: shuffled(t, "jobOrder", in.Jobs), Allocs: shuffled(t, "allocOrder", in.Allocs), Now: in.Now})
		if diff := cmp.Diff(res, again); diff != "" {
			t.Fatalf("result depends on input order (-first +shuffled):\n%s", diff)
		}

		jobs := map[string]*spec.Job{}
		for _, j := range in.Jobs {
			jobs[j.Name] = j
		}
		stopping := map[string]bool{}
		for _, s := range res.Stop {
			if !live(s.Alloc) && !lostNow(s.Alloc) {
				t.Fatalf("stop of %s, which is neither live nor lost", s.Alloc.ID)
			}
			if stopping[s.Alloc.ID] {
				t.Fatalf("%s stopped twice", s.Alloc.ID)
			}
			stopping[s.Alloc.ID] = true
		}
		byID := map[string]*spec.Alloc{}
		for _, a := range in.Allocs {
			byID[a.ID] = a
		}
		for _, id := range res.GC {
			if a := byID[id]; a == nil || !ended(a) {
				t.Fatalf("GC of %s, which has not ended", id)
			}
		}
		if !res.NextRun.IsZero() && !res.NextRun.After(in.Now) {
			t.Fatalf("NextRun %v is not after Now %v", res.NextRun, in.Now)
		}

		// A singleton never has two: nothing is placed in a slot while a
		// copy on a down node may still be running there.
		for _, p := range res.Place {
			for _, a := range in.Allocs {
				if a.Job == p.Job.Name && a.Group == p.Group.Name && a.Index == p.Index {
					if _, wait := singletonWait(a, in.Now); wait {
						t.Fatalf("placed %s while %s may still run on down node %s",
							spec.AllocName(p.Job.Name, p.Group.Name, p.Index), a.ID, a.NodeID)
					}
				}
			}
		}

		// After the result is applied, at most one live instance per slot.
		instances := map[slot]int{}
		for _, a := range in.Allocs {
			if live(a) && !stopping[a.ID] {
				instances[slot{a.Job, a.Group, a.Index}]++
			}
		}
		for _, p := range res.Place {
			if p.Job.Stopped {
				t.Fatalf("placed %s for stopped job", spec.AllocName(p.Job.Name, p.Group.Name, p.Index))
			}
			if p.Index < 0 || p.Index >= p.Group.Count || jobs[p.Job.Name] != p.Job || p.Job.Group(p.Group.Name) != p.Group {
				t.Fatalf("placed %s outside the job", spec.AllocName(p.Job.Name, p.Group.Name, p.Index))
			}
			instances[slot{p.Job.Name, p.Group.Name, p.Index}]++
		}
		// Never more live instances than a group's count.
		perGroup := map[[2]string]int{}
		for k, n := range instances {
			perGroup[[2]string{k.job, k.group}] += n
		}
		for k, n := range perGroup {
			if j := jobs[k[0]]; j != nil && j.Group(k[1]) != nil && n > j.Group(k[1]).Count {
				t.Fatalf("%d live instances of %s.%s, count %d", n, k[0], k[1], j.Group(k[1]).Count)
			}
		}
		// Never a replacement of a failure beyond the policy's attempts
		// within its interval, nor before its delay.
		for _, p := range res.Place {
			prev := byID[p.Previous]
			if prev == nil || prev.DesiredStatus != spec.DesiredRun || !prev.Terminal() || prev.ClientStatusOr() == spec.ClientLost {
				continue
			}
			pol := p.Job.ReschedulePolicyOf(p.Group)
			attempts, unlimited := pol.Limit()
			if n := failuresBefore(in, p.Job, pol, prev); !unlimited && n > attempts {
				t.Fatalf("%s replaced after %d failures within %v; attempts %d: %s", prev.Name, n, pol.Interval, attempts, p.Reason)
			}
			if due := prev.Status.UpdateTime.Add(min(pol.Delay.Std(), pol.MaxDelay.Std())); due.After(in.Now) {
				t.Fatalf("%s replaced at %v, before its delay is over at %v", prev.Name, in.Now, due)
			}
			if p.AvoidNode != prev.NodeID {
				t.Fatalf("replacement of %s avoids node %q, not its node %q", prev.ID, p.AvoidNode, prev.NodeID)
			}
		}
		for k, n := range instances {
			if n > 1 {
				t.Fatalf("%d live instances of %s after applying the result", n, spec.AllocName(k.job, k.group, k.index))
			}
			if j := jobs[k.job]; n > 0 && (j == nil || j.Stopped || j.Group(k.group) == nil || k.index >= j.Group(k.group).Count) {
				t.Fatalf("%s is live after applying the result but is not wanted", spec.AllocName(k.job, k.group, k.index))
			}
		}
		// A wanted service instance is running, being placed, due later,
		// or has used up its reschedule attempts.
		for _, j := range in.Jobs {
			if j.Stopped || j.Type != spec.JobService {
				continue
			}
			for _, g := range j.Groups {
				for i := range g.Count {
					if instances[slot{j.Name, g.Name, i}] > 0 || !res.NextRun.IsZero() {
						continue
					}
					var last *spec.Alloc
					for _, a := range in.Allocs {
						if a.Job == j.Name && a.Group == g.Name && a.Index == i && a.DesiredStatus == spec.DesiredRun && a.Terminal() &&
							(last == nil || oldestFirst(a, last) > 0) {
							last = a
						}
					}
					pol := j.ReschedulePolicyOf(g)
					attempts, unlimited := pol.Limit()
					if last == nil || last.ClientStatusOr() == spec.ClientLost || unlimited || failuresBefore(in, j, pol, last) <= attempts {
						t.Fatalf("%s has no instance, no replacement is due, and its attempts are not used up", spec.AllocName(j.Name, g.Name, i))
					}
				}
			}
		}

		// An evicted instance, and nothing since, is placed again at once;
		// nothing else is said to be evicted.
		placed := map[slot]Place{}
		for _, p := range res.Place {
			placed[slot{p.Job.Name, p.Group.Name, p.Index}] = p
			if prev := byID[p.Previous]; p.Cause == spec.CauseReplaceEvicted && (prev == nil || !isEvicted(prev)) {
				t.Fatalf("placed %s for %q, replacing %v", spec.AllocName(p.Job.Name, p.Group.Name, p.Index), p.Reason, prev)
			}
		}
		for _, j := range in.Jobs {
			if j.Stopped {
				continue
			}
			for _, g := range j.Groups {
				for i := range g.Count {
					var newest *spec.Alloc
					waiting := false
					for _, a := range in.Allocs {
						if a.Job == j.Name && a.Group == g.Name && a.Index == i {
							if newest == nil || oldestFirst(a, newest) > 0 {
								newest = a
							}
							_, wait := singletonWait(a, in.Now)
							waiting = waiting || wait || live(a) || lostNow(a)
						}
					}
					if newest == nil || !isEvicted(newest) || waiting {
						continue
					}
					k := slot{j.Name, g.Name, i}
					if p, ok := placed[k]; !ok || p.Previous != newest.ID || p.Cause != spec.CauseReplaceEvicted {
						t.Fatalf("%s was evicted (%s) and is not placed again at once: %+v", spec.AllocName(k.job, k.group, k.index), newest.DesiredReason, p)
					}
				}
			}
		}

		sorted := slices.IsSortedFunc(res.Stop, func(a, b Stop) int { return strings.Compare(a.Alloc.ID, b.Alloc.ID) }) &&
			slices.IsSorted(res.GC)
		if !sorted {
			t.Fatalf("Stop or GC not sorted")
		}
	})
}
