// Package periodic decides when a periodic job launches its children. It
// is pure, as the reconciler is: the time, the time zone database and the
// children's states are its inputs, so the same input gives the same
// decision (internal/archtest). Cron expressions are read by
// github.com/robfig/cron/v3, never here.
package periodic

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/drover-org/drover/internal/spec"
)

// parser reads five fields, six with seconds first, and the descriptors
// (@hourly, @daily, @every 1h30m...).
var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// MaxLate is how late a launch may still be: a tick missed by more (no
// leader ran, or prohibit_overlap held it) is not launched.
const MaxLate = 24 * time.Hour

// Schedule is a periodic block compiled: its expressions in its zone.
type Schedule struct {
	crons []cron.Schedule
	loc   *time.Location
}

// Parse compiles periodic block p. zone loads a time zone by its IANA name
// (time.LoadLocation; the caller gives it, since it reads the zone
// database). The problems name the field, the expression and what to write.
func Parse(p *spec.Periodic, zone func(string) (*time.Location, error)) (*Schedule, spec.Problems) {
	var ps spec.Problems
	s := &Schedule{loc: time.UTC}
	if p.TimeZone != "" {
		loc, err := zone(p.TimeZone)
		if err != nil {
			ps.Add("periodic.time_zone", "unknown time zone %q: use an IANA name such as \"Europe/Berlin\" or \"America/New_York\", or leave it out for UTC", p.TimeZone)
		} else {
			s.loc = loc
		}
	}
	check := func(field, expr string) {
		if strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ=") {
			ps.Add(field, "cron %q names its time zone inside the expression; write time_zone = \"...\" in the periodic block instead", expr)
			return
		}
		c, err := parser.Parse(sundaySeven(expr))
		if err != nil {
			hint := "five fields (minute hour day-of-month month day-of-week), six with seconds first, or @hourly, @daily, @weekly, @monthly, @yearly, @every 90m"
			if len(strings.Fields(expr)) == 7 {
				hint = "a seventh field (year) is not taken; remove it"
			}
			ps.Add(field, "cron %q does not parse (%v): %s", expr, err, hint)
			return
		}
		s.crons = append(s.crons, c)
	}
	for i, c := range p.Crons {
		check(fmt.Sprintf("periodic.crons[%d]", i), c)
	}
	if p.Cron != "" {
		check("periodic.cron", p.Cron)
	}
	if len(ps) > 0 {
		return nil, ps
	}
	return s, nil
}

// sundaySeven rewrites the day-of-week field of cron expression expr so
// that 7 reads as Sunday, as Nomad's cron and most crons read it; the
// parser takes 0 to 6 only. A lone 7 becomes 0, and a range or step that
// ends at 7 (1-7, 5-7/2, 7/1) becomes the list of the days it names, 7
// written 0. Anything else, names included, is left as it is: a malformed
// field stays malformed, for the parser to refuse.
func sundaySeven(expr string) string {
	fields := strings.Fields(expr)
	if len(fields) != 5 && len(fields) != 6 {
		return expr // a descriptor (@daily), or a count of fields the parser refuses
	}
	dow := fields[len(fields)-1]
	items := strings.Split(dow, ",")
	changed := false
	for i, item := range items {
		if days, ok := daysReaching7(item); ok {
			items[i], changed = days, true
		}
	}
	if !changed {
		return expr
	}
	fields[len(fields)-1] = strings.Join(items, ",")
	return strings.Join(fields, " ")
}

// daysReaching7 is one item of a day-of-week list (N, N-M, N/S, N-M/S)
// that names day 7, as the list of its days with 7 written 0; ok is false
// when the item does not name 7 or is not numeric.
func daysReaching7(item string) (string, bool) {
	rng, step := item, 1
	if r, s, found := strings.Cut(item, "/"); found {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return "", false
		}
		rng, step = r, n
	}
	lo, hi := 0, 0
	var err error
	if a, b, found := strings.Cut(rng, "-"); found {
		if lo, err = strconv.Atoi(a); err != nil {
			return "", false
		}
		if hi, err = strconv.Atoi(b); err != nil {
			return "", false
		}
	} else {
		if lo, err = strconv.Atoi(rng); err != nil {
			return "", false
		}
		hi = lo // 7/S: from 7 to the field's end, which is 7
	}
	if hi != 7 || lo < 0 || lo > hi {
		return "", false
	}
	var days []string
	for d := lo; d <= hi; d += step {
		days = append(days, strconv.Itoa(d%7))
	}
	return strings.Join(days, ","), true
}

// Check is Parse for validation: the problems only.
func Check(j *spec.Job, zone func(string) (*time.Location, error)) spec.Problems {
	if j.Periodic == nil {
		return nil
	}
	_, ps := Parse(j.Periodic, zone)
	return ps
}

// Child is what the decision needs of one child job of the periodic job.
type Child struct {
	Name string
	// Launch is the tick (or the forced launch's time) it ran for.
	Launch time.Time
	// Running: some instance of it may still run (or is yet to be placed).
	Running bool
	// Ended is when its last instance ended, when it is not running.
	Ended time.Time
}

// Input is one periodic job's state at Now.
type Input struct {
	Periodic *spec.Periodic
	// Submitted is when the job's current version was submitted: no tick
	// before it launches.
	Submitted time.Time
	Children  []Child
	Now       time.Time
}

// Decision is what to do for one periodic job.
type Decision struct {
	// Launch is the tick to launch a child for now; zero: none.
	Launch time.Time
	// Skipped is a due tick not launched, and Why; zero: none.
	Skipped time.Time
	Why     string
	// Next is the first tick after Now, when the leader should look
	// again; zero when the schedule is disabled or has no more ticks.
	Next time.Time
}

// Decide says whether a launch of in's job is due at in.Now: the newest
// tick after both the job's submission and its newest child's launch, at
// or before Now, at most MaxLate ago. Older missed ticks are not caught up:
// one launch stands for them. Under prohibit_overlap a tick is skipped
// when a child was running at it (still runs, or ended after it).
func (s *Schedule) Decide(in Input) Decision {
	var d Decision
	if !in.Periodic.On() {
		return d
	}
	since := in.Submitted
	for _, c := range in.Children {
		if c.Launch.After(since) {
			since = c.Launch
		}
	}
	if early := in.Now.Add(-MaxLate); since.Before(early) {
		since = early
	}
	now := in.Now.In(s.loc)
	for _, c := range s.crons {
		// The newest tick in (since, now].
		var due time.Time
		for t := c.Next(since.In(s.loc)); !t.IsZero() && !t.After(now); t = c.Next(t) {
			due = t
		}
		if due.After(d.Launch) {
			d.Launch = due
		}
		if n := c.Next(now); !n.IsZero() && (d.Next.IsZero() || n.Before(d.Next)) {
			d.Next = n
		}
	}
	if d.Launch.IsZero() {
		return d
	}
	d.Launch = d.Launch.UTC()
	if !d.Next.IsZero() {
		d.Next = d.Next.UTC()
	}
	if in.Periodic.ProhibitOverlap {
		for _, c := range in.Children {
			if c.Running || c.Ended.After(d.Launch) {
				d.Skipped, d.Why = d.Launch, fmt.Sprintf("prohibit_overlap: %s was still running", c.Name)
				d.Launch = time.Time{}
				break
			}
		}
	}
	return d
}

// Next is the first tick of s after now, zero when there is none.
func (s *Schedule) Next(now time.Time) time.Time {
	var next time.Time
	for _, c := range s.crons {
		if n := c.Next(now.In(s.loc)); !n.IsZero() && (next.IsZero() || n.Before(next)) {
			next = n
		}
	}
	if next.IsZero() {
		return next
	}
	return next.UTC()
}

// Child returns the child job of periodic job parent launched for tick at:
// parent's spec without its periodic block, named spec.PeriodicChildName.
func ChildJob(parent *spec.Job, at time.Time) *spec.Job {
	c := parent.SpecOnly()
	c.Name = spec.PeriodicChildName(parent.Name, at)
	c.Periodic = nil
	c.ParentID = parent.Name
	c.LaunchTime = at.UTC()
	return c
}
