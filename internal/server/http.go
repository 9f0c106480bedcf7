package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/drover-org/drover/internal/registry"
	"github.com/drover-org/drover/internal/spec"
)

// MaxBodyBytes bounds request bodies; a job file is small (Nomad's default
// job_max_source_size is 1 MB). Checked before parsing.
const MaxBodyBytes = 1 << 20

// Blocking queries wait at most this long (default, and cap).
const (
	defaultQueryWait = 5 * time.Minute
	maxQueryWait     = 10 * time.Minute
)

// apiError is an error with its HTTP status: the one place where error kinds
// become statuses.
type apiError struct {
	status   int
	msg      string
	problems []spec.Problem
}

func (e *apiError) Error() string { return e.msg }

func badRequest(format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) *apiError {
	return &apiError{status: http.StatusNotFound, msg: fmt.Sprintf(format, args...)}
}

// statusOf maps an error to its HTTP status. Client mistakes are 4xx; only
// an unexpected failure of ours or of etcd is 5xx.
func statusOf(err error) (int, string, []spec.Problem) {
	var ae *apiError
	var ps spec.Problems
	switch {
	case errors.As(err, &ae):
		return ae.status, ae.msg, ae.problems
	case errors.As(err, &ps):
		return http.StatusUnprocessableEntity, "the job is not valid", ps
	case errors.Is(err, registry.ErrNotFound):
		return http.StatusNotFound, err.Error(), nil
	case errors.Is(err, registry.ErrConflict):
		return http.StatusConflict, err.Error(), nil
	case errors.Is(err, registry.ErrInvalid):
		return http.StatusBadRequest, err.Error(), nil
	case errors.Is(err, registry.ErrUnavailable):
		return http.StatusServiceUnavailable, "registry unavailable: " + err.Error(), nil
	}
	return http.StatusInternalServerError, err.Error(), nil
}

// handlerFunc is an API handler that returns its error instead of writing it.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// wrap is the single door every API request passes through: panic
// recovery, the authorization hook, and error rendering.
func (s *Server) wrap(h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				s.log.Error("panic in handler", "path", r.URL.Path, "panic", p)
				writeError(w, http.StatusInternalServerError, "internal error", nil)
			}
		}()
		if err := s.authorize(r); err != nil {
			writeError(w, http.StatusForbidden, err.Error(), nil)
			return
		}
		if err := h(w, r); err != nil {
			if r.Context().Err() != nil {
				return // the client went away (or we are shutting down): nobody to answer
			}
			status, msg, problems := statusOf(err)
			if status >= 500 {
				s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
			}
			writeError(w, status, msg, problems)
		}
	})
}

// authorize is where authentication and authorization will go (the
// security issue): every API request passes here. Today it admits all.
func (s *Server) authorize(r *http.Request) error { return nil }

func writeError(w http.ResponseWriter, status int, msg string, problems []spec.Problem) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(spec.APIError{Error: msg, Problems: problems})
}

func writeJSON(w http.ResponseWriter, index int64, v any) error {
	w.Header().Set("Content-Type", "application/json")
	if index > 0 {
		w.Header().Set("X-Drover-Index", strconv.FormatInt(index, 10))
	}
	// Compact: indenting doubles the encoding cost of large lists; the CLI
	// pretty-prints its own -o json.
	return json.NewEncoder(w).Encode(v)
}

// readBody reads a request body up to MaxBodyBytes; a larger body is a 413.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
	b, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &apiError{status: http.StatusRequestEntityTooLarge,
				msg: fmt.Sprintf("request body is larger than the %d byte limit", MaxBodyBytes)}
		}
		return nil, badRequest("cannot read request body: %v", err)
	}
	return b, nil
}

// decodeStrict decodes a JSON body into v, refusing unknown fields, wrong
// types and data after the object with a 400 that says what was expected
// ("an allocation status update") and where the problem is.
func decodeStrict(body []byte, v any, what string) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("the body is not %s: %s", what, jsonErr(body, err))
	}
	if dec.More() {
		return badRequest("the body has data after the JSON object")
	}
	return nil
}

// pathName reads a path segment that names a job, node or alloc and checks
// it against the allow-list before it can reach a registry key.
func pathName(r *http.Request, key, what string) (string, error) {
	v := r.PathValue(key)
	if msg := spec.CheckName(v); msg != "" {
		return "", badRequest("%s %s", what, msg)
	}
	return v, nil
}

// queryOptions reads ?index=N&wait=D.
func queryOptions(r *http.Request) (int64, time.Duration, error) {
	q := r.URL.Query()
	var index int64
	if s := q.Get("index"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 0 {
			return 0, 0, badRequest("index must be a non-negative integer, got %q", s)
		}
		index = v
	}
	wait := defaultQueryWait
	if s := q.Get("wait"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return 0, 0, badRequest("wait must be a duration such as \"30s\", got %q", s)
		}
		wait = min(d, maxQueryWait)
	}
	return index, wait, nil
}

// blockingQuery waits (when index > 0) for one of topics to change past
// index, then runs read.
func (s *Server) blockingQuery(r *http.Request, read func() error, topics ...string) error {
	index, wait, err := queryOptions(r)
	if err != nil {
		return err
	}
	if index > 0 {
		s.hub.wait(r.Context(), index, wait, topics...)
	}
	return read()
}

func logRequests(log *slog.Logger, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.Debug("request", "method", r.Method, "path", r.URL.Path)
		h.ServeHTTP(w, r)
	})
}
