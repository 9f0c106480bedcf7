package spec

import "fmt"

// LifecycleHook is when a hook task runs relative to its group's main
// tasks (those without a lifecycle block).
type LifecycleHook string

const (
	// HookPrestart tasks run before the main tasks start: to completion,
	// or, as sidecars, started and running.
	HookPrestart LifecycleHook = "prestart"
	// HookPoststart tasks start once every main task is running.
	HookPoststart LifecycleHook = "poststart"
	// HookPoststop tasks start once every other task of the group has
	// ended, however it ended.
	HookPoststop LifecycleHook = "poststop"
)

// Lifecycle is a task's lifecycle block, as Nomad's.
type Lifecycle struct {
	Hook LifecycleHook `json:"hook"`
	// Sidecar keeps a prestart or poststart task running beside the main
	// tasks (restarted by its restart policy) until they end, when it is
	// stopped. Without it the task runs once to completion: an exit with
	// status 0 is done, whatever the job's type.
	Sidecar bool `json:"sidecar,omitempty"`
}

// HookOf is t's lifecycle hook, "" for a main task.
func (t *Task) HookOf() LifecycleHook {
	if t == nil || t.Lifecycle == nil {
		return ""
	}
	return t.Lifecycle.Hook
}

// Ephemeral reports a hook task that runs once to completion: a prestart
// or poststart task that is not a sidecar, or a poststop task.
func (t *Task) Ephemeral() bool {
	return t.HookOf() != "" && !t.Lifecycle.Sidecar
}

func (l *Lifecycle) validate(ps *Problems, path, task string) {
	switch l.Hook {
	case HookPrestart, HookPoststart:
	case HookPoststop:
		if l.Sidecar {
			ps.Add(path+".sidecar", "task %q: a poststop task cannot be a sidecar (it runs after every other task has ended); remove sidecar", task)
		}
	case "":
		ps.Add(path+".hook", "task %q: the lifecycle block needs a hook: \"prestart\", \"poststart\" or \"poststop\"", task)
	default:
		ps.Add(path+".hook", "task %q: unknown lifecycle hook %q; use \"prestart\", \"poststart\" or \"poststop\"", task, l.Hook)
	}
}

// validateLifecycles checks the group's tasks' lifecycle blocks: each on
// its own, and that some task is a main task for the hooks to run around.
func validateLifecycles(ps *Problems, path string, g *Group) {
	hooks, main := 0, 0
	for i, t := range g.Tasks {
		if t == nil {
			continue
		}
		if t.Lifecycle == nil {
			main++
			continue
		}
		hooks++
		t.Lifecycle.validate(ps, fmt.Sprintf("%s.tasks[%d].lifecycle", path, i), t.Name)
	}
	if hooks > 0 && main == 0 {
		ps.Add(path+".tasks", "group %q has only lifecycle tasks; a group needs at least one main task (a task without a lifecycle block) for its hooks to run around", g.Name)
	}
}
