package server

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/drover-org/drover/internal/acl"
	"github.com/drover-org/drover/internal/httpapi"
	"github.com/drover-org/drover/internal/registry"
)

// restartJob answers POST /v1/jobs/{name}/restart: every instance of the
// job is to be replaced, without a spec change. Only the request is
// stored here (the job's RestartRequested, no new version); the leader's
// loop, woken by the write, replaces the instances created before it a
// batch at a time. The answer is the job, as DELETE's: {"job": ...}.
// 404 for an unknown job, 409 for a stopped one.
func (s *Server) restartJob(w http.ResponseWriter, r *http.Request) error {
	name, err := s.jobName(r, acl.Submit)
	if err != nil {
		return err
	}
	job, err := s.reg.RestartJob(registry.WithActor(r.Context(), s.who(r)), name)
	switch {
	case errors.Is(err, registry.ErrNotFound):
		return httpapi.NotFound("no job named %q; see drover status for the jobs there are", name)
	case errors.Is(err, registry.ErrJobStopped):
		return &httpapi.Error{Status: http.StatusConflict, Message: fmt.Sprintf("job %q is stopped: there is nothing to restart (drover run starts it again)", name)}
	case err != nil:
		return err
	}
	return httpapi.WriteJSON(w, job.ModifyIndex, map[string]any{"job": job})
}
