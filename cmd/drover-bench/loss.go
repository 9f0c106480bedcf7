package main

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/spec"
)

func init() {
	register(scenario{
		name:  "loss",
		about: "kill simulated agents holding work: time until every replacement runs; false downs among the rest",
		flags: lossFlags,
	})
}

func lossFlags(fs *flag.FlagSet, o *options) func() (*report, error) {
	sf := addSimFlags(fs)
	kill := fs.Int("kill", 10, "agents to kill (-quick: 2 unless given)")
	per := fs.Int("per-agent", 2, "instances each agent holds")
	return func() (*report, error) {
		return loss(sf.count(o), sized(fs, o, "kill", *kill, 2), *per, sf.nodeTTL)
	}
}

// lossSlotsPerInstance: a node fits twice what it holds, so the killed
// agents' instances have room on the others.
const lossSlotsPerInstance = 2

// loss runs one job of per x agents instances spread over the agents
// (least_loaded), kills k agents that hold some, and measures until every
// replacement is reported running, watching /v1/nodes for nodes seen down
// that were not killed.
func loss(agents, k, per int, nodeTTL time.Duration) (*report, error) {
	if k >= agents {
		return nil, fmt.Errorf("-kill %d leaves no agent of %d to take the work", k, agents)
	}
	if per < 1 {
		return nil, fmt.Errorf("-per-agent %d: want at least 1", per)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	c, startup, err := startSimWithAgents(ctx, nodeTTL, agents)
	if err != nil {
		return nil, err
	}
	defer c.close()
	n := per * agents
	job := simJob("loss", n, instanceSize(per*lossSlotsPerInstance))
	job.Scoring = spec.ScoreLeastLoaded // every agent holds some work
	if _, err := c.client.SubmitJob(ctx, job, 0); err != nil {
		return nil, fmt.Errorf("submitting %s: %w", job.Name, err)
	}
	err = waitUntil(ctx, time.Minute+time.Duration(n)*10*time.Millisecond, fmt.Sprintf("%d instances to run", n), func() (bool, string) {
		placed, running, err := c.obs.counts([]string{job.Name})
		if err != nil {
			return false, err.Error()
		}
		return running == n, fmt.Sprintf("%d placed, %d running of %d", placed, running, n)
	})
	if err != nil {
		return nil, err
	}
	// A new leader ignores down nodes for its grace (2 x TTL by default)
	// after election; kill only after it, or that grace is measured too.
	if wait := time.Until(c.started.Add(2*nodeTTL + time.Second)); wait > 0 {
		time.Sleep(wait)
	}

	// The victims: the first k agents (by name) that hold instances.
	before := c.obs.allocs(job.Name)
	holding := map[string]int{}
	for _, a := range before {
		holding[a.node]++
	}
	c.mu.Lock()
	var victims []*simAgent
	for _, a := range c.agents {
		if len(victims) < k && holding[a.id] > 0 {
			victims = append(victims, a)
		}
	}
	c.mu.Unlock()
	if len(victims) < k {
		return nil, fmt.Errorf("only %d agents hold instances of %s; cannot kill %d", len(victims), job.Name, k)
	}
	killed := map[string]bool{}
	lost := 0
	for _, v := range victims {
		killed[v.id] = true
		lost += holding[v.id]
	}

	watchCtx, stopWatch := context.WithCancel(ctx)
	nw := &nodeWatch{killed: killed, downAt: map[string]time.Time{}, falseDown: map[string]bool{}}
	watchDone := make(chan struct{})
	go func() { nw.run(watchCtx, c.client); close(watchDone) }()
	// Let the node watch take its first look before anything happens.
	if err := waitUntil(ctx, 10*time.Second, "the node watch's first answer", nw.started); err != nil {
		stopWatch()
		return nil, err
	}
	reg0, warn0 := c.obs.requestCounts()["POST /v1/nodes"], c.warnings.Load()
	tKill := time.Now()
	c.kill(victims)

	replacements := func() (placed, running int, last, lastPlaced time.Time) {
		for id, a := range c.obs.allocs(job.Name) {
			if _, old := before[id]; old {
				continue
			}
			placed++
			lastPlaced = later(lastPlaced, a.seen)
			if a.isRunning {
				running++
				last = later(last, a.run.acked)
			}
		}
		return
	}
	err = waitUntil(ctx, 2*time.Minute+4*nodeTTL, fmt.Sprintf("replacements of the %d instances on the %d killed agents to run", lost, k), func() (bool, string) {
		placed, running, _, _ := replacements()
		return running >= lost, fmt.Sprintf("%d placed, %d running", placed, running)
	})
	if err == nil {
		// False downs show up as the burst settles, if at all: keep
		// watching for one more TTL.
		time.Sleep(nodeTTL)
	}
	stopWatch()
	<-watchDone
	if err != nil {
		return nil, err
	}
	placed, _, lastRunning, lastPlaced := replacements()
	detect, falseDowns, watchErrs := nw.result(tKill)
	if len(detect) == 0 {
		return nil, fmt.Errorf("replacements ran, but /v1/nodes never showed a killed node down (%d queries failed)", watchErrs)
	}
	reregs := c.obs.requestCounts()["POST /v1/nodes"] - reg0
	warnings := c.warnings.Load() - warn0

	rep := newReport("loss")
	rep.linef("loss: %d of %d simulated agents killed (context cancelled, heartbeats stop) holding %d of %d instances of job %s", k, agents, lost, n, job.Name)
	c.clusterLines(rep, agents, startup)
	addRow(rep, "kill -> every replacement reported running", ms(lastRunning.Sub(tKill)), "report")
	addRow(rep, "kill -> last replacement committed", ms(lastPlaced.Sub(tKill)), "")
	addRow(rep, "kill -> killed node seen down, max", ms(slices.Max(detect)), fmt.Sprintf("about the TTL, %s", nodeTTL))
	addRow(rep, "killed nodes seen down", fmt.Sprint(len(detect)), fmt.Sprint(k))
	addRow(rep, "false downs (not killed, seen down)", fmt.Sprint(len(falseDowns)), "0")
	if len(falseDowns) > 0 {
		rep.linef("    (%v)", falseDowns)
	}
	addRow(rep, "node registrations after the kill", fmt.Sprint(reregs), "0")
	addRow(rep, "replacements placed", fmt.Sprint(placed), fmt.Sprint(lost))
	if watchErrs > 0 {
		rep.linef("    (%d /v1/nodes queries failed while watching; false downs may be missed)", watchErrs)
	}
	rep.linef("    (nodes watched with blocking queries on /v1/nodes. Baseline: a node is down one TTL after its last heartbeat,")
	rep.linef("    which came up to one heartbeat interval, TTL/5, before the kill)")
	addRow(rep, "log warnings and errors after the kill", fmt.Sprint(warnings), "")
	c.warningLines(rep)

	rep.set("killed", k)
	rep.set("lost_instances", lost)
	rep.set("replacements_placed", placed)
	rep.set("time_to_replacements_running_ms", lastRunning.Sub(tKill))
	rep.set("time_to_replacements_placed_ms", lastPlaced.Sub(tKill))
	rep.set("time_to_seen_down_ms", slices.Max(detect))
	rep.set("killed_seen_down", len(detect))
	rep.set("false_downs", len(falseDowns))
	rep.set("registrations_after_kill", reregs)
	rep.set("node_watch_errors", watchErrs)
	rep.set("warnings_after_kill", warnings)
	return rep, nil
}

// nodeWatch follows /v1/nodes with blocking queries: when each killed
// node is first seen down, and which others are ever seen down.
type nodeWatch struct {
	killed map[string]bool

	mu        sync.Mutex
	looks     int
	errs      int
	downAt    map[string]time.Time // killed node -> first seen down
	falseDown map[string]bool      // node name
}

func (w *nodeWatch) run(ctx context.Context, c *client.Client) {
	var index int64
	for ctx.Err() == nil {
		nodes, idx, err := c.Nodes(ctx, &client.QueryOptions{Index: index, Wait: 5 * time.Second})
		now := time.Now()
		w.mu.Lock()
		if err != nil {
			if ctx.Err() == nil {
				w.errs++
			}
			w.mu.Unlock()
			sleep(ctx, 100*time.Millisecond)
			continue
		}
		w.looks++
		for _, n := range nodes {
			if n.Status == spec.NodeReady {
				continue
			}
			if !w.killed[n.ID] {
				w.falseDown[n.Name] = true
			} else if _, ok := w.downAt[n.ID]; !ok {
				w.downAt[n.ID] = now
			}
		}
		w.mu.Unlock()
		index = idx
	}
}

func (w *nodeWatch) started() (bool, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.looks > 0, fmt.Sprintf("%d answers, %d errors", w.looks, w.errs)
}

// result is, for each killed node seen down, kill -> seen down; the names
// of the other nodes seen down; and how many queries failed.
func (w *nodeWatch) result(tKill time.Time) (detect []time.Duration, falseDowns []string, errs int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, t := range w.downAt {
		detect = append(detect, t.Sub(tKill))
	}
	for name := range w.falseDown {
		falseDowns = append(falseDowns, name)
	}
	slices.Sort(falseDowns)
	return detect, falseDowns, w.errs
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
