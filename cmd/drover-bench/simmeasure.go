package main

// What the simulated-cluster scenarios measure and how: the observer (alloc
// commits from a registry watch, agents' reports as the server accepts
// them, API requests by route), etcd's own request counters, the process's
// CPU and RSS, and the plain-etcd-put baseline.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/drover-org/drover/internal/registry"
	"github.com/drover-org/drover/internal/spec"
)

// observer sees what the cluster does without adding to its work: alloc
// commits from a registry watch (one stream), agent reports from the API
// requests they arrive in, and a count of API requests by route.
type observer struct {
	mu       sync.Mutex
	placed   map[string]placedAlloc  // alloc ID -> its first commit
	running  map[string]runningAlloc // alloc ID -> first report of it running
	byJob    map[string]*jobCounts
	requests map[string]int64 // "METHOD /v1/route/{id}" -> count
	resyncs  int
	// ignore is a job name prefix whose allocs the watch does not keep
	// ("": none): the state scenario's bulk, whose memory it measures.
	ignore string
}

type placedAlloc struct {
	job, node string
	rev       int64     // the etcd revision that committed it
	seen      time.Time // when the watch delivered it
}

type runningAlloc struct {
	started time.Time // the task's start as the agent reported it
	acked   time.Time // when the server acknowledged that report
}

type jobCounts struct{ placed, running int }

func newObserver() *observer {
	return &observer{placed: map[string]placedAlloc{}, running: map[string]runningAlloc{},
		byJob: map[string]*jobCounts{}, requests: map[string]int64{}}
}

func (o *observer) job(name string) *jobCounts {
	jc := o.byJob[name]
	if jc == nil {
		jc = &jobCounts{}
		o.byJob[name] = jc
	}
	return jc
}

func (o *observer) watch(ctx context.Context, reg *registry.Registry, rev int64) {
	for batch := range reg.Watch(ctx, rev) {
		now := time.Now()
		o.mu.Lock()
		for _, ch := range batch {
			switch {
			case ch.Kind == registry.KindResync:
				o.resyncs++
			case ch.Kind == registry.KindAlloc && !ch.Deleted:
				if _, ok := o.placed[ch.ID]; ok || (o.ignore != "" && strings.HasPrefix(ch.Job, o.ignore)) {
					continue
				}
				o.placed[ch.ID] = placedAlloc{job: ch.Job, node: ch.NodeID, rev: ch.Rev, seen: now}
				jc := o.job(ch.Job)
				jc.placed++
				if _, ok := o.running[ch.ID]; ok {
					jc.running++
				}
			}
		}
		o.mu.Unlock()
	}
}

// ignoreJobs makes the watch skip the allocs of the jobs named prefix*.
func (o *observer) ignoreJobs(prefix string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ignore = prefix
}

// counts sums the placed and running instances of the named jobs; err is
// set when the watch lost changes, so the counts cannot be trusted.
func (o *observer) counts(jobs []string) (placed, running int, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.resyncs > 0 {
		return 0, 0, errors.New("the registry watch lost changes (resync); the figures would be wrong")
	}
	for _, j := range jobs {
		if jc := o.byJob[j]; jc != nil {
			placed += jc.placed
			running += jc.running
		}
	}
	return placed, running, nil
}

// allocs returns the placed allocs of job, with their running report if any.
func (o *observer) allocs(job string) map[string]observed {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[string]observed{}
	for id, p := range o.placed {
		if p.job == job {
			r, ok := o.running[id]
			out[id] = observed{placedAlloc: p, run: r, isRunning: ok}
		}
	}
	return out
}

type observed struct {
	placedAlloc
	run       runningAlloc
	isRunning bool
}

func (o *observer) requestCounts() map[string]int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make(map[string]int64, len(o.requests))
	for k, v := range o.requests {
		out[k] = v
	}
	return out
}

// wrap counts each request and reads agents' status reports as the server
// acknowledges them.
func (o *observer) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		o.requests[r.Method+" "+route(r.URL.Path)]++
		o.mu.Unlock()
		if r.Method != http.MethodPut || !strings.HasSuffix(r.URL.Path, "/allocations/status") {
			h.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "reading the report: "+err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		tw := &teeWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(tw, r)
		if tw.status/100 == 2 {
			o.reported(body, tw.buf.Bytes(), time.Now())
		}
	})
}

func (o *observer) reported(reqBody, respBody []byte, now time.Time) {
	var rep spec.NodeStatusReport
	if json.Unmarshal(reqBody, &rep) != nil {
		return
	}
	var res spec.NodeStatusResult
	json.Unmarshal(respBody, &res) // no refusals when it does not decode
	refused := map[string]bool{}
	for _, r := range res.Refused {
		refused[r.ID] = true
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, e := range rep.Allocs {
		if refused[e.ID] || e.Status == nil || e.Status.ClientStatus != spec.ClientRunning {
			continue
		}
		if _, ok := o.running[e.ID]; ok {
			continue
		}
		var started time.Time
		for _, ts := range e.Status.Tasks {
			if ts.StartedAt.After(started) {
				started = ts.StartedAt
			}
		}
		o.running[e.ID] = runningAlloc{started: started, acked: now}
		if p, ok := o.placed[e.ID]; ok {
			o.job(p.job).running++
		}
	}
}

// route is a request path with its IDs replaced by {id}, so that requests
// count by endpoint.
func route(path string) string {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	for i := 1; i < len(segs); i++ {
		switch segs[i-1] {
		case "nodes", "jobs", "allocations":
			if segs[i] != "status" {
				segs[i] = "{id}"
			}
		}
	}
	return "/" + strings.Join(segs, "/")
}

type teeWriter struct {
	http.ResponseWriter
	status int
	buf    bytes.Buffer
}

func (w *teeWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *teeWriter) Write(b []byte) (int, error) {
	w.buf.Write(b)
	return w.ResponseWriter.Write(b)
}

// countWarnings passes the first maxShownWarnings records on and counts
// all: a thousand agents repeating one warning would drown the report.
type countWarnings struct {
	slog.Handler
	n *atomic.Int64
}

const maxShownWarnings = 20

func (h countWarnings) Handle(ctx context.Context, r slog.Record) error {
	if h.n.Add(1) <= maxShownWarnings {
		return h.Handler.Handle(ctx, r)
	}
	return nil
}

func (h countWarnings) WithAttrs(as []slog.Attr) slog.Handler {
	return countWarnings{h.Handler.WithAttrs(as), h.n}
}

func (h countWarnings) WithGroup(name string) slog.Handler {
	return countWarnings{h.Handler.WithGroup(name), h.n}
}

// waitUntil polls cond every 20 ms (in memory or a cheap request) until it
// holds; after timeout it fails with what it was waiting for and cond's
// last state.
func waitUntil(ctx context.Context, timeout time.Duration, what string, cond func() (bool, string)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, state := cond()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waiting for %s: not done after %s (%s)", what, timeout, state)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (%s)", what, ctx.Err(), state)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// etcdCounts are the embedded member's gRPC requests by method, read from
// the Prometheus metrics it registers in this process (grpc-prometheus):
// a unary call counts once when handled (grpc_server_handled_total), a
// stream (Watch, LeaseKeepAlive) once per message it receives
// (grpc_server_msg_received_total), so that each heartbeat's lease renewal
// counts once however the stream is kept.
type etcdCounts map[string]float64

func gatherEtcd() (etcdCounts, error) {
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		return nil, fmt.Errorf("reading etcd's metrics: %w", err)
	}
	out := etcdCounts{}
	found := false
	for _, mf := range mfs {
		name := mf.GetName()
		if name != "grpc_server_handled_total" && name != "grpc_server_msg_received_total" {
			continue
		}
		found = true
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			unary := labels["grpc_type"] == "unary"
			if unary == (name == "grpc_server_handled_total") {
				out[labels["grpc_method"]] += m.GetCounter().GetValue()
			}
		}
	}
	if !found {
		return nil, errors.New("etcd registered no grpc_server_handled_total metric in this process")
	}
	return out, nil
}

// etcdWrites is the member's raft entries committed so far
// (etcd_server_proposals_committed_total): one per write request (a put,
// a transaction that writes, a lease grant), however many ops it carries;
// read-only transactions are not proposed.
func etcdWrites() (float64, error) {
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		return 0, fmt.Errorf("reading etcd's metrics: %w", err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "etcd_server_proposals_committed_total" && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue(), nil
		}
	}
	return 0, errors.New("etcd registered no etcd_server_proposals_committed_total gauge in this process")
}

// since is e minus an earlier reading.
func (e etcdCounts) since(before etcdCounts) etcdCounts {
	out := etcdCounts{}
	for k, v := range e {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

func (e etcdCounts) total() float64 {
	t := 0.0
	for _, v := range e {
		t += v
	}
	return t
}

// top lists the n largest methods, "Txn 123, Range 45".
func (e etcdCounts) top(n int, per float64) string {
	keys := make([]string, 0, len(e))
	for k := range e {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		return cmp.Or(cmp.Compare(e[b], e[a]), strings.Compare(a, b))
	})
	var parts []string
	for _, k := range keys[:min(n, len(keys))] {
		parts = append(parts, k+" "+num(e[k]/per))
	}
	return strings.Join(parts, ", ")
}

// simUsage is this process's CPU time (getrusage: the same counters as
// /proc/self/stat's utime and stime, in microseconds rather than ticks)
// and resident memory (/proc/self/status VmRSS).
type simUsage struct {
	cpu   time.Duration
	rssMB float64
}

func readSimUsage() (simUsage, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return simUsage{}, err
	}
	u := simUsage{cpu: time.Duration(ru.Utime.Nano() + ru.Stime.Nano())}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return simUsage{}, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				return simUsage{}, fmt.Errorf("/proc/self/status: VmRSS %q: %w", v, err)
			}
			u.rssMB = float64(kb) / 1024
		}
	}
	return u, nil
}

// putLoop is the etcd baseline: plain puts of 1 KiB (about an alloc's
// size) to the same member, fsync on, for d, with inflight at a time. They
// go through etcd's own JSON gateway on its client URL (drover's packages
// other than the registry may not import etcd), which is HTTP as drover's
// API is. Keys are outside drover's prefix, so no drover watch sees them.
func (c *simCluster) putLoop(ctx context.Context, d time.Duration, inflight int) ([]time.Duration, error) {
	url := c.emb.Endpoints()[0] + "/v3/kv/put"
	value := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("x"), 1024))
	hc := &http.Client{Timeout: 10 * time.Second}
	var mu sync.Mutex
	var lat []time.Duration
	var firstErr error
	var seq atomic.Int64
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for w := 0; w < inflight; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) && ctx.Err() == nil {
				key := base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "/drover-bench-baseline/%d", seq.Add(1)%1000))
				body := `{"key":"` + key + `","value":"` + value + `"}`
				t := time.Now()
				resp, err := hc.Post(url, "application/json", strings.NewReader(body))
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("etcd gateway put: %s", resp.Status)
					}
				}
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				if err == nil {
					lat = append(lat, time.Since(t))
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	return lat, firstErr
}

// pacedPuts puts a 1 KiB value through etcd's JSON gateway every
// interval, one at a time, until ctx ends, and returns each put's
// latency: the etcd floor under whatever else runs at the same time. A
// put that fails is left out (the run it measures reports its own).
func (c *simCluster) pacedPuts(ctx context.Context, every time.Duration) []time.Duration {
	url := c.emb.Endpoints()[0] + "/v3/kv/put"
	value := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("x"), 1024))
	hc := &http.Client{Timeout: 10 * time.Second}
	var lat []time.Duration
	tick := time.NewTicker(every)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return lat
		case <-tick.C:
		}
		key := base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "/drover-bench-baseline/paced/%d", i%100))
		t := time.Now()
		resp, err := hc.Post(url, "application/json", strings.NewReader(`{"key":"`+key+`","value":"`+value+`"}`))
		if err != nil {
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			lat = append(lat, time.Since(t))
		}
	}
}

// pct is the nearest-rank percentile p (0..100) of d; 0 when d is empty.
func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// num shows a count or rate: whole above 100, three figures below.
func num(x float64) string {
	if x >= 100 {
		return strconv.FormatFloat(x, 'f', 0, 64)
	}
	return strconv.FormatFloat(x, 'g', 3, 64)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

// addRow adds one report line: what, the figure, and its target if any.
func addRow(rep *report, what, figure, target string) {
	if target == "" {
		rep.linef("  %-42s %s", what, figure)
		return
	}
	rep.linef("  %-42s %-16s target %s", what, figure, target)
}

// clusterLines describe the cluster a report ran on.
func (c *simCluster) clusterLines(rep *report, agents int, startup time.Duration) {
	where := "tmpfs"
	if !strings.HasPrefix(c.agentDir, "/dev/shm") {
		where = "the temp dir"
	}
	rep.linef("  cluster: 1 server (embedded etcd, fsync on) + %d simulated agents in one process, node TTL %s; agent dirs on %s", agents, c.nodeTTL, where)
	rep.linef("  %d agents registered in %s", agents, startup.Round(time.Millisecond))
	rep.set("agents", agents)
	rep.set("node_ttl_ms", c.nodeTTL)
	rep.set("agents_startup_ms", startup)
}

// warningLines report how many warnings the server and agents logged.
func (c *simCluster) warningLines(rep *report) {
	n := c.warnings.Load()
	rep.set("log_warnings", n)
	if n > 0 {
		rep.linef("  log warnings and errors: %d (the first %d on stderr)", n, min(n, maxShownWarnings))
	}
}
