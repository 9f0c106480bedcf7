package spec

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

func optionsJob(edit func(g *Group, t *Task)) *Job {
	task := &Task{Name: "t", Driver: "raw_exec", Config: TaskConfig{Command: "/bin/true"}}
	g := &Group{Name: "g", Count: 1, Tasks: []*Task{task}}
	edit(g, task)
	j := &Job{Name: "j", Groups: []*Group{g}}
	j.Canonicalize()
	return j
}

// TestTaskOptionsValidation: each task option a job file can get wrong is
// refused at its field, saying what to write.
func TestTaskOptionsValidation(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(g *Group, t *Task)
		want string // "" for valid
	}{
		{"kill_signal", func(_ *Group, t *Task) { t.KillSignal = "SIGINT" }, ""},
		{"kill_signal lower case", func(_ *Group, t *Task) { t.KillSignal = "int" },
			`groups[0].tasks[0].kill_signal: task "t": unknown signal "int"; write it "SIGINT"`},
		{"kill_signal unknown", func(_ *Group, t *Task) { t.KillSignal = "SIGFOO" },
			`groups[0].tasks[0].kill_signal: task "t": unknown signal "SIGFOO"; use one of SIGABRT,`},
		{"shutdown_delay", func(_ *Group, t *Task) { t.ShutdownDelay = Duration(5 * time.Second) }, ""},
		{"shutdown_delay negative", func(_ *Group, t *Task) { t.ShutdownDelay = Duration(-time.Second) },
			`groups[0].tasks[0].shutdown_delay: task "t": shutdown_delay must be between 0 and 1h, got -1s`},
		{"user twice", func(_ *Group, t *Task) { t.User, t.Config.User = "a", "b" },
			`groups[0].tasks[0].user: task "t" sets user "a" and config user "b"; write the user once`},
		{"memory_max", func(_ *Group, t *Task) { t.Resources.MemoryMaxMB = 600 }, ""},
		{"memory_max below memory", func(_ *Group, t *Task) { t.Resources.MemoryMB, t.Resources.MemoryMaxMB = 256, 128 },
			`groups[0].tasks[0].resources.memory_max: memory_max 128 MB is less than memory 256 MB`},
		{"memory_max -1, no hard limit", func(_ *Group, t *Task) { t.Resources.MemoryMB, t.Resources.MemoryMaxMB = 64, -1 }, ""},
		{"memory_max -2", func(_ *Group, t *Task) { t.Resources.MemoryMB, t.Resources.MemoryMaxMB = 64, -2 },
			`groups[0].tasks[0].resources.memory_max: memory_max -2 MB must not be negative: write -1 for no hard memory limit (memory stays what is reserved), or a limit at or above memory 64 MB`},
		{"two leaders", func(g *Group, t *Task) {
			t.Leader = true
			u := *t
			u.Name = "u"
			g.Tasks = append(g.Tasks, &u)
		}, `groups[0].tasks: group "g" has 2 leader tasks; at most one task may be the leader`},
		{"ephemeral_disk negative", func(g *Group, _ *Task) { g.EphemeralDisk = &EphemeralDisk{SizeMB: -1} },
			`groups[0].ephemeral_disk.size: ephemeral_disk size -1 MB must not be negative`},
	} {
		err := optionsJob(c.edit).Validate().Err()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
}

// TestEphemeralDiskIsReserved: a group reserves its ephemeral_disk size
// beside its tasks' disk; memory_max is not reserved.
func TestEphemeralDiskIsReserved(t *testing.T) {
	j := optionsJob(func(g *Group, t *Task) {
		g.EphemeralDisk = &EphemeralDisk{SizeMB: 300, Sticky: true}
		t.Resources.DiskMB = 20
		t.Resources.MemoryMaxMB = 1000
	})
	r := j.Groups[0].Resources()
	if r.DiskMB != 320 || r.MemoryMB != DefaultMemoryMB {
		t.Errorf("group reserves %+v, want disk 320 MB and memory %d MB", r, DefaultMemoryMB)
	}
}

// TestMemoryMaxLimitVariable: NOMAD_MEMORY_MAX_LIMIT is set only with
// memory_max.
func TestMemoryMaxLimitVariable(t *testing.T) {
	rt := testRuntime("raw_exec")
	if v, ok := rt.Env()["NOMAD_MEMORY_MAX_LIMIT"]; ok {
		t.Errorf("NOMAD_MEMORY_MAX_LIMIT = %q without memory_max", v)
	}
	rt.Task.Resources.MemoryMaxMB = 512
	if v := rt.Env()["NOMAD_MEMORY_MAX_LIMIT"]; v != "512" {
		t.Errorf("NOMAD_MEMORY_MAX_LIMIT = %q, want 512", v)
	}
}

// TestMemoryMaxUnlimited: memory_max = -1 reserves memory only, which is
// the soft limit, and sets no hard limit; NOMAD_MEMORY_MAX_LIMIT, a number
// of MB, is not set.
func TestMemoryMaxUnlimited(t *testing.T) {
	for _, c := range []struct {
		r          Resources
		hard, soft int
		unlimited  bool
	}{
		{Resources{MemoryMB: 64}, 64, 0, false},
		{Resources{MemoryMB: 64, MemoryMaxMB: 128}, 128, 64, false},
		{Resources{MemoryMB: 64, MemoryMaxMB: 64}, 64, 0, false},
		{Resources{MemoryMB: 64, MemoryMaxMB: MemoryMaxUnlimited}, 0, 64, true},
	} {
		if got := c.r.MemoryLimitMB(); got != c.hard {
			t.Errorf("%+v: hard limit %d MB, want %d", c.r, got, c.hard)
		}
		if got := c.r.MemorySoftLimitMB(); got != c.soft {
			t.Errorf("%+v: soft limit %d MB, want %d", c.r, got, c.soft)
		}
		if got := c.r.MemoryUnlimited(); got != c.unlimited {
			t.Errorf("%+v: unlimited %v, want %v", c.r, got, c.unlimited)
		}
	}
	j := optionsJob(func(_ *Group, t *Task) { t.Resources.MemoryMB, t.Resources.MemoryMaxMB = 64, -1 })
	if r := j.Groups[0].Resources(); r.MemoryMB != 64 {
		t.Errorf("group reserves %d MB, want 64", r.MemoryMB)
	}
	rt := testRuntime("exec")
	rt.Task.Resources.MemoryMaxMB = MemoryMaxUnlimited
	env := rt.Env()
	if v, ok := env["NOMAD_MEMORY_MAX_LIMIT"]; ok {
		t.Errorf("NOMAD_MEMORY_MAX_LIMIT = %q with memory_max -1", v)
	}
	if env["NOMAD_MEMORY_LIMIT"] != strconv.Itoa(rt.Task.Resources.MemoryMB) {
		t.Errorf("NOMAD_MEMORY_LIMIT = %q, want the reserved %d", env["NOMAD_MEMORY_LIMIT"], rt.Task.Resources.MemoryMB)
	}
}
