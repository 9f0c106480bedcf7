package main

import (
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/spec"
)

// STATE says what an instance is doing now: a task that died is
// "restarting in 12s (attempt 1 of 2)" from the moment it died, not
// "running"; a failure's long cause is cut in the table.
func TestInstanceState(t *testing.T) {
	now := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	alloc := func(cs spec.ClientStatus, desc string, tasks map[string]*spec.TaskState) *spec.Alloc {
		return &spec.Alloc{DesiredStatus: spec.DesiredRun, Status: &spec.AllocStatus{ClientStatus: cs, Description: desc, Tasks: tasks}}
	}
	long := "task t failed: " + strings.Repeat("x", 200)
	for _, tc := range []struct {
		name string
		a    *spec.Alloc
		want string
	}{
		{"running", alloc(spec.ClientRunning, "", map[string]*spec.TaskState{"t": {State: spec.TaskRunning}}), "running"},
		{"waiting to restart", alloc(spec.ClientRunning, "", map[string]*spec.TaskState{
			"t": {State: spec.TaskPending, RestartAt: now.Add(12 * time.Second), RestartAttempt: 1, RestartAttempts: 2}}),
			"restarting in 12s (attempt 1 of 2)"},
		{"due", alloc(spec.ClientRunning, "", map[string]*spec.TaskState{
			"t": {State: spec.TaskPending, RestartAt: now.Add(-time.Second), RestartAttempt: 2, RestartAttempts: 2}}),
			"restarting now (attempt 2 of 2)"},
		{"waiting for the interval", alloc(spec.ClientRunning, "", map[string]*spec.TaskState{
			"t": {State: spec.TaskPending, RestartAt: now.Add(90 * time.Second), RestartAttempts: 2}}),
			"restarting in 1m30s (2 restarts used; waiting for the interval)"},
		{"one of two tasks", alloc(spec.ClientRunning, "", map[string]*spec.TaskState{
			"a": {State: spec.TaskRunning},
			"b": {State: spec.TaskPending, RestartAt: now.Add(5 * time.Second), RestartAttempt: 1, RestartAttempts: 3}}),
			"b restarting in 5s (attempt 1 of 3)"},
		{"failed, cut", alloc(spec.ClientFailed, long, nil), "failed: " + long[:tableCut-1] + "…"},
		{"failed, short", alloc(spec.ClientFailed, "task t failed: exit code 3", nil), "failed: task t failed: exit code 3"},
	} {
		if got := instanceState(tc.a, now); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
