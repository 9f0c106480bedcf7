package server

import (
	"slices"
	"testing"

	"github.com/drover-org/drover/internal/registry"
)

func TestAllocIndex(t *testing.T) {
	var x allocIndex
	if _, _, ok := x.of("n1"); ok {
		t.Fatal("an index not loaded answers")
	}
	x.load(map[string]string{"a1": "n1", "a2": "n2"}, 10)
	check := func(node string, want []string, wantRev int64) {
		t.Helper()
		ids, rev, ok := x.of(node)
		if !ok || !slices.Equal(ids, want) || rev != wantRev {
			t.Fatalf("of(%s) = %v at %d (%v), want %v at %d", node, ids, rev, ok, want, wantRev)
		}
	}
	check("n1", []string{"a1"}, 10)
	ok := x.apply([]registry.Change{
		{Rev: 11, Kind: registry.KindAlloc, ID: "a3", NodeID: "n1"},
		{Rev: 12, Kind: registry.KindAllocStatus, ID: "a1", NodeID: "n1"},
		{Rev: 13, Kind: registry.KindAlloc, ID: "a2", NodeID: "n2", Deleted: true},
		{Rev: 14, Kind: registry.KindAlloc, ID: "a1", NodeID: "n1"}, // an update
	})
	if !ok {
		t.Fatal("apply asked for a reload without a resync")
	}
	check("n1", []string{"a1", "a3"}, 14)
	check("n2", []string{}, 14)
	if x.apply([]registry.Change{{Rev: 20, Kind: registry.KindResync}}) {
		t.Fatal("a resync did not ask for a reload")
	}
}
