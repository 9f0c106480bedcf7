package server

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/drover-org/drover/internal/acl"
	"github.com/drover-org/drover/internal/httpapi"
	"github.com/drover-org/drover/internal/registry"
	"github.com/drover-org/drover/internal/spec"
)

// scaleRequest is the body of POST /v1/jobs/{name}/scale.
type scaleRequest struct {
	// Group is the group to scale; "" for a job of one group.
	Group string `json:"group,omitempty"`
	// Count is the group's new count; required.
	Count *int `json:"count"`
	// Message is kept in the version's Submitted event, beside who asked.
	Message string `json:"message,omitempty"`
	// CheckIndex > 0 refuses the change (409) unless the job's
	// ModifyIndex equals it, as a submit's check_index.
	CheckIndex int64 `json:"check_index,omitempty"`
}

// scaleJob answers POST /v1/jobs/{name}/scale: the current spec with one
// group's count changed is submitted through the same path as POST
// /v1/jobs, so it is a new version (or nothing, when the count is the
// current one), held to the group's scaling bounds.
func (s *Server) scaleJob(w http.ResponseWriter, r *http.Request) error {
	name, err := s.jobName(r, acl.Submit)
	if err != nil {
		return err
	}
	body, err := httpapi.ReadBody(w, r)
	if err != nil {
		return err
	}
	var req scaleRequest
	if err := httpapi.DecodeStrict(body, &req, `a scale request ({"group": "web", "count": N, "message": "...", "check_index": M})`); err != nil {
		return err
	}
	if req.Count == nil {
		return httpapi.BadRequest("count is missing: give the group's new count")
	}
	if req.CheckIndex < 0 {
		return httpapi.BadRequest("check_index must be a non-negative integer, got %d", req.CheckIndex)
	}
	cur, err := s.reg.GetJob(r.Context(), name)
	if errors.Is(err, registry.ErrNotFound) {
		return httpapi.NotFound("no job named %q; see drover status for the jobs there are", name)
	}
	if err != nil {
		return err
	}
	if cur.Stopped {
		return &httpapi.Error{Status: http.StatusConflict, Message: fmt.Sprintf("job %q is stopped; run it again (drover run FILE, or drover revert %s VERSION) before scaling it", name, name)}
	}
	next := cur.Clone()
	g, msg := spec.ScaleTarget(next, req.Group)
	if g == nil {
		return &httpapi.Error{Status: http.StatusUnprocessableEntity, Message: msg}
	}
	if msg := spec.ScaleCheck(next, g, *req.Count); msg != "" {
		return &httpapi.Error{Status: http.StatusUnprocessableEntity, Message: msg}
	}
	from := g.Count
	g.Count = *req.Count
	actor := s.who(r) + fmt.Sprintf(" (scale %s from %d to %d", g.Name, from, g.Count)
	if req.Message != "" {
		actor += ": " + req.Message
	}
	actor += ")"
	stored, changed, err := s.reg.PutJob(registry.WithActor(r.Context(), actor), next, req.CheckIndex)
	if err != nil {
		return checkIndexConflict(err, "scale again", "the count is already "+fmt.Sprint(g.Count))
	}
	return httpapi.WriteJSON(w, stored.ModifyIndex, &spec.SubmitResponse{Job: stored, Changed: changed, Index: stored.ModifyIndex})
}
