// Package metrics is what drover's servers and agents export for
// Prometheus (GET /metrics): counters and histograms they update as they
// work, and gauges read from their state when scraped. Every label has a
// bounded set of values (a status, an etcd method), never a node, job or
// alloc name.
//
// Each server and agent has its own prometheus.Registry, so that several
// in one process (drover dev, tests) do not collide.
package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// latencyBuckets span a local etcd read (sub-millisecond) to a slow
// scheduling pass (seconds).
var latencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// snapshotBuckets start lower: a snapshot's target is a millisecond or
// less, and one of an immutable store takes microseconds.
var snapshotBuckets = append([]float64{.00001, .0001}, latencyBuckets...)

// Server is a server's metrics.
type Server struct {
	Registry *prometheus.Registry
	// Placements counts instances the leader placed (committed).
	Placements prometheus.Counter
	// Unplaced counts, per pass, the groups the scheduler could not place.
	Unplaced prometheus.Counter
	// Evictions counts instances stopped to make room (preemption).
	Evictions prometheus.Counter
	// PassSeconds is one leader pass: snapshot, decide, commit.
	PassSeconds prometheus.Histogram
	// SnapshotSeconds is the part of a pass that gets its state snapshot.
	SnapshotSeconds prometheus.Histogram
	// FullPassSeconds is a pass over every job (the first of a term, one
	// after a failure or a due time), or the passes of a sweep summed (the
	// periodic resync, which looks at every job a slice at a time): what
	// the safety net costs.
	FullPassSeconds prometheus.Histogram
	// SubmitToPlaced is from a job version's submit to the commit that
	// placed its first new instances.
	SubmitToPlaced prometheus.Histogram
	// IsLeader is 1 on the leader.
	IsLeader prometheus.Gauge
}

// State is what a server reports when scraped.
type State struct {
	NodesByStatus  map[string]int // ready, down, ...
	AllocsByStatus map[string]int // pending, running, complete, failed, lost
	Restarts       int            // task restarts, summed over live allocs
}

// NewServer makes a server's metrics; state is called at each scrape (with
// a deadline) for the gauges of nodes and allocations.
func NewServer(state func(context.Context) (State, error), extra ...prometheus.Collector) *Server {
	m := &Server{
		Registry:        prometheus.NewRegistry(),
		Placements:      prometheus.NewCounter(prometheus.CounterOpts{Name: "drover_placements_total", Help: "Instances placed by this server while leader."}),
		Unplaced:        prometheus.NewCounter(prometheus.CounterOpts{Name: "drover_unplaced_total", Help: "Groups a scheduling pass could not place in full."}),
		Evictions:       prometheus.NewCounter(prometheus.CounterOpts{Name: "drover_evictions_total", Help: "Instances stopped to make room for higher-priority work."}),
		PassSeconds:     prometheus.NewHistogram(prometheus.HistogramOpts{Name: "drover_leader_pass_seconds", Help: "One scheduling pass of the leader: snapshot, decide, commit.", Buckets: latencyBuckets}),
		SnapshotSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "drover_leader_snapshot_seconds", Help: "The state snapshot a leader pass starts with.", Buckets: snapshotBuckets}),
		FullPassSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "drover_leader_full_pass_seconds", Help: "A leader pass over every job, or the passes of a periodic resync's sweep over every job, summed.", Buckets: latencyBuckets}),
		SubmitToPlaced:  prometheus.NewHistogram(prometheus.HistogramOpts{Name: "drover_scheduling_latency_seconds", Help: "From a job version's submit to the commit placing its instances.", Buckets: latencyBuckets}),
		IsLeader:        prometheus.NewGauge(prometheus.GaugeOpts{Name: "drover_leader", Help: "1 while this server is the leader."}),
	}
	m.Registry.MustRegister(m.Placements, m.Unplaced, m.Evictions, m.PassSeconds, m.SnapshotSeconds, m.FullPassSeconds, m.SubmitToPlaced, m.IsLeader,
		&stateCollector{state: state},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.Registry.MustRegister(extra...)
	return m
}

var (
	nodesDesc    = prometheus.NewDesc("drover_nodes", "Nodes by status.", []string{"status"}, nil)
	allocsDesc   = prometheus.NewDesc("drover_allocations", "Allocations by client status (lost: on a node that is down).", []string{"status"}, nil)
	restartsDesc = prometheus.NewDesc("drover_task_restarts", "Task restarts, summed over the allocations that are not terminal.", nil, nil)
	scrapeErr    = prometheus.NewDesc("drover_state_scrape_error", "1 when the cluster state could not be read for this scrape.", nil, nil)
)

// stateCollector reads the cluster's state at scrape time.
type stateCollector struct {
	state func(context.Context) (State, error)
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- nodesDesc
	ch <- allocsDesc
	ch <- restartsDesc
	ch <- scrapeErr
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := c.state(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(scrapeErr, prometheus.GaugeValue, 1)
		return
	}
	ch <- prometheus.MustNewConstMetric(scrapeErr, prometheus.GaugeValue, 0)
	for s, n := range st.NodesByStatus {
		ch <- prometheus.MustNewConstMetric(nodesDesc, prometheus.GaugeValue, float64(n), s)
	}
	for s, n := range st.AllocsByStatus {
		ch <- prometheus.MustNewConstMetric(allocsDesc, prometheus.GaugeValue, float64(n), s)
	}
	ch <- prometheus.MustNewConstMetric(restartsDesc, prometheus.GaugeValue, float64(st.Restarts))
}

// Agent is an agent's metrics.
type Agent struct {
	// Registry holds the agent's own metrics; Runtime the process's (Go,
	// CPU, memory), apart, because drover dev serves the agent's beside a
	// server's, which has the process's already.
	Registry *prometheus.Registry
	Runtime  *prometheus.Registry
	// Restarts counts task restarts on this node.
	Restarts prometheus.Counter
	// TaskStarts counts task starts (first starts and restarts).
	TaskStarts prometheus.Counter
}

// AgentState is what an agent reports when scraped.
type AgentState struct {
	// Allocs by client status, as the agent last reported them.
	AllocsByStatus map[string]int
	// SinceHeartbeat is the time since the last heartbeat a server took;
	// negative before the first.
	SinceHeartbeat time.Duration
	Registered     bool
}

var (
	agentAllocsDesc = prometheus.NewDesc("drover_agent_allocations", "This node's allocations by client status.", []string{"status"}, nil)
	heartbeatDesc   = prometheus.NewDesc("drover_agent_heartbeat_age_seconds", "Time since a server last took this agent's heartbeat (-1: none yet).", nil, nil)
	registeredDesc  = prometheus.NewDesc("drover_agent_registered", "1 once the node is registered with a server.", nil, nil)
)

// NewAgent makes an agent's metrics; state is read at each scrape.
func NewAgent(state func() AgentState) *Agent {
	m := &Agent{
		Registry:   prometheus.NewRegistry(),
		Runtime:    prometheus.NewRegistry(),
		Restarts:   prometheus.NewCounter(prometheus.CounterOpts{Name: "drover_agent_task_restarts_total", Help: "Task restarts on this node."}),
		TaskStarts: prometheus.NewCounter(prometheus.CounterOpts{Name: "drover_agent_task_starts_total", Help: "Task starts on this node, restarts included."}),
	}
	m.Registry.MustRegister(m.Restarts, m.TaskStarts, agentCollector(state))
	m.Runtime.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

type agentCollector func() AgentState

func (c agentCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- agentAllocsDesc
	ch <- heartbeatDesc
	ch <- registeredDesc
}

func (c agentCollector) Collect(ch chan<- prometheus.Metric) {
	st := c()
	for s, n := range st.AllocsByStatus {
		ch <- prometheus.MustNewConstMetric(agentAllocsDesc, prometheus.GaugeValue, float64(n), s)
	}
	age := -1.0
	if st.SinceHeartbeat >= 0 {
		age = st.SinceHeartbeat.Seconds()
	}
	ch <- prometheus.MustNewConstMetric(heartbeatDesc, prometheus.GaugeValue, age)
	reg := 0.0
	if st.Registered {
		reg = 1
	}
	ch <- prometheus.MustNewConstMetric(registeredDesc, prometheus.GaugeValue, reg)
}
