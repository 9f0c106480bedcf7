package planner

import (
	"fmt"
	"time"

	"github.com/drover-org/drover/internal/spec"
)

// planEvents describes a plan for the cluster's history: deployments that
// began or changed status, and instances placed, stopped and evicted, with
// why. before are the deployments as the pass read them.
func planEvents(plan *spec.Plan, before []*spec.Deployment, now time.Time) []spec.Event {
	var evs []spec.Event
	// Deployments first: they are committed before the allocs that name
	// them (the registry's Leader.Commit).
	was := map[string]spec.DeploymentStatus{}
	for _, d := range before {
		was[d.ID] = d.Status
	}
	for _, d := range plan.Deployments {
		status, known := was[d.ID]
		if known && status == d.Status {
			continue
		}
		msg := d.Description
		if !known {
			msg = fmt.Sprintf("deployment %s of version %d began", spec.ShortID(d.ID), d.JobVersion)
		}
		evs = append(evs, spec.Event{Time: now, Topic: spec.TopicDeployment, Type: d.Status.EventType(), Job: d.Job,
			Namespace: spec.NamespaceOf(d.Namespace), DeploymentID: d.ID, Message: msg})
	}
	for _, a := range plan.Allocs {
		e := spec.Event{Time: now, Topic: spec.TopicAlloc, Job: a.Job, Namespace: spec.NamespaceOf(a.Namespace),
			Node: a.NodeName, Alloc: a.Name, AllocID: a.ID, Message: a.DesiredReason}
		switch {
		case a.DesiredStatus == spec.DesiredStop && a.Evicted():
			e.Type = spec.EventEvicted
		case a.DesiredStatus == spec.DesiredStop:
			e.Type = spec.EventStopping
		case a.CreateTime.Equal(now):
			e.Type = spec.EventPlaced // on e.Node, for e.Message (the reason)
		default:
			continue
		}
		evs = append(evs, e)
	}
	return evs
}
