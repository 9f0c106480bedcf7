package client

import (
	"context"
	"net/url"

	"github.com/drover-org/drover/internal/spec"
)

// The bodies of the plan endpoints. They are the API's, like the spec
// types, and live here only until they move to spec/api.go; the server
// writes them and the CLI prints them.

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
	PlanChanges
}

// PlanChanges is what one scheduling pass would do to a job's instances.
type PlanChanges struct {
	Create []PlannedAlloc `json:"create,omitempty"`
	// Stop includes the job's own instances evicted by other jobs, with
	// the eviction's reason.
	Stop []PlannedAlloc `json:"stop,omitempty"`
	// Update are instances that keep running, unchanged, under the new
	// version: their tasks are the same.
	Update []PlannedAlloc `json:"update,omitempty"`
	// Keep are instances the pass leaves as they are.
	Keep []PlannedAlloc `json:"keep,omitempty"`
	// Evict are other jobs' instances stopped to make room for this one's.
	// They are placed again, elsewhere if they fit, on the next pass.
	Evict []PlannedAlloc `json:"evict,omitempty"`
	// Failures are the groups with instances that would not be placed,
	// with the reasons per dimension and hints.
	Failures []spec.PlacementFailure `json:"failures,omitempty"`
}

// Fits reports whether every instance would be placed.
func (c *PlanChanges) Fits() bool { return len(c.Failures) == 0 }

// PlannedAlloc is one instance in a plan.
type PlannedAlloc struct {
	Name string `json:"name"`
	// AllocID is the existing alloc's ID; "" for one to create.
	AllocID  string           `json:"alloc_id,omitempty"`
	Node     string           `json:"node"`
	NodeID   string           `json:"node_id"`
	FromNode string           `json:"from_node,omitempty"` // where the alloc it replaces ran
	Reason   string           `json:"reason,omitempty"`
	Ports    []spec.AllocPort `json:"ports,omitempty"`
}

// NodeLossPlan answers GET /v1/plan/without: what one scheduling pass
// would do if the named nodes were down.
type NodeLossPlan struct {
	// Without names the nodes planned as down.
	Without []string `json:"without"`
	// Jobs are those with instances on those nodes, or evicted to make
	// room for them, by name.
	Jobs []JobChanges `json:"jobs"`
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

// PlanJob asks what submitting job would do, with the nodes in without
// (names or IDs) planned as down. diff asks for the spec diff.
func (c *Client) PlanJob(ctx context.Context, job *spec.Job, without []string, diff bool) (*JobPlan, error) {
	q := url.Values{}
	if len(without) > 0 {
		q["without"] = without
	}
	if !diff {
		q.Set("diff", "0")
	}
	var out JobPlan
	_, err := c.do(ctx, "POST", "/v1/jobs/plan", q, job, &out)
	return &out, err
}

// PlanWithout asks where the work on the named nodes (names or IDs) would
// go if they were down, and what would not fit.
func (c *Client) PlanWithout(ctx context.Context, nodes []string) (*NodeLossPlan, error) {
	var out NodeLossPlan
	_, err := c.do(ctx, "GET", "/v1/plan/without", url.Values{"node": nodes}, nil, &out)
	return &out, err
}
