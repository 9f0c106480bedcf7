package main

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"time"
)

func init() {
	register(scenario{
		name:  "throughput",
		about: "simulated agents; jobs x instances submitted at once: placements/s, etcd txns per placement",
		flags: throughputFlags,
	})
}

// slotsPerNode sizes the throughput and latency instances: 16 fill a
// simulated node, so 100 x 100 instances use 10,000 of 1,000 agents'
// 16,000 slots and the scheduler still has room to choose.
const slotsPerNode = 16

func throughputFlags(fs *flag.FlagSet, o *options) func() (*report, error) {
	sf := addSimFlags(fs)
	jobs := fs.Int("jobs", 100, "jobs submitted at once (-quick: 10 unless given)")
	instances := fs.Int("instances", 100, "instances per job (-quick: 10 unless given)")
	baseline := fs.Duration("baseline", 3*time.Second, "how long each etcd put baseline runs (-quick: 1s unless given)")
	return func() (*report, error) {
		return throughput(sf.count(o), sized(fs, o, "jobs", *jobs, 10), sized(fs, o, "instances", *instances, 10),
			sf.nodeTTL, sized(fs, o, "baseline", *baseline, time.Second))
	}
}

// throughput submits jobs x instances at once, each job by its own
// request, and times them from the first submit to the last alloc
// committed (seen by a registry watch) and to the last reported running
// (the agents' status reports as the server acknowledged them).
func throughput(agents, jobs, instances int, nodeTTL, putFor time.Duration) (*report, error) {
	n := jobs * instances
	if n > agents*slotsPerNode {
		return nil, fmt.Errorf("%d instances do not fit on %d agents of %d slots; raise -agents", n, agents, slotsPerNode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	c, startup, err := startSimWithAgents(ctx, nodeTTL, agents)
	if err != nil {
		return nil, err
	}
	defer c.close()

	// The baseline: what the same etcd member commits of plain puts, one
	// at a time (fsync latency) and 64 at a time (what raft batching gets).
	seqPuts, err := c.putLoop(ctx, putFor, 1)
	if err != nil {
		return nil, err
	}
	parPuts, err := c.putLoop(ctx, putFor, 64)
	if err != nil {
		return nil, err
	}

	res := instanceSize(slotsPerNode)
	names := make([]string, jobs)
	for i := range names {
		names[i] = fmt.Sprintf("tp-%03d", i)
	}
	before, err := gatherEtcd()
	if err != nil {
		return nil, err
	}
	writes0, err := etcdWrites()
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, jobs)
	for _, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			if _, err := c.client.SubmitJob(sctx, simJob(name, instances, res), 0); err != nil {
				errs <- fmt.Errorf("submitting %s: %w", name, err)
			}
		}()
	}
	wg.Wait()
	submitted := time.Since(t0)
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	// A loaded 2-core machine is slow; still, 10 ms a placement is far
	// below any target, so failing there says something is stuck.
	timeout := time.Minute + time.Duration(n)*10*time.Millisecond
	err = waitUntil(ctx, timeout, fmt.Sprintf("%d placements to commit", n), func() (bool, string) {
		placed, _, err := c.obs.counts(names)
		if err != nil {
			return false, err.Error()
		}
		return placed == n, fmt.Sprintf("%d of %d committed", placed, n)
	})
	if err != nil {
		return nil, err
	}
	after, err := gatherEtcd()
	if err != nil {
		return nil, err
	}
	writes1, err := etcdWrites()
	if err != nil {
		return nil, err
	}
	writes := writes1 - writes0
	err = waitUntil(ctx, timeout, fmt.Sprintf("%d instances to be reported running", n), func() (bool, string) {
		_, running, err := c.obs.counts(names)
		if err != nil {
			return false, err.Error()
		}
		return running == n, fmt.Sprintf("%d of %d running", running, n)
	})
	if err != nil {
		return nil, err
	}

	var lastPlaced, lastRunning time.Time
	revs := map[int64]bool{}
	for _, name := range names {
		for _, a := range c.obs.allocs(name) {
			revs[a.rev] = true
			lastPlaced = later(lastPlaced, a.seen)
			lastRunning = later(lastRunning, a.run.acked)
		}
	}
	placeSpan, runSpan := lastPlaced.Sub(t0), lastRunning.Sub(t0)
	rate := float64(n) / placeSpan.Seconds()
	during := after.since(before)
	txns := during["Txn"]
	seqRate := float64(len(seqPuts)) / putFor.Seconds()
	parRate := float64(len(parPuts)) / putFor.Seconds()

	rep := newReport("throughput")
	rep.linef("throughput: %d jobs x %d instances submitted at once (one request each) to %d simulated agents", jobs, instances, agents)
	c.clusterLines(rep, agents, startup)
	addRow(rep, "all submits answered", ms(submitted), "")
	addRow(rep, "placements committed per second", fmt.Sprintf("%.0f/s", rate), ">= 2000/s")
	addRow(rep, "first submit -> last placement committed", ms(placeSpan), "")
	addRow(rep, "first submit -> all reported running", ms(runSpan), "report")
	addRow(rep, "etcd txns committing allocs per placement", fmt.Sprintf("%.4f", float64(len(revs))/float64(n)), "<= 0.05")
	rep.linef("    (%d distinct etcd revisions carried the %d allocs, as the registry watch saw them)", len(revs), n)
	addRow(rep, "etcd writes per placement", fmt.Sprintf("%.4f", writes/float64(n)), "")
	rep.linef("    (raft entries committed from first submit to last commit: %.0f: plans, submits, agents' status reports)", writes)
	addRow(rep, "etcd Txn calls per placement", fmt.Sprintf("%.4f", txns/float64(n)), "")
	rep.linef("    (gRPC Txn calls in that time: %.0f, reads included: an agent's assignment query is one read-only Txn)", txns)
	addRow(rep, "all etcd requests in that time", fmt.Sprintf("%.0f", during.total()), "")
	rep.linef("    (by method: %s)", during.top(6, 1))
	addRow(rep, "baseline: plain etcd puts, 1 in flight", fmt.Sprintf("%.0f/s", seqRate), "")
	addRow(rep, "baseline: plain etcd puts, 64 in flight", fmt.Sprintf("%.0f/s", parRate), "")
	rep.linef("    (1 KiB puts through etcd's JSON gateway to the same member, fsync on, %s each, before the jobs)", putFor)
	c.warningLines(rep)

	rep.set("jobs", jobs)
	rep.set("instances", instances)
	rep.set("placements", n)
	rep.set("submit_ms", submitted)
	rep.set("placements_per_second", round1(rate))
	rep.set("time_to_all_placed_ms", placeSpan)
	rep.set("time_to_all_running_ms", runSpan)
	rep.set("alloc_commits", len(revs))
	rep.set("alloc_commits_per_placement", float64(len(revs))/float64(n))
	rep.set("etcd_writes", writes)
	rep.set("etcd_writes_per_placement", writes/float64(n))
	rep.set("etcd_txns", txns)
	rep.set("etcd_txns_per_placement", txns/float64(n))
	rep.set("etcd_requests", during.total())
	rep.set("baseline_puts_per_second_1", round1(seqRate))
	rep.set("baseline_puts_per_second_64", round1(parRate))
	rep.set("baseline_put_p50_ms", pct(seqPuts, 50))
	return rep, nil
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func round1(x float64) float64 { return float64(int64(x*10+0.5)) / 10 }

// round2 rounds x to two decimals.
func round2(x float64) float64 { return float64(int64(x*100+0.5)) / 100 }
