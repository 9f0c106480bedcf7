package reconcile

import (
	"time"

	"github.com/drover-org/drover/internal/spec"
)

var now = time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)

func task(cmd string) *spec.Task {
	return &spec.Task{Name: "main", Driver: "exec", Config: spec.TaskConfig{Command: cmd}, Resources: spec.Resources{CPU: 100, MemoryMB: 128}}
}

func grp(name string, count int, cmd string) *spec.Group {
	return &spec.Group{Name: name, Count: count, Tasks: []*spec.Task{task(cmd)}}
}

func svc(name string, version uint64, groups ...*spec.Group) *spec.Job {
	return &spec.Job{Name: name, Type: spec.JobService, Priority: 50, Version: version, Groups: groups}
}

func batch(name string, version uint64, groups ...*spec.Group) *spec.Job {
	j := svc(name, version, groups...)
	j.Type = spec.JobBatch
	return j
}

type opt func(*spec.Alloc)

// mk returns an alloc of the job's current version with the group's tasks,
// desired run, last updated at now, with client status cs ("" for no report).
func mk(id string, j *spec.Job, group string, index int, createIndex int64, cs spec.ClientStatus, opts ...opt) *spec.Alloc {
	a := &spec.Alloc{
		ID:            id,
		Name:          spec.AllocName(j.Name, group, index),
		Job:           j.Name,
		JobVersion:    j.Version,
		Group:         group,
		Index:         index,
		NodeID:        "n1",
		DesiredStatus: spec.DesiredRun,
		CreateIndex:   createIndex,
		JobType:       j.Type,
	}
	if g := j.Group(group); g != nil {
		a.Tasks = g.Tasks
		a.Resources = g.Resources()
	}
	if cs != "" {
		a.Status = &spec.AllocStatus{ClientStatus: cs, UpdateTime: now}
	}
	for _, o := range opts {
		o(a)
	}
	return a
}

// stopped marks the alloc as told to stop.
func stopped(a *spec.Alloc) { a.DesiredStatus = spec.DesiredStop }

// ver makes the alloc one of an older version running cmd.
func ver(v uint64, cmd string) opt {
	return func(a *spec.Alloc) {
		a.JobVersion = v
		a.Tasks = []*spec.Task{task(cmd)}
	}
}

// ago sets when the agent last reported.
func ago(d time.Duration) opt {
	return func(a *spec.Alloc) { a.Status.UpdateTime = now.Add(-d) }
}

// down puts the alloc on a node that stopped heartbeating.
func down(a *spec.Alloc) { a.NodeDown, a.NodeName = true, "n1" }

func desc(s string) opt {
	return func(a *spec.Alloc) { a.Status.Description = s }
}

// gone is a job that is no longer registered; only its name matters.
var gone = svc("old", 1, grp("api", 1, "x"))

// on puts the alloc on another node.
func on(node string) opt {
	return func(a *spec.Alloc) { a.NodeID, a.NodeName = node, node }
}

// policy is a limited reschedule policy.
func policy(attempts int, interval, delay time.Duration, fn spec.DelayFunction, maxDelay time.Duration) *spec.ReschedulePolicy {
	unlimited := false
	return &spec.ReschedulePolicy{Attempts: &attempts, Interval: spec.Duration(interval), Delay: spec.Duration(delay),
		DelayFunction: fn, MaxDelay: spec.Duration(maxDelay), Unlimited: &unlimited}
}

// withPolicy sets the group's reschedule policy.
func withPolicy(g *spec.Group, p *spec.ReschedulePolicy) *spec.Group {
	g.Reschedule = p
	return g
}
