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

// ValidateResponse answers POST /v1/validate/job when the job is valid.
type ValidateResponse struct {
	Valid bool `json:"valid"`
	Job   *Job `json:"job"`
}

// LeaderResponse answers GET /v1/status/leader.
type LeaderResponse struct {
	Leader string `json:"leader"`
}
