package spec

import (
	"strconv"
	"time"
)

// Service registers a task's instances in the service catalog under Name,
// at the node's address and the port of the group port PortLabel. Only
// healthy instances are served (DNS, the services API). An instance is
// healthy when its task runs and every check passes; a service with no
// checks is healthy while its task runs.
type Service struct {
	Name string `json:"name"`
	// PortLabel names a port of the group's network, or is a port number
	// (NumericPort) registered as it is; "" registers the address with
	// port 0 (an A record and no SRV target).
	PortLabel string   `json:"port,omitempty"`
	Tags      []string `json:"tags,omitempty"`
	Checks    []*Check `json:"checks,omitempty" hcl:"check"`
	// Task, in a group's service, names the task it is registered with
	// (groupservice.go); Canonicalize moves the service there.
	Task string `json:"task,omitempty"`
}

// CheckType is how a check probes its instance.
type CheckType string

const (
	// CheckHTTP is a GET of Path on the instance's address and port: a 2xx
	// answer passes, anything else (or none within Timeout) fails.
	CheckHTTP CheckType = "http"
	// CheckTCP passes when a TCP connection to the address and port opens.
	CheckTCP CheckType = "tcp"
	// CheckScript runs Command with Args in the task's environment (inside
	// its container for docker): exit 0 passes.
	CheckScript CheckType = "script"
)

// Check defaults, as Nomad's and Consul's.
const (
	DefaultCheckInterval = Duration(10 * time.Second)
	DefaultCheckTimeout  = Duration(2 * time.Second)
	MinCheckInterval     = Duration(100 * time.Millisecond)
)

// Check is one health check of a service's instance.
type Check struct {
	// Name defaults to "<service>-<type>" (and an index past the first of
	// a type).
	Name string    `json:"name,omitempty"`
	Type CheckType `json:"type"`
	// PortLabel overrides the service's port for this check: a label of
	// the group's ports or a number, as the service's.
	PortLabel string `json:"port,omitempty"`
	// Path is the HTTP check's path, "/" by default.
	Path    string   `json:"path,omitempty"`
	Command string   `json:"command,omitempty"`
	Args    []string `json:"args,omitempty"`
	// Interval is the time between the starts of two probes; Timeout
	// bounds each.
	Interval Duration `json:"interval,omitempty"`
	Timeout  Duration `json:"timeout,omitempty"`
	// Grace is the initial grace period: from the task's start, failures
	// leave the check pending instead of failing it, and count for no
	// restart; the first pass ends it early.
	Grace Duration `json:"grace,omitempty"`
	// Restart restarts the task after Limit consecutive failures.
	Restart *CheckRestart `json:"check_restart,omitempty"`
	// Task, in a check of a group's service, names the task a script
	// check runs in (groupservice.go).
	Task string `json:"task,omitempty"`
}

// CheckRestart is Nomad's check_restart: Limit consecutive failed probes
// restart the task (counted by the task's restart policy like an exit);
// failures within Grace of the task's start do not count. Grace defaults to
// the check's own.
type CheckRestart struct {
	Limit int      `json:"limit"`
	Grace Duration `json:"grace,omitempty"`
}

// CheckStatus is the latest verdict of one check.
type CheckStatus string

const (
	CheckPending CheckStatus = "pending" // no verdict yet, or failing within grace
	CheckPassing CheckStatus = "passing"
	CheckFailing CheckStatus = "failing"
)

// CheckState is what the agent reports of one check of one task.
type CheckState struct {
	Service string      `json:"service"`
	Check   string      `json:"check"`
	Status  CheckStatus `json:"status"`
	// Output is the last probe's result, trimmed: "HTTP 200", "connection
	// refused", a script's first line of output.
	Output string `json:"output,omitempty"`
	// Since is when Status last changed.
	Since time.Time `json:"since,omitzero"`
	// Failures counts consecutive failed probes.
	Failures int `json:"failures,omitempty"`
}

// Health is an instance's health as a whole.
type Health string

const (
	// HealthPending: not running yet, or some check has no verdict.
	HealthPending Health = "pending"
	// HealthHealthy: running, and every check of every task passes.
	HealthHealthy Health = "healthy"
	// HealthUnhealthy: some check fails, or the instance is not running
	// after it was healthy.
	HealthUnhealthy Health = "unhealthy"
)

// ServiceInstance is one registered instance of a service, as the catalog
// serves it.
type ServiceInstance struct {
	Service   string   `json:"service"`
	Tags      []string `json:"tags,omitempty"`
	Address   string   `json:"address"`
	Port      int      `json:"port,omitempty"`
	Health    Health   `json:"health"`
	AllocID   string   `json:"alloc_id"`
	AllocName string   `json:"alloc_name"`
	Job       string   `json:"job"`
	Namespace string   `json:"namespace,omitempty"`
	Task      string   `json:"task"`
	NodeID    string   `json:"node_id"`
	NodeName  string   `json:"node_name"`
	// Checks are the instance's checks of this service.
	Checks []CheckState `json:"checks,omitempty"`
}

// ServiceSummary is one service in the catalog's list.
type ServiceSummary struct {
	Name      string   `json:"name"`
	Tags      []string `json:"tags,omitempty"`
	Healthy   int      `json:"healthy"`
	Instances int      `json:"instances"`
}

// Usage is what a task, an alloc or a node uses right now: CPU in MHz (the
// unit resources are reserved in), memory in MB of resident memory.
type Usage struct {
	CPU      int `json:"cpu"`
	MemoryMB int `json:"memory"`
}

// NodeUsage is a node's usage report: the node's tasks in all, and each
// alloc's tasks. Time is when it was sampled.
type NodeUsage struct {
	NodeID string                      `json:"node_id"`
	Time   time.Time                   `json:"time"`
	Tasks  Usage                       `json:"tasks"`
	Allocs map[string]map[string]Usage `json:"allocs,omitempty"` // alloc ID -> task -> usage
}

// NumericPort reports whether a service's or check's port is written as a
// number, as Nomad allows (port = "8080"): that port itself, at the
// alloc's address, with no port of the group behind it. A port label may be
// all digits too (port "8080" {}): where the group has that label, it is
// the label (ServicePort and validation look for it first); a number out
// of 1 to 65535 is not a port (ok false, and validation says so).
func NumericPort(port string) (n int, ok bool) {
	if port == "" || port[0] < '0' || port[0] > '9' {
		return 0, false
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return 0, false
	}
	return n, true
}

// ServicePort resolves a service's or check's port on alloc a: the host
// port reserved under label port, at its host IP; or a port written as a
// number (NumericPort), at the alloc's address. ok is false when port is
// "" or resolves to nothing; addr is then still the alloc's address: its
// first port's host IP, else DefaultNodeIP.
func (a *Alloc) ServicePort(port string) (addr string, value int, ok bool) {
	addr = DefaultNodeIP
	if len(a.Ports) > 0 && a.Ports[0].HostIP != "" {
		addr = a.Ports[0].HostIP
	}
	if port == "" {
		return addr, 0, false
	}
	for _, p := range a.Ports {
		if p.Label == port {
			if p.HostIP == "" {
				return DefaultNodeIP, p.Value, true
			}
			return p.HostIP, p.Value, true
		}
	}
	if n, num := NumericPort(port); num {
		return addr, n, true
	}
	return addr, 0, false
}
