package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/drover-org/drover/internal/acl"
	"github.com/drover-org/drover/internal/httpapi"
	"github.com/drover-org/drover/internal/registry"
	"github.com/drover-org/drover/internal/spec"
	"github.com/drover-org/drover/internal/state"
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
		return httpapi.NotFound("no job named %q; see drover status for the jobs there are", name)
	}
	slices.Reverse(vs)
	return httpapi.WriteJSON(w, 0, vs)
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
	body, err := httpapi.ReadBody(w, r)
	if err != nil {
		return err
	}
	var req revertRequest
	if err := httpapi.DecodeStrict(body, &req, `a revert request ({"version": N, "check_index": M})`); err != nil {
		return err
	}
	if req.Version == 0 {
		return httpapi.BadRequest("version is missing: give the version to revert to (GET /v1/jobs/%s/versions lists them)", name)
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
	old, err := s.reg.GetJobVersion(r.Context(), name, req.Version)
	if errors.Is(err, registry.ErrNotFound) {
		return httpapi.NotFound("job %q has no version %d; its current version is %d (GET /v1/jobs/%s/versions lists them)", name, req.Version, cur.Version, name)
	}
	if err != nil {
		return err
	}
	// The rules may have changed since the version was stored.
	if ps := old.Validate(); len(ps) > 0 {
		return &httpapi.Error{Status: http.StatusUnprocessableEntity, Message: fmt.Sprintf("version %d of job %q is not valid today", req.Version, name), Problems: ps}
	}
	stored, changed, err := s.reg.PutJob(registry.WithActor(r.Context(), s.who(r)+fmt.Sprintf(" (revert to version %d)", req.Version)), old, req.CheckIndex)
	if err != nil {
		return checkIndexConflict(err, "revert again", "there is nothing to revert")
	}
	return httpapi.WriteJSON(w, stored.ModifyIndex, &spec.SubmitResponse{Job: stored, Changed: changed, Index: stored.ModifyIndex})
}

// jobDeployments answers GET /v1/jobs/{name}/deployments: the job's
// deployments, newest first (none for an unknown job).
func (s *Server) jobDeployments(w http.ResponseWriter, r *http.Request) error {
	name, err := s.jobName(r, acl.Read)
	if err != nil {
		return err
	}
	return s.blockingQuery(r, func() error {
		ss, err := s.read(r.Context())
		if err != nil {
			return err
		}
		return httpapi.WriteJSON(w, ss.Rev, newestFirst(ss.JobDeployments(name)))
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
		ss, err := s.read(r.Context())
		if err != nil {
			return err
		}
		ds := newestFirst(ss.JobDeployments(name))
		if len(ds) == 0 {
			return httpapi.NotFound("job %q has no deployment (only a service job with an update block makes one)", name)
		}
		return httpapi.WriteJSON(w, ss.Rev, ds[0])
	}, "deployments/"+name)
}

// listDeployments answers GET /v1/deployments: every deployment, newest
// first.
func (s *Server) listDeployments(w http.ResponseWriter, r *http.Request) error {
	return s.blockingQuery(r, func() error {
		ss, err := s.read(r.Context())
		if err != nil {
			return err
		}
		ds := slices.DeleteFunc(ss.Deployments(), func(d *spec.Deployment) bool { return !s.canRead(r, d.Namespace) })
		return httpapi.WriteJSON(w, ss.Rev, newestFirst(ds))
	}, "deployments")
}

// newestFirst sorts ds into the API's order, the newest deployment first
// whatever its job; ties (one pass creating several) by job version, then
// ID. It returns ds.
func newestFirst(ds []*spec.Deployment) []*spec.Deployment {
	slices.SortFunc(ds, func(a, b *spec.Deployment) int {
		return cmp.Or(b.CreateTime.Compare(a.CreateTime), cmp.Compare(b.JobVersion, a.JobVersion),
			cmp.Compare(a.Job, b.Job), cmp.Compare(a.ID, b.ID))
	})
	return ds
}

// findDeployment accepts a full ID or a unique prefix of at least 4
// characters, as findAlloc does.
func findDeployment(ss *state.Snapshot, id string) (*spec.Deployment, error) {
	var match []*spec.Deployment
	for _, d := range ss.Deployments() {
		if d.ID == id {
			return d, nil
		}
		if len(id) >= 4 && strings.HasPrefix(d.ID, id) {
			match = append(match, d)
		}
	}
	switch len(match) {
	case 0:
		if len(id) < 4 {
			return nil, httpapi.NotFound("no deployment %q (give at least 4 characters of an ID)", id)
		}
		return nil, httpapi.NotFound("no deployment with ID or prefix %q; see GET /v1/deployments", id)
	case 1:
		return match[0], nil
	}
	ids := make([]string, len(match))
	for i, m := range match {
		ids[i] = m.ID
	}
	slices.Sort(ids)
	return nil, &httpapi.Error{Status: http.StatusConflict, Message: fmt.Sprintf("prefix %q matches %d deployments: %s; give more characters", id, len(match), strings.Join(ids, ", "))}
}

// getDeployment answers GET /v1/deployments/{id or prefix}; a blocking
// query wakes when that deployment (or its request) changes.
func (s *Server) getDeployment(w http.ResponseWriter, r *http.Request) error {
	id, err := httpapi.PathName(r, "id", "deployment id")
	if err != nil {
		return err
	}
	ss, err := s.read(r.Context())
	if err != nil {
		return err
	}
	found, err := findDeployment(ss, id)
	if err != nil {
		return err
	}
	if err := s.allow(r, found.Namespace, acl.Read); err != nil {
		return err
	}
	return s.blockingQuery(r, func() error {
		ss, err := s.read(r.Context())
		if err != nil {
			return err
		}
		d, err := findDeployment(ss, found.ID)
		if err != nil {
			return err
		}
		return httpapi.WriteJSON(w, ss.Rev, d)
	}, "deployment/"+found.ID)
}

// promoteDeployment answers POST /v1/deployments/{id}/promote.
func (s *Server) promoteDeployment(w http.ResponseWriter, r *http.Request) error {
	return s.requestDeployment(w, r, "promoted", func(ctx context.Context, d *spec.Deployment) error {
		if !hasCanaries(d) {
			return httpapi.BadRequest("deployment has no canaries to promote")
		}
		return s.reg.PutDeploymentRequest(ctx, d.ID, &spec.DeploymentRequest{Promote: true, Time: time.Now().UTC()})
	})
}

// failDeployment answers POST /v1/deployments/{id}/fail.
func (s *Server) failDeployment(w http.ResponseWriter, r *http.Request) error {
	return s.requestDeployment(w, r, "failed", func(ctx context.Context, d *spec.Deployment) error {
		return s.reg.PutDeploymentRequest(ctx, d.ID, &spec.DeploymentRequest{Fail: true, Time: time.Now().UTC()})
	})
}

// pauseDeployment answers POST /v1/deployments/{id}/pause: the leader
// starts no new batch of it until resumed.
func (s *Server) pauseDeployment(w http.ResponseWriter, r *http.Request) error {
	return s.requestDeployment(w, r, "paused", func(ctx context.Context, d *spec.Deployment) error {
		return s.reg.PauseDeployment(ctx, d.ID, true)
	})
}

// resumeDeployment answers POST /v1/deployments/{id}/resume.
func (s *Server) resumeDeployment(w http.ResponseWriter, r *http.Request) error {
	return s.requestDeployment(w, r, "resumed", func(ctx context.Context, d *spec.Deployment) error {
		return s.reg.PauseDeployment(ctx, d.ID, false)
	})
}

// requestDeployment stores an operator's request about a running
// deployment (write) and answers with the deployment as it now reads. The
// leader acts on it in its next pass of the job. verb says what the
// request makes of the deployment, for errors.
func (s *Server) requestDeployment(w http.ResponseWriter, r *http.Request, verb string, write func(context.Context, *spec.Deployment) error) error {
	id, err := httpapi.PathName(r, "id", "deployment id")
	if err != nil {
		return err
	}
	ss, err := s.read(r.Context())
	if err != nil {
		return err
	}
	d, err := findDeployment(ss, id)
	if err != nil {
		return err
	}
	if err := s.allow(r, d.Namespace, acl.Submit); err != nil {
		return err
	}
	if d.Status.Final() {
		return &httpapi.Error{Status: http.StatusConflict, Message: fmt.Sprintf(
			"deployment %s of job %q version %d is %s; only a running deployment can be %s", d.ID, d.Job, d.JobVersion, d.Status, verb)}
	}
	if err := write(r.Context(), d); err != nil {
		if errors.Is(err, registry.ErrConflict) {
			return &httpapi.Error{Status: http.StatusConflict, Message: fmt.Sprintf("deployment %s cannot be %s: %v", d.ID, verb, err)}
		}
		return err
	}
	// The answer shows the request: read what was written.
	if ss, err = s.readCurrent(r.Context()); err != nil {
		return err
	}
	if d, err = findDeployment(ss, d.ID); err != nil {
		return err
	}
	return httpapi.WriteJSON(w, ss.Rev, d)
}

func hasCanaries(d *spec.Deployment) bool {
	for _, g := range d.Groups {
		if g != nil && g.DesiredCanaries > 0 {
			return true
		}
	}
	return false
}

// jobDiff is GET /v1/jobs/{name}/diff?from=A&to=B: the fields of the spec
// that differ from version A to version B (spec.Changes, as drover history
// lists them). Without to, the current version.
func (s *Server) jobDiff(w http.ResponseWriter, r *http.Request) error {
	name, err := s.jobName(r, acl.Read)
	if err != nil {
		return err
	}
	vs, err := s.reg.JobVersions(r.Context(), name)
	if err != nil {
		return err
	}
	if len(vs) == 0 {
		return httpapi.NotFound("no job named %q; see drover status for the jobs there are", name)
	}
	pick := func(key string, dflt *spec.Job) (*spec.Job, error) {
		v := r.URL.Query().Get(key)
		if v == "" {
			if dflt == nil {
				return nil, httpapi.BadRequest("%s is missing: GET /v1/jobs/%s/diff?from=VERSION[&to=VERSION]", key, name)
			}
			return dflt, nil
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return nil, httpapi.BadRequest("%s must be a version number, got %q", key, v)
		}
		for _, j := range vs {
			if j.Version == n {
				return j, nil
			}
		}
		return nil, httpapi.NotFound("job %q has no version %d; drover history %s lists its versions", name, n, name)
	}
	from, err := pick("from", nil)
	if err != nil {
		return err
	}
	to, err := pick("to", vs[len(vs)-1])
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, 0, spec.NewJobDiff(from, to))
}
