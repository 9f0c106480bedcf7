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
	Node              *Node    `json:"node"`
	HeartbeatInterval Duration `json:"heartbeat_interval"`
	// NodeTTL is how long without a heartbeat before the node is down and
	// its allocations are replaced elsewhere.
	NodeTTL Duration `json:"node_ttl"`
	// Secret is the node's credential, given once, at its first
	// registration: the agent keeps it and sends it (X-Drover-Node-Secret)
	// on its own requests. The server keeps only its hash.
	Secret string `json:"secret,omitempty"`
}

// ValidateResponse answers POST /v1/validate/job when the job is valid.
type ValidateResponse struct {
	Valid bool `json:"valid"`
	Job   *Job `json:"job"`
}

// LeaderResponse answers GET /v1/status/leader.
type LeaderResponse struct {
	Leader string `json:"leader"`
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
