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
	// Type is what happened: Submitted, Stopped, Placed, Stopping,
	// Evicted, Running, Complete, Failed, Lost, a task event's type
	// (Started, Terminated, Restarting, ...), Down, Ready, Elected, or a
	// deployment's status.
	Type      string `json:"type"`
	Job       string `json:"job,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Node      string `json:"node,omitempty"`  // node name
	Alloc     string `json:"alloc,omitempty"` // alloc name, job.group[i]
	AllocID   string `json:"alloc_id,omitempty"`
	// DeploymentID is the deployment a deployment's event is about.
	DeploymentID string `json:"deployment_id,omitempty"`
	Task         string `json:"task,omitempty"`
	// Message says why, in words.
	Message string `json:"message,omitempty"`
}
