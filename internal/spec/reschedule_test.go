package spec

import (
	"reflect"
	"testing"
	"time"
)

func rjob(t JobType, jobPol *ReschedulePolicy, groupPols ...*ReschedulePolicy) *Job {
	j := &Job{Name: "web", Type: t, Reschedule: jobPol}
	for i, p := range groupPols {
		j.Groups = append(j.Groups, &Group{Name: string(rune('a' + i)), Count: 1, Reschedule: p,
			Tasks: []*Task{{Name: "t", Driver: "exec", Config: TaskConfig{Command: "x"}}}})
	}
	return j
}

func TestRescheduleCanonicalize(t *testing.T) {
	sec := func(n int) Duration { return Duration(time.Duration(n) * time.Second) }
	tests := []struct {
		name string
		job  *Job
		want *ReschedulePolicy // of the first group
	}{
		{"service default", rjob(JobService, nil, nil), DefaultReschedule(JobService)},
		{"batch default", rjob(JobBatch, nil, nil), DefaultReschedule(JobBatch)},
		{"a group's delay keeps the service's unlimited", rjob(JobService, nil, &ReschedulePolicy{Delay: sec(5)}),
			&ReschedulePolicy{Attempts: ptr(0), Delay: sec(5), DelayFunction: DelayExponential, MaxDelay: Duration(time.Hour), Unlimited: ptr(true)}},
		{"attempts without unlimited is a limit", rjob(JobService, nil, &ReschedulePolicy{Attempts: ptr(3), Interval: Duration(time.Hour)}),
			&ReschedulePolicy{Attempts: ptr(3), Interval: Duration(time.Hour), Delay: sec(30), DelayFunction: DelayExponential, MaxDelay: Duration(time.Hour), Unlimited: ptr(false)}},
		{"the job's policy is the groups' default", rjob(JobBatch, &ReschedulePolicy{Attempts: ptr(2), DelayFunction: DelayExponential}, nil),
			&ReschedulePolicy{Attempts: ptr(2), Interval: Duration(24 * time.Hour), Delay: sec(5), DelayFunction: DelayExponential, MaxDelay: Duration(time.Hour), Unlimited: ptr(false)}},
		{"the group's fields override the job's", rjob(JobBatch, &ReschedulePolicy{Attempts: ptr(2), Delay: sec(7)}, &ReschedulePolicy{Unlimited: ptr(true)}),
			&ReschedulePolicy{Attempts: ptr(2), Interval: Duration(24 * time.Hour), Delay: sec(7), DelayFunction: DelayConstant, MaxDelay: Duration(time.Hour), Unlimited: ptr(true)}},
		{"attempts 0 disables", rjob(JobService, nil, &ReschedulePolicy{Attempts: ptr(0)}),
			&ReschedulePolicy{Attempts: ptr(0), Delay: sec(30), DelayFunction: DelayExponential, MaxDelay: Duration(time.Hour), Unlimited: ptr(false)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.job.Canonicalize()
			if got := tt.job.Groups[0].Reschedule; !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v\nwant %+v", deref(got), deref(tt.want))
			}
			if got := tt.job.ReschedulePolicyOf(tt.job.Groups[0]); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ReschedulePolicyOf: got %+v", deref(got))
			}
			again := tt.job.Clone()
			again.Canonicalize()
			if !reflect.DeepEqual(again, tt.job) {
				t.Errorf("Canonicalize is not idempotent")
			}
			if ps := tt.job.Validate(); len(ps) > 0 {
				t.Errorf("Validate: %v", ps)
			}
		})
	}
}

func deref(p *ReschedulePolicy) any {
	if p == nil {
		return nil
	}
	a, u := p.Limit()
	return struct {
		P         ReschedulePolicy
		Attempts  int
		Unlimited bool
	}{*p, a, u}
}

func TestRescheduleValidate(t *testing.T) {
	tests := []struct {
		name string
		job  *Job
		want Problems
	}{
		{"negative attempts and durations", rjob(JobService, nil, &ReschedulePolicy{Attempts: ptr(-1), Interval: -1, Delay: Duration(-time.Second)}),
			Problems{
				{Field: "groups[0].reschedule.attempts", Message: "attempts -1 must not be negative"},
				{Field: "groups[0].reschedule.interval", Message: "interval -1ns must not be negative"},
				{Field: "groups[0].reschedule.delay", Message: "delay -1s must not be negative"},
			}},
		{"unknown delay function, reported once at the job", rjob(JobService, &ReschedulePolicy{DelayFunction: "fib"}, nil, &ReschedulePolicy{Delay: Duration(time.Second)}),
			Problems{{Field: "reschedule.delay_function", Message: `unknown delay_function "fib"; use "constant" or "exponential"`}}},
		{"attempts need an interval", rjob(JobService, nil, &ReschedulePolicy{Attempts: ptr(2)}),
			Problems{{Field: "groups[0].reschedule.interval", Message: "interval must be set when attempts > 0, unless unlimited = true"}}},
		{"unless unlimited", rjob(JobService, nil, &ReschedulePolicy{Attempts: ptr(2), Unlimited: ptr(true)}), nil},
		{"max_delay below delay", rjob(JobService, nil, &ReschedulePolicy{Delay: Duration(2 * time.Hour)}),
			Problems{{Field: "groups[0].reschedule.max_delay", Message: "max_delay 1h must not be less than delay 2h"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.job.Canonicalize()
			if got := tt.job.Validate(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %#v\nwant %#v", got, tt.want)
			}
		})
	}
}

func TestDurationShort(t *testing.T) {
	for d, want := range map[time.Duration]string{
		time.Hour: "1h", 24 * time.Hour: "24h", 90 * time.Second: "1m30s", 90 * time.Minute: "1h30m",
		5 * time.Second: "5s", time.Hour + time.Second: "1h0m1s", 0: "0s", 10 * time.Minute: "10m",
	} {
		if got := Duration(d).Short(); got != want {
			t.Errorf("Short(%v) = %q, want %q", d, got, want)
		}
	}
}
