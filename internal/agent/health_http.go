package agent

import (
	"errors"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/drover-org/drover/internal/metrics"
	"github.com/drover-org/drover/internal/spec"
)

// metricsState is what a scrape of the agent reads: its allocs by the
// status it last computed, and how long since a server last answered it.
func (a *Agent) metricsState() metrics.AgentState {
	st := metrics.AgentState{AllocsByStatus: map[string]int{}, SinceHeartbeat: -1}
	a.mu.Lock()
	runners := make([]*allocRunner, 0, len(a.runners))
	for _, ar := range a.runners {
		runners = append(runners, ar)
	}
	a.mu.Unlock()
	for _, ar := range runners {
		cs := spec.ClientPending
		if s := ar.snapshot(); s != nil && s.ClientStatus != "" {
			cs = s.ClientStatus
		}
		st.AllocsByStatus[string(cs)]++
	}
	if a.lastContact.Load() != 0 {
		st.Registered = true
		st.SinceHeartbeat = a.sinceContact()
	}
	return st
}

// Metrics is the agent's Prometheus registry (drover dev serves it with
// the server's).
func (a *Agent) Metrics() prometheus.Gatherer { return a.metrics.Registry }

// Ready says whether the agent can run work: its node is registered.
func (a *Agent) Ready() error {
	if a.lastContact.Load() == 0 {
		return errNotRegistered
	}
	return nil
}

var errNotRegistered = errors.New("the node is not registered with a server yet")

func (a *Agent) serveMetrics() http.Handler {
	return promhttp.HandlerFor(prometheus.Gatherers{a.metrics.Registry, a.metrics.Runtime}, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}
