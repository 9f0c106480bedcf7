package server

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/drover-org/drover/internal/acl"
	"github.com/drover-org/drover/internal/registry"
	"github.com/drover-org/drover/internal/spec"
)

// The API of job versions and deployments. The leader writes deployments;
// here operators read them, follow them (blocking queries on the
// "deployments", "deployments/<job>" and "deployment/<id>" topics), and ask
// for a promotion or a failure, which the leader's next pass of the job
// acts on. A revert is a submit of an old version's spec.

// jobVersions answers GET /v1/jobs/{name}/versions: every stored version,
// newest first.
func (s *Server) jobVersions(w http.ResponseWriter, r *http.Request) error {
	name, err := s.jobName(r, acl.Read)
	if err != nil {
		return err
	}
	vs, err := s.reg.JobVersions(r.Context(), name)
	if err != nil {
		return err
	}
	if len(vs) == 0 {
		return notFound("no job named %q; see drover status for the jobs there are", name)
	}
	slices.Reverse(vs)
	return writeJSON(w, 0, vs)
}

// revertRequest is the body of POST /v1/jobs/{name}/revert.
type revertRequest struct {
	// Version is the version whose spec becomes the job's next version.
	Version uint64 `json:"version"`
	// CheckIndex > 0 refuses the revert (409) unless the job's
	// ModifyIndex equals it, as a submit's check_index.
	CheckIndex int64 `json:"check_index,omitempty"`
}

// revertJob answers POST /v1/jobs/{name}/revert: version N's spec is
// submitted again, through the same path as POST /v1/jobs, so it becomes
// a new version (or changes nothing when it is the current spec).
func (s *Server) revertJob(w http.ResponseWriter, r *http.Request) error {
	name, err := s.jobName(r, acl.Submit)
	if err != nil {
		return err
	}
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	var req revertRequest
	if err := decodeStrict(body, &req, `a revert request ({"version": N, "check_index": M})`); err != nil {
		return err
	}
	if req.Version == 0 {
		return badRequest("version is missing: give the version to revert to (GET /v1/jobs/%s/versions lists them)", name)
	}
	if req.CheckIndex < 0 {
		return badRequest("check_index must be a non-negative integer, got %d", req.CheckIndex)
	}
	cur, err := s.reg.GetJob(r.Context(), name)
	if errors.Is(err, registry.ErrNotFound) {
		return notFound("no job named %q; see drover status for the jobs there are", name)
	}
	if err != nil {
		return err
	}
	old, err := s.reg.GetJobVersion(r.Context(), name, req.Version)
	if errors.Is(err, registry.ErrNotFound) {
		return notFound("job %q has no version %d; its current version is %d (GET /v1/jobs/%s/versions lists them)", name, req.Version, cur.Version, name)
	}
	if err != nil {
		return err
	}
	// The rules may have changed since the version was stored.
	if ps := old.Validate(); len(ps) > 0 {
		return &apiError{status: http.StatusUnprocessableEntity, msg: fmt.Sprintf("version %d of job %q is not valid today", req.Version, name), problems: ps}
	}
	stored, changed, err := s.reg.PutJob(registry.WithActor(r.Context(), s.who(r)+fmt.Sprintf(" (revert to version %d)", req.Version)), old, req.CheckIndex)
	if err != nil {
		return checkIndexConflict(err, "revert again", "there is nothing to revert")
	}
	return writeJSON(w, stored.ModifyIndex, &spec.SubmitResponse{Job: stored, Changed: changed, Index: stored.ModifyIndex})
}

// jobDeployments answers GET /v1/jobs/{name}/deployments: the job's
// deployments, newest first (none for an unknown job).
func (s *Server) jobDeployments(w http.ResponseWriter, r *http.Request) error {
	name, err := s.jobName(r, acl.Read)
	if err != nil {
		return err
	}
	return s.blockingQuery(r, func() error {
		ds, rev, err := s.reg.ListDeployments(r.Context(), name)
		if err != nil {
			return err
		}
		return writeJSON(w, rev, nonNilDeployments(ds))
	}, "deployments/"+name)
}

// latestDeployment answers GET /v1/jobs/{name}/deployment: the job's
// newest deployment, 404 when it has none.
func (s *Server) latestDeployment(w http.ResponseWriter, r *http.Request) error {
	name, err := s.jobName(r, acl.Read)
	if err != nil {
		return err
	}
	return s.blockingQuery(r, func() error {
		ds, rev, err := s.reg.ListDeployments(r.Context(), name)
		if err != nil {
			return err
		}
		if len(ds) == 0 {
			return notFound("job %q has no deployment (only a service job with an update block makes one)", name)
		}
		return writeJSON(w, rev, ds[0])
	}, "deployments/"+name)
}

// listDeployments answers GET /v1/deployments: every deployment, newest
// first.
func (s *Server) listDeployments(w http.ResponseWriter, r *http.Request) error {
	return s.blockingQuery(r, func() error {
		ds, rev, err := s.reg.ListDeployments(r.Context(), "")
		if err != nil {
			return err
		}
		ds = slices.DeleteFunc(ds, func(d *spec.Deployment) bool { return !s.canRead(r, d.Namespace) })
		return writeJSON(w, rev, nonNilDeployments(ds))
	}, "deployments")
}

func nonNilDeployments(ds []*spec.Deployment) []*spec.Deployment {
	if ds == nil {
		return []*spec.Deployment{}
	}
	return ds
}

// findDeployment accepts a full ID or a unique prefix of at least 4
// characters, as findAlloc does. It returns the revision read at.
func (s *Server) findDeployment(r *http.Request, id string) (*spec.Deployment, int64, error) {
	all, rev, err := s.reg.ListDeployments(r.Context(), "")
	if err != nil {
		return nil, 0, err
	}
	var match []*spec.Deployment
	for _, d := range all {
		if d.ID == id {
			return d, rev, nil
		}
		if len(id) >= 4 && strings.HasPrefix(d.ID, id) {
			match = append(match, d)
		}
	}
	switch len(match) {
	case 0:
		if len(id) < 4 {
			return nil, 0, notFound("no deployment %q (give at least 4 characters of an ID)", id)
		}
		return nil, 0, notFound("no deployment with ID or prefix %q; see GET /v1/deployments", id)
	case 1:
		return match[0], rev, nil
	}
	ids := make([]string, len(match))
	for i, m := range match {
		ids[i] = m.ID
	}
	slices.Sort(ids)
	return nil, 0, &apiError{status: http.StatusConflict, msg: fmt.Sprintf("prefix %q matches %d deployments: %s; give more characters", id, len(match), strings.Join(ids, ", "))}
}

// getDeployment answers GET /v1/deployments/{id or prefix}; a blocking
// query wakes when that deployment (or its request) changes.
func (s *Server) getDeployment(w http.ResponseWriter, r *http.Request) error {
	id, err := pathName(r, "id", "deployment id")
	if err != nil {
		return err
	}
	found, _, err := s.findDeployment(r, id)
	if err != nil {
		return err
	}
	if err := s.allow(r, found.Namespace, acl.Read); err != nil {
		return err
	}
	return s.blockingQuery(r, func() error {
		d, rev, err := s.findDeployment(r, found.ID)
		if err != nil {
			return err
		}
		return writeJSON(w, rev, d)
	}, "deployment/"+found.ID)
}

// promoteDeployment answers POST /v1/deployments/{id}/promote.
func (s *Server) promoteDeployment(w http.ResponseWriter, r *http.Request) error {
	return s.requestDeployment(w, r, spec.DeploymentRequest{Promote: true})
}

// failDeployment answers POST /v1/deployments/{id}/fail.
func (s *Server) failDeployment(w http.ResponseWriter, r *http.Request) error {
	return s.requestDeployment(w, r, spec.DeploymentRequest{Fail: true})
}

// requestDeployment stores an operator's request about a running
// deployment and answers with the deployment as it now reads. The leader
// acts on it in its next pass of the job.
func (s *Server) requestDeployment(w http.ResponseWriter, r *http.Request, req spec.DeploymentRequest) error {
	id, err := pathName(r, "id", "deployment id")
	if err != nil {
		return err
	}
	d, _, err := s.findDeployment(r, id)
	if err != nil {
		return err
	}
	if err := s.allow(r, d.Namespace, acl.Submit); err != nil {
		return err
	}
	verb := "failed"
	if req.Promote {
		verb = "promoted"
	}
	if d.Status.Final() {
		return &apiError{status: http.StatusConflict, msg: fmt.Sprintf(
			"deployment %s of job %q version %d is %s; only a running deployment can be %s", d.ID, d.Job, d.JobVersion, d.Status, verb)}
	}
	if req.Promote && !hasCanaries(d) {
		return badRequest("deployment has no canaries to promote")
	}
	req.Time = time.Now().UTC()
	if err := s.reg.PutDeploymentRequest(r.Context(), d.ID, &req); err != nil {
		if errors.Is(err, registry.ErrConflict) {
			return &apiError{status: http.StatusConflict, msg: fmt.Sprintf("deployment %s cannot be %s: %v", d.ID, verb, err)}
		}
		return err
	}
	d, err = s.reg.GetDeployment(r.Context(), d.ID)
	if err != nil {
		return err
	}
	return writeJSON(w, d.ModifyIndex, d)
}

func hasCanaries(d *spec.Deployment) bool {
	for _, g := range d.Groups {
		if g != nil && g.DesiredCanaries > 0 {
			return true
		}
	}
	return false
}
