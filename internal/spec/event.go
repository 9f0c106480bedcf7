package spec

import "time"

// Event topics.
const (
	TopicJob        = "job"
	TopicAlloc      = "alloc"
	TopicNode       = "node"
	TopicDeployment = "deployment"
	TopicLeader     = "leader"
)

// Event is one state change in the cluster's durable history (GET
// /v1/events, drover events): what happened, to what, and why.
type Event struct {
	// Index is the etcd revision that stored the event: events of one
	// write share it; a reader resumes after the last it saw.
	Index int64     `json:"index,omitempty"`
	Time  time.Time `json:"time"`
	Topic string    `json:"topic"`
	// Type is what happened: one of the EventTypes below, a task event's
	// type, or a deployment's status.
	Type      EventType `json:"type"`
	Job       string    `json:"job,omitempty"`
	Namespace string    `json:"namespace,omitempty"`
	Node      string    `json:"node,omitempty"`  // node name
	Alloc     string    `json:"alloc,omitempty"` // alloc name, job.group[i]
	AllocID   string    `json:"alloc_id,omitempty"`
	// DeploymentID is the deployment a deployment's event is about.
	DeploymentID string `json:"deployment_id,omitempty"`
	Task         string `json:"task,omitempty"`
	// Message says why, in words.
	Message string `json:"message,omitempty"`
}

// EventType is what an event says happened: the cluster history's
// (Event.Type) and a task's (TaskEvent.Type). The values are stored: the
// history written by earlier versions reads with the same ones, so none
// may change.
type EventType string

// Job events (TopicJob).
const (
	EventSubmitted EventType = "Submitted"
	EventStopped   EventType = "Stopped"
	// EventRestartRequested is also a task's, when an operator asks for
	// it to be restarted in place (drover alloc restart).
	EventRestartRequested EventType = "Restart Requested"
	EventPurged           EventType = "Purged"
)

// Node events (TopicNode) and the leader's (TopicLeader).
const (
	EventRegistered EventType = "Registered"
	EventDown       EventType = "Down"
	EventReady      EventType = "Ready"
	EventElected    EventType = "Elected"
)

// Alloc events (TopicAlloc) of the leader's plans, and of the agents'
// reports (ClientStatus.EventType).
const (
	EventPlaced   EventType = "Placed"
	EventStopping EventType = "Stopping"
	EventEvicted  EventType = "Evicted"

	EventPending  EventType = "Pending"
	EventRunning  EventType = "Running"
	EventComplete EventType = "Complete"
	EventFailed   EventType = "Failed"
	EventLost     EventType = "Lost"
)

// Deployment events (TopicDeployment): an agent's verdict on an instance,
// and the deployment's status (DeploymentStatus.EventType).
const (
	EventHealthy   EventType = "Healthy"
	EventUnhealthy EventType = "Unhealthy"
)

// Task event types: an alloc's task events (TaskState.Events), which are
// also alloc events of the history.
const (
	EventReceived   EventType = "Received"
	EventStarted    EventType = "Started"
	EventTerminated EventType = "Terminated"
	EventRestarting EventType = "Restarting"
	EventNotRestart EventType = "Not Restarting"
	EventKilling    EventType = "Killing"
	EventKilled     EventType = "Killed"
	EventDriverFail EventType = "Driver Failure"
	EventCompleted  EventType = "Completed"
	// EventAdopted: a restarted agent took over the task's running process
	// instead of starting it again.
	EventAdopted      EventType = "Adopted"
	EventCheckPassing EventType = "Check Passing"
	EventCheckFailing EventType = "Check Failing"
	EventCheckRestart EventType = "Restart Signaled"
	// EventOutOfMemory: the task was killed for going past its memory
	// limit (exec in a cgroup, docker).
	EventOutOfMemory EventType = "OOM Killed"
	// EventPoststop: a poststop command ran, after the task's process
	// ended.
	EventPoststop EventType = "Poststop"
	// EventTemplate: a template was rendered again after the service
	// catalog changed, and what its change_mode did; or rendering failed.
	EventTemplate EventType = "Template"
	// EventArtifacts: the task's artifacts were fetched, before its
	// start; EventArtifactFail: one could not be (its URL, redacted, and
	// why).
	EventArtifacts    EventType = "Downloading Artifacts"
	EventArtifactFail EventType = "Failed Artifact Download"
	// EventSignaled: an operator sent the task a signal (drover alloc
	// signal).
	EventSignaled EventType = "Signaled"
)

// EventType is the history's event for an alloc's client status becoming s.
func (s ClientStatus) EventType() EventType {
	switch s {
	case ClientPending:
		return EventPending
	case ClientRunning:
		return EventRunning
	case ClientComplete:
		return EventComplete
	case ClientFailed:
		return EventFailed
	case ClientLost:
		return EventLost
	}
	return EventType(s)
}

// EventType is the history's event for a deployment's status becoming s:
// the status itself.
func (s DeploymentStatus) EventType() EventType { return EventType(s) }
