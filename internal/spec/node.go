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
	// MinDynamicPort and MaxDynamicPort bound the ports the scheduler picks
	// for dynamic port labels on this node (`drover agent
	// --min-dynamic-port`, as Nomad's client); 0: DynamicPortMin and
	// DynamicPortMax.
	MinDynamicPort int `json:"min_dynamic_port,omitempty"`
	MaxDynamicPort int `json:"max_dynamic_port,omitempty"`

	Status       NodeStatus `json:"status"`
	RegisterTime time.Time  `json:"register_time"`

	// Ineligible and Drain are the operator's (`drover node eligibility`,
	// `drover node drain`), stored apart from the agent's record
	// (NodeControl) and merged in on read. An ineligible or draining node
	// gets no new work; a draining node's work moves elsewhere.
	Ineligible bool           `json:"ineligible,omitempty"`
	Drain      *DrainStrategy `json:"drain,omitempty"`
	// Usage is what the node's tasks use in all (Tasks; Allocs is not
	// kept), as its agent last reported it, merged in on read; nil before
	// the first report.
	Usage *NodeUsage `json:"usage,omitempty"`

	ModifyIndex int64 `json:"modify_index,omitempty"`
}

// NodeStatus says whether the scheduler may place work on a node.
type NodeStatus string

const (
	NodeReady NodeStatus = "ready"
	NodeDown  NodeStatus = "down"
)

// DynamicPorts is the node's range of dynamic ports.
func (n *Node) DynamicPorts() (lo, hi int) {
	lo, hi = DynamicPortMin, DynamicPortMax
	if n.MinDynamicPort > 0 {
		lo = n.MinDynamicPort
	}
	if n.MaxDynamicPort > 0 {
		hi = n.MaxDynamicPort
	}
	return lo, hi
}

// HasDriver reports whether the node advertises driver d.
func (n *Node) HasDriver(d string) bool {
	for _, x := range n.Drivers {
		if x == d {
			return true
		}
	}
	return false
}

// Eligible reports whether the scheduler may place new work on the node:
// ready, not marked ineligible, not draining.
func (n *Node) Eligible() bool {
	return n.Status == NodeReady && !n.Ineligible && n.Drain == nil
}

// NodeControl is what an operator decides about a node, stored apart from
// the agent's record.
type NodeControl struct {
	Ineligible bool           `json:"ineligible,omitempty"`
	Drain      *DrainStrategy `json:"drain,omitempty"`
}

// DrainStrategy moves a node's work elsewhere: each group's instances
// move under its update block's max_parallel (1 without one), each
// replacement healthy before the next moves. Batch instances finish where
// they are. At Deadline (zero: none) whatever is left is stopped; system
// jobs' instances stop once nothing else is left.
type DrainStrategy struct {
	StartedAt time.Time `json:"started_at"`
	Deadline  time.Time `json:"deadline,omitzero"`
}
