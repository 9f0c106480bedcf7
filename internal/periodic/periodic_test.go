package periodic

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/drover-org/drover/internal/spec"
)

var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC) // a Sunday

func at(h, m, s int) time.Time {
	return t0.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute + time.Duration(s)*time.Second)
}

func off() *bool { f := false; return &f }

// TestDecide is the periodic decision's transcript: a schedule, the
// children launched so far, a time; the launch, the skip, the next tick.
func TestDecide(t *testing.T) {
	every15 := &spec.Periodic{Crons: []string{"*/15 * * * *"}}
	overlap := &spec.Periodic{Crons: []string{"*/15 * * * *"}, ProhibitOverlap: true}
	two := &spec.Periodic{Crons: []string{"0 11 * * *"}, Cron: "30 10 * * *"}
	berlin := &spec.Periodic{Cron: "0 12 * * *", TimeZone: "Europe/Berlin"}
	seconds := &spec.Periodic{Cron: "*/10 * * * * *"}
	disabled := &spec.Periodic{Crons: []string{"*/15 * * * *"}, Enabled: off()}
	tests := []struct {
		name string
		in   Input
		want Decision
	}{
		{"before the first tick: nothing, next at the tick",
			Input{Periodic: every15, Submitted: at(0, 1, 0), Now: at(0, 10, 0)},
			Decision{Next: at(0, 15, 0)}},
		{"at the tick: launch it",
			Input{Periodic: every15, Submitted: at(0, 1, 0), Now: at(0, 15, 0)},
			Decision{Launch: at(0, 15, 0), Next: at(0, 30, 0)}},
		{"a tick already launched is not launched again",
			Input{Periodic: every15, Submitted: at(0, 1, 0), Children: []Child{{Name: "c", Launch: at(0, 15, 0), Running: true}}, Now: at(0, 16, 0)},
			Decision{Next: at(0, 30, 0)}},
		{"a tick before the job's submission is not launched",
			Input{Periodic: every15, Submitted: at(0, 16, 0), Now: at(0, 20, 0)},
			Decision{Next: at(0, 30, 0)}},
		{"ticks missed while no leader ran: only the newest launches",
			Input{Periodic: every15, Submitted: at(0, 1, 0), Children: []Child{{Name: "c", Launch: at(0, 15, 0), Ended: at(0, 16, 0)}}, Now: at(1, 5, 0)},
			Decision{Launch: at(1, 0, 0), Next: at(1, 15, 0)}},
		{"a tick more than MaxLate old is not launched",
			Input{Periodic: &spec.Periodic{Cron: "0 0 1 1 *"}, Submitted: at(-24*70, 0, 0), Now: at(0, 0, 0)},
			Decision{Next: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{"overlap allowed: launch beside a running child",
			Input{Periodic: every15, Submitted: at(0, 1, 0), Children: []Child{{Name: "c", Launch: at(0, 15, 0), Running: true}}, Now: at(0, 30, 0)},
			Decision{Launch: at(0, 30, 0), Next: at(0, 45, 0)}},
		{"prohibit_overlap: a running child skips the tick",
			Input{Periodic: overlap, Submitted: at(0, 1, 0), Children: []Child{{Name: "j@periodic-1", Launch: at(0, 15, 0), Running: true}}, Now: at(0, 30, 0)},
			Decision{Skipped: at(0, 30, 0), Why: "prohibit_overlap: j@periodic-1 was still running", Next: at(0, 45, 0)}},
		{"prohibit_overlap: a child that ended after the tick still skips it (no late launch)",
			Input{Periodic: overlap, Submitted: at(0, 1, 0), Children: []Child{{Name: "j@periodic-1", Launch: at(0, 15, 0), Ended: at(0, 31, 0)}}, Now: at(0, 32, 0)},
			Decision{Skipped: at(0, 30, 0), Why: "prohibit_overlap: j@periodic-1 was still running", Next: at(0, 45, 0)}},
		{"prohibit_overlap: the next tick after the child ended launches",
			Input{Periodic: overlap, Submitted: at(0, 1, 0), Children: []Child{{Name: "j@periodic-1", Launch: at(0, 15, 0), Ended: at(0, 31, 0)}}, Now: at(0, 45, 0)},
			Decision{Launch: at(0, 45, 0), Next: at(1, 0, 0)}},
		{"crons and cron together: the newest due of either, the earliest next",
			Input{Periodic: two, Submitted: at(0, 0, 0), Now: at(0, 40, 0)},
			Decision{Launch: at(0, 30, 0), Next: at(1, 0, 0)}},
		{"time_zone: noon in Berlin is 11:00 UTC in winter",
			Input{Periodic: berlin, Submitted: at(0, 0, 0), Now: at(1, 0, 0)},
			Decision{Launch: at(1, 0, 0), Next: at(25, 0, 0)}},
		{"six fields: seconds first",
			Input{Periodic: seconds, Submitted: at(0, 0, 1), Now: at(0, 0, 25)},
			Decision{Launch: at(0, 0, 20), Next: at(0, 0, 30)}},
		{"enabled = false: nothing, no next",
			Input{Periodic: disabled, Submitted: at(0, 1, 0), Now: at(1, 0, 0)},
			Decision{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ps := Parse(tt.in.Periodic, time.LoadLocation)
			if ps != nil {
				t.Fatal(ps)
			}
			if diff := cmp.Diff(tt.want, s.Decide(tt.in)); diff != "" {
				t.Errorf("Decide mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestParseRefuses: bad expressions and zones are refused, each naming
// the field and what to write.
func TestParseRefuses(t *testing.T) {
	for _, c := range []struct {
		p          spec.Periodic
		field, has string
	}{
		{spec.Periodic{Crons: []string{"* * *"}}, "periodic.crons[0]", "five fields"},
		{spec.Periodic{Crons: []string{"0 0 * * * * 2030"}}, "periodic.crons[0]", "seventh field (year)"},
		{spec.Periodic{Cron: "61 * * * *"}, "periodic.cron", "does not parse"},
		{spec.Periodic{Cron: "0 12 * * 8"}, "periodic.cron", "above maximum"},
		{spec.Periodic{Cron: "0 12 * * 7-8"}, "periodic.cron", "above maximum"},
		{spec.Periodic{Cron: "CRON_TZ=UTC 0 * * * *"}, "periodic.cron", "time_zone"},
		{spec.Periodic{Cron: "@hourly", TimeZone: "Mars/Olympus"}, "periodic.time_zone", "IANA name"},
	} {
		_, ps := Parse(&c.p, time.LoadLocation)
		if len(ps) != 1 || ps[0].Field != c.field || !strings.Contains(ps[0].Message, c.has) {
			t.Errorf("%+v: got %v; want one problem at %s saying %q", c.p, ps, c.field, c.has)
		}
	}
}

// TestSundaySeven: a day of week written 7 is Sunday, alone, as a range's
// end, in a list and with a step; each expression's next runs from t0
// (Sunday 1 March 2026, 10:00 UTC) are the days the crontab names.
func TestSundaySeven(t *testing.T) {
	day := func(d int) time.Time { return time.Date(2026, 3, d, 12, 0, 0, 0, time.UTC) }
	tests := []struct {
		cron string
		want []time.Time
	}{
		{"0 12 * * 7", []time.Time{day(1), day(8), day(15)}},
		{"0 12 * * 0", []time.Time{day(1), day(8), day(15)}},
		{"0 12 * * 5-7", []time.Time{day(1), day(6), day(7), day(8)}},
		{"0 12 * * 1-7", []time.Time{day(1), day(2), day(3), day(4)}},
		{"0 12 * * 3,7", []time.Time{day(1), day(4), day(8), day(11)}},
		{"0 12 * * 3-7/2", []time.Time{day(1), day(4), day(6), day(8)}},
		{"0 12 * * 7/1", []time.Time{day(1), day(8), day(15)}},
		{"0 0 12 * * 7", []time.Time{day(1), day(8), day(15)}}, // six fields, seconds first
		{"0 12 * * SUN", []time.Time{day(1), day(8), day(15)}},
		{"0 12 7 * 1", []time.Time{day(2), day(7), day(9)}}, // day of month 7 is left alone
	}
	for _, tt := range tests {
		t.Run(tt.cron, func(t *testing.T) {
			s, ps := Parse(&spec.Periodic{Cron: tt.cron}, time.LoadLocation)
			if ps != nil {
				t.Fatal(ps)
			}
			var got []time.Time
			for n := s.Next(t0); len(got) < len(tt.want); n = s.Next(n) {
				got = append(got, n)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("next runs of %q (-want +got):\n%s", tt.cron, diff)
			}
		})
	}
}
