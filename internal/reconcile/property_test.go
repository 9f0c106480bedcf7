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
		for gi := range rapid.IntRange(1, 2).Draw(t, "groups") {
			j.Groups = append(j.Groups, grp(fmt.Sprintf("g%d", gi), rapid.IntRange(0, 3).Draw(t, "count"), rapid.SampledFrom([]string{"x", "y"}).Draw(t, "cmd")))
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
		}
		a.NodeDown = rapid.IntRange(0, 3).Draw(t, "nodeDown") == 0
		if a.Status != nil {
			a.Status.UpdateTime = now.Add(time.Duration(rapid.IntRange(-3600, 60).Draw(t, "updated")) * time.Second)
		}
		in.Allocs = append(in.Allocs, a)
	}
	return in
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
		for k, n := range instances {
			if n > 1 {
				t.Fatalf("%d live instances of %s after applying the result", n, spec.AllocName(k.job, k.group, k.index))
			}
			if j := jobs[k.job]; n > 0 && (j == nil || j.Stopped || j.Group(k.group) == nil || k.index >= j.Group(k.group).Count) {
				t.Fatalf("%s is live after applying the result but is not wanted", spec.AllocName(k.job, k.group, k.index))
			}
		}
		// A wanted service instance is running, being placed, or due later.
		for _, j := range in.Jobs {
			if j.Stopped || j.Type != spec.JobService {
				continue
			}
			for _, g := range j.Groups {
				for i := range g.Count {
					if instances[slot{j.Name, g.Name, i}] == 0 && res.NextRun.IsZero() {
						t.Fatalf("%s has no instance and no replacement is due", spec.AllocName(j.Name, g.Name, i))
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
