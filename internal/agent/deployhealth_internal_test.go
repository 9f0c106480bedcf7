package agent

import (
	"fmt"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/spec"
)

// TestJudgeDeployment judges statuses at given times and compares the
// whole outcome: the verdict with its reason, or when to look again.
func TestJudgeDeployment(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	web := &spec.Task{Name: "web", Services: []*spec.Service{{Name: "web", Checks: []*spec.Check{{Type: spec.CheckHTTP}}}}}
	side := &spec.Task{Name: "side"}
	checks := &spec.UpdateStrategy{HealthCheck: spec.HealthChecks,
		MinHealthyTime: spec.Duration(300 * time.Millisecond), HealthyDeadline: spec.Duration(2 * time.Second)}
	states := *checks
	states.HealthCheck = spec.HealthTaskStates

	running := func(startMs int, cs ...spec.CheckState) *spec.TaskState {
		return &spec.TaskState{State: spec.TaskRunning, StartedAt: at(startMs), Checks: cs}
	}
	check := func(s spec.CheckStatus, sinceMs int, out string) spec.CheckState {
		return spec.CheckState{Service: "web", Check: "web-http", Status: s, Since: at(sinceMs), Output: out}
	}
	restarted := &spec.TaskState{State: spec.TaskRunning, StartedAt: at(500), Restarts: 1, Events: []spec.TaskEvent{
		{Type: spec.EventTerminated, Message: "exit code 2"},
		{Type: spec.EventRestarting, Message: "exit code 2; restarting in 1s (restart 1 of 2 within 30m0s)"},
		{Type: spec.EventStarted, Message: "pid 9"},
	}}
	dead := &spec.TaskState{State: spec.TaskDead, Failed: true, Events: []spec.TaskEvent{
		{Type: spec.EventDriverFail, Message: `driver "docker" is not available on this node`},
	}}
	pending := &spec.TaskState{State: spec.TaskPending}

	tests := []struct {
		name   string
		u      *spec.UpdateStrategy
		tasks  []*spec.Task
		states map[string]*spec.TaskState
		exits  map[string]string
		now    int
		want   string
	}{
		{"nothing started: wait for a change", checks, []*spec.Task{web}, map[string]*spec.TaskState{"web": pending}, nil, 0,
			"none; wake never"},
		{"started, check pending: wake at the deadline", checks, []*spec.Task{web}, map[string]*spec.TaskState{"web": running(0, check(spec.CheckPending, 0, ""))}, nil, 100,
			"none; wake 2000"},
		{"check passing: wake at min_healthy_time after it passed", checks, []*spec.Task{web}, map[string]*spec.TaskState{"web": running(0, check(spec.CheckPassing, 400, "HTTP 200"))}, nil, 500,
			"none; wake 700"},
		{"passing for min_healthy_time", checks, []*spec.Task{web}, map[string]*spec.TaskState{"web": running(0, check(spec.CheckPassing, 400, "HTTP 200"))}, nil, 700,
			"healthy at 700"},
		{"a later task start holds the clock", checks, []*spec.Task{web, side}, map[string]*spec.TaskState{"web": running(0, check(spec.CheckPassing, 100, "HTTP 200")), "side": running(600)}, nil, 700,
			"none; wake 900"},
		{"a sibling not started yet", checks, []*spec.Task{web, side}, map[string]*spec.TaskState{"web": running(0, check(spec.CheckPassing, 100, "HTTP 200")), "side": pending}, nil, 700,
			"none; wake 2000"},
		{"failing check at the deadline", checks, []*spec.Task{web}, map[string]*spec.TaskState{"web": running(0, check(spec.CheckFailing, 50, "HTTP 503"))}, nil, 2000,
			"unhealthy at 2000: not healthy within healthy_deadline 2s: check web-http failing: HTTP 503"},
		{"pending check at the deadline", checks, []*spec.Task{web}, map[string]*spec.TaskState{"web": running(0, check(spec.CheckPending, 0, "connection refused"))}, nil, 2100,
			"unhealthy at 2100: not healthy within healthy_deadline 2s: check web-http pending: connection refused"},
		{"task not running at the deadline", checks, []*spec.Task{web, side}, map[string]*spec.TaskState{"web": running(0, check(spec.CheckPassing, 100, "HTTP 200")), "side": pending}, nil, 2000,
			"unhealthy at 2000: not healthy within healthy_deadline 2s: task side not running"},
		{"passing too late for the deadline", checks, []*spec.Task{web}, map[string]*spec.TaskState{"web": running(0, check(spec.CheckPassing, 1900, "HTTP 200"))}, nil, 2000,
			"unhealthy at 2000: not healthy within healthy_deadline 2s: healthy for only 100ms of min_healthy_time 300ms"},
		{"healthy in time, judged late by the timer", checks, []*spec.Task{web}, map[string]*spec.TaskState{"web": running(0, check(spec.CheckPassing, 100, "HTTP 200"))}, nil, 2500,
			"healthy at 2500"},
		{"task_states ignores a failing check", &states, []*spec.Task{web}, map[string]*spec.TaskState{"web": running(0, check(spec.CheckFailing, 50, "HTTP 503"))}, nil, 300,
			"healthy at 300"},
		{"task_states waits for every task", &states, []*spec.Task{web, side}, map[string]*spec.TaskState{"web": running(0), "side": running(200)}, nil, 300,
			"none; wake 500"},
		{"an exit noted by the runner", checks, []*spec.Task{web}, map[string]*spec.TaskState{"web": pending}, map[string]string{"web": "exit code 1"}, 50,
			"unhealthy at 50: task web restarted: exit code 1"},
		{"an exit that killed it", checks, []*spec.Task{web}, map[string]*spec.TaskState{"web": {State: spec.TaskDead}}, map[string]string{"web": "exit code 1"}, 50,
			"unhealthy at 50: task web died: exit code 1"},
		{"a restart read back after an agent restart", &states, []*spec.Task{web}, map[string]*spec.TaskState{"web": restarted}, nil, 600,
			"unhealthy at 600: task web restarted: exit code 2"},
		{"dead without a restart policy's say", checks, []*spec.Task{side}, map[string]*spec.TaskState{"side": dead}, nil, 10,
			`unhealthy at 10: task side died: driver "docker" is not available on this node`},
		{"no min_healthy_time", &spec.UpdateStrategy{HealthCheck: spec.HealthChecks}, []*spec.Task{side}, map[string]*spec.TaskState{"side": running(5)}, nil, 5,
			"healthy at 5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &spec.AllocStatus{Tasks: tt.states}
			v, wake := judgeDeployment(tt.u, tt.tasks, st, tt.exits, at(tt.now))
			var got string
			switch {
			case v == nil && wake.IsZero():
				got = "none; wake never"
			case v == nil:
				got = fmt.Sprintf("none; wake %d", wake.Sub(t0).Milliseconds())
			case v.Healthy:
				got = fmt.Sprintf("healthy at %d", v.Time.Sub(t0).Milliseconds())
				if v.Reason != "" {
					got += ": " + v.Reason
				}
			default:
				got = fmt.Sprintf("unhealthy at %d: %s", v.Time.Sub(t0).Milliseconds(), v.Reason)
			}
			if got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}
