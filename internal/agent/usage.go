package agent

import (
	"context"
	"encoding/json"
	"net/http"
	"runtime"
	"sync"
	"time"

	"github.com/drover-org/drover/internal/driver"
	"github.com/drover-org/drover/internal/spec"
)

// Usage: what this node's running tasks use, for `drover nodes` and
// `drover status`. The sampler asks each running task's handle that is a
// driver.Measurer for its cumulative CPU time and its memory every
// usageEvery, and on demand when its last sample is older than usageFresh.
// CPU becomes MHz, the unit reservations are in: the CPU time used between
// two samples over the wall time between them, times the MHz of one core
// (the fingerprint's cpu.mhz).
//
// After each periodic sample, the node's totals go to the server (PUT
// /v1/nodes/{id}/usage, where the leader reads them to move work off a
// node short of memory) when they moved enough since the last report
// (shouldReport), or usageReportMaxAge passed; a report that fails is
// tried again at the next sample.
const (
	// usageEvery: often enough that a reading is recent, rarely enough that
	// measuring (a /proc walk per sample, a cgroup's files per isolated
	// task) costs nothing noticeable.
	usageEvery = 10 * time.Second
	// usageFresh: a request within this of the last sample reuses it, so
	// that a CLI polling many nodes does not make each measure again.
	usageFresh = time.Second
	// measureAtOnce bounds the measures in flight: docker's stats take
	// about a second each (the daemon's collector ticks once a second), so
	// one after the other they would take a second per container.
	measureAtOnce = 16

	// A report is sent when memory moved by usageReportMemPercent of the
	// node's memory, or CPU by usageReportCPUPercent of its CPU, since the
	// last one: a change the leader could act on (it moves work at tens
	// of percent of memory), while a node at rest sends little. CPU is
	// noisier than memory, hence the larger step.
	usageReportMemPercent = 1
	usageReportCPUPercent = 5
	// usageReportMaxAge: a report at least this often, so that the leader
	// (which ignores reports older than two minutes) always has a recent one.
	usageReportMaxAge = time.Minute
	// usageReportTimeout bounds a report, well under usageEvery, so that a
	// stuck server never holds the sampler past its next sample.
	usageReportTimeout = 5 * time.Second
)

type taskKey struct{ alloc, task string }

// cpuPoint is a task's cumulative CPU time when it was measured.
type cpuPoint struct {
	cpu time.Duration
	at  time.Time
}

// usageSampler holds the running tasks' handles and the last sample.
type usageSampler struct {
	nodeID     string
	mhzPerCore int
	// capacity is the node's CPU (MHz) and memory (MB), what the report
	// thresholds are shares of.
	capacity spec.Resources
	// every and maxAge are usageEvery and usageReportMaxAge, but for tests.
	every, maxAge time.Duration
	// sent is the totals last reported and when; sentOnce is false until
	// a report got through. Only run touches them.
	sent     spec.Usage
	sentAt   time.Time
	sentOnce bool

	mu      sync.Mutex
	handles map[taskKey]driver.Handle
	prev    map[taskKey]cpuPoint
	last    spec.NodeUsage

	sampleMu sync.Mutex // one sample at a time
}

func newUsageSampler(nodeID string, mhzPerCore int) *usageSampler {
	return &usageSampler{nodeID: nodeID, mhzPerCore: mhzPerCore,
		capacity: spec.Resources{CPU: mhzPerCore * runtime.NumCPU(), MemoryMB: int(memTotalBytes() >> 20)},
		every:    usageEvery, maxAge: usageReportMaxAge,
		handles: map[taskKey]driver.Handle{}, prev: map[taskKey]cpuPoint{}}
}

// setHandle records the handle of alloc's task once it runs; started says
// it was started just now rather than adopted. clearHandle forgets it once
// the task has exited.
func (a *Agent) setHandle(alloc, task string, h driver.Handle, started bool) {
	a.usage.set(alloc, task, h, started)
}
func (a *Agent) clearHandle(alloc, task string) { a.usage.set(alloc, task, nil, false) }

func (u *usageSampler) set(alloc, task string, h driver.Handle, started bool) {
	k := taskKey{alloc, task}
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.prev, k)
	if h == nil {
		delete(u.handles, k)
		return
	}
	u.handles[k] = h
	if started {
		// A process started now has used no CPU yet: its first sample
		// gives its rate since the start. An adopted one's CPU count
		// began earlier, unknown to this agent: its rate is known from its
		// second sample on.
		u.prev[k] = cpuPoint{0, time.Now()}
	}
}

// run samples every u.every until ctx ends, and after each sample (and
// one at the start, so that the server has a report soon after the node
// registers) sends the totals through report when shouldReport says so.
// report returns whether the server took them; it is bounded
// (usageReportTimeout), so a sample is never late by more than that.
func (u *usageSampler) run(ctx context.Context, report func(context.Context, *spec.NodeUsage) bool) {
	t := time.NewTicker(u.every)
	defer t.Stop()
	for {
		nu := u.sample(ctx)
		if shouldReport(u.sentOnce, u.sent, u.sentAt, nu.Tasks, nu.Time, u.capacity, u.maxAge) {
			// Totals only: per-alloc figures would make each report as
			// large as the node's work; the agent serves them on demand.
			if report(ctx, &spec.NodeUsage{NodeID: nu.NodeID, Time: nu.Time, Tasks: nu.Tasks}) {
				u.sent, u.sentAt, u.sentOnce = nu.Tasks, nu.Time, true
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// shouldReport decides whether a sample of the totals (now, taken at) is
// worth sending, given the last report (last, at lastAt; none when
// !sent): always the first; then when maxAge passed, or memory moved by
// usageReportMemPercent of the node's memory, or CPU by
// usageReportCPUPercent of its CPU. A node of unknown capacity reports
// any change.
func shouldReport(sent bool, last spec.Usage, lastAt time.Time, now spec.Usage, at time.Time, capacity spec.Resources, maxAge time.Duration) bool {
	if !sent || at.Sub(lastAt) >= maxAge {
		return true
	}
	memStep := max(1, capacity.MemoryMB*usageReportMemPercent/100)
	cpuStep := max(1, capacity.CPU*usageReportCPUPercent/100)
	return abs(now.MemoryMB-last.MemoryMB) >= memStep || abs(now.CPU-last.CPU) >= cpuStep
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// reportUsage sends the node's usage to the server; a failure is logged
// at debug (the next sample tries again) and reported as false.
func (a *Agent) reportUsage(ctx context.Context, nu *spec.NodeUsage) bool {
	rctx, cancel := context.WithTimeout(ctx, usageReportTimeout)
	defer cancel()
	if err := a.client.ReportNodeUsage(rctx, a.nodeID, nu); err != nil {
		if ctx.Err() == nil {
			a.log.Debug("cannot report node usage; will try again at the next sample", "err", err)
		}
		return false
	}
	return true
}

// current is the last sample, taken anew if older than usageFresh.
func (u *usageSampler) current(ctx context.Context) spec.NodeUsage {
	u.mu.Lock()
	last := u.last
	u.mu.Unlock()
	if time.Since(last.Time) < usageFresh {
		return last
	}
	return u.sample(ctx)
}

// sample measures every task whose handle is a Measurer; a task whose
// measure fails (it just exited) is left out.
func (u *usageSampler) sample(ctx context.Context) spec.NodeUsage {
	u.sampleMu.Lock()
	defer u.sampleMu.Unlock()
	u.mu.Lock()
	ms := map[taskKey]driver.Measurer{}
	for k, h := range u.handles {
		if m, ok := h.(driver.Measurer); ok {
			ms[k] = m
		}
	}
	u.mu.Unlock()

	points := measureAll(ctx, ms)

	u.mu.Lock()
	defer u.mu.Unlock()
	nu := spec.NodeUsage{NodeID: u.nodeID, Time: time.Now(), Allocs: map[string]map[string]spec.Usage{}}
	for k, p := range points {
		if _, ok := u.handles[k]; !ok {
			continue // exited while measured
		}
		tu := spec.Usage{MemoryMB: int(p.memory >> 20)}
		if prev, ok := u.prev[k]; ok {
			tu.CPU = rateMHz(prev, p.cpuPoint, u.mhzPerCore)
		}
		u.prev[k] = p.cpuPoint
		if nu.Allocs[k.alloc] == nil {
			nu.Allocs[k.alloc] = map[string]spec.Usage{}
		}
		nu.Allocs[k.alloc][k.task] = tu
		nu.Tasks.CPU += tu.CPU
		nu.Tasks.MemoryMB += tu.MemoryMB
	}
	u.last = nu
	return nu
}

type measured struct {
	cpuPoint
	memory uint64
}

// measureAll measures every task in one driver.Round, so that what the
// drivers read of the whole node (the process table) is read once per
// sample, not once per task.
func measureAll(ctx context.Context, ms map[taskKey]driver.Measurer) map[taskKey]measured {
	out := make(map[taskKey]measured, len(ms))
	round := new(driver.Round)
	var mu sync.Mutex
	var wg sync.WaitGroup
	slots := make(chan struct{}, measureAtOnce)
	for k, m := range ms {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer func() { <-slots; wg.Done() }()
			us, err := m.Usage(ctx, round)
			if err != nil {
				return
			}
			mu.Lock()
			out[k] = measured{cpuPoint{us.CPU, time.Now()}, us.MemoryBytes}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// rateMHz is the CPU rate between two points, in MHz: the share of one core
// used over the interval, times a core's MHz. A drop in CPU time (another
// process behind the same key) reads as 0, not as a negative rate.
func rateMHz(from, to cpuPoint, mhzPerCore int) int {
	wall := to.at.Sub(from.at)
	if wall <= 0 || to.cpu < from.cpu {
		return 0
	}
	return int(float64(to.cpu-from.cpu) / float64(wall) * float64(mhzPerCore))
}

// serveUsage answers GET /v1/client/usage with the node's spec.NodeUsage.
func (a *Agent) serveUsage(w http.ResponseWriter, r *http.Request) {
	nu := a.usage.current(r.Context())
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(nu)
}

// handle is the running task's handle, or nil.
func (u *usageSampler) handle(alloc, task string) driver.Handle {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.handles[taskKey{alloc, task}]
}
