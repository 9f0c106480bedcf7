package server

import (
	"errors"
	"net/http"

	"github.com/drover-org/drover/internal/httpapi"
	"github.com/drover-org/drover/internal/jobfile"
	"github.com/drover-org/drover/internal/spec"
)

// parseJobSource is the name a parsed source's problems are placed in:
// "job:12:5" is line 12, column 5 of the text sent.
const parseJobSource = "job"

// parseJob answers POST /v1/jobs/parse {"source": TEXT}: the job file's
// text (HCL, JSON or YAML, told apart as drover run tells stdin's) decoded
// by the same decoder as the CLI's, so that the web UI needs no job
// language of its own. A source that is not a valid job is a 422 listing
// every problem with its "job:LINE:COL". The HCL filesystem functions
// refuse: the text came without the files beside it, and the server's own
// disk is not the user's. Parsing changes nothing, so any token may.
func (s *Server) parseJob(w http.ResponseWriter, r *http.Request) error {
	body, err := httpapi.ReadBody(w, r)
	if err != nil {
		return err
	}
	var req spec.ParseRequest
	if err := httpapi.DecodeStrict(body, &req, `{"source": "the job file's text"}`); err != nil {
		return err
	}
	job, warns, err := jobfile.DecodeWith(parseJobSource, []byte(req.Source), jobfile.Options{NoFiles: true})
	if err != nil {
		var ps spec.Problems
		if errors.As(err, &ps) {
			return &httpapi.Error{Status: http.StatusUnprocessableEntity, Message: "the job is not valid", Problems: ps}
		}
		return httpapi.BadRequest("%v", err)
	}
	return httpapi.WriteJSON(w, 0, &spec.ParseResponse{Job: job, Warnings: warns})
}
