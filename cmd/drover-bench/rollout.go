package main

// drover-bench rollout: what a rolling update costs beyond its health gates.
//
//	go run ./cmd/drover-bench rollout                   # 20 instances, max_parallel 5, min_healthy_time 2s
//	go run ./cmd/drover-bench rollout -count 40 -parallel 10
//
// It starts `drover dev`, runs `count` instances of internal/testapp
// (raw_exec, an HTTP check every 200ms) under an update block, waits for
// that version's deployment to succeed, then:
//
//   - good update: changes the tasks' env and times submit -> deployment
//     successful. A deployment replaces max_parallel instances per batch
//     and each batch waits min_healthy_time after its instances pass
//     their check, so ceil(count/max_parallel) * min_healthy_time is time
//     no rollout can save (the gates); the rest is drover's overhead
//     (stopping, placing, starting, the first passing probe, reports).
//   - bad build: version 3 answers /health with 503 (auto_revert on,
//     progress_deadline 0: the first unhealthy instance fails the
//     deployment, rather than being replaced until the deadline); times
//     submit -> deployment failed and submit -> the revert's deployment
//     successful.
//
// All along it samples the number of instances the service catalog serves
// (checks passing) every 20ms, and reports the minimum: a rollout must
// never go below count - max_parallel.

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/spec"
)

func init() {
	register(scenario{name: "rollout", about: "a rolling update's time against the sum of its health gates, and the healthy minimum during a bad build", flags: rolloutFlags})
}

func rolloutFlags(fs *flag.FlagSet, o *options) func() (*report, error) {
	count := fs.Int("count", 20, "instances (-quick: 8)")
	parallel := fs.Int("parallel", 5, "max_parallel (-quick: 4)")
	gate := fs.Duration("min-healthy-time", 2*time.Second, "min_healthy_time (-quick: 500ms)")
	return func() (*report, error) {
		return rollout(o.drover, sized(fs, o, "count", *count, 8), sized(fs, o, "parallel", *parallel, 4),
			sized(fs, o, "min-healthy-time", *gate, 500*time.Millisecond))
	}
}

const rolloutService = "bench-rollout"

func rollout(bin string, count, parallel int, gate time.Duration) (*report, error) {
	tmp, err := os.MkdirTemp("", "drover-bench-rollout-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	if bin, err = droverBinary(bin, tmp); err != nil {
		return nil, err
	}
	app, err := buildTestapp(tmp)
	if err != nil {
		return nil, err
	}
	sick := filepath.Join(tmp, "sick")
	if err := os.WriteFile(sick, nil, 0o644); err != nil {
		return nil, err
	}
	c, _, stop, err := devNode(bin, filepath.Join(tmp, "data"))
	if err != nil {
		return nil, err
	}
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()

	job := func(version string, args ...string) *spec.Job {
		j := &spec.Job{Name: "bench-rollout", Update: &spec.UpdateStrategy{
			MaxParallel: &parallel, MinHealthyTime: spec.Duration(gate), HealthyDeadline: spec.Duration(gate + 5*time.Second),
			ProgressDeadline: new(spec.Duration(0)), AutoRevert: new(true),
		}, Groups: []*spec.Group{{
			Name: "g", Count: count,
			Network: &spec.Network{Ports: []spec.Port{{Label: "http"}}},
			Tasks: []*spec.Task{{
				Name: "web", Driver: "raw_exec",
				Config:    spec.TaskConfig{Command: app, Args: args},
				Env:       map[string]string{"VERSION": version},
				Resources: spec.Resources{CPU: 10, MemoryMB: 16},
				Services: []*spec.Service{{Name: rolloutService, PortLabel: "http", Checks: []*spec.Check{{
					Type: spec.CheckHTTP, Path: "/health", Interval: spec.Duration(200 * time.Millisecond), Timeout: spec.Duration(200 * time.Millisecond),
				}}}},
			}},
		}}}
		j.Canonicalize()
		return j
	}
	// deployed submits j, waits for its version's deployment to end with
	// status want, and returns how long after the submit that was.
	deployed := func(j *spec.Job, want spec.DeploymentStatus, within time.Duration) (time.Duration, error) {
		t0 := time.Now()
		res, err := c.SubmitJob(ctx, j, 0)
		if err != nil {
			return 0, err
		}
		v := res.Job.Version
		var took time.Duration
		err = waitFor(ctx, within, fmt.Sprintf("version %d's deployment %s", v, want), func() (bool, error) {
			// Not the latest deployment: a revert starts the next at once.
			ds, _, err := c.JobDeployments(ctx, j.Name, nil)
			if err != nil {
				return false, nil
			}
			for _, d := range ds {
				if d.JobVersion != v || !d.Status.Final() {
					continue
				}
				if d.Status != want {
					return false, fmt.Errorf("version %d's deployment is %s, want %s: %s", v, d.Status, want, d.Description)
				}
				took = time.Since(t0)
				return true, nil
			}
			return false, nil
		})
		return took, err
	}
	within := time.Duration(count/parallel+2)*(gate+10*time.Second) + time.Minute
	if _, err := deployed(job("1"), spec.DeploymentSuccessful, within); err != nil {
		return nil, err
	}
	defer c.StopJob(context.Background(), "bench-rollout", true)

	sampler := startHealthySampler(ctx, c, count)
	good, err := deployed(job("2"), spec.DeploymentSuccessful, within)
	if err != nil {
		return nil, err
	}
	goodMin := sampler.stop()

	sampler = startHealthySampler(ctx, c, count)
	badFailed, err := deployed(job("3", "-unhealthy-file", sick), spec.DeploymentFailed, within)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	var reverted time.Duration
	if err := waitFor(ctx, within, "the revert's deployment successful", func() (bool, error) {
		d, _, err := c.LatestDeployment(ctx, "bench-rollout", nil)
		if err == nil && d.JobVersion == 4 && d.Status == spec.DeploymentSuccessful {
			reverted = badFailed + time.Since(t0)
			return true, nil
		}
		return false, nil
	}); err != nil {
		return nil, err
	}
	badMin := sampler.stop()

	batches := (count + parallel - 1) / parallel
	gates := time.Duration(batches) * gate
	overhead := good - gates
	rep := newReport("rollout")
	rep.linef("drover-bench rollout: %d instances of testapp (raw_exec, HTTP check every 200ms), max_parallel %d, min_healthy_time %s, drover dev", count, parallel, gate)
	rep.linef("good update: submit -> deployment successful  %7.2fs", good.Seconds())
	rep.linef("sum of its health gates (%d batches x %s)    %7.2fs", batches, gate, gates.Seconds())
	rep.linef("drover's overhead: %.2fs in all, %.2fs per batch; rollout / gates = %.2f", overhead.Seconds(), overhead.Seconds()/float64(batches), good.Seconds()/gates.Seconds())
	rep.linef("healthy instances during the good update: min %d of %d (floor %d)", goodMin, count, count-parallel)
	rep.linef("bad build (/health 503, auto_revert): submit -> failed %.2fs, -> reverted version healthy %.2fs", badFailed.Seconds(), reverted.Seconds())
	rep.linef("healthy instances during the bad build and its revert: min %d of %d (floor %d)", badMin, count, count-parallel)
	rep.set("instances", count)
	rep.set("max_parallel", parallel)
	rep.set("min_healthy_time_ms", gate)
	rep.set("rollout_ms", good)
	rep.set("gates_ms", gates)
	rep.set("overhead_per_batch_ms", overhead/time.Duration(batches))
	rep.set("ratio_to_gates", good.Seconds()/gates.Seconds())
	rep.set("min_healthy_good", goodMin)
	rep.set("min_healthy_bad", badMin)
	rep.set("bad_to_failed_ms", badFailed)
	rep.set("bad_to_reverted_ms", reverted)
	if goodMin < count-parallel || badMin < count-parallel {
		return rep, fmt.Errorf("healthy instances fell below count - max_parallel = %d: %d during the good update, %d during the bad build", count-parallel, goodMin, badMin)
	}
	return rep, nil
}

// healthySampler counts, every 20ms, the instances the catalog serves.
type healthySampler struct {
	mu   sync.Mutex
	min  int
	quit chan struct{}
	done chan struct{}
}

func startHealthySampler(ctx context.Context, c *client.Client, count int) *healthySampler {
	s := &healthySampler{min: count, quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			select {
			case <-s.quit:
				return
			case <-time.After(20 * time.Millisecond):
			}
			is, _, err := c.Service(ctx, rolloutService, false, nil)
			if err != nil {
				continue
			}
			s.mu.Lock()
			s.min = min(s.min, len(is))
			s.mu.Unlock()
		}
	}()
	return s
}

// stop ends the sampling and returns the minimum seen.
func (s *healthySampler) stop() int {
	close(s.quit)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.min
}
