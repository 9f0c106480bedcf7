package leader

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/drover-org/drover/internal/spec"
	"github.com/drover-org/drover/internal/state"
)

// A sweep looks at every job a full pass would: stored ones, and purged
// ones that left allocs, a deployment or a schedule record behind, each
// once; and in slices of about sliceAllocs allocs, at least one job each.
func TestSweepCoversWhatAFullPassDoes(t *testing.T) {
	s := state.New()
	tx := s.Write()
	tx.PutJob(&spec.Job{Name: "a"})
	tx.PutJob(&spec.Job{Name: "b"})
	for i, id := range []string{"b1", "b2", "b3"} {
		tx.PutAlloc(&spec.Alloc{ID: id, Job: "b", Group: "g", Index: i, NodeID: "n"}, 2, 2)
	}
	tx.PutAlloc(&spec.Alloc{ID: "c1", Job: "c-purged", Group: "g", NodeID: "n"}, 3, 3)
	tx.PutDeployment("d1", &spec.Deployment{ID: "d1", Job: "d-purged"})
	tx.PutSchedule(&spec.JobSchedule{Job: "e-purged"})
	tx.Commit(4)
	ss := s.Snapshot()

	if diff := cmp.Diff([]string{"a", "b", "c-purged", "d-purged", "e-purged"}, sweepNames(ss)); diff != "" {
		t.Errorf("sweepNames (-want +got):\n%s", diff)
	}

	var sw sweep
	sw.start(2)
	var slices [][]string
	for sw.pending() {
		only := sw.slice(ss, map[string]bool{"dirty": true})
		if !only["dirty"] {
			t.Fatalf("a slice %v dropped the pass's own dirty job", only)
		}
		var names []string
		for _, n := range sweepNames(ss) {
			if only[n] {
				names = append(names, n)
			}
		}
		slices = append(slices, names)
		if done, _ := sw.passed(0); done != !sw.pending() {
			t.Fatalf("passed says done=%v with the sweep pending=%v", done, sw.pending())
		}
	}
	// b has 3 allocs: a slice of its own; a job without allocs counts 1.
	want := [][]string{{"a", "b"}, {"c-purged", "d-purged"}, {"e-purged"}}
	if diff := cmp.Diff(want, slices); diff != "" {
		t.Errorf("slices (-want +got):\n%s", diff)
	}
}
