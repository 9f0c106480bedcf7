package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/drover-org/drover/internal/registry"
	"github.com/drover-org/drover/internal/spec"
)

// Error is an error with its HTTP status: the one place where error kinds
// become statuses.
type Error struct {
	Status   int
	Message  string
	Problems []spec.Problem
}

func (e *Error) Error() string { return e.Message }

// BadRequest is a 400 saying what is wrong with the request.
func BadRequest(format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Message: fmt.Sprintf(format, args...)}
}

// NotFound is a 404 saying what is not there.
func NotFound(format string, args ...any) *Error {
	return &Error{Status: http.StatusNotFound, Message: fmt.Sprintf(format, args...)}
}

// StatusOf maps an error to its HTTP status, the message to answer and the
// problems to list. Client mistakes are 4xx; only an unexpected failure of
// ours or of etcd is 5xx.
func StatusOf(err error) (int, string, []spec.Problem) {
	var ae *Error
	var ps spec.Problems
	switch {
	case errors.As(err, &ae):
		return ae.Status, ae.Message, ae.Problems
	case errors.As(err, &ps):
		return http.StatusUnprocessableEntity, "the job is not valid", ps
	case errors.Is(err, registry.ErrNotFound):
		return http.StatusNotFound, err.Error(), nil
	case errors.Is(err, registry.ErrConflict):
		return http.StatusConflict, err.Error(), nil
	case errors.Is(err, registry.ErrInvalid):
		return http.StatusBadRequest, err.Error(), nil
	case errors.Is(err, registry.ErrTooLarge):
		return http.StatusRequestEntityTooLarge, err.Error(), nil
	case errors.Is(err, registry.ErrUnavailable):
		// registry.UnavailableError says what to check.
		return http.StatusServiceUnavailable, err.Error(), nil
	}
	return http.StatusInternalServerError, err.Error(), nil
}

// maxProblems bounds the problems an error answer lists.
const maxProblems = 100

// WriteError answers status with msg and problems as a spec.APIError.
func WriteError(w http.ResponseWriter, status int, msg string, problems []spec.Problem) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if n := len(problems); n > maxProblems {
		// A generated job with 100,000 bad groups must not get a 13 MB
		// answer: the first ones show what is wrong.
		problems = append(problems[:maxProblems:maxProblems], spec.Problem{Message: fmt.Sprintf("... and %d more problems", n-maxProblems)})
	}
	json.NewEncoder(w).Encode(spec.APIError{Error: msg, Problems: problems})
}
