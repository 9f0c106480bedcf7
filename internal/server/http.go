package server

import (
	"net/http"

	"github.com/drover-org/drover/internal/httpapi"
	"github.com/drover-org/drover/internal/link"
)

// wrap puts h behind the API's one door (httpapi.Handle), with its route's
// access checked (auth.go) before h reads anything.
func (s *Server) wrap(a access, h httpapi.HandlerFunc) http.Handler {
	return httpapi.Handle(s.log, func(r *http.Request) (*http.Request, func(), error) { return s.authorize(r, a) }, h)
}

// blockingQuery waits (when index > 0) for one of topics to change past
// index, then runs read. A request that came over a link (an agent's) is
// parked instead of waiting, and runs again, woken, without waiting.
func (s *Server) blockingQuery(r *http.Request, read func() error, topics ...string) error {
	index, wait, err := httpapi.QueryOptions(r)
	if err != nil {
		return err
	}
	if index > 0 && !link.Woken(r) {
		if link.Park(r, func(wake func()) func() { return s.hub.park(index, wait, wake, topics...) }) {
			return link.ErrParked
		}
		s.hub.wait(r.Context(), index, wait, topics...)
	}
	return read()
}
