package server

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/drover-org/drover/internal/acl"
	"github.com/drover-org/drover/internal/httpapi"
	"github.com/drover-org/drover/internal/leader"
	"github.com/drover-org/drover/internal/planner"
	"github.com/drover-org/drover/internal/planview"
	"github.com/drover-org/drover/internal/registry"
	"github.com/drover-org/drover/internal/spec"
)

// Plans answer "what would the leader do?" by running the leader's own
// pass (planner.Decide) on this server's snapshot, changed as asked (a
// submitted job in place of the stored one, some nodes down), and writing
// nothing. Any server can plan: the snapshot is one consistent read of the
// registry.

// planJob answers POST /v1/jobs/plan[?diff=0][&text=1][&without=NODE...].
func (s *Server) planJob(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	diff := true
	switch v := q.Get("diff"); v {
	case "", "1", "true":
	case "0", "false":
		diff = false
	default:
		return httpapi.BadRequest("diff must be 1 or 0, got %q", v)
	}
	text, err := textParam(q.Get("text"))
	if err != nil {
		return err
	}
	job, err := decodeJob(w, r)
	if err != nil {
		return err
	}
	if err := s.allow(r, job.Namespace, acl.Submit); err != nil {
		return err
	}
	ss, err := s.read(r.Context())
	if err != nil {
		return err
	}
	snap := leader.ReadPass(ss, nil)
	down, err := resolveNodes(snap.Nodes, q["without"])
	if err != nil {
		return err
	}
	p := jobPlan(snap, job, down, diff, time.Now().UTC(), s.movePolicy())
	p.Failures = spec.ShownFailures(p.Failures)
	if text {
		p.Text = planview.JobText(p)
	}
	return httpapi.WriteJSON(w, ss.Rev, p)
}

// textParam reads ?text=: 1 adds the plan as drover plan prints it.
func textParam(v string) (bool, error) {
	switch v {
	case "", "0", "false":
		return false, nil
	case "1", "true":
		return true, nil
	}
	return false, httpapi.BadRequest("text must be 1 (add the plan as drover plan prints it) or 0, got %q", v)
}

// planWithout answers GET /v1/plan/without?node=NODE[&node=NODE...][&text=1].
func (s *Server) planWithout(w http.ResponseWriter, r *http.Request) error {
	names := r.URL.Query()["node"]
	if len(names) == 0 {
		return httpapi.BadRequest("name the nodes to plan without: /v1/plan/without?node=NAME&node=NAME (names or IDs)")
	}
	text, err := textParam(r.URL.Query().Get("text"))
	if err != nil {
		return err
	}
	ss, err := s.read(r.Context())
	if err != nil {
		return err
	}
	snap := leader.ReadPass(ss, nil)
	down, err := resolveNodes(snap.Nodes, names)
	if err != nil {
		return err
	}
	p := nodeLossPlan(snap, down, time.Now().UTC(), s.movePolicy())
	for i := range p.Jobs {
		p.Jobs[i].Failures = spec.ShownFailures(p.Jobs[i].Failures)
	}
	if text {
		p.Text = planview.NodeLossText(p)
	}
	return httpapi.WriteJSON(w, ss.Rev, p)
}

// resolveNodes finds the nodes named, by name or ID. Every node with a
// matching name is taken: leaving out a machine means every registration
// it has had.
func resolveNodes(nodes []*spec.Node, names []string) ([]*spec.Node, error) {
	var out []*spec.Node
	var unknown []string
	for _, name := range names {
		found := false
		for _, n := range nodes {
			if n.ID == name || n.Name == name {
				found = true
				if !slices.Contains(out, n) {
					out = append(out, n)
				}
			}
		}
		if !found {
			unknown = append(unknown, fmt.Sprintf("%q", name))
		}
	}
	if len(unknown) == 0 {
		return out, nil
	}
	known := make([]string, 0, min(len(nodes), 10))
	for _, n := range nodes[:min(len(nodes), 10)] {
		known = append(known, n.Name)
	}
	list := strings.Join(known, ", ")
	switch {
	case len(nodes) == 0:
		list = "there are no nodes"
	case len(nodes) > 10:
		list = fmt.Sprintf("known nodes include %s (%d in all; see drover nodes)", list, len(nodes))
	default:
		list = "known nodes: " + list
	}
	return nil, httpapi.BadRequest("no node named %s; %s", strings.Join(unknown, ", "), list)
}

// leaveOut marks nodes down in snap, and their allocs lost with them as
// the leader does once its grace period is over. Allocs on nodes that are
// already down are marked too: the plan shows the steady state.
//
// The question is where the work ends up, not when: the nodes count as
// down since long ago, so that a singleton's wait for its cut-off agent
// to stop it (Disconnect.StopAfter) is over and its replacement shows.
func leaveOut(snap *planner.Input, down []*spec.Node) {
	out := map[string]*spec.Node{}
	for _, n := range down {
		c := *n
		c.Status = spec.NodeDown
		out[n.ID] = &c
	}
	// A copy: the list is the store's, shared by every reader.
	snap.Nodes = slices.Clone(snap.Nodes)
	for i, n := range snap.Nodes {
		if c := out[n.ID]; c != nil {
			snap.Nodes[i] = c
		}
	}
	node := snap.Node
	snap.Node = func(id string) *spec.Node { return cmp.Or(out[id], node(id)) }
	snap.MarkDown()
	for _, a := range snap.Allocs {
		if out[a.NodeID] != nil {
			a.NodeDownSince = longAgo // a marked copy: its node is down
		}
	}
}

var longAgo = time.Unix(0, 0).UTC()

// jobPlan plans job in place of the stored one.
func jobPlan(snap *planner.Input, job *spec.Job, down []*spec.Node, diff bool, now time.Time, mp planner.Policy) *spec.JobPlan {
	leaveOut(snap, down)
	var stored *spec.Job
	for _, j := range snap.Jobs {
		if j.Name == job.Name {
			stored = j
		}
	}
	cand := candidate(stored, job, now)
	with := *snap
	with.Jobs = slices.DeleteFunc(slices.Clone(snap.Jobs), func(j *spec.Job) bool { return j.Name == job.Name })
	with.Jobs = append(with.Jobs, cand)
	slices.SortFunc(with.Jobs, func(a, b *spec.Job) int { return strings.Compare(a.Name, b.Name) })

	d := planner.Decide(&with, now, nil, mp, uuid.NewString)
	p := &spec.JobPlan{Job: job.Name, Version: cand.Version, New: stored == nil, PlanChanges: changesOf(cand, stored != nil && cand.Version != stored.Version, snap.Allocs, d)}
	for _, n := range down {
		p.Without = append(p.Without, n.Name)
	}
	if stored != nil {
		p.CheckIndex = stored.ModifyIndex
		if diff {
			p.Diff = specDiff(stored, cand)
		}
	}
	return p
}

// candidate is job as PutJob would store it over stored.
func candidate(stored, job *spec.Job, now time.Time) *spec.Job {
	c, _ := registry.NextVersion(stored, job, now)
	return c
}

// nodeLossPlan plans every job with the nodes down, and reports the jobs
// that had instances on them or would have some evicted.
func nodeLossPlan(snap *planner.Input, down []*spec.Node, now time.Time, mp planner.Policy) *spec.NodeLossPlan {
	leaveOut(snap, down)
	out := map[string]bool{}
	p := &spec.NodeLossPlan{Jobs: []spec.JobChanges{}}
	for _, n := range down {
		out[n.ID] = true
		p.Without = append(p.Without, n.Name)
	}
	d := planner.Decide(snap, now, nil, mp, uuid.NewString)
	hit := map[string]bool{}
	for _, a := range snap.Allocs {
		if out[a.NodeID] && a.DesiredStatus == spec.DesiredRun && !a.Terminal() {
			hit[a.Job] = true
		}
	}
	for _, e := range d.Scheduler.Evictions {
		hit[e.Alloc.Job] = true
	}
	for _, j := range snap.Jobs {
		if !hit[j.Name] {
			continue
		}
		c := changesOf(j, false, snap.Allocs, d)
		// Each job lists its own evicted instances (under Stop); listing
		// them again under the jobs that evict them would count them twice.
		c.Evict = nil
		p.Jobs = append(p.Jobs, spec.JobChanges{Job: j.Name, PlanChanges: c})
	}
	return p
}

// changesOf picks out of d what it does to job's instances; changed says
// the plan gives job a new version. allocs are the snapshot's.
func changesOf(j *spec.Job, changed bool, allocs []*spec.Alloc, d planner.Decision) spec.PlanChanges {
	job := j.Name
	byID := make(map[string]*spec.Alloc, len(allocs))
	for _, a := range allocs {
		byID[a.ID] = a
	}
	existing := func(a *spec.Alloc, reason string) spec.PlannedAlloc {
		return spec.PlannedAlloc{Name: a.Name, AllocID: a.ID, Node: a.NodeName, NodeID: a.NodeID, Reason: reason, Ports: a.Ports}
	}
	var c spec.PlanChanges
	stopped := map[string]bool{}
	for _, st := range d.Reconcile.Stop {
		if st.Alloc.Job == job {
			c.Stop = append(c.Stop, existing(st.Alloc, st.Reason))
			stopped[st.Alloc.ID] = true
		}
	}
	for _, e := range d.Scheduler.Evictions {
		switch {
		case stopped[e.Alloc.ID]:
		case e.Alloc.Job == job:
			c.Stop = append(c.Stop, existing(e.Alloc, e.Reason))
			stopped[e.Alloc.ID] = true
		case e.By.Job.Name == job: // only the evictions this job causes
			c.Evict = append(c.Evict, existing(e.Alloc, e.Reason))
		}
	}
	for _, pl := range d.Scheduler.Placements {
		r := pl.Request
		if r.Job.Name != job {
			continue
		}
		pa := spec.PlannedAlloc{Name: spec.AllocName(job, r.Group.Name, r.Index), Node: pl.NodeName, NodeID: pl.NodeID, Reason: r.Reason, Ports: pl.Ports}
		if prev := byID[r.Previous]; prev != nil {
			pa.FromNode = prev.NodeName
		}
		c.Create = append(c.Create, pa)
	}
	for _, a := range allocs {
		if a.Job != job || stopped[a.ID] || a.DesiredStatus != spec.DesiredRun || a.Terminal() || a.NodeDown {
			continue
		}
		if changed && a.JobVersion != j.Version {
			// Nothing is written for it: it stays the alloc of its version,
			// as drover ps and status go on showing.
			c.Update = append(c.Update, existing(a, fmt.Sprintf("keeps running as version %d: its tasks are the same in version %d", a.JobVersion, j.Version)))
		} else {
			c.Keep = append(c.Keep, existing(a, ""))
		}
	}
	for _, f := range d.Scheduler.Failures {
		if f.Job == job {
			c.Failures = append(c.Failures, f.PlacementFailure)
		}
	}
	for _, u := range d.Reconcile.Unmatched {
		if u.Job == job {
			c.Failures = append(c.Failures, u.PlacementFailure)
		}
	}
	byName := func(x, y spec.PlannedAlloc) int { return strings.Compare(x.Name, y.Name) }
	for _, l := range [][]spec.PlannedAlloc{c.Create, c.Stop, c.Update, c.Keep, c.Evict} {
		slices.SortStableFunc(l, byName)
	}
	return c
}

// specDiff lists the fields that differ between the operator-written parts
// of two versions of a job, one line each, as `drover history` shows them
// (spec.Changes): "~ groups[web].count: 2 -> 3".
func specDiff(from, to *spec.Job) []string {
	var out []string
	for _, c := range spec.Changes(from, to) {
		out = append(out, c.String())
	}
	if len(out) == 0 && from.Version != to.Version {
		// Same fields, in another order: a new version all the same.
		out = append(out, "~ groups, tasks or other named lists in another order (no field changed)")
	}
	if from.Stopped {
		out = append(out, "~ stopped: true -> false (submitting starts the job again)")
	}
	return out
}
