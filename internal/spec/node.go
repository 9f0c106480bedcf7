package spec

import "time"

// Node is a machine that runs an agent. The agent registers it; the server
// owns Status.
type Node struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Address is the agent's HTTP address (for logs), "http://host:port".
	Address string `json:"address,omitempty"`
	// Attributes are detected facts: os, arch, kernel, cpu.count, hostname.
	Attributes map[string]string `json:"attributes,omitempty"`
	// Meta is operator-given, from `drover agent --meta k=v`.
	Meta map[string]string `json:"meta,omitempty"`
	// Resources is the node's total capacity.
	Resources Resources `json:"resources"`
	// Drivers are the task drivers this node can run.
	Drivers []string `json:"drivers"`

	Status       NodeStatus `json:"status"`
	RegisterTime time.Time  `json:"register_time"`

	ModifyIndex int64 `json:"modify_index,omitempty"`
}

// NodeStatus says whether the scheduler may place work on a node.
type NodeStatus string

const (
	NodeReady NodeStatus = "ready"
	NodeDown  NodeStatus = "down"
)

// HasDriver reports whether the node advertises driver d.
func (n *Node) HasDriver(d string) bool {
	for _, x := range n.Drivers {
		if x == d {
			return true
		}
	}
	return false
}
