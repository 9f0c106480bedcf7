package spec

import (
	"strings"
	"testing"
	"time"
)

// TestMaxRunDurationValidates: max_run_duration bounds the instances of
// batch and sysbatch jobs, as in Nomad; in a service or system job, or
// negative, it is refused at its field, saying what to write.
func TestMaxRunDurationValidates(t *testing.T) {
	for _, c := range []struct {
		typ JobType
		d   time.Duration
		err string
	}{
		{JobBatch, 5 * time.Second, ""},
		{JobSysBatch, time.Hour, ""},
		{JobBatch, 0, ""},
		{JobService, 0, ""},
		{JobService, 5 * time.Second, `groups[0].max_run_duration: max_run_duration applies to batch and sysbatch jobs only, not to a service job`},
		{JobSystem, 5 * time.Second, `not to a system job, whose instances run until stopped; leave it out, or make the job type "batch"`},
		{JobBatch, -time.Second, `groups[0].max_run_duration: max_run_duration -1s is negative; write a positive duration`},
	} {
		j := optionsJob(func(g *Group, _ *Task) { g.MaxRunDuration = Duration(c.d) })
		j.Type = c.typ
		err := j.Validate().Err()
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s %s: %v", c.typ, c.d, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s %s: got %v, want %q", c.typ, c.d, err, c.err)
		}
	}
}
