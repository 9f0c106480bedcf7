package spec

import (
	"strings"
	"testing"
)

// TestValidateKinds: periodic and parameterized blocks and
// dispatch_payload are refused where they cannot work, with the field and
// what to write.
func TestValidateKinds(t *testing.T) {
	base := func(typ JobType) *Job {
		return &Job{Name: "j", Type: typ, Priority: 50, Groups: []*Group{{Name: "g", Count: 1, Tasks: []*Task{{Name: "t", Driver: "exec",
			Config: TaskConfig{Command: "/bin/true"}, Resources: Resources{CPU: 10, MemoryMB: 10}}}}}}
	}
	for _, tc := range []struct {
		name         string
		edit         func(*Job)
		field, words string
	}{
		{"periodic service", func(j *Job) { j.Type = JobService; j.Periodic = &Periodic{Cron: "@daily"} }, "periodic", `type "batch" or "sysbatch"`},
		{"no schedule", func(j *Job) { j.Periodic = &Periodic{} }, "periodic.crons", "needs a schedule"},
		{"both", func(j *Job) { j.Periodic = &Periodic{Cron: "@daily"}; j.Parameterized = &Parameterized{} }, "periodic", "not both"},
		{"bad payload", func(j *Job) { j.Parameterized = &Parameterized{Payload: "maybe"} }, "parameterized.payload", `"optional" (the default)`},
		{"required and optional", func(j *Job) {
			j.Parameterized = &Parameterized{MetaRequired: []string{"a"}, MetaOptional: []string{"a"}}
		}, "parameterized.meta_optional", "both required and optional"},
		{"payload without parameterized", func(j *Job) { j.Groups[0].Tasks[0].DispatchPayload = &DispatchPayload{File: "in"} }, "groups[0].tasks[0].dispatch_payload", "needs a parameterized job"},
		{"payload outside local", func(j *Job) {
			j.Parameterized = &Parameterized{}
			j.Groups[0].Tasks[0].DispatchPayload = &DispatchPayload{File: "../x"}
		}, "groups[0].tasks[0].dispatch_payload.file", "inside the task's local/"},
	} {
		j := base(JobBatch)
		tc.edit(j)
		ps := j.Validate()
		if len(ps) != 1 || ps[0].Field != tc.field || !strings.Contains(ps[0].Message, tc.words) {
			t.Errorf("%s: got %v; want one problem at %s saying %q", tc.name, ps, tc.field, tc.words)
		}
	}
	ok := base(JobSysBatch)
	ok.Parameterized = &Parameterized{MetaRequired: []string{"a"}}
	ok.Groups[0].Tasks[0].DispatchPayload = &DispatchPayload{File: "in/p.json"}
	if ps := ok.Validate(); ps != nil {
		t.Errorf("a parameterized sysbatch job with a payload file: %v", ps)
	}
}
