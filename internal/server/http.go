package server

import (
	"net/http"

	"github.com/drover-org/drover/internal/httpapi"
)

// wrap puts h behind the API's one door (httpapi.Handle), with its route's
// access checked (auth.go) before h reads anything.
func (s *Server) wrap(a access, h httpapi.HandlerFunc) http.Handler {
	return httpapi.Handle(s.log, func(r *http.Request) (*http.Request, func(), error) { return s.authorize(r, a) }, h)
}

// blockingQuery waits (when index > 0) for one of topics to change past
// index, then runs read.
func (s *Server) blockingQuery(r *http.Request, read func() error, topics ...string) error {
	index, wait, err := httpapi.QueryOptions(r)
	if err != nil {
		return err
	}
	if index > 0 {
		s.hub.wait(r.Context(), index, wait, topics...)
	}
	return read()
}
