package spec

// Plan is a set of leader writes: what one scheduling pass decided
// (internal/planner), which the leader commits fenced on its election
// (the registry's Leader.Commit). Not to be confused with JobPlan, the
// answer of `drover plan`, which writes nothing.
type Plan struct {
	// Allocs are stored as their desired half: Status, CreateIndex and
	// ModifyIndex are not stored.
	Allocs []*Alloc
	// DeleteAllocs deletes both halves of each alloc.
	DeleteAllocs    []string
	Schedules       []*JobSchedule
	DeleteSchedules []string
	// Deployments are stored as the leader's record: Request and
	// ModifyIndex are not stored (an operator's request lives apart).
	Deployments []*Deployment
	// DeleteDeployments deletes each deployment and its request.
	DeleteDeployments []string
	// Events describe the plan for the cluster's history (the planner's
	// events.go). Each is stored in the transaction that writes what it
	// is about (its AllocID's alloc, its DeploymentID's deployment), one
	// about nothing the plan writes in the first; so the history has them
	// in the order of the registry's planOps, and in their order here
	// among those about one write.
	Events []Event
}

// Empty reports whether p writes nothing (its events aside): nil, or no
// alloc, schedule or deployment to put or delete.
func (p *Plan) Empty() bool {
	return p == nil || len(p.Allocs)+len(p.DeleteAllocs)+len(p.Schedules)+len(p.DeleteSchedules)+
		len(p.Deployments)+len(p.DeleteDeployments) == 0
}
