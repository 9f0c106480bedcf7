package main

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"time"

	"github.com/drover-org/drover/internal/spec"
)

func init() {
	register(scenario{
		name:  "latency",
		about: "simulated agents; single-instance jobs at 1/s and 50/s: submit -> assigned, -> started by the agent",
		flags: latencyFlags,
	})
}

// Issue 5's latency targets (p99).
const (
	assignedP99Target = 25 * time.Millisecond
	seenP99Target     = 50 * time.Millisecond
)

func latencyFlags(fs *flag.FlagSet, o *options) func() (*report, error) {
	sf := addSimFlags(fs)
	d := fs.Duration("duration", 30*time.Second, "how long jobs are submitted at each rate (-quick: 3s unless given)")
	return func() (*report, error) {
		return latency(sf.count(o), sf.nodeTTL, sized(fs, o, "duration", *d, 3*time.Second))
	}
}

// latencyPutEvery paces the baseline put that runs beside each rate's
// submissions: 20 a second, a small share of the writes they cause.
const latencyPutEvery = 50 * time.Millisecond

// ratio is a / b, 0 when b is 0.
func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// latencyRates are the submit rates, jobs per second.
var latencyRates = []int{1, 50}

// latency submits single-instance jobs at each rate for d, open loop (a
// slow answer does not delay the next submit), and measures for each job
// submit -> assigned (its alloc committed, as a registry watch sees it)
// and submit -> started by the agent (the task start time the agent
// reports; the fake driver starts at once, so this is when the agent saw
// the assignment).
func latency(agents int, nodeTTL, d time.Duration) (*report, error) {
	total := 0
	for _, r := range latencyRates {
		total += int(float64(r) * d.Seconds())
	}
	if total > agents*slotsPerNode {
		return nil, fmt.Errorf("%d instances do not fit on %d agents of %d slots; raise -agents or lower -duration", total, agents, slotsPerNode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	c, startup, err := startSimWithAgents(ctx, nodeTTL, agents)
	if err != nil {
		return nil, err
	}
	defer c.close()
	// The baseline: one plain etcd put at a time, the floor under any
	// committed assignment.
	puts, err := c.putLoop(ctx, min(d, 3*time.Second), 1)
	if err != nil {
		return nil, err
	}

	rep := newReport("latency")
	rep.linef("latency: single-instance jobs submitted at %v jobs/s for %s each, %d simulated agents", latencyRates, d, agents)
	c.clusterLines(rep, agents, startup)
	res := instanceSize(slotsPerNode)
	for _, rate := range latencyRates {
		before, err := scrape(c.url)
		if err != nil {
			return nil, err
		}
		w0, err := etcdWrites()
		if err != nil {
			return nil, err
		}
		// The same baseline during the run: a paced put beside the
		// submissions meets the same disk, fsyncs and machine as they do
		// (other processes' writes stall an fsync too).
		pctx, stopPuts := context.WithCancel(ctx)
		during := make(chan []time.Duration, 1)
		go func() { during <- c.pacedPuts(pctx, latencyPutEvery) }()
		assigned, seen, accepted, err := latencyRun(ctx, c, rate, d, res)
		stopPuts()
		putsDuring := <-during
		if err != nil {
			return nil, err
		}
		w1, err := etcdWrites()
		if err != nil {
			return nil, err
		}
		after, err := scrape(c.url)
		if err != nil {
			return nil, err
		}
		writesPerJob := round1((w1 - w0) / float64(len(accepted)))
		passes, passSum, slow, err := histogramGain(before.body, after.body, "drover_leader_pass_seconds", "0.025")
		if err != nil {
			return nil, err
		}
		passMean := time.Duration(0)
		if passes > 0 {
			passMean = time.Duration(passSum / float64(passes) * float64(time.Second))
		}
		snap, allPasses, err := meanSnapshot(before.body, after.body)
		if err != nil {
			return nil, err
		}
		snapMean := time.Duration(snap * float64(time.Second))
		rep.linef("  at %d job/s (%d jobs):", rate, len(assigned))
		addRow(rep, "  submit -> accepted (job written) p50", ms(pct(accepted, 50)), "")
		addRow(rep, "  submit -> accepted (job written) p99", ms(pct(accepted, 99)), "")
		addRow(rep, "  submit -> assigned p50", ms(pct(assigned, 50)), "")
		addRow(rep, "  submit -> assigned p99", ms(pct(assigned, 99)), "<= "+ms(assignedP99Target))
		addRow(rep, "  submit -> started by the agent p50", ms(pct(seen, 50)), "")
		addRow(rep, "  submit -> started by the agent p99", ms(pct(seen, 99)), "<= "+ms(seenP99Target))
		addRow(rep, "  submit -> started by the agent max", ms(pct(seen, 100)), "")
		addRow(rep, "  leader passes that wrote, mean", fmt.Sprintf("%d, %s", passes, ms(passMean)), "")
		addRow(rep, "  of them over 25 ms", fmt.Sprint(slow), "")
		addRow(rep, "  every pass: count, mean snapshot wait", fmt.Sprintf("%d, %s", allPasses, ms(snapMean)), "")
		addRow(rep, "  etcd writes per job (until running)", fmt.Sprint(writesPerJob), "")
		addRow(rep, "  plain etcd put during the run p50", ms(pct(putsDuring, 50)), "")
		addRow(rep, "  plain etcd put during the run p99", ms(pct(putsDuring, 99)), "")
		addRow(rep, "  assigned p99 / that put's p99", fmt.Sprintf("%.2f", ratio(pct(assigned, 99), pct(putsDuring, 99))), "")
		key := fmt.Sprintf("rate_%d_", rate)
		rep.set(key+"jobs", len(assigned))
		rep.set(key+"accepted_p50_ms", pct(accepted, 50))
		rep.set(key+"accepted_p99_ms", pct(accepted, 99))
		rep.set(key+"passes", passes)
		rep.set(key+"pass_mean_ms", passMean)
		rep.set(key+"passes_over_25ms", slow)
		rep.set(key+"passes_all", allPasses)
		rep.set(key+"snapshot_mean_ms", snapMean)
		rep.set(key+"etcd_writes_per_job", writesPerJob)
		rep.set(key+"assigned_p50_ms", pct(assigned, 50))
		rep.set(key+"assigned_p99_ms", pct(assigned, 99))
		rep.set(key+"seen_p50_ms", pct(seen, 50))
		rep.set(key+"seen_p99_ms", pct(seen, 99))
		rep.set(key+"seen_max_ms", pct(seen, 100))
		rep.set(key+"put_during_p50_ms", pct(putsDuring, 50))
		rep.set(key+"put_during_p99_ms", pct(putsDuring, 99))
		rep.set(key+"assigned_p99_to_put_p99", round2(ratio(pct(assigned, 99), pct(putsDuring, 99))))
	}
	addRow(rep, "baseline: plain etcd put p50 (1 in flight)", ms(pct(puts, 50)), "")
	addRow(rep, "baseline: plain etcd put p99 (1 in flight)", ms(pct(puts, 99)), "")
	rep.linef("    (1 KiB puts through etcd's JSON gateway to the same member, fsync on)")
	rep.set("baseline_put_p50_ms", pct(puts, 50))
	rep.set("baseline_put_p99_ms", pct(puts, 99))
	c.warningLines(rep)
	return rep, nil
}

// latencyRun submits jobs at rate for d and returns, per job, submit ->
// assigned, submit -> started by the agent, and submit -> accepted (the
// server answered the submit: the job is written).
func latencyRun(ctx context.Context, c *simCluster, rate int, d time.Duration, res spec.Resources) (assigned, seen, accepted []time.Duration, err error) {
	n := int(float64(rate) * d.Seconds())
	names := make([]string, n)
	sent := make([]time.Time, n)
	accepted = make([]time.Duration, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	for i := range n {
		if i > 0 {
			<-tick.C
		}
		names[i] = fmt.Sprintf("lat%d-%05d", rate, i)
		job := simJob(names[i], 1, res)
		sent[i] = time.Now()
		wg.Add(1)
		go func() {
			defer wg.Done()
			sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			if _, err := c.client.SubmitJob(sctx, job, 0); err != nil {
				errs <- fmt.Errorf("submitting %s: %w", job.Name, err)
			}
			accepted[i] = time.Since(sent[i])
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, nil, nil, err
	}
	err = waitUntil(ctx, time.Minute, fmt.Sprintf("%d jobs submitted at %d/s to run", n, rate), func() (bool, string) {
		placed, running, err := c.obs.counts(names)
		if err != nil {
			return false, err.Error()
		}
		return running == n, fmt.Sprintf("%d placed, %d running of %d", placed, running, n)
	})
	if err != nil {
		return nil, nil, nil, err
	}
	for i, name := range names {
		for _, a := range c.obs.allocs(name) {
			assigned = append(assigned, a.seen.Sub(sent[i]))
			seen = append(seen, a.run.started.Sub(sent[i]))
		}
	}
	return assigned, seen, accepted, nil
}
