package reconcile

import (
	"maps"
	"slices"

	"github.com/drover-org/drover/internal/spec"
)

// tasksEqual reports whether two task lists run the same thing, so that a
// new job version that changed only count, meta or priority keeps its
// running allocs (an in-place update) while any change to what a task runs
// or reserves replaces them. Constraints are not compared: like the job's
// and the group's, a task's constraints decide where new instances go, and
// a change to them leaves running instances where they are.
//
// It is written out field by field, rather than with reflect, to keep the
// package's imports pure; TestTasksEqualCoversEveryField fails when spec.Task
// gains a field this function does not know. Nil and empty maps and slices
// are equal, as they are after a JSON round trip through the registry.
func tasksEqual(a, b []*spec.Task) bool {
	return slices.EqualFunc(a, b, taskEqual)
}

func taskEqual(a, b *spec.Task) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Name == b.Name &&
		a.Driver == b.Driver &&
		a.Config.Command == b.Config.Command &&
		slices.Equal(a.Config.Args, b.Config.Args) &&
		maps.Equal(a.Env, b.Env) &&
		a.Resources == b.Resources &&
		restartEqual(a.Restart, b.Restart) &&
		a.KillTimeout == b.KillTimeout &&
		maps.Equal(a.Meta, b.Meta)
}

func restartEqual(a, b *spec.RestartPolicy) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
