package main

// drover-bench machineloss: a machine dies -> its instances run elsewhere.
//
//	go run ./cmd/drover-bench machineloss -trials 20
//	go run ./cmd/drover-bench machineloss -falsedown 3m
//
// It runs `drover dev` (a server and a node) and three more agents
// (`drover agent`, each its own node), all with the defaults but -node-ttl.
// A service job of 4 instances, scored least_loaded, spreads over the 4
// nodes. Each trial SIGKILLs one agent together with its tasks' process
// groups, as a machine that loses power, and times kill -> every lost
// instance running again on another node (the replacement's task start as
// its agent recorded it). The dead node is then
// replaced by a fresh agent for the next trial.
//
// With -falsedown D it instead saturates both CPUs with busy loops for D
// while the nodes only heartbeat, and counts the times any node was seen
// down (it polls every 200 ms). Target: zero.
//
// -quick runs one trial at a node TTL of 1 s (the default is 5 s): the
// leader's grace after its election is 2 x TTL, and the harness waits it
// out before the first kill.

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"syscall"
	"time"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/server"
	"github.com/drover-org/drover/internal/spec"
)

func init() {
	register(scenario{name: "machineloss", about: "drover dev + 3 agents; SIGKILL an agent and its tasks: time until its instances run elsewhere", flags: machineLossFlags})
}

func machineLossFlags(fs *flag.FlagSet, o *options) func() (*report, error) {
	trials := fs.Int("trials", 20, "machines to kill (-quick: 1)")
	falseDown := fs.Duration("falsedown", 0, "instead: saturate the CPUs this long and count false node-down observations")
	nodeTTL := fs.Duration("node-ttl", server.DefaultNodeTTL, "drover dev's --node-ttl (-quick: 1s, so that a trial takes seconds)")
	return func() (*report, error) {
		ttl := sized(fs, o, "node-ttl", *nodeTTL, time.Second)
		if ttl <= 0 {
			return nil, fmt.Errorf("-node-ttl %s: want a positive duration", ttl)
		}
		return machineLoss(o.drover, sized(fs, o, "trials", *trials, 1), *falseDown, ttl)
	}
}

type benchAgent struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

func startBenchAgent(bin, addr, tlsDir, dir, name string) (*benchAgent, error) {
	cmd := exec.Command(bin, "agent", "--server", addr, "--tls-dir", tlsDir, "--data-dir", filepath.Join(dir, name),
		"--http-addr", "127.0.0.1:0", "--name", name, "--log-level", "error")
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	a := &benchAgent{name: name, cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(a.done) }()
	return a, nil
}

func machineLoss(bin string, trials int, falseDown, nodeTTL time.Duration) (*report, error) {
	if err := need("/bin/sleep"); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "drover-bench-loss-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	if bin, err = droverBinary(bin, tmp); err != nil {
		return nil, err
	}
	devStarted := time.Now()
	dev, addr, err := startDev(bin, filepath.Join(tmp, "dev"), "--node-ttl", nodeTTL.String())
	if err != nil {
		return nil, err
	}
	defer func() { dev.Process.Signal(syscall.SIGTERM); dev.Wait() }()
	c, err := devClient(addr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()

	agents := map[string]*benchAgent{}
	defer func() {
		for _, a := range agents {
			a.cmd.Process.Kill()
			<-a.done
		}
	}()
	// Runs before the agents are killed: their tasks would outlive them.
	defer stopAllJobs(ctx, c)
	next := 0
	spawn := func() error {
		next++
		name := fmt.Sprintf("m%d", next)
		a, err := startBenchAgent(bin, addr, filepath.Join(tmp, "dev", "tls"), tmp, name)
		if err != nil {
			return err
		}
		agents[name] = a
		return waitNodes(ctx, c, keys(agents))
	}
	for range 3 {
		if err := spawn(); err != nil {
			return nil, err
		}
	}
	if falseDown > 0 {
		return countFalseDown(ctx, c, falseDown, nodeTTL)
	}

	job := sleepJob("lossbench", 4)
	job.Scoring = spec.ScoreLeastLoaded // one per node, not binpack's all on one
	if _, err := c.SubmitJob(ctx, job, 0); err != nil {
		return nil, err
	}
	// Measure the steady state: a newly elected leader waits its grace
	// (2 x node TTL) before acting on down nodes, so a loss in the first
	// seconds after an election is handled when that grace ends.
	if wait := time.Until(devStarted.Add(2*nodeTTL + time.Second)); wait > 0 {
		time.Sleep(wait)
	}
	var took, detect []time.Duration
	for trial := 0; trial < trials; trial++ {
		if err := waitRunningAll(ctx, c, job.Name, 4); err != nil {
			return nil, err
		}
		st, _, err := c.Job(ctx, job.Name, nil)
		if err != nil {
			return nil, err
		}
		// The victim: an agent node that runs at least one instance.
		var victim string
		var lost []*spec.Alloc
		for _, name := range keys(agents) {
			lost = lost[:0]
			for _, a := range st.Allocations {
				if a.NodeName == name && a.DesiredStatus == spec.DesiredRun && !a.Terminal() {
					lost = append(lost, a)
				}
			}
			if len(lost) > 0 {
				victim = name
				break
			}
		}
		if victim == "" {
			return nil, fmt.Errorf("trial %d: no instance runs on an agent node", trial)
		}
		v := agents[victim]
		killed := time.Now()
		v.cmd.Process.Kill()
		for _, a := range lost {
			if ts := a.Status.Tasks["t"]; ts != nil && ts.PID > 0 {
				syscall.Kill(-ts.PID, syscall.SIGKILL)
			}
		}
		<-v.done
		delete(agents, victim)

		// Wait until every lost instance has a running replacement.
		var index int64
		for {
			st, idx, err := c.Job(ctx, job.Name, &client.QueryOptions{Index: index, Wait: 30 * time.Second})
			if err != nil {
				return nil, err
			}
			index = idx
			var last, placed time.Time
			done := 0
			for _, old := range lost {
				for _, a := range st.Allocations {
					if a.Index != old.Index || a.DesiredStatus != spec.DesiredRun || a.NodeName == victim {
						continue
					}
					if ts := a.Status; ts != nil && ts.Tasks["t"] != nil && ts.Tasks["t"].State == spec.TaskRunning {
						done++
						last = maxTime(last, ts.Tasks["t"].StartedAt)
						placed = maxTime(placed, a.CreateTime)
					}
				}
			}
			if done == len(lost) {
				took = append(took, last.Sub(killed))
				detect = append(detect, placed.Sub(killed))
				break
			}
			if time.Since(killed) > 2*time.Minute {
				return nil, fmt.Errorf("trial %d: lost instances not replaced within 2 minutes", trial)
			}
		}
		if err := spawn(); err != nil {
			return nil, err
		}
	}
	rep := newReport("machineloss")
	rep.linef("drover-bench machineloss: %d trials, SIGKILL of an agent and its tasks, node TTL %s (heartbeat every TTL/5), leader past its grace, %d CPUs, %s/%s",
		trials, nodeTTL, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)
	rep.linef("kill -> replacements placed   %s", distS(detect))
	rep.linef("kill -> replacements running  %s", distS(took))
	rep.set("trials", trials)
	rep.set("node_ttl_ms", nodeTTL)
	rep.setDist("kill_to_placed", detect)
	rep.setDist("kill_to_running", took)
	return rep, nil
}

// countFalseDown burns both CPUs for d and counts nodes seen down.
func countFalseDown(ctx context.Context, c *client.Client, d, nodeTTL time.Duration) (*report, error) {
	loops := 2 * runtime.NumCPU()
	burn := exec.Command("sh", "-c", fmt.Sprintf("for i in $(seq %d); do (while :; do :; done) & done; wait", loops))
	burn.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := burn.Start(); err != nil {
		return nil, err
	}
	defer func() { syscall.Kill(-burn.Process.Pid, syscall.SIGKILL); burn.Wait() }()
	polls, downs := 0, 0
	deadline := time.After(d)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-deadline:
			rep := newReport("machineloss")
			rep.linef("drover-bench machineloss -falsedown: %s with %d busy loops on %d CPUs, 4 nodes, node TTL %s", d, loops, runtime.NumCPU(), nodeTTL)
			rep.linef("node-list polls %d, node seen down %d times (target 0: %s)", polls, downs, verdict(downs == 0))
			rep.set("falsedown_seconds", d.Seconds())
			rep.set("node_ttl_ms", nodeTTL)
			rep.set("polls", polls)
			rep.set("false_downs", downs)
			return rep, nil
		case <-tick.C:
		}
		qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		nodes, _, err := c.Nodes(qctx, nil)
		cancel()
		if err != nil {
			continue
		}
		polls++
		for _, n := range nodes {
			if n.Status != spec.NodeReady {
				downs++
				fmt.Fprintf(os.Stderr, "%s node %s seen %s\n", time.Now().Format(time.RFC3339), n.Name, n.Status)
			}
		}
	}
}

func waitNodes(ctx context.Context, c *client.Client, names []string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		nodes, _, err := c.Nodes(ctx, nil)
		if err == nil {
			ready := 0
			for _, n := range nodes {
				if slices.Contains(names, n.Name) && n.Status == spec.NodeReady {
					ready++
				}
			}
			if ready == len(names) {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("nodes %v not all ready within 30s", names)
}

func keys(m map[string]*benchAgent) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
