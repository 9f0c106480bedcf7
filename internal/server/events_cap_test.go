package server

import (
	"testing"

	"github.com/drover-org/drover/internal/spec"
)

// TestCapEventsPagesWithoutLoss: a reader that pages by the last index it
// got reads every event once, in order, whatever the answer's bound; a
// reader that does not resume gets the newest. No record is cut in two.
func TestCapEventsPagesWithoutLoss(t *testing.T) {
	var all []spec.Event
	for rec := int64(1); len(all) < 3*maxEventList+17; rec++ {
		for range 1 + rec%3 { // records of one, two and three events
			all = append(all, spec.Event{Index: rec})
		}
	}
	after := func(idx int64) []spec.Event {
		for i, e := range all {
			if e.Index > idx {
				return all[i:]
			}
		}
		return nil
	}
	var got []spec.Event
	last := int64(0)
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("paging does not end")
		}
		page := capEvents(after(last), true) // ?index=0, then the last index got
		if len(page) == 0 {
			break
		}
		got = append(got, page...)
		last = page[len(page)-1].Index
	}
	if len(got) != len(all) {
		t.Fatalf("paged %d events of %d", len(got), len(all))
	}
	for i := range all {
		if got[i].Index != all[i].Index {
			t.Fatalf("event %d: index %d, want %d", i, got[i].Index, all[i].Index)
		}
	}
	newest := capEvents(all, false)
	if n := len(newest); n > maxEventList || n < maxEventList-2 || newest[n-1].Index != all[len(all)-1].Index {
		t.Fatalf("the newest: %d events ending at %d", n, newest[n-1].Index)
	}
	if i := len(all) - len(newest); all[i-1].Index == all[i].Index {
		t.Fatalf("the newest cut record %d in two", all[i].Index)
	}
}
