package spec

import (
	"strings"
	"testing"
	"time"
)

// TestMigrateValidationAndMerge: a migrate block is checked where it is
// written, and a group's is merged over the job's over Nomad's defaults.
func TestMigrateValidationAndMerge(t *testing.T) {
	for _, c := range []struct {
		name string
		jt   JobType
		job  *MigrateStrategy
		grp  *MigrateStrategy
		want string
	}{
		{"job and group", JobService, &MigrateStrategy{MaxParallel: new(3)}, &MigrateStrategy{MinHealthyTime: Duration(time.Second)}, ""},
		{"max_parallel 0", JobService, nil, &MigrateStrategy{MaxParallel: new(0)}, "groups[0].migrate.max_parallel: max_parallel 0 is out of range; use 1 to"},
		{"health_check", JobService, &MigrateStrategy{HealthCheck: "manual"}, nil, `migrate.health_check: unknown health_check "manual"; use "checks" or "task_states"`},
		{"deadline", JobService, nil, &MigrateStrategy{MinHealthyTime: Duration(10 * time.Minute)}, "groups[0].migrate.healthy_deadline: healthy_deadline (5m) must be longer than min_healthy_time (10m)"},
		{"batch", JobBatch, nil, &MigrateStrategy{}, "groups[0].migrate: migrate applies to service jobs only"},
	} {
		j := optionsJob(func(g *Group, _ *Task) { g.Migrate = c.grp })
		j.Type, j.Migrate = c.jt, c.job
		j.Canonicalize()
		err := j.Validate().Err()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
	g := &Group{Name: "g", Count: 1, Migrate: &MigrateStrategy{MinHealthyTime: Duration(time.Second)},
		Tasks: []*Task{{Name: "t", Driver: "raw_exec", Config: TaskConfig{Command: "/bin/true"}}}}
	j := &Job{Name: "j", Groups: []*Group{g}, Migrate: &MigrateStrategy{MaxParallel: new(3), HealthCheck: HealthTaskStates}}
	j.Canonicalize()
	u := j.MigrateOf(g)
	if u.Parallel() != 3 || u.HealthCheck != HealthTaskStates || u.MinHealthyTime != Duration(time.Second) || u.HealthyDeadline != Duration(5*time.Minute) {
		t.Errorf("merged migrate %+v, want 3, task_states, 1s, 5m", u)
	}
	if none := optionsJob(func(*Group, *Task) {}); none.MigrateOf(none.Groups[0]) != nil {
		t.Errorf("no migrate block anywhere, got %+v", none.MigrateOf(none.Groups[0]))
	}
}
