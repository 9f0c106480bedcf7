package state

import (
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/spec"
)

// TestEventsQueryByIndexAndTime: the history reads oldest first by index
// (the records of one write together, by name), Since and MaxRecords go
// by the time a record names, which another server's clock may have put
// out of index order, After by index; a deleted record is gone.
func TestEventsQueryByIndexAndTime(t *testing.T) {
	s := New()
	tx := s.Write()
	put := func(name string, at, rev int64) {
		tx.PutEvents(name, time.Unix(0, at), rev, []spec.Event{{Index: rev, Job: name}})
	}
	put("100-a", 100, 10)
	put("300-a", 300, 11)
	put("200-a", 200, 12) // a slower clock: older, stored later
	put("400-b", 400, 13) // one write's two records
	put("400-a", 400, 13)
	tx.Commit(13)
	for _, tt := range []struct {
		q    EventQuery
		want string
	}{
		{EventQuery{}, "100-a 300-a 200-a 400-a 400-b"},
		{EventQuery{After: 11}, "200-a 400-a 400-b"},
		{EventQuery{After: 13}, ""},
		{EventQuery{Since: time.Unix(0, 250)}, "300-a 400-a 400-b"},
		{EventQuery{Since: time.Unix(0, 200)}, "300-a 200-a 400-a 400-b"},
		{EventQuery{After: 10, Since: time.Unix(0, 250)}, "300-a 400-a 400-b"},
		{EventQuery{MaxRecords: 2}, "400-a 400-b"},
		{EventQuery{MaxRecords: 3}, "300-a 400-a 400-b"},
		{EventQuery{MaxRecords: 4, Since: time.Unix(0, 150)}, "300-a 200-a 400-a 400-b"},
		{EventQuery{MaxRecords: 9, Since: time.Unix(0, 250)}, "300-a 400-a 400-b"},
		{EventQuery{MaxRecords: 2, After: 11}, "400-a 400-b"},
		{EventQuery{MaxRecords: 3, After: 10}, "300-a 400-a 400-b"},
	} {
		var got []string
		for _, e := range s.Snapshot().Events(tt.q) {
			got = append(got, e.Job)
		}
		if strings.Join(got, " ") != tt.want {
			t.Errorf("%+v: %v, want [%s]", tt.q, got, tt.want)
		}
	}
	before := s.Snapshot()
	tx = s.Write()
	tx.DeleteEvents("300-a")
	tx.Commit(14)
	if got := s.Snapshot().Events(EventQuery{Since: time.Unix(0, 250)}); len(got) != 2 || got[0].Job != "400-a" {
		t.Errorf("after deleting 300-a: %+v", got)
	}
	if got := before.Events(EventQuery{}); len(got) != 5 {
		t.Errorf("a snapshot taken before the deletion changed: %+v", got)
	}
}
