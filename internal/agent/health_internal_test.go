package agent

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/spec"
)

// TestCheckTracker plays probe results through a tracker and compares, at
// each step, the status, the failure count, and whether the step is
// reported (a change) or asks for a restart.
func TestCheckTracker(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	type step struct {
		at   time.Duration // since the task's start
		pass bool
		want string // "status failures [changed] [restart]"
	}
	tests := []struct {
		name  string
		check spec.Check
		steps []step
	}{
		{"no grace: every change reported, repeats not", spec.Check{}, []step{
			{0, false, "failing 1 changed"},
			{1, false, "failing 2"},
			{2, true, "passing 0 changed"},
			{3, true, "passing 0"},
			{4, false, "failing 1 changed"},
			{5, true, "passing 0 changed"},
		}},
		{"grace keeps failures pending until it passes", spec.Check{Grace: spec.Duration(10)}, []step{
			{0, false, "pending 1"},
			{9, false, "pending 2"},
			{10, false, "failing 3 changed"},
		}},
		{"the first pass ends the grace", spec.Check{Grace: spec.Duration(10)}, []step{
			{1, false, "pending 1"},
			{2, true, "passing 0 changed"},
			{3, false, "failing 1 changed"},
		}},
		{"check_restart counts failures past the grace", spec.Check{Grace: spec.Duration(10), Restart: &spec.CheckRestart{Limit: 2}}, []step{
			{0, false, "pending 1"},
			{5, false, "pending 2"},
			{10, false, "failing 3 changed"},
			{11, false, "failing 4 restart"},
			{12, false, "failing 5"},
			{13, false, "failing 6 restart"},
		}},
		{"a pass starts the restart count over", spec.Check{Restart: &spec.CheckRestart{Limit: 2}}, []step{
			{0, false, "failing 1 changed"},
			{1, true, "passing 0 changed"},
			{2, false, "failing 1 changed"},
			{3, false, "failing 2 restart"},
		}},
		{"check_restart's own grace", spec.Check{Restart: &spec.CheckRestart{Limit: 1, Grace: spec.Duration(5)}}, []step{
			{0, false, "failing 1 changed"},
			{4, false, "failing 2"},
			{5, false, "failing 3 restart"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check.Type = spec.CheckTCP
			svc := &spec.Service{Name: "web", PortLabel: "http", Checks: []*spec.Check{&tt.check}}
			cs := taskChecks(&spec.Task{Services: []*spec.Service{svc}})
			k := newCheckTracker(cs[0], start)
			for i, s := range tt.steps {
				changed, restart := k.observe(start.Add(s.at), s.pass, "out")
				got := fmt.Sprintf("%s %d", k.state.Status, k.state.Failures)
				if changed {
					got += " changed"
				}
				if restart {
					got += " restart"
				}
				if got != s.want {
					t.Errorf("step %d (at %d, pass %v): %q, want %q", i, s.at, s.pass, got, s.want)
				}
			}
		})
	}
}

func TestTaskChecksDefaults(t *testing.T) {
	task := &spec.Task{Services: []*spec.Service{
		{Name: "web", PortLabel: "http", Checks: []*spec.Check{
			{Type: spec.CheckHTTP},
			{Type: spec.CheckHTTP, Path: "/health", PortLabel: "admin", Interval: spec.Duration(time.Second),
				Grace: spec.Duration(time.Minute), Restart: &spec.CheckRestart{Limit: 3}},
			{Name: "mine", Type: spec.CheckScript, Restart: &spec.CheckRestart{Limit: 1, Grace: spec.Duration(time.Hour)}},
		}},
		{Name: "db", Checks: []*spec.Check{{Type: spec.CheckTCP, Timeout: spec.Duration(time.Second)}}},
	}}
	var got []string
	for _, c := range taskChecks(task) {
		got = append(got, fmt.Sprintf("%s/%s port=%q path=%q interval=%s timeout=%s restart-grace=%s",
			c.service, c.check.Name, c.port, c.check.Path, c.check.Interval, c.check.Timeout, c.restartGrace))
	}
	want := []string{
		`web/web-http port="http" path="/" interval=10s timeout=2s restart-grace=0s`,
		`web/web-http-2 port="admin" path="/health" interval=1s timeout=1s restart-grace=1m0s`,
		`web/mine port="http" path="" interval=10s timeout=2s restart-grace=1h0m0s`,
		`db/db-tcp port="" path="" interval=10s timeout=1s restart-grace=0s`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("checks:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestAllocHealth(t *testing.T) {
	withChecks := &spec.Task{Name: "web", Services: []*spec.Service{{Name: "web", Checks: []*spec.Check{{Type: spec.CheckTCP}, {Type: spec.CheckHTTP}}}}}
	noChecks := &spec.Task{Name: "side", Services: []*spec.Service{{Name: "side"}}}
	plain := &spec.Task{Name: "plain"}
	run := func(statuses ...spec.CheckStatus) *spec.TaskState {
		ts := &spec.TaskState{State: spec.TaskRunning}
		for _, s := range statuses {
			ts.Checks = append(ts.Checks, spec.CheckState{Status: s})
		}
		return ts
	}
	pending := &spec.TaskState{State: spec.TaskPending}
	dead := &spec.TaskState{State: spec.TaskDead}
	P, OK, F := spec.CheckPending, spec.CheckPassing, spec.CheckFailing
	tests := []struct {
		name   string
		tasks  []*spec.Task
		states map[string]*spec.TaskState
		judged bool
		want   spec.Health
	}{
		{"no services", []*spec.Task{plain}, map[string]*spec.TaskState{"plain": run()}, false, ""},
		{"not started yet", []*spec.Task{withChecks}, map[string]*spec.TaskState{"web": pending}, false, spec.HealthPending},
		{"running, checks not set up", []*spec.Task{withChecks}, map[string]*spec.TaskState{"web": run()}, false, spec.HealthPending},
		{"a check pending", []*spec.Task{withChecks}, map[string]*spec.TaskState{"web": run(OK, P)}, false, spec.HealthPending},
		{"all pass", []*spec.Task{withChecks, noChecks, plain}, map[string]*spec.TaskState{"web": run(OK, OK), "side": run(), "plain": dead}, false, spec.HealthHealthy},
		{"one fails", []*spec.Task{withChecks}, map[string]*spec.TaskState{"web": run(P, F)}, false, spec.HealthUnhealthy},
		{"service without checks running", []*spec.Task{noChecks}, map[string]*spec.TaskState{"side": run()}, false, spec.HealthHealthy},
		{"restarting after a verdict", []*spec.Task{withChecks}, map[string]*spec.TaskState{"web": pending}, true, spec.HealthUnhealthy},
		{"dead after a verdict", []*spec.Task{noChecks}, map[string]*spec.TaskState{"side": dead}, true, spec.HealthUnhealthy},
		{"running again, checks pending", []*spec.Task{withChecks}, map[string]*spec.TaskState{"web": run(P, P)}, true, spec.HealthPending},
	}
	for _, tt := range tests {
		if got := allocHealth(tt.tasks, tt.states, tt.judged); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestScriptOutput(t *testing.T) {
	for _, tt := range []struct {
		out  string
		code int
		want string
	}{
		{"\n  all good  \nmore\n", 0, "all good"},
		{"", 3, "exit code 3"},
		{strings.Repeat("x", 300), 1, strings.Repeat("x", 200) + "..."},
	} {
		if got := scriptOutput([]byte(tt.out), tt.code); got != tt.want {
			t.Errorf("scriptOutput(%q, %d) = %q, want %q", tt.out, tt.code, got, tt.want)
		}
	}
}
