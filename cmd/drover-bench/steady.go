package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

func init() {
	register(scenario{
		name:  "steady",
		about: "simulated idle agents: etcd requests/s per agent, process CPU and RSS",
		flags: steadyFlags,
	})
}

// steadyRequestsTarget is issue 5's ceiling on etcd requests per second
// per idle agent.
const steadyRequestsTarget = 1.0

func steadyFlags(fs *flag.FlagSet, o *options) func() (*report, error) {
	sf := addSimFlags(fs)
	d := fs.Duration("duration", 60*time.Second, "how long the idle agents are measured (-quick: 5s unless given)")
	base := fs.Duration("baseline", 10*time.Second, "how long the server alone is measured first (-quick: 2s unless given)")
	return func() (*report, error) {
		return steady(sf.count(o), sf.nodeTTL, sized(fs, o, "duration", *d, 5*time.Second), sized(fs, o, "baseline", *base, 2*time.Second))
	}
}

// steadyWindow is what one measured interval cost.
type steadyWindow struct {
	d        time.Duration
	etcd     etcdCounts
	api      map[string]int64 // API requests by route
	cpu      time.Duration
	rssMB    float64 // at the end
	warnings int64
}

// measureSteady measures the cluster doing whatever it does for d.
func measureSteady(c *simCluster, d time.Duration) (steadyWindow, error) {
	e0, err := gatherEtcd()
	if err != nil {
		return steadyWindow{}, err
	}
	u0, err := readSimUsage()
	if err != nil {
		return steadyWindow{}, err
	}
	a0, w0 := c.obs.requestCounts(), c.warnings.Load()
	t0 := time.Now()
	time.Sleep(d)
	e1, err := gatherEtcd()
	if err != nil {
		return steadyWindow{}, err
	}
	u1, err := readSimUsage()
	if err != nil {
		return steadyWindow{}, err
	}
	w := steadyWindow{d: time.Since(t0), etcd: e1.since(e0), api: map[string]int64{},
		cpu: u1.cpu - u0.cpu, rssMB: u1.rssMB, warnings: c.warnings.Load() - w0}
	for k, v := range c.obs.requestCounts() {
		if n := v - a0[k]; n > 0 {
			w.api[k] = n
		}
	}
	return w, nil
}

func (w steadyWindow) cpuPct() float64 { return 100 * w.cpu.Seconds() / w.d.Seconds() }

// steady measures the server alone, then with agents idle: no jobs, only
// heartbeats, waiting assignment queries and whatever the server does on
// its own (resyncs).
func steady(agents int, nodeTTL, d, base time.Duration) (*report, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	c, err := startSim(ctx, nodeTTL)
	if err != nil {
		return nil, err
	}
	defer c.close()
	alone, err := measureSteady(c, base)
	if err != nil {
		return nil, err
	}
	startup, err := c.addAgents(ctx, agents)
	if err != nil {
		return nil, err
	}
	// Registration is not the steady state: let its reports and the first
	// assignment answers pass.
	time.Sleep(2 * time.Second)
	idle, err := measureSteady(c, d)
	if err != nil {
		return nil, err
	}

	secs := idle.d.Seconds()
	perAgent := idle.etcd.total() / secs / float64(agents)
	var apiTotal int64
	for _, v := range idle.api {
		apiTotal += v
	}
	rep := newReport("steady")
	rep.linef("steady: %d idle simulated agents for %s (no jobs), after the server alone for %s", agents, idle.d.Round(time.Millisecond), alone.d.Round(time.Millisecond))
	c.clusterLines(rep, agents, startup)
	addRow(rep, "etcd requests per second per agent", fmt.Sprintf("%.3f", perAgent), fmt.Sprintf("<= %g", steadyRequestsTarget))
	rep.linef("    (all etcd requests %.0f/s; by method per second: %s)", idle.etcd.total()/secs, idle.etcd.top(6, secs))
	addRow(rep, "API requests per second per agent", fmt.Sprintf("%.3f", float64(apiTotal)/secs/float64(agents)), "")
	rep.linef("    (by route per second: %s)", topRoutes(idle.api, 4, secs))
	addRow(rep, "process CPU, agents idle", fmt.Sprintf("%.1f%% of a core", idle.cpuPct()), "report")
	addRow(rep, "process RSS, agents idle", fmt.Sprintf("%.0f MB", idle.rssMB), "report")
	addRow(rep, "baseline: server alone, etcd requests/s", fmt.Sprintf("%.1f", alone.etcd.total()/alone.d.Seconds()), "")
	addRow(rep, "baseline: server alone, CPU", fmt.Sprintf("%.1f%% of a core", alone.cpuPct()), "")
	addRow(rep, "baseline: server alone, RSS", fmt.Sprintf("%.0f MB", alone.rssMB), "")
	rep.linef("    (server, etcd and agents share this process: CPU and RSS are theirs together)")
	c.warningLines(rep)

	rep.set("duration_ms", idle.d)
	rep.set("etcd_requests_per_second_per_agent", perAgent)
	rep.set("etcd_requests_per_second", idle.etcd.total()/secs)
	rep.set("api_requests_per_second_per_agent", float64(apiTotal)/secs/float64(agents))
	rep.set("cpu_percent", round1(idle.cpuPct()))
	rep.set("rss_mb", round1(idle.rssMB))
	rep.set("baseline_etcd_requests_per_second", alone.etcd.total()/alone.d.Seconds())
	rep.set("baseline_cpu_percent", round1(alone.cpuPct()))
	rep.set("baseline_rss_mb", round1(alone.rssMB))
	rep.set("warnings_during", idle.warnings)
	return rep, nil
}

// topRoutes lists the n most requested routes, per second over secs.
func topRoutes(m map[string]int64, n int, secs float64) string {
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(cmp.Compare(m[b], m[a]), strings.Compare(a, b)) })
	var parts []string
	for _, k := range keys[:min(n, len(keys))] {
		parts = append(parts, k+" "+num(float64(m[k])/secs))
	}
	return strings.Join(parts, ", ")
}
