package spec

import (
	"fmt"
	"slices"
	"strings"
)

// Nomad's files write services at group level too, a check naming with
// task = the task a script check runs in. drover registers every service
// with one task (its catalog entries, checks and health follow that task),
// so a group's service is moved into the task it belongs to: the one its
// task names, else the one its checks name, else the group's first main
// task (one without a lifecycle block). The job then holds one
// representation of services, in its tasks.

// ServiceMove says where group service From (its index in the group's
// services as written) went: task Task's services, at index To; or, for
// Task -1, the group's services at index To (it stayed).
type ServiceMove struct{ From, Task, To int }

// MoveServices moves g's services into their tasks and returns where
// each went; a service whose task cannot be told stays in g.Services,
// for Validate to say why. A moved service and its checks lose their
// task, which is now where they are.
func (g *Group) MoveServices() []ServiceMove {
	var moves []ServiceMove
	var left []*Service
	for i, s := range g.Services {
		ti, why := g.serviceHome(s)
		if why != "" {
			moves = append(moves, ServiceMove{From: i, Task: -1, To: len(left)})
			left = append(left, s)
			continue
		}
		t := g.Tasks[ti]
		s.Task = ""
		for _, c := range s.Checks {
			if c != nil {
				c.Task = ""
			}
		}
		moves = append(moves, ServiceMove{From: i, Task: ti, To: len(t.Services)})
		t.Services = append(t.Services, s)
	}
	g.Services = left
	return moves
}

// serviceHome is the index of the task group service s belongs to, or
// why it has none.
func (g *Group) serviceHome(s *Service) (int, string) {
	if s == nil {
		return 0, "service is null"
	}
	named := s.Task
	for _, c := range s.Checks {
		if c == nil || c.Task == "" {
			continue
		}
		if named != "" && c.Task != named {
			return 0, fmt.Sprintf("group service %q would run in task %q and in task %q: drover registers a service, and runs its checks, with one task; write one service per task", s.Name, named, c.Task)
		}
		named = c.Task
	}
	if named != "" {
		i := slices.IndexFunc(g.Tasks, func(t *Task) bool { return t != nil && t.Name == named })
		if i < 0 {
			return 0, fmt.Sprintf("group service %q names task %q, which is not a task of group %q; %s", s.Name, named, g.Name, taskHint(g))
		}
		return i, ""
	}
	i := slices.IndexFunc(g.Tasks, func(t *Task) bool { return t != nil && t.Lifecycle == nil })
	if i < 0 {
		return 0, fmt.Sprintf("group service %q has no task to be registered with: group %q has no main task; name one with task = ...", s.Name, g.Name)
	}
	return i, ""
}

func taskHint(g *Group) string {
	var names []string
	for _, t := range g.Tasks {
		if t != nil {
			names = append(names, fmt.Sprintf("%q", t.Name))
		}
	}
	if len(names) == 0 {
		return "the group has no tasks"
	}
	return "its tasks are " + strings.Join(names, ", ")
}

// validateGroupServices reports the group's services Canonicalize could
// not move, and a task's services that name a task, which only a group's
// may.
func validateGroupServices(ps *Problems, path string, g *Group) {
	for i, s := range g.Services {
		sp := fmt.Sprintf("%s.services[%d]", path, i)
		if _, why := g.serviceHome(s); why != "" {
			ps.Add(sp+".task", "%s", why)
		}
	}
	for i, t := range g.Tasks {
		if t == nil {
			continue
		}
		for k, s := range t.Services {
			if s == nil {
				continue
			}
			sp := fmt.Sprintf("%s.tasks[%d].services[%d]", path, i, k)
			if s.Task != "" {
				ps.Add(sp+".task", "task = is for a group's services; this service is in task %q already: remove it", t.Name)
			}
			for c, ch := range s.Checks {
				if ch != nil && ch.Task != "" {
					ps.Add(fmt.Sprintf("%s.checks[%d].task", sp, c), "task = is for the checks of a group's services; this check's service is in task %q already: remove it", t.Name)
				}
			}
		}
	}
}
