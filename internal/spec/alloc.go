package spec

import (
	"fmt"
	"time"
)

// An allocation (alloc) is one instance of a group placed on one node.
//
// Its two halves have one writer each:
//
//	Alloc        desired state   written by the leader's scheduling loop
//	AllocStatus  observed state  written by the agent on the alloc's node
//
// Desired status only moves run -> stop. Client status only moves forward:
//
//	pending --> running --> complete
//	   |           |
//	   +-----------+------> failed
//	   +-----------+------> lost      (node gone; set by the leader, issue 3)
type Alloc struct {
	ID   string `json:"id"`
	Name string `json:"name"` // "job.group[index]"
	Job  string `json:"job"`
	// Namespace is the job's, copied at placement ("" before namespaces).
	Namespace  string    `json:"namespace,omitempty"`
	JobVersion uint64    `json:"job_version"`
	Group      string    `json:"group"`
	Index      int       `json:"index"`
	NodeID     string    `json:"node_id"`
	NodeName   string    `json:"node_name"`
	Resources  Resources `json:"resources"`
	// Ports are the host ports reserved for the alloc on its node.
	Ports []AllocPort `json:"ports,omitempty"`
	// NetworkMode is the group's network mode as of JobVersion
	// (Group.NetworkMode; "" is host), so that the agent sets up the
	// instance's network without the job at hand.
	NetworkMode string `json:"network_mode,omitempty"`
	// DNS and Hostname are the group network's, as of JobVersion: the
	// resolver and host name of the alloc's docker tasks.
	DNS      *DNSConfig `json:"dns,omitempty"`
	Hostname string     `json:"hostname,omitempty"`
	// Tasks is the group's tasks as of JobVersion, so that the agent runs
	// exactly what was placed even while the job changes.
	Tasks []*Task `json:"tasks"`
	// Volumes are the group's volume blocks as of JobVersion: the host
	// volumes its tasks' volume_mount blocks name (volume.go).
	Volumes []*VolumeRequest `json:"volumes,omitempty"`
	// Meta is the job's meta with the group's over it, as of JobVersion:
	// the tasks' NOMAD_META_* with their own meta (TaskRuntime.Env).
	Meta map[string]string `json:"meta,omitempty"`
	// JobType tells the agent whether an exit 0 completes the task.
	JobType JobType `json:"job_type"`
	// Payload is a dispatched job's payload, which each task with a
	// dispatch_payload block finds in its local/ directory.
	Payload []byte `json:"payload,omitempty"`
	// Disconnect is the group's policy as of JobVersion: the agent stops
	// the alloc itself after StopAfter without contact with any server.
	Disconnect *DisconnectPolicy `json:"disconnect,omitempty"`
	// MaxRunDuration is the group's as of JobVersion: the agent stops the
	// alloc that long after it began (Group.MaxRunDuration).
	MaxRunDuration Duration `json:"max_run_duration,omitempty"`
	// DeploymentID is the deployment that placed the alloc, or "". Its
	// agent then judges the alloc's health once, by Update's health_check,
	// min_healthy_time and healthy_deadline (AllocStatus.DeploymentHealth).
	DeploymentID string          `json:"deployment_id,omitempty"`
	Update       *UpdateStrategy `json:"update,omitempty"`
	// Canary: placed beside the old version's instance of the same index,
	// which keeps running until the deployment is promoted.
	Canary bool `json:"canary,omitempty"`

	DesiredStatus DesiredStatus `json:"desired_status"`
	// DesiredCause is why the leader placed or stopped the alloc, for the
	// decisions that read it back; DesiredReason says why in words, for
	// people, and no decision reads it.
	DesiredCause  DesiredCause `json:"desired_cause,omitempty"`
	DesiredReason string       `json:"desired_reason,omitempty"`
	// EvictedLegacy is what servers wrote before DesiredCause: set when
	// the alloc was stopped to make room for other work. Read only for
	// their records (Evicted); never written.
	EvictedLegacy bool      `json:"evicted,omitempty"`
	CreateTime    time.Time `json:"create_time"`
	ModifyTime    time.Time `json:"modify_time"`

	// Status is the agent's report, merged in on read. Nil until the agent
	// first reports.
	Status *AllocStatus `json:"status,omitempty"`

	// NodeDown is set on read, never stored: the alloc's node has stopped
	// heartbeating (its liveness lease ran out), so whatever the agent last
	// reported is no longer known. The reconciler counts such an alloc as
	// lost and replaces it.
	NodeDown bool `json:"node_down,omitempty"`
	// NodeDownSince is when the leader first saw the node down (set by the
	// leader before reconciling, never stored); zero when unknown.
	NodeDownSince time.Time `json:"node_down_since,omitzero"`

	// CreateIndex and ModifyIndex are registry revisions, set on read.
	CreateIndex int64 `json:"create_index,omitempty"`
	ModifyIndex int64 `json:"modify_index,omitempty"`
}

// DesiredStatus is what the leader wants done with an alloc.
type DesiredStatus string

const (
	DesiredRun  DesiredStatus = "run"
	DesiredStop DesiredStatus = "stop"
)

// ClientStatus is what the agent observes of an alloc as a whole.
type ClientStatus string

const (
	ClientPending  ClientStatus = "pending"
	ClientRunning  ClientStatus = "running"
	ClientComplete ClientStatus = "complete"
	ClientFailed   ClientStatus = "failed"
	ClientLost     ClientStatus = "lost"
)

// Terminal reports whether the status can no longer change.
func (s ClientStatus) Terminal() bool {
	return s == ClientComplete || s == ClientFailed || s == ClientLost
}

// AllocStatus is the agent's observation of one alloc.
type AllocStatus struct {
	ClientStatus ClientStatus          `json:"client_status"`
	Description  string                `json:"description,omitempty"`
	Tasks        map[string]*TaskState `json:"tasks,omitempty"`
	// Health is the instance's health from its tasks' checks (service.go);
	// "" for an alloc whose tasks have no services.
	Health Health `json:"health,omitempty"`
	// DeploymentHealth is the agent's verdict on an alloc placed by a
	// deployment (Alloc.DeploymentID); nil until given, then final.
	DeploymentHealth *DeploymentHealth `json:"deployment_health,omitempty"`
	// EndCause is why the agent ended the alloc on its own, as data for
	// the programs that read it; Description says it in words. "" when
	// the alloc ended as its tasks did, or as the server asked.
	EndCause EndCause `json:"end_cause,omitempty"`
	// Began is when the alloc began on its node (its agent took it up),
	// kept across agent restarts and task restarts: what its group's
	// max_run_duration counts from.
	Began      time.Time `json:"began,omitzero"`
	UpdateTime time.Time `json:"update_time"`
}

// EndCause is why an agent ended an alloc on its own (AllocStatus.EndCause).
type EndCause string

// EndMaxRunDuration: the alloc ran for its group's max_run_duration and
// its agent stopped it; it is complete, not failed.
const EndMaxRunDuration EndCause = "max-run-duration"

// TaskStateName is where a task is in its life on the node.
//
//	pending --start--> running --exit--> (restart policy) --> running
//	                                  \-> dead (complete, failed or stopped)
type TaskStateName string

const (
	TaskPending TaskStateName = "pending"
	TaskRunning TaskStateName = "running"
	TaskDead    TaskStateName = "dead"
)

// TaskState is one task's observed state and its history of events.
type TaskState struct {
	State      TaskStateName `json:"state"`
	Failed     bool          `json:"failed,omitempty"`
	Restarts   int           `json:"restarts"`
	PID        int           `json:"pid,omitempty"`
	ExitCode   *int          `json:"exit_code,omitempty"`
	StartedAt  time.Time     `json:"started_at,omitzero"`
	FinishedAt time.Time     `json:"finished_at,omitzero"`
	// RestartAt is when a task that died starts again under its restart
	// policy, set from the moment it died until it starts; RestartAttempt
	// is that start's number within the policy's interval, of
	// RestartAttempts allowed (0 when waiting for the interval to pass).
	RestartAt       time.Time   `json:"restart_at,omitzero"`
	RestartAttempt  int         `json:"restart_attempt,omitempty"`
	RestartAttempts int         `json:"restart_attempts,omitempty"`
	Events          []TaskEvent `json:"events,omitempty"`
	// Checks are the task's services' checks, in job file order.
	Checks []CheckState `json:"checks,omitempty"`
	// ContainerID is the docker container running the task.
	ContainerID string `json:"container_id,omitempty"`
}

// MaxTaskEvents bounds the events kept per task; the oldest are dropped.
const MaxTaskEvents = 20

// TaskEvent is one state change of a task, with when and why.
type TaskEvent struct {
	Time    time.Time `json:"time"`
	Type    EventType `json:"type"` // the task event types in event.go
	Message string    `json:"message,omitempty"`
}

// AddEvent appends e and keeps at most MaxTaskEvents.
func (ts *TaskState) AddEvent(e TaskEvent) {
	ts.Events = append(ts.Events, e)
	if n := len(ts.Events); n > MaxTaskEvents {
		ts.Events = append(ts.Events[:0:0], ts.Events[n-MaxTaskEvents:]...)
	}
}

// AllocName is the readable name of an instance: "web.api[2]".
func AllocName(job, group string, index int) string {
	return fmt.Sprintf("%s.%s[%d]", job, group, index)
}

// ClientStatusOr returns the agent's status, or pending before any report.
func (a *Alloc) ClientStatusOr() ClientStatus {
	if a.Status == nil || a.Status.ClientStatus == "" {
		return ClientPending
	}
	return a.Status.ClientStatus
}

// Evicted reports whether the leader stopped a to make room for other work
// (preemption, or a job's replaces rule): the instance did not fail, so it
// is placed again at once and does not count as a reschedule attempt. A
// record written before causes existed says so by its own flag.
func (a *Alloc) Evicted() bool {
	return a.DesiredCause.Evicted() || a.DesiredCause == "" && a.EvictedLegacy
}

// Terminal reports whether the alloc is done: the agent says so, or it was
// told to stop and never started.
func (a *Alloc) Terminal() bool {
	return a.ClientStatusOr().Terminal()
}

// Restarts is the total restart count over the alloc's tasks.
func (a *Alloc) Restarts() int {
	n := 0
	if a.Status != nil {
		for _, t := range a.Status.Tasks {
			n += t.Restarts
		}
	}
	return n
}

// NetworkModeOf is the alloc's network mode, NetworkHost when it records
// none.
func (a *Alloc) NetworkModeOf() string {
	if a.NetworkMode == "" {
		return NetworkHost
	}
	return a.NetworkMode
}
