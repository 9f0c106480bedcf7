package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/drover-org/drover/internal/registry"
	"github.com/drover-org/drover/internal/spec"
)

// Every kind of error the handlers return has its status: the API's own
// errors say theirs, an invalid job is a 422 with its problems, each of
// the registry's kinds (wrapped as the registry and the handlers wrap
// them) its 4xx or 503, and anything else is a 500.
func TestStatusOfEachErrorKind(t *testing.T) {
	problems := spec.Problems{{Field: "groups[0].count", Message: "must be positive"}}
	cases := []struct {
		name     string
		err      error
		status   int
		msg      string
		problems int
	}{
		{"an Error", &Error{Status: http.StatusBadGateway, Message: "node n1 is unreachable"}, http.StatusBadGateway, "node n1 is unreachable", 0},
		{"an Error with problems", &Error{Status: http.StatusBadRequest, Message: "the status report is not valid", Problems: problems}, http.StatusBadRequest, "the status report is not valid", 1},
		{"a wrapped BadRequest", fmt.Errorf("decoding: %w", BadRequest("wait must be a duration, got %q", "x")), http.StatusBadRequest, `wait must be a duration, got "x"`, 0},
		{"NotFound", NotFound("no job named %q", "web"), http.StatusNotFound, `no job named "web"`, 0},
		{"invalid job", fmt.Errorf("submit: %w", problems), http.StatusUnprocessableEntity, "the job is not valid", 1},
		{"registry not found", fmt.Errorf("registry: alloc %q: %w", "a1", registry.ErrNotFound), http.StatusNotFound, `registry: alloc "a1": not found`, 0},
		{"registry conflict", registry.ErrJobStopped, http.StatusConflict, registry.ErrJobStopped.Error(), 0},
		{"check index", &registry.CheckIndexError{Job: "web", CheckIndex: 3, ModifyIndex: 5}, http.StatusConflict, (&registry.CheckIndexError{Job: "web", CheckIndex: 3, ModifyIndex: 5}).Error(), 0},
		{"registry invalid", fmt.Errorf("registry: alloc %q: missing client status: %w", "a1", registry.ErrInvalid), http.StatusBadRequest, `registry: alloc "a1": missing client status: invalid`, 0},
		{"registry too large", fmt.Errorf("job web: %w", registry.ErrTooLarge), http.StatusRequestEntityTooLarge, "job web: too large", 0},
		{"registry unavailable", &registry.UnavailableError{What: "write job web"}, http.StatusServiceUnavailable, (&registry.UnavailableError{What: "write job web"}).Error(), 0},
		{"anything else", errors.New("disk on fire"), http.StatusInternalServerError, "disk on fire", 0},
	}
	for _, c := range cases {
		status, msg, ps := StatusOf(c.err)
		if status != c.status || msg != c.msg || len(ps) != c.problems {
			t.Errorf("%s: StatusOf = %d %q with %d problems; want %d %q with %d", c.name, status, msg, len(ps), c.status, c.msg, c.problems)
		}
	}
}
