package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/drover-org/drover/internal/registry"
	"github.com/drover-org/drover/internal/spec"
)

// Config sizes one run.
type Config struct {
	// Drover and Task are the drover and chaostask binaries.
	Drover, Task string
	// Etcd is EtcdEmbedded or EtcdExternal; EtcdBin the etcd binary for
	// EtcdExternal (Debian's /usr/bin/etcd).
	Etcd, EtcdBin string
	// Agents is how many agents run (at least 3).
	Agents int
	// Submissions is how many jobs are submitted; updates, scale changes
	// and stops of them run beside.
	Submissions int
	// Rounds of faults: each round injects, one after the other, a leader
	// SIGKILL, a leader SIGSTOP longer than its lease, an agent SIGKILL, a
	// leader cut off from etcd, an etcd follower's and the etcd leader's
	// SIGKILL (external etcd), and quorum loss.
	Rounds int
	// Rate is operations (submit, update, scale, stop) per second.
	Rate float64
	// ForeignWrites is writes per second of the suite's own keys, outside
	// drover's prefix, on the same etcd.
	ForeignWrites int
	// Converge bounds how long after the last fault everything must be as
	// asked.
	Converge time.Duration
	Seed     uint64
	// Dir keeps the processes' logs and the evidence ("": a temporary
	// directory, removed after a run that found nothing wrong).
	Dir string
	// Log gets a line per fault and phase (nil: none).
	Log io.Writer
}

// Result is what a run found. The invariants hold when Lost,
// Overlaps, HealthyRestarted, HealthyStopped and MissingEvents are 0 and
// Converged is true.
type Result struct {
	Etcd   string         `json:"etcd"`
	Faults map[string]int `json:"faults"` // injected, by kind
	// LeaderChanges counts leader kills and pauses.
	LeaderChanges int `json:"leader_faults"`
	Submitted     int `json:"submitted"`
	// Acknowledged: operations the API answered with success.
	Acknowledged int `json:"acknowledged"`
	// Unacknowledged: operations that failed or timed out (the client
	// cannot know whether they applied; their jobs are checked against
	// what etcd holds).
	Unacknowledged int `json:"unacknowledged"`
	ForeignWrites  int `json:"foreign_writes"`
	// Lost: acknowledged jobs missing from etcd, or not running (or not
	// complete) with their full count when the run ends.
	Lost int `json:"lost"`
	// Overlaps: instances that ran twice at once (by the tasks' own
	// locks), outside machine loss.
	Overlaps         int     `json:"overlaps"`
	MaxOverlapMS     float64 `json:"max_overlap_ms"`
	OverlapsLostNode int     `json:"overlaps_after_machine_loss"`
	// Handovers: of the Overlaps, those where an updated instance's new
	// task started while the old one was still stopping (a replacement
	// must wait for the instance it replaces to end).
	Handovers     int     `json:"update_handovers"`
	MaxHandoverMS float64 `json:"max_handover_ms"`
	// BatchReruns: batch instances placed again after one of their allocs
	// had run (a leader that lost track of what it placed).
	BatchReruns int `json:"batch_reruns"`
	// NodesDown: nodes the cluster declared down during the run (its
	// history says so); what happened on them is counted apart.
	NodesDown int `json:"nodes_down"`
	// Uncertain: jobs whose last operation went unanswered.
	Uncertain      int `json:"uncertain_jobs"`
	TasksStarted   int `json:"tasks_started"`
	HealthyRestart int `json:"healthy_restarted"`
	// RestartedAfterAgentKill: tasks that ended while their agent was
	// down (killed) and were started again when it came back: the agent
	// cannot learn how a task it did not see end ended, and runs it
	// again by its restart policy, with an event. Not a healthy agent's
	// task, so counted apart.
	RestartedAfterAgentKill int     `json:"restarted_after_agent_kill"`
	HealthyStopped          int     `json:"healthy_stopped"`
	MissingEvents           int     `json:"missing_events"`
	Converged               bool    `json:"converged"`
	ConvergeMS              float64 `json:"converge_ms"`
	DurationMS              float64 `json:"duration_ms"`
	// Problems lists each violation found, in words (at most 50).
	Problems []string `json:"problems,omitempty"`
}

// OK reports whether every invariant held.
func (r *Result) OK() bool {
	return r.Lost == 0 && r.Overlaps == 0 && r.BatchReruns == 0 && r.HealthyRestart == 0 && r.HealthyStopped == 0 &&
		r.MissingEvents == 0 && r.Converged
}

func (r *Result) problem(format string, a ...any) {
	if len(r.Problems) < 50 {
		r.Problems = append(r.Problems, fmt.Sprintf(format, a...))
	}
}

// run is one run's state.
type run struct {
	cfg      Config
	c        *cluster
	id       string // CHAOS_RUN, in every task's environment
	began    time.Time
	evidence string
	locks    string
	rng      *rand.Rand // the workload's
	faultRng *rand.Rand // the faults' (each goroutine its own)
	log      func(format string, a ...any)

	mu      sync.Mutex
	jobs    map[string]*jobRecord
	order   []string // job names in submission order
	res     Result
	lostAgt map[string]bool // nodes whose agent was down long enough to be declared lost
	// agentDown are the times each node's agent was killed and back.
	agentDown map[string][][2]time.Time
}

// jobRecord is what the suite asked of a job, as acknowledged, and every
// change it tried (acknowledged or not), to explain the stops it caused.
type jobRecord struct {
	name      string
	batch     bool
	count     int
	gen       int
	version   uint64 // the last acknowledged version
	stopped   bool
	uncertain bool // an operation's outcome is unknown: check against etcd
	triedStop bool
	tried     []tried
}

// tried is one change the suite asked for, acknowledged or not, and when
// it began: only a change asked for before a task stopped explains it.
type tried struct {
	at    time.Time
	stop  bool
	count int
	gen   int
}

// explains reports whether a change asked for before t would stop
// instance index at gen: a stop, a count at most index, a newer gen.
func (j *jobRecord) explains(t time.Time, index, gen int) bool {
	for _, c := range j.tried {
		if !c.at.After(t) && (c.stop || index >= c.count || gen < c.gen) {
			return true
		}
	}
	return false
}

// Run starts a cluster on cfg.Etcd, runs the workload and the faults, and
// checks the invariants. An error means the suite itself could not run;
// violations are in the Result.
func Run(ctx context.Context, cfg Config) (res *Result, err error) {
	if cfg.Agents < 3 {
		cfg.Agents = 3
	}
	if cfg.Rate <= 0 {
		cfg.Rate = 4
	}
	if cfg.Converge <= 0 {
		cfg.Converge = time.Minute
	}
	dir := cfg.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "drover-chaos-"); err != nil {
			return nil, err
		}
	} else if entries, err := os.ReadDir(dir); err != nil || len(entries) > 0 {
		// Another run's evidence and etcd data would mix with this one's.
		return nil, fmt.Errorf("chaos: %s must be an empty directory (%d entries, %v)", dir, len(entries), err)
	}
	r := &run{cfg: cfg, id: fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano()),
		evidence: filepath.Join(dir, "evidence.log"), locks: filepath.Join(dir, "locks"),
		rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)), faultRng: rand.New(rand.NewPCG(cfg.Seed^1, cfg.Seed)), jobs: map[string]*jobRecord{}, lostAgt: map[string]bool{},
		agentDown: map[string][][2]time.Time{}}
	r.res.Etcd, r.res.Faults = cfg.Etcd, map[string]int{}
	r.log = func(format string, a ...any) {
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, "chaos %s %s: %s\n", cfg.Etcd, time.Now().Format("15:04:05.000"), fmt.Sprintf(format, a...))
		}
	}
	if err := os.MkdirAll(r.locks, 0o755); err != nil {
		return nil, err
	}
	began := time.Now()
	r.began = began
	c, err := startCluster(ctx, cfg, dir)
	if c != nil {
		defer func() {
			c.stop()
			if n := killTasks(r.id); n > 0 && err == nil {
				err = fmt.Errorf("chaos: %d task processes still alive 10s after SIGKILL", n)
			}
			if err == nil && res.OK() && cfg.Dir == "" {
				os.RemoveAll(dir)
			} else {
				r.log("logs and evidence kept in %s", dir)
			}
		}()
	}
	if err != nil {
		return nil, err
	}
	r.c = c
	r.log("cluster up: 3 servers, %d agents, etcd %s, in %s", cfg.Agents, cfg.Etcd, time.Since(began).Round(time.Millisecond))

	etcd, err := clientv3.New(clientv3.Config{Endpoints: c.etcd, DialTimeout: 5 * time.Second, Logger: nopLogger()})
	if err != nil {
		return nil, err
	}
	defer etcd.Close()

	wctx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	var foreign int
	go func() { defer wg.Done(); foreign = foreignWriter(wctx, etcd, cfg.ForeignWrites) }()
	faultsDone, workDone := make(chan struct{}), make(chan struct{})
	go func() { defer close(workDone); r.workload(wctx, faultsDone) }()

	healed, ferr := r.faults(ctx)
	close(faultsDone)
	if ferr != nil {
		stopLoad()
		<-workDone
		wg.Wait()
		return nil, ferr
	}
	// The workload ends once its submissions are made.
	select {
	case <-workDone:
	case <-time.After(time.Duration(float64(cfg.Submissions)*3/cfg.Rate)*time.Second + time.Minute):
	}
	stopLoad()
	<-workDone
	wg.Wait()
	r.res.ForeignWrites = foreign
	if last := time.Now(); last.After(healed) {
		healed = last // converge from the last change asked for
	}
	r.log("faults done; workload done (%d submitted); waiting for convergence", r.res.Submitted)
	if err := r.check(ctx, etcd, healed); err != nil {
		return nil, err
	}
	r.res.DurationMS = ms(time.Since(began))
	out := r.res
	return &out, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// foreignWriter puts keys outside drover's prefix at rate per second until
// ctx ends, as a shared etcd's other users do (up to 32 at once), and
// returns how many it wrote. Failures (etcd down on purpose) are not
// counted and not retried.
func foreignWriter(ctx context.Context, etcd *clientv3.Client, rate int) int {
	if rate <= 0 {
		return 0
	}
	var n atomic.Int64
	var wg sync.WaitGroup
	slots := make(chan struct{}, 32)
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			wg.Wait()
			return int(n.Load())
		case <-tick.C:
		}
		select {
		case slots <- struct{}{}:
		default:
			continue // etcd is slower than the rate: skip this one
		}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			defer cancel()
			if _, err := etcd.Put(pctx, "/chaos-foreign/k"+strconv.Itoa(i%500), strconv.Itoa(i)); err == nil {
				n.Add(1)
			}
		}()
	}
}

// ---- the workload ----

const maxLiveServices = 30

func (r *run) jobSpec(rec *jobRecord) *spec.Job {
	args := []string{"-evidence", r.evidence, "-locks", r.locks}
	typ := spec.JobService
	if rec.batch {
		typ = spec.JobBatch
		args = append(args, "-run", "1s")
	}
	job := &spec.Job{Name: rec.name, Type: typ, Groups: []*spec.Group{{Name: "g", Count: rec.count, Tasks: []*spec.Task{{
		Name: "t", Driver: "raw_exec",
		Config:      spec.TaskConfig{Command: r.cfg.Task, Args: args},
		Env:         map[string]string{"CHAOS_RUN": r.id, "CHAOS_GEN": strconv.Itoa(rec.gen)},
		Resources:   spec.Resources{CPU: 1, MemoryMB: 1},
		KillTimeout: spec.Duration(2 * time.Second),
	}}}}}
	job.Canonicalize()
	return job
}

// workload submits, updates, scales and stops jobs at cfg.Rate until
// cfg.Submissions jobs were submitted and the faults are done, or ctx
// ends.
func (r *run) workload(ctx context.Context, faultsDone <-chan struct{}) {
	tick := time.NewTicker(time.Duration(float64(time.Second) / r.cfg.Rate))
	defer tick.Stop()
	faulting := true
	for {
		select {
		case <-ctx.Done():
			return
		case <-faultsDone:
			faulting, faultsDone = false, nil
			continue
		case <-tick.C:
		}
		r.mu.Lock()
		submitted := r.res.Submitted
		var live []*jobRecord
		for _, name := range r.order {
			if j := r.jobs[name]; !j.batch && !j.stopped && !j.triedStop {
				live = append(live, j)
			}
		}
		pick := r.rng.Float64()
		var which *jobRecord
		if len(live) > 0 {
			which = live[r.rng.IntN(len(live))]
		}
		r.mu.Unlock()
		switch {
		case submitted >= r.cfg.Submissions && !faulting:
			return
		case len(live) >= maxLiveServices:
			r.stopJob(ctx, live[0])
		case which == nil || (pick < 0.5 && submitted < r.cfg.Submissions):
			if submitted < r.cfg.Submissions {
				r.submitNew(ctx, submitted)
			}
		case pick < 0.7:
			r.change(ctx, which, which.count, which.gen+1)
		case pick < 0.85:
			r.change(ctx, which, 1+r.rng.IntN(4), which.gen)
		default:
			r.stopJob(ctx, which)
		}
	}
}

func (r *run) submitNew(ctx context.Context, n int) {
	rec := &jobRecord{name: fmt.Sprintf("c%04d", n), batch: r.rng.IntN(10) < 3, count: 1 + r.rng.IntN(3), gen: 1}
	if rec.batch {
		rec.count = 1 + r.rng.IntN(2)
	}
	rec.tried = []tried{{at: time.Now(), count: rec.count, gen: rec.gen}}
	r.mu.Lock()
	r.jobs[rec.name] = rec
	r.order = append(r.order, rec.name)
	r.res.Submitted++
	r.mu.Unlock()
	r.submit(ctx, rec, rec.count, rec.gen)
}

// change asks for a job's count and gen (a scale change or an update).
func (r *run) change(ctx context.Context, rec *jobRecord, count, gen int) {
	r.mu.Lock()
	rec.tried = append(rec.tried, tried{at: time.Now(), count: count, gen: gen})
	r.mu.Unlock()
	r.submit(ctx, rec, count, gen)
}

func (r *run) submit(ctx context.Context, rec *jobRecord, count, gen int) {
	r.mu.Lock()
	want := *rec
	r.mu.Unlock()
	want.count, want.gen = count, gen
	octx, cancel := context.WithTimeout(ctx, 5*time.Second)
	resp, err := r.c.api.SubmitJob(octx, r.jobSpec(&want), 0)
	cancel()
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.res.Unacknowledged++
		rec.uncertain = true
		if ctx.Err() == nil {
			r.log("submit %s (count %d, gen %d) not acknowledged: %v", rec.name, count, gen, err)
		}
		return
	}
	r.res.Acknowledged++
	rec.count, rec.gen, rec.version = count, gen, resp.Job.Version
}

func (r *run) stopJob(ctx context.Context, rec *jobRecord) {
	r.mu.Lock()
	rec.triedStop = true
	rec.tried = append(rec.tried, tried{at: time.Now(), stop: true})
	r.mu.Unlock()
	octx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_, err := r.c.api.StopJob(octx, rec.name, false)
	cancel()
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.res.Unacknowledged++
		rec.uncertain = true
		if ctx.Err() == nil {
			r.log("stop %s not acknowledged: %v", rec.name, err)
		}
		return
	}
	r.res.Acknowledged++
	rec.stopped = true
}

// storedJobs reads drover's jobs straight from etcd.
func storedJobs(ctx context.Context, etcd *clientv3.Client) (map[string]*spec.Job, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := etcd.Get(ctx, registry.Prefix+"jobs/", clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	out := map[string]*spec.Job{}
	for _, kv := range resp.Kvs {
		var j spec.Job
		if err := json.Unmarshal(kv.Value, &j); err != nil {
			return nil, fmt.Errorf("chaos: decode %s: %w", kv.Key, err)
		}
		out[j.Name] = &j
	}
	return out, nil
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
