package main

// drover-bench machineloss: a machine dies -> its instances run elsewhere.
//
//	go run ./cmd/drover-bench machineloss -trials 20
//	go run ./cmd/drover-bench machineloss -falsedown 3m
//
// It runs `drover dev` (a server and a node) and three more agents
// (`drover agent`, each its own node), all with the defaults. A service job
// of 4 instances, scored least_loaded, spreads over the 4 nodes. Each trial SIGKILLs one agent
// together with its tasks' process groups, as a machine that loses power,
// and times kill -> every lost instance running again on another node (the
// replacement's task start as its agent recorded it). The dead node is then
// replaced by a fresh agent for the next trial.
//
// With -falsedown D it instead saturates both CPUs with busy loops for D
// while the nodes only heartbeat, and counts the times any node was seen
// down (it polls every 200 ms). Target: zero.

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
	"github.com/drover-org/drover/internal/spec"
)

// leaderGrace is drover's default: 2 x the default node TTL of 5 s.
const leaderGrace = 10 * time.Second

func machineLossMain(args []string) int {
	fs := flag.NewFlagSet("drover-bench machineloss", flag.ExitOnError)
	trials := fs.Int("trials", 20, "machines to kill")
	falseDown := fs.Duration("falsedown", 0, "instead: saturate the CPUs this long and count false node-down observations")
	bin := fs.String("drover", "", "drover binary (default: go build ./cmd/drover)")
	fs.Parse(args)
	if err := machineLoss(*bin, *trials, *falseDown); err != nil {
		fmt.Fprintln(os.Stderr, "drover-bench machineloss:", err)
		return 1
	}
	return 0
}

type benchAgent struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

func startBenchAgent(bin, addr, dir, name string) (*benchAgent, error) {
	cmd := exec.Command(bin, "agent", "--server", addr, "--data-dir", filepath.Join(dir, name),
		"--http-addr", "127.0.0.1:0", "--name", name, "--log-level", "error")
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	a := &benchAgent{name: name, cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(a.done) }()
	return a, nil
}

func machineLoss(bin string, trials int, falseDown time.Duration) error {
	tmp, err := os.MkdirTemp("", "drover-bench-loss-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if bin == "" {
		bin = filepath.Join(tmp, "drover")
		b := exec.Command("go", "build", "-o", bin, "./cmd/drover")
		b.Stderr = os.Stderr
		if err := b.Run(); err != nil {
			return fmt.Errorf("building drover: %w", err)
		}
	}
	devStarted := time.Now()
	dev, addr, err := startDev(bin, filepath.Join(tmp, "dev"))
	if err != nil {
		return err
	}
	defer func() { dev.Process.Signal(syscall.SIGTERM); dev.Wait() }()
	c, _ := client.New(addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()

	agents := map[string]*benchAgent{}
	defer func() {
		for _, a := range agents {
			a.cmd.Process.Kill()
			<-a.done
		}
	}()
	next := 0
	spawn := func() error {
		next++
		name := fmt.Sprintf("m%d", next)
		a, err := startBenchAgent(bin, addr, tmp, name)
		if err != nil {
			return err
		}
		agents[name] = a
		return waitNodes(ctx, c, keys(agents))
	}
	for range 3 {
		if err := spawn(); err != nil {
			return err
		}
	}
	if falseDown > 0 {
		return countFalseDown(ctx, c, falseDown)
	}

	job := sleepJob("lossbench", 4)
	job.Scoring = spec.ScoreLeastLoaded // one per node, not binpack's all on one
	if _, err := c.SubmitJob(ctx, job, 0); err != nil {
		return err
	}
	// Measure the steady state: a newly elected leader waits its grace
	// (2 x node TTL) before acting on down nodes, so a loss in the first
	// seconds after an election is handled when that grace ends.
	if wait := time.Until(devStarted.Add(leaderGrace + time.Second)); wait > 0 {
		time.Sleep(wait)
	}
	var took, detect []time.Duration
	for trial := 0; trial < trials; trial++ {
		if err := waitRunningAll(ctx, c, job.Name, 4); err != nil {
			return err
		}
		st, _, err := c.Job(ctx, job.Name, nil)
		if err != nil {
			return err
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
			return fmt.Errorf("trial %d: no instance runs on an agent node", trial)
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
				return err
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
				return fmt.Errorf("trial %d: lost instances not replaced within 2 minutes", trial)
			}
		}
		if err := spawn(); err != nil {
			return err
		}
	}
	fmt.Printf("drover-bench machineloss: %d trials, SIGKILL of an agent and its tasks, defaults (node TTL 5s), leader past its grace, %d CPUs, %s/%s\n",
		trials, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)
	fmt.Printf("kill -> replacements placed   %s\n", distS(detect))
	fmt.Printf("kill -> replacements running  %s\n", distS(took))
	return nil
}

// countFalseDown burns both CPUs for d and counts nodes seen down.
func countFalseDown(ctx context.Context, c *client.Client, d time.Duration) error {
	stop := make(chan struct{})
	burn := exec.Command("sh", "-c", fmt.Sprintf("for i in $(seq %d); do (while :; do :; done) & done; wait", 2*runtime.NumCPU()))
	burn.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := burn.Start(); err != nil {
		return err
	}
	defer func() { syscall.Kill(-burn.Process.Pid, syscall.SIGKILL); burn.Wait() }()
	polls, downs := 0, 0
	deadline := time.After(d)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-deadline:
			close(stop)
			fmt.Printf("drover-bench machineloss -falsedown: %s with %d busy loops on %d CPUs, 4 nodes, node TTL default\n",
				d, 2*runtime.NumCPU(), runtime.NumCPU())
			fmt.Printf("node-list polls %d, node seen down %d times\n", polls, downs)
			return nil
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

func distS(d []time.Duration) string {
	s := slices.Clone(d)
	slices.Sort(s)
	q := func(p float64) time.Duration { return s[min(len(s)-1, int(p*float64(len(s))))] }
	sec := func(d time.Duration) string { return fmt.Sprintf("%6.2fs", d.Seconds()) }
	return fmt.Sprintf("n=%d p50=%s p90=%s p99=%s max=%s", len(s), sec(q(0.50)), sec(q(0.90)), sec(q(0.99)), sec(s[len(s)-1]))
}
