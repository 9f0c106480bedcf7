package server

import (
	"context"
	"errors"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/drover-org/drover/internal/metrics"
	"github.com/drover-org/drover/internal/registry"
)

// newMetrics makes the server's metrics: what the leader counts as it
// works, etcd's latency, and the cluster's nodes and allocations as read at
// each scrape.
func (s *Server) newMetrics() *metrics.Server {
	return metrics.NewServer(s.clusterState, registry.RequestSeconds)
}

// clusterState counts nodes and allocations by status for a scrape.
func (s *Server) clusterState(ctx context.Context) (metrics.State, error) {
	snap, err := s.read(ctx)
	if err != nil {
		return metrics.State{}, err
	}
	st := metrics.State{NodesByStatus: map[string]int{}, AllocsByStatus: map[string]int{}}
	for _, n := range snap.Nodes() {
		st.NodesByStatus[string(n.Status)]++
	}
	// The store keeps the counts as allocs change: a scrape does not list
	// every alloc.
	byStatus, restarts := snap.AllocCounts()
	for status, n := range byStatus {
		st.AllocsByStatus[string(status)] = n
	}
	st.Restarts = restarts
	return st, nil
}

// AddMetrics adds another component's metrics to this server's /metrics
// (drover dev: its agent's).
func (s *Server) AddMetrics(g prometheus.Gatherer) { s.gatherers = append(s.gatherers, g) }

func (s *Server) metricsHandler() http.Handler {
	gs := prometheus.Gatherers{s.metrics.Registry}
	gs = append(gs, s.gatherers...)
	return promhttp.HandlerFor(gs, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// readyChecks are /readyz's: etcd answers, and this server's watch and
// caches are running; then any a command added (drover dev: its agent).
func (s *Server) readyChecks() []metrics.Check {
	return append([]metrics.Check{
		{Name: "registry", Run: func(ctx context.Context) error {
			_, err := s.reg.Revision(ctx)
			return err
		}},
		{Name: "caches", Run: func(context.Context) error {
			if !s.ready.Load() {
				return errors.New("the alloc index and watch are not running yet")
			}
			return nil
		}},
	}, s.readyExtra...)
}

// AddReadyCheck adds a check to /readyz; call it before serving.
func (s *Server) AddReadyCheck(c metrics.Check) { s.readyExtra = append(s.readyExtra, c) }
