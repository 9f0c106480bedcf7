package spec

import (
	"strings"
	"time"
)

// Node is a machine that runs an agent. The agent registers it; the server
// owns Status.
type Node struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Address is the agent's HTTP address (for logs), "http://host:port".
	Address string `json:"address,omitempty"`
	// Datacenter, NodeClass and NodePool are the operator's, as on a
	// Nomad client (`drover agent --datacenter`, `--node-class`,
	// `--node-pool`): a job runs only on nodes of its datacenters and
	// pool (Job.Admits), and constraints read them as ${node.datacenter},
	// ${node.class} and ${node.pool}. A record without them (an agent
	// that did not send them) reads as DefaultDatacenter and
	// DefaultNodePool: see DatacenterOf and PoolOf.
	Datacenter string `json:"datacenter,omitempty"`
	NodeClass  string `json:"node_class,omitempty"`
	NodePool   string `json:"node_pool,omitempty"`
	// Attributes are detected facts, with Nomad's names (attribute.go);
	// read them with Attribute, which also knows drover's older names.
	Attributes map[string]string `json:"attributes,omitempty"`
	// Meta is operator-given, from `drover agent --meta k=v`.
	Meta map[string]string `json:"meta,omitempty"`
	// Resources is the node's total capacity.
	Resources Resources `json:"resources"`
	// Drivers are the task drivers this node can run.
	Drivers []string `json:"drivers"`
	// HostVolumes are the directories the agent offers jobs by name
	// (`drover agent --host-volume`, volume.go), sorted by name.
	HostVolumes []HostVolume `json:"host_volumes,omitempty"`
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

// A node's datacenter and pool when its agent names none, as Nomad's.
// NodePoolAll is the pool a job names to run on every node, whatever its
// pool; no node is in it.
const (
	DefaultDatacenter = "dc1"
	DefaultNodePool   = "default"
	NodePoolAll       = "all"
)

// DatacenterOf is the node's datacenter: DefaultDatacenter when unset.
func (n *Node) DatacenterOf() string {
	if n.Datacenter == "" {
		return DefaultDatacenter
	}
	return n.Datacenter
}

// PoolOf is the node's pool: DefaultNodePool when unset.
func (n *Node) PoolOf() string {
	if n.NodePool == "" {
		return DefaultNodePool
	}
	return n.NodePool
}

// CheckNodeScope says what is wrong with a node's datacenter, class or
// pool as an operator gives them, or "" when nothing is. The class may
// be empty; the others are set by then (their defaults).
func CheckNodeScope(datacenter, class, pool string) string {
	if msg := CheckName(datacenter); msg != "" {
		return "datacenter " + msg
	}
	if msg := CheckName(class); msg != "" && class != "" {
		return "node class " + msg
	}
	if msg := CheckName(pool); msg != "" {
		return "node pool " + msg
	}
	if pool == NodePoolAll {
		return `node pool "all" is the one jobs name to run in every pool; no node is in it: choose another name`
	}
	return ""
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
// jobs' instances stop once nothing else is left, unless IgnoreSystemJobs.
type DrainStrategy struct {
	StartedAt time.Time `json:"started_at"`
	Deadline  time.Time `json:"deadline,omitzero"`
	// IgnoreSystemJobs leaves the node's system and sysbatch instances
	// running when the rest has left (and at the deadline): the node
	// keeps its per-node services (log shippers, monitoring) through a
	// drain, as Nomad's -ignore-system.
	IgnoreSystemJobs bool `json:"ignore_system_jobs,omitempty"`
}

// Admits reports whether the job may run on n at all: n is in its node
// pool and in one of its datacenters. Constraints and resources come
// after.
func (j *Job) Admits(n *Node) bool { return j.inPool(n) && j.inDatacenters(n) }

// Excluded is why the job may not run on n, as a placement failure's
// dimension ("node pool gpu", "datacenter dc2 or dc3"), or "" when it
// Admits n.
func (j *Job) Excluded(n *Node) string {
	switch {
	case !j.inPool(n):
		return DimensionNodePool + j.poolOf()
	case !j.inDatacenters(n):
		return DimensionDatacenter + strings.Join(j.Datacenters, " or ")
	}
	return ""
}

func (j *Job) poolOf() string {
	if j.NodePool == "" {
		return DefaultNodePool
	}
	return j.NodePool
}

func (j *Job) inPool(n *Node) bool {
	p := j.poolOf()
	return p == NodePoolAll || p == n.PoolOf()
}

func (j *Job) inDatacenters(n *Node) bool {
	if len(j.Datacenters) == 0 {
		return true
	}
	dc := n.DatacenterOf()
	for _, pat := range j.Datacenters {
		if globMatch(pat, dc) {
			return true
		}
	}
	return false
}

// globMatch reports whether s matches pattern, in which * stands for any
// run of characters and every other character for itself: the globs of
// Nomad's datacenters (no ?, no [...]).
func globMatch(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == s
	}
	rest, ok := strings.CutPrefix(s, parts[0])
	if !ok {
		return false
	}
	last := parts[len(parts)-1]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(rest, p)
		if i < 0 {
			return false
		}
		rest = rest[i+len(p):]
	}
	return strings.HasSuffix(rest, last)
}
