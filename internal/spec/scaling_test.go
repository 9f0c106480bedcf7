package spec

import (
	"strings"
	"testing"
)

// TestScalingValidation: a scaling block's bounds are checked where they
// are written, min defaults to the count, and a count below min is
// raised to it (a Nomad file that gives min and no count).
func TestScalingValidation(t *testing.T) {
	for _, c := range []struct {
		name      string
		jt        JobType
		count     int
		s         Scaling
		want      string // "" for valid
		wantCount int
		wantMin   int
	}{
		{"bounds", JobService, 2, Scaling{Min: new(1), Max: new(5)}, "", 2, 1},
		{"min from count", JobService, 3, Scaling{Max: new(5)}, "", 3, 3},
		{"count raised to min", JobService, 1, Scaling{Min: new(2), Max: new(5)}, "", 2, 2},
		{"no max", JobService, 1, Scaling{Min: new(1)}, `groups[0].scaling.max: group "g": scaling needs max`, 1, 1},
		{"min above max", JobService, 1, Scaling{Min: new(6), Max: new(5)}, `groups[0].scaling.min: group "g": scaling min 6 is above max 5`, 1, 6},
		{"negative min", JobService, 1, Scaling{Min: new(-1), Max: new(5)}, `scaling min -1 must not be negative`, 1, -1},
		{"count above max", JobService, 7, Scaling{Max: new(5)}, `groups[0].scaling.max: group "g": count 7 is above scaling max 5; lower count or raise max`, 7, 7},
		{"batch", JobBatch, 1, Scaling{Max: new(5)}, "", 1, 1},
		{"system", JobSystem, 1, Scaling{Max: new(5)}, `groups[0].scaling: group "g": a system job runs one instance per node and has no count to scale`, 1, 1},
	} {
		j := optionsJob(func(g *Group, _ *Task) {})
		j.Type = c.jt
		j.Groups[0].Count = c.count
		s := c.s
		j.Groups[0].Scaling = &s
		j.Canonicalize()
		err := j.Validate().Err()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
		g := j.Groups[0]
		if g.Count != c.wantCount || g.Scaling.Min == nil || *g.Scaling.Min != c.wantMin {
			t.Errorf("%s: count %d, min %v after Canonicalize; want %d and %d", c.name, g.Count, g.Scaling.Min, c.wantCount, c.wantMin)
		}
	}
}

// TestScaleCheck: the bounds a scale request is held to, and the group
// it names.
func TestScaleCheck(t *testing.T) {
	j := optionsJob(func(g *Group, _ *Task) { g.Scaling = &Scaling{Min: new(1), Max: new(3)} })
	g, msg := ScaleTarget(j, "")
	if g == nil || msg != "" {
		t.Fatalf("the only group is not the target: %q", msg)
	}
	for count, want := range map[int]string{1: "", 3: "", 0: "count 0 is below group \"g\"'s scaling min 1", 4: "count 4 is above group \"g\"'s scaling max 3", -1: "count must not be negative"} {
		if got := ScaleCheck(j, g, count); !strings.Contains(got, want) || (want == "") != (got == "") {
			t.Errorf("count %d: %q, want %q", count, got, want)
		}
	}
	two := optionsJob(func(g *Group, t *Task) {})
	other := *two.Groups[0]
	other.Name = "h"
	two.Groups = append(two.Groups, &other)
	if g, msg := ScaleTarget(two, ""); g != nil || msg != `job "j" has 2 groups (g, h); name the one to scale` {
		t.Errorf("two groups, none named: %v %q", g, msg)
	}
	if g, msg := ScaleTarget(two, "x"); g != nil || msg != `job "j" has no group "x"; its groups are g, h` {
		t.Errorf("unknown group: %v %q", g, msg)
	}
	two.Type = JobSystem
	if msg := ScaleCheck(two, two.Groups[0], 2); !strings.Contains(msg, "has no count to scale") {
		t.Errorf("system job: %q", msg)
	}
}
