package spec

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// diffJob is a small valid service job; edit the copy it returns.
func diffJob() *Job {
	return &Job{Name: "web", Type: JobService, Priority: 50, Groups: []*Group{{
		Name: "api", Count: 2,
		Tasks: []*Task{{
			Name: "server", Driver: "exec",
			Config:    TaskConfig{Command: "/bin/app", Args: []string{"-v1"}},
			Resources: Resources{CPU: 100, MemoryMB: 64},
		}},
	}}}
}

func diffIntp(n int) *int { return &n }

func TestSpecChanges(t *testing.T) {
	cases := []struct {
		name string
		edit func(j *Job)
		want []string
	}{
		{"identical", func(*Job) {}, nil},
		{"server-owned fields are not the spec", func(j *Job) {
			j.Version, j.SubmitTime, j.ModifyIndex, j.Stopped = 7, time.Unix(99, 0), 42, true
		}, nil},
		{"a task's args", func(j *Job) { j.Groups[0].Tasks[0].Config.Args = []string{"-v2"} },
			[]string{`~ groups[api].tasks[server].config.args: ["-v1"] -> ["-v2"]`}},
		{"an update block added", func(j *Job) {
			j.Groups[0].Update = &UpdateStrategy{Canary: diffIntp(1), MinHealthyTime: Duration(2 * time.Second)}
		}, []string{
			`+ groups[api].update.canary: 1`,
			`+ groups[api].update.min_healthy_time: "2s"`,
		}},
		{"count and a removed field", func(j *Job) {
			j.Groups[0].Count = 3
			j.Groups[0].Tasks[0].Config.Args = nil
		}, []string{
			`~ groups[api].count: 2 -> 3`,
			`- groups[api].tasks[server].config.args: ["-v1"]`,
		}},
		{"a group added before the other is its own fields only", func(j *Job) {
			j.Groups = append([]*Group{{Name: "cache", Count: 1, Tasks: []*Task{{
				Name: "redis", Driver: "exec", Config: TaskConfig{Command: "redis"}, Resources: Resources{CPU: 200, MemoryMB: 128}}}}}, j.Groups...)
		}, []string{
			`+ groups[cache].count: 1`,
			`+ groups[cache].name: "cache"`,
			`+ groups[cache].tasks[redis].config.command: "redis"`,
			`+ groups[cache].tasks[redis].driver: "exec"`,
			`+ groups[cache].tasks[redis].name: "redis"`,
			`+ groups[cache].tasks[redis].resources.cpu: 200`,
			`+ groups[cache].tasks[redis].resources.memory: 128`,
		}},
		{"env and meta by key, odd keys quoted, no HTML escapes", func(j *Job) {
			j.Meta = map[string]string{"team.owner": "ops"}
			j.Groups[0].Tasks[0].Env = map[string]string{"VERSION": "2", "URL": "http://a/?x=1&y=<2>"}
		}, []string{
			`+ groups[api].tasks[server].env.URL: "http://a/?x=1&y=<2>"`,
			`+ groups[api].tasks[server].env.VERSION: "2"`,
			`+ meta["team.owner"]: "ops"`,
		}},
		{"unnamed objects by index", func(j *Job) {
			j.Constraints = []*Constraint{{Attribute: "${attr.os}", Operator: "=", Value: "linux"}}
		}, []string{
			`+ constraints[0].attribute: "${attr.os}"`,
			`+ constraints[0].operator: "="`,
			`+ constraints[0].value: "linux"`,
		}},
		{"big numbers stay exact", func(j *Job) { j.Groups[0].Tasks[0].Resources.MemoryMB = 12345678901 },
			[]string{`~ groups[api].tasks[server].resources.memory: 64 -> 12345678901`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			from, to := diffJob(), diffJob()
			c.edit(to)
			var got []string
			for _, ch := range Changes(from, to) {
				got = append(got, ch.String())
			}
			if d := cmp.Diff(c.want, got); d != "" {
				t.Errorf("specChanges (-want +got):\n%s", d)
			}
			// The other way round, every + is a - and every ~ turns around.
			var back []string
			for _, ch := range Changes(to, from) {
				back = append(back, ch.String())
			}
			if len(back) != len(got) {
				t.Errorf("reverse has %d changes, want %d: %q", len(back), len(got), back)
			}
		})
	}
}

func TestSpecChangesReorderIsNoChange(t *testing.T) {
	from := diffJob()
	from.Groups = append(from.Groups, &Group{Name: "worker", Count: 1, Tasks: []*Task{{Name: "w", Driver: "exec", Config: TaskConfig{Command: "w"}}}})
	to := diffJob()
	to.Groups = []*Group{from.Groups[1], to.Groups[0]}
	if ch := Changes(from, to); len(ch) != 0 {
		t.Errorf("reordering groups: %v, want no change", ch)
	}
}

func TestFlattenDuplicateNamesByIndex(t *testing.T) {
	got := map[string]string{}
	flattenJSON("l", []any{map[string]any{"name": "a"}, map[string]any{"name": "a"}, map[string]any{}}, got)
	want := map[string]string{`l[0].name`: `"a"`, `l[1].name`: `"a"`, `l[2]`: `{}`}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("flattenJSON (-want +got):\n%s", d)
	}
}

func TestSummaryProgress(t *testing.T) {
	for _, tc := range []struct {
		s    JobSummary
		want string
	}{
		{JobSummary{Desired: 3, Running: 3}, "3/3 running"},
		{JobSummary{Desired: 2, Complete: 2}, "2/2 complete"},
		{JobSummary{Desired: 2, Running: 1, Complete: 1}, "1/2 running, 1 complete"},
		{JobSummary{Desired: 3, Running: 2, Failed: 1}, "2/3 running, 1 failed"},
		{JobSummary{Desired: 2, Complete: 1, Failed: 1}, "1/2 complete, 1 failed"},
		{JobSummary{Desired: 2, Running: 1, Lost: 1}, "1/2 running, 1 lost"},
		{JobSummary{Desired: 1}, "0/1 running"},
	} {
		if got := tc.s.Progress(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.s, got, tc.want)
		}
	}
}
