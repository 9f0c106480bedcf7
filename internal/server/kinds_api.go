package server

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"net/http"
	"time"

	"github.com/drover-org/drover/internal/acl"
	"github.com/drover-org/drover/internal/httpapi"
	"github.com/drover-org/drover/internal/leader"
	"github.com/drover-org/drover/internal/periodic"
	"github.com/drover-org/drover/internal/registry"
	"github.com/drover-org/drover/internal/spec"
	"github.com/drover-org/drover/internal/state"
)

// kinds fills in what a template job's status shows: its next launch
// (periodic) and its children.
func kinds(ss *state.Snapshot, job *spec.Job, st *spec.JobStatus, now time.Time) {
	for _, c := range leader.Children(ss, job.Name) {
		st.Children = append(st.Children, c.Name)
	}
	if job.Periodic.On() {
		if sched, ps := periodic.Parse(job.Periodic, time.LoadLocation); ps == nil {
			st.NextLaunch = sched.Next(now)
		}
	}
}

// template reads the job named in the request, for a capability, and
// checks it is a template of the kind what says ("periodic" or
// "parameterized").
func (s *Server) template(r *http.Request, what string) (*spec.Job, error) {
	name, err := s.jobName(r, acl.Submit)
	if err != nil {
		return nil, err
	}
	ss, err := s.read(r.Context())
	if err != nil {
		return nil, err
	}
	job := ss.Job(name)
	switch {
	case job == nil:
		return nil, httpapi.NotFound("no job named %q; see drover status for the jobs there are", name)
	case job.Stopped:
		return nil, &httpapi.Error{Status: http.StatusConflict, Message: fmt.Sprintf("job %q is stopped; drover run starts it again", name)}
	case what == "periodic" && job.Periodic == nil, what == "parameterized" && job.Parameterized == nil:
		return nil, httpapi.BadRequest("job %q is not %s: only a job with a %s block can be %s", name, what, what,
			map[string]string{"periodic": "forced", "parameterized": "dispatched"}[what])
	}
	return job, nil
}

// forcePeriodic answers POST /v1/jobs/{name}/periodic/force: a child of
// the periodic job is launched now, whatever its schedule, enabled and
// prohibit_overlap say. The answer is the child: {"job": ...}.
func (s *Server) forcePeriodic(w http.ResponseWriter, r *http.Request) error {
	job, err := s.template(r, "periodic")
	if err != nil {
		return err
	}
	child := periodic.ChildJob(job, time.Now())
	stored, _, err := s.reg.PutJob(registry.WithActor(r.Context(), s.who(r)+", forced launch"), child, 0)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, stored.ModifyIndex, map[string]any{"job": stored})
}

// dispatchJob answers POST /v1/jobs/{name}/dispatch with a
// spec.DispatchRequest: a child of the parameterized job, with the meta
// merged over the job's and the payload, named
// spec.DispatchChildName. The answer is the child: {"job": ...}.
func (s *Server) dispatchJob(w http.ResponseWriter, r *http.Request) error {
	job, err := s.template(r, "parameterized")
	if err != nil {
		return err
	}
	var req spec.DispatchRequest
	body, err := httpapi.ReadBody(w, r)
	if err != nil {
		return err
	}
	if err := httpapi.DecodeStrict(body, &req, "a dispatch request (meta, payload)"); err != nil {
		return err
	}
	child, msg := Dispatched(job, req, time.Now(), randomID())
	if msg != "" {
		return &httpapi.Error{Status: http.StatusUnprocessableEntity, Message: msg}
	}
	stored, _, err := s.reg.PutJob(registry.WithActor(r.Context(), s.who(r)), child, 0)
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, stored.ModifyIndex, map[string]any{"job": stored})
}

// Dispatched is the child of parameterized job j that req dispatches at
// now with the suffix id, or why req is refused.
func Dispatched(j *spec.Job, req spec.DispatchRequest, now time.Time, id string) (*spec.Job, string) {
	p := j.Parameterized
	switch {
	case len(req.Payload) > spec.MaxPayload:
		return nil, fmt.Sprintf("the payload is %d bytes; the limit is %d", len(req.Payload), spec.MaxPayload)
	case p.Payload == spec.PayloadRequired && len(req.Payload) == 0:
		return nil, fmt.Sprintf("job %q requires a payload (parameterized payload = \"required\"): pass a file, or - for standard input", j.Name)
	case p.Payload == spec.PayloadForbidden && len(req.Payload) > 0:
		return nil, fmt.Sprintf("job %q takes no payload (parameterized payload = \"forbidden\"): dispatch it without a file", j.Name)
	}
	if msg := j.DispatchMetaProblem(req.Meta); msg != "" {
		return nil, msg
	}
	c := j.SpecOnly()
	c.Name = spec.DispatchChildName(j.Name, now, id)
	c.Parameterized = nil
	c.ParentID = j.Name
	c.LaunchTime = now.UTC()
	c.Payload = req.Payload
	if len(req.Meta) > 0 {
		c.Meta = maps.Clone(c.Meta)
		if c.Meta == nil {
			c.Meta = map[string]string{}
		}
		maps.Copy(c.Meta, req.Meta)
	}
	return c, ""
}

func randomID() string {
	b := make([]byte, 4)
	rand.Read(b)
	return hex.EncodeToString(b)
}
