package clustertest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/spec"
)

// The restarted job: restartCount instances, replaced one at a time, each
// judged healthy once its task has run for restartMinHealthy.
const (
	restartCount      = 4
	restartMinHealthy = time.Second
)

func restartJob(name string) *spec.Job {
	job := sleepJob(name, restartCount)
	one := 1
	job.Groups[0].Update = &spec.UpdateStrategy{
		MaxParallel:     &one,
		MinHealthyTime:  spec.Duration(restartMinHealthy),
		HealthyDeadline: spec.Duration(20 * time.Second),
		HealthCheck:     spec.HealthTaskStates,
	}
	job.Canonicalize()
	return job
}

// unjudged reports whether a is a live alloc placed with an update
// strategy whose agent has not yet given its health verdict: the
// reconciler counts it against the group's max_parallel.
func unjudged(a *spec.Alloc) bool {
	return a.DesiredStatus == spec.DesiredRun && !a.Terminal() && a.Update != nil &&
		(a.Status == nil || a.Status.DeploymentHealth == nil)
}

// restartState is one look at a restart: the replacements (allocs created
// at or after the request) and what is left of the old instances.
type restartState struct {
	replRunning  int // replacements that should run and do
	replInFlight int // replacements live without a verdict (pending or running)
	runInFlight  int // ... of them running
	oldLive      int // old allocs not yet terminal (running, or stopping)
	live         int
	desc         string
}

func restartStateOf(st *spec.JobStatus, since time.Time) restartState {
	var s restartState
	var parts []string
	for _, a := range st.Allocations {
		old := a.CreateTime.Before(since)
		running := a.DesiredStatus == spec.DesiredRun && a.ClientStatusOr() == spec.ClientRunning
		if !a.Terminal() {
			s.live++
			if old {
				s.oldLive++
			}
		}
		if !old && running {
			s.replRunning++
		}
		if !old && unjudged(a) {
			s.replInFlight++
			if running {
				s.runInFlight++
			}
		}
		if !a.Terminal() || !old {
			verdict := "-"
			if a.Status != nil && a.Status.DeploymentHealth != nil {
				verdict = fmt.Sprintf("healthy=%v", a.Status.DeploymentHealth.Healthy)
			}
			age := "new"
			if old {
				age = "old"
			}
			parts = append(parts, fmt.Sprintf("%s %s %s %s/%s %s %q",
				a.Name, short(a.ID), age, a.DesiredStatus, a.ClientStatusOr(), verdict, a.DesiredReason))
		}
	}
	s.desc = strings.Join(parts, "; ")
	return s
}

// done: every instance replaced, running, and nothing old left live.
func (s restartState) done() bool {
	return s.replRunning == restartCount && s.live == restartCount && s.oldLive == 0
}

// TestRestartResumesAfterLeaderFailover: `drover restart` of a 4-instance
// service with max_parallel 1; the leader is SIGKILLed once the first
// replacement runs; the next leader, reading the same RestartRequested,
// replaces the rest, still one at a time, with no duplicate and no old
// instance left.
func TestRestartResumesAfterLeaderFailover(t *testing.T) {
	c := startCluster(t, 2)
	const name = "rolling"
	c.submit(restartJob(name))
	c.waitRunning(name, restartCount, 30*time.Second)
	// A clean start: the first placement's verdicts (if it was judged) are
	// in, so the restart's budget is all its own.
	waitFor(t, 30*time.Second, "initial instances judged", func() bool {
		st, err := c.jobStatus(name)
		if err != nil {
			return false
		}
		for _, a := range st.Allocations {
			if unjudged(a) {
				return false
			}
		}
		return true
	})

	leader, _ := c.waitLeader(nil, 10*time.Second)
	// s1 never leads: it survives the kill, so the sampler reads through it.
	s1 := c.server("s1")
	if leader == s1 {
		t.Fatal("s1 leads; the harness runs it --api-only")
	}
	s1c := s1.client()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	job, err := c.api().RestartJob(ctx, name)
	cancel()
	if err != nil {
		t.Fatalf("restart %s: %v", name, err)
	}
	since := job.RestartRequested
	requested := time.Now()
	if since.IsZero() {
		t.Fatalf("restart answered a job without RestartRequested: %+v", job)
	}

	samples := startRestartSampler(t, s1c, name, since)
	defer func() {
		if t.Failed() {
			t.Logf("what the sampler saw, at each change:\n%s", strings.Join(samples.stop().changes, "\n"))
		}
	}()

	// Kill the leader once the first replacement runs, before all are in.
	var first restartState
	waitFor(t, 20*time.Second, "first replacement running", func() bool {
		st, err := c.jobStatus(name)
		if err != nil {
			return false
		}
		first = restartStateOf(st, since)
		return first.replRunning >= 1
	})
	if first.done() {
		t.Fatalf("restart finished before the leader could be killed: %s", first.desc)
	}
	t.Logf("at the kill, %s after the request: %d replacement(s) running, %d old live: %s",
		time.Since(requested).Round(time.Millisecond), first.replRunning, first.oldLive, first.desc)
	leader.signal(syscall.SIGKILL)
	leader.wait(10 * time.Second)
	killed := time.Now()
	next, took := c.waitLeader(leader, 15*time.Second)
	t.Logf("%s leads %s after the kill (TTL %s)", next.name, took.Round(time.Millisecond), leaderTTL)

	// The bound: the next leader takes over within the TTL (2s) plus an
	// election (~1s); then at most every batch is still to do, 4 here (the
	// in-flight one's verdict may not be in), each a placement, the agent's
	// pick-up and start and report (~1-2s) plus min_healthy_time (1s): 4 x
	// 3s = 12s; plus 10s margin for a loaded machine: 2+1+12+10 = 25s.
	remaining := restartCount - first.replRunning + 1
	bound := leaderTTL + time.Second + time.Duration(remaining)*(restartMinHealthy+2*time.Second) + 10*time.Second
	waitFor(t, bound-time.Since(killed), fmt.Sprintf("every instance replaced within %s of the kill", bound), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		st, _, err := s1c.Job(ctx, name, nil)
		if err != nil {
			return false
		}
		return restartStateOf(st, since).done()
	})
	t.Logf("restart of %d instances: all replaced %s after the request, %s after the leader %s was SIGKILLed (bound %s)",
		restartCount, time.Since(requested).Round(time.Millisecond), time.Since(killed).Round(time.Millisecond), leader.name, bound)

	seen := samples.stop()
	t.Logf("sampled %d times through s1: at most %d replacement(s) running and %d live without a verdict",
		seen.n, seen.running, seen.live)
	if seen.running > 1 || seen.live > 1 {
		t.Errorf("more than max_parallel=1 replacements in flight at once: %s", seen.worst)
	}

	st, err := c.jobStatus(name)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range liveAllocs(st) {
		if a.CreateTime.Before(since) {
			t.Errorf("old alloc %s (%s) still live: %s/%s", a.Name, short(a.ID), a.DesiredStatus, a.ClientStatusOr())
		}
	}
	for _, a := range runningAllocs(st) {
		if a.CreateTime.Before(since) {
			t.Errorf("alloc %s (%s) running was created %s, before the restart request %s", a.Name, short(a.ID), a.CreateTime, since)
		}
	}
	c.checkExactlyOnce(name, restartCount)
}

// restartSampler reads the job every 100ms and keeps the most replacements
// it saw in flight (live, placed with an update strategy, no verdict yet).
type restartSampler struct {
	stopc chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
	max   restartMax
}

type restartMax struct {
	n, running, live int
	worst            string
	changes          []string // a timestamped line each time the state changed
}

func startRestartSampler(t *testing.T, cl *client.Client, name string, since time.Time) *restartSampler {
	s := &restartSampler{stopc: make(chan struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			st, _, err := cl.Job(ctx, name, nil)
			cancel()
			if err == nil {
				r := restartStateOf(st, since)
				s.max.n++
				if l := len(s.max.changes); l == 0 || !strings.HasSuffix(s.max.changes[l-1], r.desc) {
					s.max.changes = append(s.max.changes, time.Now().Format("15:04:05.000")+" "+r.desc)
				}
				if r.runInFlight > s.max.running || r.replInFlight > s.max.live {
					s.max.worst = fmt.Sprintf("%s: %s", time.Now().Format("15:04:05.000"), r.desc)
				}
				s.max.running = max(s.max.running, r.runInFlight)
				s.max.live = max(s.max.live, r.replInFlight)
			}
			select {
			case <-s.stopc:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { s.stop() })
	return s
}

// stop ends the sampling (once; later calls only read) and returns what
// it saw.
func (s *restartSampler) stop() restartMax {
	s.once.Do(func() { close(s.stopc) })
	s.wg.Wait()
	return s.max
}
