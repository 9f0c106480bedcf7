package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/drover-org/drover/internal/acl"
	"github.com/drover-org/drover/internal/httpapi"
	"github.com/drover-org/drover/internal/jobfile"
	"github.com/drover-org/drover/internal/leader"
	"github.com/drover-org/drover/internal/planner"
	"github.com/drover-org/drover/internal/reconcile"
	"github.com/drover-org/drover/internal/registry"
	"github.com/drover-org/drover/internal/spec"
	"github.com/drover-org/drover/internal/state"
)

// route is one API endpoint: its pattern, who may call it (auth.go), and
// its handler.
type route struct {
	pattern string
	access  access
	h       httpapi.HandlerFunc
}

// routeTable lists the API. The endpoint x identity test
// (authz_matrix_test.go) fails for any route it does not know.
func (s *Server) routeTable() []route {
	rs := []route{
		{"POST /v1/jobs", accessToken, s.submitJob},
		{"GET /v1/jobs", accessToken, s.listJobs},
		{"GET /v1/jobs/{name}", accessToken, s.getJob},
		{"DELETE /v1/jobs/{name}", accessToken, s.stopJob},
		{"GET /v1/jobs/{name}/allocations", accessToken, s.jobAllocs},
		{"GET /v1/jobs/{name}/versions", accessToken, s.jobVersions},
		{"GET /v1/jobs/{name}/diff", accessToken, s.jobDiff},
		{"POST /v1/jobs/{name}/revert", accessToken, s.revertJob},
		{"POST /v1/jobs/{name}/restart", accessToken, s.restartJob},
		{"POST /v1/jobs/{name}/scale", accessToken, s.scaleJob},
		{"POST /v1/jobs/{name}/periodic/force", accessToken, s.forcePeriodic},
		{"POST /v1/jobs/{name}/dispatch", accessToken, s.dispatchJob},
		{"GET /v1/jobs/{name}/deployments", accessToken, s.jobDeployments},
		{"GET /v1/jobs/{name}/deployment", accessToken, s.latestDeployment},
		{"GET /v1/deployments", accessToken, s.listDeployments},
		{"GET /v1/deployments/{id}", accessToken, s.getDeployment},
		{"POST /v1/deployments/{id}/promote", accessToken, s.promoteDeployment},
		{"POST /v1/deployments/{id}/fail", accessToken, s.failDeployment},
		{"POST /v1/deployments/{id}/pause", accessToken, s.pauseDeployment},
		{"POST /v1/deployments/{id}/resume", accessToken, s.resumeDeployment},
		{"POST /v1/jobs/plan", accessToken, s.planJob},
		{"GET /v1/plan/without", accessNodeRead, s.planWithout},
		{"POST /v1/validate/job", accessToken, s.validateJob},
		{"POST /v1/jobs/parse", accessToken, s.parseJob},
		{"GET /v1/allocations", accessToken, s.listAllocs},
		{"GET /v1/allocations/{id}", accessToken, s.getAlloc},
		{"PUT /v1/allocations/{id}/status", accessNode, s.putAllocStatus},
		{"GET /v1/allocations/{id}/logs", accessToken, s.allocLogs},
		{"GET /v1/allocations/{id}/exec", accessToken, s.allocExec},
		{"POST /v1/allocations/{id}/signal", accessToken, s.allocSignal},
		{"POST /v1/allocations/{id}/restart", accessToken, s.allocRestart},
		{"POST /v1/allocations/{id}/stop", accessToken, s.allocStop},
		{"GET /v1/nodes", accessNodeRead, s.listNodes},
		{"POST /v1/nodes", accessNode, s.registerNode},
		{"GET /v1/nodes/{id}", accessNodeRead, s.getNode},
		{"GET /v1/nodes/{id}/allocations", accessNode, s.nodeAllocs},
		{"GET /v1/nodes/{id}/usage", accessNodeRead, s.nodeUsage},
		{"PUT /v1/nodes/{id}/allocations/status", accessNode, s.putNodeStatuses},
		{"PUT /v1/nodes/{id}/heartbeat", accessNode, s.heartbeat},
		{"PUT /v1/nodes/{id}/eligibility", accessNodeWrite, s.putNodeEligibility},
		{"PUT /v1/nodes/{id}/drain", accessNodeWrite, s.putNodeDrain},
		{"PUT /v1/nodes/{id}/usage", accessNode, s.putNodeUsage},
		{"GET /v1/status/leader", accessOpen, s.leader},
		{"GET /v1/services", accessCatalog, s.listServices},
		{"GET /v1/services/{name}", accessCatalog, s.getService},
		{"GET /v1/events", accessToken, s.listEvents},
		{"GET /v1/agent/monitor", accessManagement, s.monitor},
	}
	rs = append(rs, s.uiRoutes()...)
	return append(rs, s.aclRoutes()...)
}

func (s *Server) routes(mux *http.ServeMux) {
	for _, rt := range s.routeTable() {
		mux.Handle(rt.pattern, s.wrap(rt.access, rt.h))
	}
	mux.Handle("/v1/", s.wrap(accessOpen, func(w http.ResponseWriter, r *http.Request) error {
		return httpapi.NotFound("no API endpoint %s %s", r.Method, r.URL.Path)
	}))
}

// decodeJob reads a job body: malformed JSON, unknown fields and wrong types
// are a 400; a well-formed job that breaks the rules is a 422 listing every
// problem. Nothing is written in either case.
func decodeJob(w http.ResponseWriter, r *http.Request) (*spec.Job, error) {
	body, err := httpapi.ReadBody(w, r)
	if err != nil {
		return nil, err
	}
	if err := strictShape(body); err != nil {
		return nil, err
	}
	job, err := jobfile.DecodeJSONBody(body)
	if err != nil {
		var ps spec.Problems
		if errors.As(err, &ps) {
			return nil, &httpapi.Error{Status: http.StatusUnprocessableEntity, Message: "the job is not valid", Problems: ps}
		}
		return nil, httpapi.BadRequest("%v", err)
	}
	return job, nil
}

// strictShape checks the body is one JSON object of the job's schema (a Job
// or a JobStatus wrapping one) with no unknown fields, wrong types or
// trailing data.
func strictShape(body []byte) error {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return &httpapi.Error{Status: http.StatusBadRequest, Message: "the body is not a JSON object: " + httpapi.JSONErrorAt(body, err)}
	}
	var target any = &spec.Job{}
	if _, ok := top["job"]; ok {
		target = &spec.JobStatus{}
	}
	return httpapi.DecodeStrict(body, target, "a job of drover's schema")
}

func (s *Server) submitJob(w http.ResponseWriter, r *http.Request) error {
	var check int64
	if v := r.URL.Query().Get("check_index"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return httpapi.BadRequest("check_index must be a non-negative integer, got %q", v)
		}
		check = n
	}
	job, err := decodeJob(w, r)
	if err != nil {
		return err
	}
	if err := s.allow(r, job.Namespace, acl.Submit); err != nil {
		return err
	}
	// The store's copy of the job lets the write skip reading etcd (one
	// round trip, not two); the registry reads etcd when that copy is behind.
	ss, err := s.read(r.Context())
	if err != nil {
		return err
	}
	stored, changed, err := s.reg.PutJobOver(registry.WithActor(r.Context(), s.who(r)), job, check, ss.Job(job.Name))
	if taken := (*registry.JobNamespaceError)(nil); errors.As(err, &taken) {
		return s.namespaceTaken(r, taken)
	}
	if err != nil {
		return checkIndexConflict(err, "resubmit", "submit it without --check-index (check_index) to create it")
	}
	return httpapi.WriteJSON(w, stored.ModifyIndex, &spec.SubmitResponse{Job: stored, Changed: changed, Index: stored.ModifyIndex})
}

// checkIndexConflict turns a check index that did not match into a 409
// that says what to do: again when the job changed, ifMissing when it does
// not exist. Other errors pass through.
func checkIndexConflict(err error, again, ifMissing string) error {
	var ce *registry.CheckIndexError
	switch {
	case errors.As(err, &ce) && ce.ModifyIndex == 0:
		return &httpapi.Error{Status: http.StatusConflict, Message: fmt.Sprintf(
			"job %q does not exist (never submitted, or purged), so check_index %d cannot match: %s", ce.Job, ce.CheckIndex, ifMissing)}
	case errors.As(err, &ce):
		return &httpapi.Error{Status: http.StatusConflict, Message: fmt.Sprintf(
			"job %q changed since index %d (it is at %d now): read it again (drover status %s) and %s", ce.Job, ce.CheckIndex, ce.ModifyIndex, ce.Job, again)}
	}
	return err
}

func (s *Server) validateJob(w http.ResponseWriter, r *http.Request) error {
	job, err := decodeJob(w, r)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, 0, &spec.ValidateResponse{Valid: true, Job: job})
}

func (s *Server) listJobs(w http.ResponseWriter, r *http.Request) error {
	ns := r.URL.Query().Get("namespace")
	return s.blockingQuery(r, func() error {
		ss, err := s.read(r.Context())
		if err != nil {
			return err
		}
		snap := leader.ReadJobs(ss, nil)
		out := make([]*spec.JobListEntry, 0, len(snap.Jobs))
		for _, j := range snap.Jobs {
			if !s.canRead(r, j.Namespace) || (ns != "" && ns != spec.NamespaceOf(j.Namespace)) {
				continue
			}
			allocs := ss.JobAllocs(j.Name)
			planner.MarkNodeDown(allocs, snap.Nodes)
			out = append(out, &spec.JobListEntry{
				Name: j.Name, Namespace: spec.NamespaceOf(j.Namespace), Type: j.Type, Priority: j.Priority, Version: j.Version, Stopped: j.Stopped,
				Summary:     reconcile.Summarize(j, allocs, snap.Nodes, snap.Schedules[j.Name]),
				ModifyIndex: j.ModifyIndex,
			})
		}
		return httpapi.WriteJSON(w, ss.Rev, out)
	}, "jobs")
}

func (s *Server) getJob(w http.ResponseWriter, r *http.Request) error {
	name, err := httpapi.PathName(r, "name", "job name") // jobStatus checks read on the job's namespace
	if err != nil {
		return err
	}
	return s.blockingQuery(r, func() error {
		st, rev, err := s.jobStatus(r, name)
		if err != nil {
			return err
		}
		return httpapi.WriteJSON(w, rev, st)
	}, "job/"+name)
}

func (s *Server) jobStatus(r *http.Request, name string) (*spec.JobStatus, int64, error) {
	ss, err := s.read(r.Context())
	if err != nil {
		return nil, 0, err
	}
	job := ss.Job(name)
	if job == nil {
		return nil, 0, httpapi.NotFound("no job named %q; see drover status for the jobs there are", name)
	}
	if err := s.allow(r, job.Namespace, acl.Read); err != nil {
		return nil, 0, err
	}
	allocs := ss.JobAllocs(name)
	markDown(ss, allocs)
	sched := ss.Schedule(name)
	var nodes []*spec.Node
	if job.Type.PerNode() { // only system and sysbatch jobs count eligible nodes
		nodes = ss.Nodes()
	}
	st := &spec.JobStatus{Job: job, Summary: reconcile.Summarize(job, allocs, nodes, sched), Allocations: allocs}
	if sched != nil && sched.JobVersion == job.Version {
		st.Failures = spec.ShownFailures(sched.Failures)
	}
	if job.IsTemplate() {
		kinds(ss, job, st, time.Now())
	}
	return st, ss.Rev, nil
}

func (s *Server) stopJob(w http.ResponseWriter, r *http.Request) error {
	name, err := s.jobName(r, acl.Submit)
	if err != nil {
		return err
	}
	job, err := s.reg.StopJob(registry.WithActor(r.Context(), s.who(r)), name)
	if errors.Is(err, registry.ErrNotFound) {
		return httpapi.NotFound("no job named %q", name)
	}
	if err != nil {
		return err
	}
	if r.URL.Query().Get("purge") == "true" {
		if err := s.reg.PurgeJob(r.Context(), name); err != nil {
			return err
		}
		s.event(r, spec.Event{Topic: spec.TopicJob, Type: spec.EventPurged, Job: name, Namespace: job.Namespace, Message: "by " + s.who(r)})
	}
	return httpapi.WriteJSON(w, job.ModifyIndex, map[string]any{"job": job})
}

func (s *Server) jobAllocs(w http.ResponseWriter, r *http.Request) error {
	name, err := s.jobName(r, acl.Read)
	if err != nil {
		return err
	}
	return s.blockingQuery(r, func() error {
		ss, err := s.read(r.Context())
		if err != nil {
			return err
		}
		return httpapi.WriteJSON(w, ss.Rev, ss.JobAllocs(name))
	}, "job/"+name)
}

func (s *Server) listAllocs(w http.ResponseWriter, r *http.Request) error {
	job, node := r.URL.Query().Get("job"), r.URL.Query().Get("node")
	for _, v := range []struct{ val, what string }{{job, "job name"}, {node, "node id"}} {
		if v.val != "" {
			if msg := spec.CheckName(v.val); msg != "" {
				return httpapi.BadRequest("%s %s", v.what, msg)
			}
		}
	}
	// One encoding for all the queries that ask at once (a change wakes
	// every waiting one): sharedlist.go.
	return s.blockingQuery(r, func() error {
		list, err := s.allocLists.get(r.Context(), job+"\x00"+node, func(ctx context.Context) (*encodedList, error) {
			ss, err := s.read(ctx)
			if err != nil {
				return nil, err
			}
			allocs := filterAllocs(ss, job, node)
			markDown(ss, allocs)
			return encodeList(ss.Rev, allocs, func(a *spec.Alloc) string { return a.Namespace })
		})
		if err != nil {
			return err
		}
		return list.write(w, func(ns string) bool { return s.canRead(r, ns) })
	}, "allocs")
}

// filterAllocs returns the allocs of job on node ("" matches any), in
// Allocs' order (the store's node index lists by ID).
func filterAllocs(ss *state.Snapshot, job, node string) []*spec.Alloc {
	var allocs []*spec.Alloc
	if job != "" {
		allocs = ss.JobAllocs(job)
	} else {
		allocs = ss.Allocs()
	}
	if node != "" {
		allocs = slices.DeleteFunc(allocs, func(a *spec.Alloc) bool { return a.NodeID != node })
	}
	return allocs
}

// findAlloc accepts a full ID or a unique prefix of at least 4 characters.
func findAlloc(ss *state.Snapshot, id string) (*spec.Alloc, error) {
	if a := ss.Alloc(id); a != nil {
		return a, nil
	}
	if len(id) < 4 {
		return nil, httpapi.NotFound("no allocation %q (give at least 4 characters of an ID)", id)
	}
	var match []*spec.Alloc
	for _, a := range ss.Allocs() {
		if strings.HasPrefix(a.ID, id) {
			match = append(match, a)
		}
	}
	switch len(match) {
	case 0:
		return nil, httpapi.NotFound("no allocation with ID or prefix %q", id)
	case 1:
		return match[0], nil
	}
	ids := make([]string, len(match))
	for i, m := range match {
		ids[i] = m.ID
	}
	sort.Strings(ids)
	return nil, &httpapi.Error{Status: http.StatusConflict, Message: fmt.Sprintf("prefix %q matches %d allocations: %s; give more characters", id, len(match), strings.Join(ids, ", "))}
}

func (s *Server) getAlloc(w http.ResponseWriter, r *http.Request) error {
	id, err := httpapi.PathName(r, "id", "allocation id")
	if err != nil {
		return err
	}
	ss, err := s.read(r.Context())
	if err != nil {
		return err
	}
	a, err := findAlloc(ss, id)
	if err != nil {
		return err
	}
	if err := s.allow(r, a.Namespace, acl.Read); err != nil {
		return err
	}
	return httpapi.WriteJSON(w, ss.Rev, a)
}

func (s *Server) putAllocStatus(w http.ResponseWriter, r *http.Request) error {
	id, err := httpapi.PathName(r, "id", "allocation id")
	if err != nil {
		return err
	}
	body, err := httpapi.ReadBody(w, r)
	if err != nil {
		return err
	}
	var u spec.AllocStatusUpdate
	if err := httpapi.DecodeStrict(body, &u, "an allocation status update"); err != nil {
		return err
	}
	if msg := spec.CheckName(u.NodeID); msg != "" {
		return httpapi.BadRequest("node_id %s", msg)
	}
	if u.Status == nil {
		return httpapi.BadRequest("status is missing")
	}
	if msg := checkClientStatus(u.Status.ClientStatus); msg != "" {
		return httpapi.BadRequest("%s", msg)
	}
	if err := s.checkNode(r, u.NodeID); err != nil {
		return err
	}
	if err := s.reg.PutAllocStatus(r.Context(), id, u.NodeID, u.Status); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// putNodeStatuses takes an agent's batched reports: one registry
// transaction for the batch. Per-alloc refusals come back in the answer.
func (s *Server) putNodeStatuses(w http.ResponseWriter, r *http.Request) error {
	node, err := httpapi.PathName(r, "id", "node id")
	if err != nil {
		return err
	}
	if err := s.checkNode(r, node); err != nil {
		return err
	}
	body, err := httpapi.ReadBody(w, r)
	if err != nil {
		return err
	}
	var rep spec.NodeStatusReport
	if err := httpapi.DecodeStrict(body, &rep, "a status report"); err != nil {
		return err
	}
	if len(rep.Allocs) > spec.MaxStatusBatch {
		return httpapi.BadRequest("a report holds at most %d allocations, got %d", spec.MaxStatusBatch, len(rep.Allocs))
	}
	var ps spec.Problems
	updates := make([]registry.StatusUpdate, len(rep.Allocs))
	// What the state holds judges the batch and guards its write, so that
	// a report costs etcd one transaction; a stale state costs a read.
	ss := s.state.Snapshot()
	first := make(map[string]int, len(rep.Allocs))
	for i, e := range rep.Allocs {
		if msg := spec.CheckName(e.ID); msg != "" {
			ps.Add(fmt.Sprintf("allocs[%d].id", i), "alloc id %s", msg)
		} else if j, dup := first[e.ID]; dup {
			ps.Add(fmt.Sprintf("allocs[%d].id", i), "alloc %s is reported at allocs[%d] too; report each allocation once per batch", e.ID, j)
		} else {
			first[e.ID] = i
		}
		if e.Status == nil {
			ps.Add(fmt.Sprintf("allocs[%d].status", i), "status is missing")
		} else if msg := checkClientStatus(e.Status.ClientStatus); msg != "" {
			ps.Add(fmt.Sprintf("allocs[%d].status.client_status", i), "%s", msg)
		}
		updates[i] = registry.StatusUpdate{ID: e.ID, Status: e.Status}
		if a, allocRev, statusRev := ss.AllocRevs(e.ID); a != nil {
			updates[i].Known = &registry.KnownAlloc{Alloc: a, AllocRev: allocRev, StatusRev: statusRev}
		}
	}
	if len(ps) > 0 {
		return &httpapi.Error{Status: http.StatusBadRequest, Message: "the status report is not valid", Problems: ps}
	}
	errs, err := s.reg.PutAllocStatuses(r.Context(), node, updates)
	if err != nil {
		return err
	}
	var res spec.NodeStatusResult
	for i, e := range errs {
		if e != nil {
			status, msg, _ := httpapi.StatusOf(e)
			res.Refused = append(res.Refused, spec.RefusedStatus{ID: updates[i].ID, Status: status, Error: msg})
		}
	}
	return httpapi.WriteJSON(w, 0, &res)
}

func checkClientStatus(cs spec.ClientStatus) string {
	switch cs {
	case spec.ClientPending, spec.ClientRunning, spec.ClientComplete, spec.ClientFailed:
		return ""
	}
	return fmt.Sprintf("client_status %q is not one an agent reports (pending, running, complete, failed)", cs)
}

func (s *Server) listNodes(w http.ResponseWriter, r *http.Request) error {
	return s.blockingQuery(r, func() error {
		ss, err := s.read(r.Context())
		if err != nil {
			return err
		}
		return httpapi.WriteJSON(w, ss.Rev, ss.Nodes())
	}, "nodes", "node_usage")
}

func (s *Server) registerNode(w http.ResponseWriter, r *http.Request) error {
	body, err := httpapi.ReadBody(w, r)
	if err != nil {
		return err
	}
	var n spec.Node
	if err := httpapi.DecodeStrict(body, &n, "a node"); err != nil {
		return err
	}
	var ps spec.Problems
	if msg := spec.CheckName(n.ID); msg != "" {
		ps.Add("id", "node id %s", msg)
	}
	if msg := spec.CheckName(n.Name); msg != "" {
		ps.Add("name", "node name %s", msg)
	}
	if n.Resources.CPU < 0 || n.Resources.MemoryMB < 0 || n.Resources.DiskMB < 0 {
		ps.Add("resources", "resources must not be negative")
	}
	if n.Address != "" {
		if u, err := url.Parse(n.Address); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			ps.Add("address", "address %q must be http://host:port", n.Address)
		}
	}
	if len(ps) > 0 {
		return &httpapi.Error{Status: http.StatusUnprocessableEntity, Message: "the node is not valid", Problems: ps}
	}
	// Before the node's secret is written: a registration that cannot be
	// stored must not leave its node ID taken.
	if err := registry.CheckEncodedSize(fmt.Sprintf("node %q", n.ID), &n); err != nil {
		return err
	}
	secret, err := s.admitRegistration(r, n.ID)
	if err != nil {
		return err
	}
	n.Status = spec.NodeReady
	n.RegisterTime = time.Now().UTC()
	stored, err := s.reg.PutNode(r.Context(), &n)
	if err != nil {
		return err
	}
	beat := s.heartbeatTiming()
	if err := s.reg.NodeAlive(r.Context(), n.ID, beat.NodeTTL.Std()); err != nil {
		return err
	}
	stored.Status = spec.NodeReady
	s.event(r, spec.Event{Topic: spec.TopicNode, Type: spec.EventRegistered, Node: stored.Name,
		Message: fmt.Sprintf("node %s at %s, drivers %s", spec.ShortID(stored.ID), stored.Address, strings.Join(stored.Drivers, ","))})
	return httpapi.WriteJSON(w, stored.ModifyIndex, &spec.NodeRegistration{
		Node: stored, NodeHeartbeat: beat, Secret: secret,
	})
}

// heartbeat keeps a node up. It writes nothing: it renews the node's
// liveness lease in etcd. 404 tells the agent to register again. The
// answer says when to heartbeat next, which changes with the number of
// nodes.
func (s *Server) heartbeat(w http.ResponseWriter, r *http.Request) error {
	id, err := httpapi.PathName(r, "id", "node id")
	if err != nil {
		return err
	}
	if err := s.checkNode(r, id); err != nil {
		return err
	}
	beat := s.heartbeatTiming()
	if err := s.reg.Heartbeat(r.Context(), id, beat.NodeTTL.Std()); err != nil {
		if errors.Is(err, registry.ErrNotFound) {
			return httpapi.NotFound("node %q is not alive (its heartbeats stopped for longer than its TTL); register again", id)
		}
		return err
	}
	return httpapi.WriteJSON(w, 0, &beat)
}

// heartbeatTiming is the interval and TTL this server gives a node now:
// the configured TTL and a fifth of it, or, when its nodes heartbeating
// that often would exceed MaxHeartbeatsPerSecond, an interval that keeps
// them under it. A node gets the new timing at its next heartbeat, and
// keeps the TTL it was given until then.
func (s *Server) heartbeatTiming() spec.NodeHeartbeat {
	return heartbeatTiming(s.reg.LiveNodes(), s.cfg.MaxHeartbeatsPerSecond, s.cfg.NodeTTL)
}

func heartbeatTiming(nodes, perSecond int, floorTTL time.Duration) spec.NodeHeartbeat {
	every := max(floorTTL/5, time.Duration(nodes)*time.Second/time.Duration(perSecond))
	return spec.NodeHeartbeat{HeartbeatInterval: spec.Duration(every), NodeTTL: spec.Duration(5 * every)}
}

// markDown flags, for display, the allocs whose node is down: `drover
// status` shows them as lost. It replaces those elements of allocs with
// marked copies (the store's are shared), reading only their nodes.
func markDown(ss *state.Snapshot, allocs []*spec.Alloc) {
	var nodes []*spec.Node
	seen := map[string]bool{}
	for _, a := range allocs {
		if !seen[a.NodeID] {
			seen[a.NodeID] = true
			if n := ss.Node(a.NodeID); n != nil {
				nodes = append(nodes, n)
			}
		}
	}
	planner.MarkNodeDown(allocs, nodes)
}

// findNode accepts an ID, a unique ID prefix, or a node name. It returns
// the revision of the state read.
func (s *Server) findNode(r *http.Request, id string) (*spec.Node, int64, error) {
	ss, err := s.read(r.Context())
	if err != nil {
		return nil, 0, err
	}
	if n := ss.Node(id); n != nil {
		return n, ss.Rev, nil
	}
	var match []*spec.Node
	for _, n := range ss.Nodes() {
		if n.Name == id || (len(id) >= 4 && strings.HasPrefix(n.ID, id)) {
			match = append(match, n)
		}
	}
	if len(match) == 1 {
		return match[0], ss.Rev, nil
	}
	if len(match) > 1 {
		return nil, 0, &httpapi.Error{Status: http.StatusConflict, Message: fmt.Sprintf("%q matches %d nodes; give the node ID", id, len(match))}
	}
	return nil, 0, httpapi.NotFound("no node %q; see drover nodes", id)
}

func (s *Server) getNode(w http.ResponseWriter, r *http.Request) error {
	id, err := httpapi.PathName(r, "id", "node id")
	if err != nil {
		return err
	}
	n, rev, err := s.findNode(r, id)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, rev, n)
}

// nodeAllocs is the agent's assignment query: it wakes only when something
// placed on this node changes.
func (s *Server) nodeAllocs(w http.ResponseWriter, r *http.Request) error {
	id, err := httpapi.PathName(r, "id", "node id")
	if err != nil {
		return err
	}
	if err := s.checkNode(r, id); err != nil {
		return err
	}
	return s.blockingQuery(r, func() error {
		ss, err := s.read(r.Context())
		if err != nil {
			return err
		}
		return httpapi.WriteJSON(w, ss.Rev, ss.NodeAllocs(id))
	}, "node/"+id)
}

func (s *Server) leader(w http.ResponseWriter, r *http.Request) error {
	id, err := s.reg.LeaderID(r.Context())
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, 0, &spec.LeaderResponse{Leader: id})
}

// allocLogs proxies to the agent of the alloc's node, so a client reads
// logs by job name without knowing where the task runs.
// agentCall is what a request for an alloc's agent needs: the alloc, the
// URL of the agent's endpoint for it (with the request's query and the
// task named), and its node.
type agentCall struct {
	alloc *spec.Alloc
	url   string
	node  *spec.Node
}

// forAgent checks the request's capability on the alloc in {id} and its
// ?task (which may be left out when the alloc has one, and for a restart,
// which then restarts them all), and builds the URL of the agent's
// endpoint what (logs, exec, signal, restart) for it.
func (s *Server) forAgent(r *http.Request, capability, what string) (*agentCall, error) {
	id, err := httpapi.PathName(r, "id", "allocation id")
	if err != nil {
		return nil, err
	}
	ss, err := s.read(r.Context())
	if err != nil {
		return nil, err
	}
	a, err := findAlloc(ss, id)
	if err != nil {
		return nil, err
	}
	if err := s.allow(r, a.Namespace, capability); err != nil {
		return nil, err
	}
	q := r.URL.Query()
	task := q.Get("task")
	if task == "" && len(a.Tasks) == 1 {
		task = a.Tasks[0].Name
	}
	if task == "" && what == "restart" {
		// A restart without a task restarts every running one.
		return s.agentCallFor(a, what, q, ss)
	}
	found := false
	for _, t := range a.Tasks {
		found = found || t.Name == task
	}
	if !found {
		names := make([]string, len(a.Tasks))
		for i, t := range a.Tasks {
			names[i] = t.Name
		}
		if task == "" {
			return nil, httpapi.BadRequest("allocation %s has %d tasks; name one (JOB/TASK on the command line, ?task= in the API): %s", a.Name, len(a.Tasks), strings.Join(names, ", "))
		}
		return nil, httpapi.BadRequest("allocation %s has no task %q; its tasks are: %s", a.Name, task, strings.Join(names, ", "))
	}
	if what == "logs" {
		for _, t := range a.Tasks {
			if t.Name == task && t.LogsDisabled() {
				return nil, httpapi.NotFound("task %s of allocation %s keeps no logs: its logs block says disabled = true; remove that line and submit the job again to keep them", task, a.Name)
			}
		}
	}
	q.Set("task", task)
	return s.agentCallFor(a, what, q, ss)
}

// agentCallFor builds the call of the agent's endpoint what for alloc a,
// with query q.
func (s *Server) agentCallFor(a *spec.Alloc, what string, q url.Values, ss *state.Snapshot) (*agentCall, error) {
	node := ss.Node(a.NodeID)
	if node == nil {
		return nil, httpapi.NotFound("node %s of allocation %s is not registered (it was removed); the allocation's agent cannot be reached", a.NodeID, a.Name)
	}
	if node.Address == "" {
		return nil, &httpapi.Error{Status: http.StatusBadGateway, Message: fmt.Sprintf("node %s has no address to reach its agent at", node.Name)}
	}
	u := strings.TrimRight(node.Address, "/") + "/v1/client/allocations/" + url.PathEscape(a.ID) + "/" + what + "?" + q.Encode()
	return &agentCall{alloc: a, url: u, node: node}, nil
}

func (s *Server) allocLogs(w http.ResponseWriter, r *http.Request) error {
	call, err := s.forAgent(r, acl.Logs, "logs")
	if err != nil {
		return err
	}
	node := call.node
	req, err := http.NewRequestWithContext(r.Context(), "GET", call.url, nil)
	if err != nil {
		return err
	}
	resp, err := s.agentHTTP.Do(req)
	if err != nil {
		return &httpapi.Error{Status: http.StatusBadGateway, Message: fmt.Sprintf("cannot reach node %s at %s for logs: %v", node.Name, node.Address, err)}
	}
	defer resp.Body.Close()
	for _, k := range []string{"Content-Type", "X-Content-Type-Options"} {
		if v := resp.Header.Get(k); v != "" {
			w.Header().Set(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return nil
			}
			rc.Flush()
		}
		if err == io.EOF || err != nil {
			return nil
		}
	}
}
