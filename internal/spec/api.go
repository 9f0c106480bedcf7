package spec

// Bodies of the HTTP API (/v1) that are not one of the nouns above.

// SubmitResponse answers POST /v1/jobs.
type SubmitResponse struct {
	Job *Job `json:"job"`
	// Changed is false when the same spec was already there: nothing was
	// written (apply is idempotent).
	Changed bool `json:"changed"`
	// Index is the registry revision to wait past for the result.
	Index int64 `json:"index"`
}

// APIError is the body of every 4xx and 5xx answer.
type APIError struct {
	// Error is one line saying what went wrong and what to do.
	Error string `json:"error"`
	// Problems lists every problem with the input, by field path.
	Problems []Problem `json:"problems,omitempty"`
}

// AllocStatusUpdate is the body an agent sends to
// PUT /v1/allocations/{id}/status.
type AllocStatusUpdate struct {
	NodeID string       `json:"node_id"`
	Status *AllocStatus `json:"status"`
}

// NodeRegistration answers POST /v1/nodes: the stored node, and how often
// its agent must heartbeat (PUT /v1/nodes/{id}/heartbeat) to stay up.
type NodeRegistration struct {
	Node *Node `json:"node"`
	NodeHeartbeat
	// Secret is the node's credential, given once, at its first
	// registration: the agent keeps it and sends it (X-Drover-Node-Secret)
	// on its own requests. The server keeps only its hash.
	Secret string `json:"secret,omitempty"`
}

// NodeHeartbeat answers a heartbeat (and is part of a registration's
// answer): when to heartbeat next, and how long the node may be silent
// before it is down. Both grow with the number of nodes a server takes
// heartbeats from, so that it takes a bounded number per second.
type NodeHeartbeat struct {
	HeartbeatInterval Duration `json:"heartbeat_interval"`
	// NodeTTL is how long without a heartbeat before the node is down and
	// its allocations are replaced elsewhere.
	NodeTTL Duration `json:"node_ttl"`
}

// ValidateResponse answers POST /v1/validate/job when the job is valid.
type ValidateResponse struct {
	Valid bool `json:"valid"`
	Job   *Job `json:"job"`
}

// ParseRequest is POST /v1/jobs/parse's body: a job file's text, in any
// format drover run reads but a systemd unit (HCL, JSON, YAML; sniffed).
type ParseRequest struct {
	Source string `json:"source"`
}

// ParseResponse answers POST /v1/jobs/parse when the source is a valid
// job: the job, as POST /v1/jobs and /v1/jobs/plan take it, and what the
// file asks that drover does otherwise (as drover run warns).
type ParseResponse struct {
	Job      *Job     `json:"job"`
	Warnings Problems `json:"warnings,omitempty"`
}

// LeaderResponse answers GET /v1/status/leader.
type LeaderResponse struct {
	Leader string `json:"leader"`
}

// TaskActionResult answers POST /v1/allocations/{id}/signal and
// /v1/allocations/{id}/restart: which task of which alloc, and what was done.
type TaskActionResult struct {
	Alloc   string `json:"alloc"`
	Task    string `json:"task"`
	Message string `json:"message"`
}

// NodeStatusReport is the body of PUT /v1/nodes/{id}/allocations/status:
// one agent's reports for many of its allocs at once.
type NodeStatusReport struct {
	Allocs []AllocStatusEntry `json:"allocs"`
}

// AllocStatusEntry is one alloc's status in a NodeStatusReport.
type AllocStatusEntry struct {
	ID     string       `json:"id"`
	Status *AllocStatus `json:"status"`
}

// NodeStatusResult answers a NodeStatusReport: the allocs whose report was
// refused, and why (gone: 404, or not this node's / moving backwards: 409).
type NodeStatusResult struct {
	Refused []RefusedStatus `json:"refused,omitempty"`
}

// RefusedStatus is one refused alloc report.
type RefusedStatus struct {
	ID     string `json:"id"`
	Status int    `json:"status"`
	Error  string `json:"error"`
}

// MaxStatusBatch bounds a NodeStatusReport so that its transaction stays
// under etcd's default limit of 128 operations (3 per alloc).
const MaxStatusBatch = 40

// The bodies of the plan endpoints: the server writes them, the CLI
// prints them.

// JobPlan answers POST /v1/jobs/plan: what the leader would do for one job
// if it were submitted now. Nothing is written.
type JobPlan struct {
	Job string `json:"job"`
	// CheckIndex is the stored job's modify index, 0 when the job is new.
	// `drover run --check-index` with it submits exactly the planned spec,
	// or is refused (409) when the job changed in between.
	CheckIndex int64 `json:"check_index"`
	// Version is the version the job would have: the stored one when the
	// spec is unchanged, one more when it changed, 1 when it is new.
	Version uint64 `json:"version"`
	// New is true when no job of that name is stored.
	New bool `json:"new"`
	// Diff lists the changed fields of the spec against the stored one,
	// one per line: "groups[0].count: 2 -> 3". Empty for a new job, an
	// unchanged spec, or ?diff=0.
	Diff []string `json:"diff,omitempty"`
	// Without names the nodes planned as down (?without=).
	Without []string `json:"without,omitempty"`
	// Text is the plan as drover plan prints it (package planview), with
	// ?text=1 only: the web UI shows it as it is.
	Text string `json:"text,omitempty"`
	PlanChanges
}

// PlanChanges is what one scheduling pass would do to a job's instances.
type PlanChanges struct {
	Create []PlannedAlloc `json:"create,omitempty"`
	// Stop includes the job's own instances evicted by other jobs, with
	// the eviction's reason.
	Stop []PlannedAlloc `json:"stop,omitempty"`
	// Update are instances that keep running, unchanged and still of
	// their own version (nothing is written for them), because their tasks
	// are the same in the new version.
	Update []PlannedAlloc `json:"update,omitempty"`
	// Keep are instances the pass leaves as they are.
	Keep []PlannedAlloc `json:"keep,omitempty"`
	// Evict are other jobs' instances stopped to make room for this one's.
	// They are placed again, elsewhere if they fit, on the next pass.
	Evict []PlannedAlloc `json:"evict,omitempty"`
	// Failures are the groups with instances that would not be placed,
	// with the reasons per dimension and hints.
	Failures []PlacementFailure `json:"failures,omitempty"`
}

// Fits reports whether every instance would be placed.
func (c *PlanChanges) Fits() bool { return len(c.Failures) == 0 }

// PlannedAlloc is one instance in a plan.
type PlannedAlloc struct {
	Name string `json:"name"`
	// AllocID is the existing alloc's ID; "" for one to create.
	AllocID  string      `json:"alloc_id,omitempty"`
	Node     string      `json:"node"`
	NodeID   string      `json:"node_id"`
	FromNode string      `json:"from_node,omitempty"` // where the alloc it replaces ran
	Reason   string      `json:"reason,omitempty"`
	Ports    []AllocPort `json:"ports,omitempty"`
}

// NodeLossPlan answers GET /v1/plan/without: what one scheduling pass
// would do if the named nodes were down.
type NodeLossPlan struct {
	// Without names the nodes planned as down.
	Without []string `json:"without"`
	// Jobs are those with instances on those nodes, or evicted to make
	// room for them, by name.
	Jobs []JobChanges `json:"jobs"`
	// Text is the plan as drover plan --without prints it (package
	// planview), with ?text=1 only: the web UI shows it as it is.
	Text string `json:"text,omitempty"`
}

// Fits reports whether every displaced instance would be placed.
func (p *NodeLossPlan) Fits() bool {
	for _, j := range p.Jobs {
		if !j.Fits() {
			return false
		}
	}
	return true
}

// JobChanges is one job's part of a NodeLossPlan.
type JobChanges struct {
	Job string `json:"job"`
	PlanChanges
}
