package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/spec"
)

// TestVerdictWaitsForASoonReplacement: drover run follows past a failed
// instance whose reschedule policy replaces it soon (the job may yet run),
// saying so once, and ends with the failure when the replacement is far
// off, when none comes (the job failed), or for an older server that does
// not say when (no NextReplacement).
func TestVerdictWaitsForASoonReplacement(t *testing.T) {
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	status := func(state spec.JobState, next *time.Time) *spec.JobStatus {
		return &spec.JobStatus{
			Job:     &spec.Job{Name: "web", Version: 1, Type: spec.JobService},
			Summary: spec.JobSummary{State: state, Desired: 1, Failed: 1, NextReplacement: next, Reason: "web.g[0] failed"},
			Allocations: []*spec.Alloc{{ID: "a1", Name: "web.g[0]", Job: "web", JobVersion: 1, DesiredStatus: spec.DesiredRun,
				Status: &spec.AllocStatus{ClientStatus: spec.ClientFailed, Description: "task t failed: exit code 1"}}},
		}
	}
	in := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	for _, tc := range []struct {
		name    string
		st      *spec.JobStatus
		done    bool
		recheck time.Duration
	}{
		{"replaced in 5s", status(spec.JobPending, in(5*time.Second)), false, 6 * time.Second},
		{"replacement due already", status(spec.JobPending, in(-time.Second)), false, time.Second},
		{"replaced in 30s (a service's default first delay)", status(spec.JobPending, in(30*time.Second)), true, 0},
		{"no replacement said (an older server)", status(spec.JobPending, nil), true, 0},
		{"failed for good", status(spec.JobFailed, nil), true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			noted := map[string]bool{}
			done, recheck, err := verdict(&out, tc.st, 5*time.Second, now, noted)
			if done != tc.done || recheck != tc.recheck {
				t.Fatalf("verdict: done %v, recheck %s, err %v; want done %v, recheck %s", done, recheck, err, tc.done, tc.recheck)
			}
			var ee *exitError
			if tc.done && (!errors.As(err, &ee) || ee.code != exitFailure || !strings.Contains(err.Error(), "web.g[0]") && !strings.Contains(err.Error(), "failed")) {
				t.Errorf("done with %v, want an exit %d naming the failure", err, exitFailure)
			}
			if !tc.done {
				if err != nil || !strings.Contains(out.String(), "Instance web.g[0] failed: task t failed: exit code 1; its reschedule policy replaces it in") {
					t.Errorf("following on: err %v, printed %q; want the failure and its coming replacement said", err, out.String())
				}
				out.Reset()
				verdict(&out, tc.st, 5*time.Second, now, noted)
				if out.Len() != 0 {
					t.Errorf("said again on the next look: %q", out.String())
				}
			}
		})
	}
}

// TestVerdictAfterTheReplacementIsPlaced: once the reschedule policy has
// placed a failed instance's replacement (a new alloc, with a new ID, of
// the same index), the failed alloc no longer stands for the instance:
// drover run follows the replacement, and declares the job running once it
// has stayed up, as Nomad's reschedule makes a job such as its
// rescheduling_success test end up running. A replacement that fails in
// turn is the instance's failure.
func TestVerdictAfterTheReplacementIsPlaced(t *testing.T) {
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	failed := &spec.Alloc{ID: "a1", Name: "web.g[0]", Job: "web", Group: "g", JobVersion: 1, DesiredStatus: spec.DesiredRun, CreateIndex: 10,
		Status: &spec.AllocStatus{ClientStatus: spec.ClientFailed, Description: "task t failed: exit code 255"}}
	next := func(cs spec.ClientStatus, ts spec.TaskStateName, desc string) *spec.Alloc {
		return &spec.Alloc{ID: "a2", Name: "web.g[0]", Job: "web", Group: "g", JobVersion: 1, DesiredStatus: spec.DesiredRun, CreateIndex: 20,
			Status: &spec.AllocStatus{ClientStatus: cs, Description: desc,
				Tasks: map[string]*spec.TaskState{"t": {State: ts, StartedAt: now.Add(-time.Minute)}}}}
	}
	status := func(state spec.JobState, running int, replacement *spec.Alloc) *spec.JobStatus {
		return &spec.JobStatus{
			Job:         &spec.Job{Name: "web", Version: 1, Type: spec.JobService},
			Summary:     spec.JobSummary{State: state, Desired: 1, Running: running},
			Allocations: []*spec.Alloc{failed, replacement},
		}
	}
	for _, tc := range []struct {
		name string
		st   *spec.JobStatus
		done bool
		ok   bool
	}{
		{"replacement pending", status(spec.JobPending, 0, next(spec.ClientPending, spec.TaskPending, "")), false, false},
		{"replacement running for a minute", status(spec.JobRunning, 1, next(spec.ClientRunning, spec.TaskRunning, "")), true, true},
		{"replacement failed too", status(spec.JobFailed, 0, next(spec.ClientFailed, spec.TaskDead, "task t failed: exit code 1")), true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			done, _, err := verdict(&out, tc.st, 5*time.Second, now, map[string]bool{})
			if done != tc.done || (err == nil) != (tc.ok || !tc.done) {
				t.Fatalf("verdict: done %v, err %v, printed %q; want done %v, success %v", done, err, out.String(), tc.done, tc.ok)
			}
			if tc.done && !tc.ok && !strings.Contains(err.Error(), "exit code 1") {
				t.Errorf("failure %q, want the replacement's (exit code 1), not the replaced alloc's", err)
			}
		})
	}
}
