package server

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/drover-org/drover/internal/httpapi"
	"github.com/drover-org/drover/internal/registry"
	"github.com/drover-org/drover/internal/spec"
)

// Node control: an operator takes a node out of scheduling (eligibility)
// or moves its work elsewhere (drain); an agent reports what its tasks
// use. The operator's decision and the report are stored apart from the
// agent's registration (registry node_ctl/, node_usage/) and merged into
// every read of the node. The leader's reconciler moves the work; the
// scheduler places nothing new on a node that is not spec.Node.Eligible.
//
//	PUT /v1/nodes/{id}/eligibility  {"eligible": false}                               operator
//	PUT /v1/nodes/{id}/drain        {"enable": true, "deadline": "1h"}                operator
//	                                {"enable": false, "keep_ineligible": true}
//	PUT /v1/nodes/{id}/usage        spec.NodeUsage                                    the node's agent

// eligibilityRequest is PUT /v1/nodes/{id}/eligibility's body. Eligible
// is required: an empty body must not quietly mean "ineligible".
type eligibilityRequest struct {
	Eligible *bool `json:"eligible"`
}

// drainRequest is PUT /v1/nodes/{id}/drain's body.
type drainRequest struct {
	// Enable is required: true starts (or changes) a drain, false ends it.
	Enable *bool `json:"enable"`
	// Deadline is how long the drain may take, a Go duration ("1h",
	// "30m"); "" or "0s": no deadline. Only with enable.
	Deadline string `json:"deadline,omitempty"`
	// KeepIneligible, when ending a drain, leaves the node ineligible.
	KeepIneligible bool `json:"keep_ineligible,omitempty"`
	// IgnoreSystemJobs, with enable, leaves the node's system jobs'
	// instances running (spec.DrainStrategy).
	IgnoreSystemJobs bool `json:"ignore_system_jobs,omitempty"`
}

// putNodeEligibility marks a node eligible or not for new work. A
// draining node cannot be made eligible: the drain says it takes none.
func (s *Server) putNodeEligibility(w http.ResponseWriter, r *http.Request) error {
	node, err := s.nodeForControl(r)
	if err != nil {
		return err
	}
	body, err := httpapi.ReadBody(w, r)
	if err != nil {
		return err
	}
	var req eligibilityRequest
	if err := httpapi.DecodeStrict(body, &req, `an eligibility request ({"eligible": true|false})`); err != nil {
		return err
	}
	if req.Eligible == nil {
		return httpapi.BadRequest(`"eligible" is missing: send {"eligible": true} or {"eligible": false}`)
	}
	eligible := *req.Eligible
	err = s.reg.UpdateNodeControl(r.Context(), node.ID, func(c spec.NodeControl) (spec.NodeControl, error) {
		if eligible && c.Drain != nil {
			return c, &httpapi.Error{Status: http.StatusConflict, Message: fmt.Sprintf(
				"node %s is draining; end the drain first (drover node drain --disable %s)", node.Name, node.Name)}
		}
		c.Ineligible = !eligible
		return c, nil
	})
	if err != nil {
		return s.controlError(node, err)
	}
	return s.answerNode(w, r, node.ID)
}

// putNodeDrain starts, changes or ends a node's drain. A drain started on
// a draining node replaces its deadline but keeps when it started.
func (s *Server) putNodeDrain(w http.ResponseWriter, r *http.Request) error {
	node, err := s.nodeForControl(r)
	if err != nil {
		return err
	}
	body, err := httpapi.ReadBody(w, r)
	if err != nil {
		return err
	}
	var req drainRequest
	if err := httpapi.DecodeStrict(body, &req, `a drain request ({"enable": true, "deadline": "1h"} or {"enable": false})`); err != nil {
		return err
	}
	if req.Enable == nil {
		return httpapi.BadRequest(`"enable" is missing: send {"enable": true} to drain, {"enable": false} to stop draining`)
	}
	var deadline time.Duration
	if req.Deadline != "" {
		if deadline, err = time.ParseDuration(req.Deadline); err != nil || deadline < 0 {
			return httpapi.BadRequest(`deadline must be a non-negative duration such as "1h" or "30m" ("" or "0s": none), got %q`, req.Deadline)
		}
	}
	enable := *req.Enable
	switch {
	case enable && req.KeepIneligible:
		return httpapi.BadRequest("keep_ineligible applies when ending a drain (enable false); a draining node takes no new work anyway")
	case !enable && deadline > 0:
		return httpapi.BadRequest("deadline applies when starting a drain (enable true)")
	case !enable && req.IgnoreSystemJobs:
		return httpapi.BadRequest("ignore_system_jobs applies when starting a drain (enable true)")
	}
	now := time.Now().UTC()
	err = s.reg.UpdateNodeControl(r.Context(), node.ID, func(c spec.NodeControl) (spec.NodeControl, error) {
		if !enable {
			// Ending a drain makes the node eligible again, unless the
			// operator keeps it out (to stop it for maintenance, say).
			c.Drain, c.Ineligible = nil, req.KeepIneligible
			return c, nil
		}
		d := spec.DrainStrategy{StartedAt: now, IgnoreSystemJobs: req.IgnoreSystemJobs}
		if c.Drain != nil {
			d.StartedAt = c.Drain.StartedAt
		}
		if deadline > 0 {
			d.Deadline = now.Add(deadline)
		}
		c.Drain = &d
		return c, nil
	})
	if err != nil {
		return s.controlError(node, err)
	}
	return s.answerNode(w, r, node.ID)
}

// putNodeUsage stores an agent's usage report of its node: the tasks in
// all (per-alloc figures are left out; the agent serves them on demand).
// Only the node itself may report (its secret, as for heartbeats). The
// report's Time is when this server received it: the leader judges its
// age against its own clock, and an agent's clock may be off.
func (s *Server) putNodeUsage(w http.ResponseWriter, r *http.Request) error {
	id, err := httpapi.PathName(r, "id", "node id")
	if err != nil {
		return err
	}
	if err := s.checkNode(r, id); err != nil {
		return err
	}
	body, err := httpapi.ReadBody(w, r)
	if err != nil {
		return err
	}
	var u spec.NodeUsage
	if err := httpapi.DecodeStrict(body, &u, "a node usage report"); err != nil {
		return err
	}
	if u.NodeID != "" && u.NodeID != id {
		return httpapi.BadRequest("the report is of node %q, sent to node %q's endpoint", u.NodeID, id)
	}
	if u.Tasks.CPU < 0 || u.Tasks.MemoryMB < 0 {
		return httpapi.BadRequest("usage must not be negative (cpu %d MHz, memory %d MB)", u.Tasks.CPU, u.Tasks.MemoryMB)
	}
	u.Time = time.Now().UTC()
	if err := s.reg.PutNodeUsage(r.Context(), id, &u); err != nil {
		if errors.Is(err, registry.ErrNotFound) {
			return httpapi.NotFound("node %q is not registered; register it first", id)
		}
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// nodeForControl finds the node of the path: an ID, a unique ID prefix or
// a name, as GET /v1/nodes/{id}.
func (s *Server) nodeForControl(r *http.Request) (*spec.Node, error) {
	id, err := httpapi.PathName(r, "id", "node id")
	if err != nil {
		return nil, err
	}
	n, _, err := s.findNode(r, id)
	return n, err
}

// controlError turns a node that went away between the lookup and the
// write into a 404.
func (s *Server) controlError(node *spec.Node, err error) error {
	if errors.Is(err, registry.ErrNotFound) {
		return httpapi.NotFound("node %s (%s) is no longer registered; see drover nodes", node.Name, node.ID)
	}
	return err
}

// answerNode writes the node as every read merges it, with the request's
// own change.
func (s *Server) answerNode(w http.ResponseWriter, r *http.Request, id string) error {
	ss, err := s.readCurrent(r.Context())
	if err != nil {
		return err
	}
	n := ss.Node(id)
	if n == nil {
		return httpapi.NotFound("node %q is no longer registered; see drover nodes", id)
	}
	return httpapi.WriteJSON(w, ss.Rev, n)
}
