package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/drover-org/drover/internal/acl"
	"github.com/drover-org/drover/internal/httpapi"
	"github.com/drover-org/drover/internal/registry"
	"github.com/drover-org/drover/internal/spec"
)

// allocSignal answers POST /v1/allocations/{id}/signal?task=T&signal=SIG:
// the alloc's agent sends the running task the signal through its driver.
// The signal is checked here first, so that a typo is a 400 that names
// the signals there are, whatever the agent.
func (s *Server) allocSignal(w http.ResponseWriter, r *http.Request) error {
	if msg := spec.CheckSignal(r.URL.Query().Get("signal")); msg != "" {
		return httpapi.BadRequest("%s", msg)
	}
	return s.taskAction(w, r, "signal")
}

// allocRestart answers POST /v1/allocations/{id}/restart?task=T: the
// alloc's agent stops the task and starts it again in place.
func (s *Server) allocRestart(w http.ResponseWriter, r *http.Request) error {
	return s.taskAction(w, r, "restart")
}

// taskAction proxies one of the lifecycle verbs on a running task to the
// alloc's agent (agent/lifecycle_api.go), after the submit capability on
// the alloc's namespace: what a signal or a restart can do, a job's
// submitter can do by submitting.
func (s *Server) taskAction(w http.ResponseWriter, r *http.Request, what string) error {
	call, err := s.forAgent(r, acl.Submit, what)
	if err != nil {
		return err
	}
	if call.alloc.Terminal() {
		return &httpapi.Error{Status: http.StatusConflict, Message: fmt.Sprintf("allocation %s is %s: there is no task to %s", call.alloc.Name, call.alloc.ClientStatusOr(), what)}
	}
	req, err := http.NewRequestWithContext(r.Context(), "POST", call.url, nil)
	if err != nil {
		return err
	}
	resp, err := s.agentHTTP.Do(req)
	if err != nil {
		return &httpapi.Error{Status: http.StatusBadGateway, Message: fmt.Sprintf("cannot reach node %s at %s to %s: %v", call.node.Name, call.node.Address, what, err)}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return &httpapi.Error{Status: http.StatusBadGateway, Message: fmt.Sprintf("reading node %s's answer: %v", call.node.Name, err)}
	}
	if resp.StatusCode != http.StatusOK {
		var e spec.APIError
		msg := strings.TrimSpace(string(body))
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		return &httpapi.Error{Status: resp.StatusCode, Message: fmt.Sprintf("node %s: %s", call.node.Name, msg)}
	}
	var res spec.TaskActionResult
	if err := json.Unmarshal(body, &res); err != nil {
		return &httpapi.Error{Status: http.StatusBadGateway, Message: fmt.Sprintf("node %s answered what is not a result: %v", call.node.Name, err)}
	}
	return httpapi.WriteJSON(w, 0, &res)
}

// allocStop answers POST /v1/allocations/{id}/stop: the instance is
// stopped and replaced, as Nomad's alloc stop. Only the request is stored
// here (the job's StopAllocs, no new version); the leader's loop, woken by
// the write, stops the alloc at once and places its replacement. The
// answer is the alloc as it was, {"alloc": ..., "job": ...}. 409 for an
// alloc already told to stop or a system job's (which runs one instance
// per node: drain the node instead).
func (s *Server) allocStop(w http.ResponseWriter, r *http.Request) error {
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
	if err := s.allow(r, a.Namespace, acl.Submit); err != nil {
		return err
	}
	switch {
	case a.JobType == spec.JobSystem:
		return &httpapi.Error{Status: http.StatusConflict, Message: fmt.Sprintf("allocation %s is a system job's, which runs one instance on every node that fits: stop the job (drover stop %s) or take the node out (drover node drain)", a.Name, a.Job)}
	case a.DesiredStatus != spec.DesiredRun || a.Terminal():
		return &httpapi.Error{Status: http.StatusConflict, Message: fmt.Sprintf("allocation %s is %s (desired %s): there is nothing to stop", a.Name, a.ClientStatusOr(), a.DesiredStatus)}
	}
	live := func(id string) bool {
		b := ss.Alloc(id)
		return b != nil && b.DesiredStatus == spec.DesiredRun && !b.Terminal()
	}
	job, err := s.reg.StopAlloc(registry.WithActor(r.Context(), s.who(r)), a.Job, a.ID, live)
	switch {
	case errors.Is(err, registry.ErrNotFound):
		return httpapi.NotFound("allocation %s's job %q is gone", a.Name, a.Job)
	case errors.Is(err, registry.ErrJobStopped):
		return &httpapi.Error{Status: http.StatusConflict, Message: fmt.Sprintf("job %q is stopped: its instances are stopping already", a.Job)}
	case err != nil:
		return err
	}
	return httpapi.WriteJSON(w, job.ModifyIndex, map[string]any{"alloc": a, "job": job})
}
