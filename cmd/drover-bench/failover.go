package main

// drover-bench failover: leader loss -> scheduling again.
//
//	go run ./cmd/drover-bench failover -trials 20
//
// It starts three servers and one agent as real processes: s1 carries the
// embedded etcd and serves the API only (--api-only), s2 and s3 use s1's
// etcd and campaign; the agent talks to s1. Each trial SIGKILLs the
// leader, submits a job through s1 right after the kill, and times kill ->
// every instance of that job placed (and kill -> a new leader named). It
// then checks every job for lost (no live alloc) or duplicated (two live
// allocs) instances, and restarts the killed server.

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/spec"
)

func failoverMain(args []string) int {
	fs := flag.NewFlagSet("drover-bench failover", flag.ExitOnError)
	trials := fs.Int("trials", 20, "leader kills")
	count := fs.Int("instances", 5, "instances of the job submitted after each kill")
	ttl := fs.Duration("leader-ttl", 2*time.Second, "the servers' --leader-ttl (drover's default is 2s)")
	bin := fs.String("drover", "", "drover binary (default: go build ./cmd/drover)")
	fs.Parse(args)
	if err := failover(*bin, *trials, *count, *ttl); err != nil {
		fmt.Fprintln(os.Stderr, "drover-bench failover:", err)
		return 1
	}
	return 0
}

// benchProc is a drover process that can be killed and started again on
// the same data dir and addresses.
type benchProc struct {
	name string
	args func() []string
	cmd  *exec.Cmd
	done chan struct{}
	log  *os.File
	api  string // http://host:port
	etcd string // s1: its etcd's client URL
}

var serverLine = regexp.MustCompile(`drover server \S+: API at (http://[^,\s]+), (?:embedded )?etcd at (http://[^,\s]+)`)

func (p *benchProc) start() error {
	cmd := exec.Command(p.args()[0], p.args()[1:]...)
	out, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	p.cmd, p.done = cmd, make(chan struct{})
	ready := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			fmt.Fprintln(p.log, sc.Text())
			if m := serverLine.FindStringSubmatch(sc.Text()); m != nil {
				ready <- m
			} else if strings.HasPrefix(sc.Text(), "drover agent ") {
				ready <- nil
			}
		}
	}()
	go func() { cmd.Wait(); close(p.done) }()
	select {
	case m := <-ready:
		if m != nil {
			p.api, p.etcd = m[1], m[2]
		}
		return nil
	case <-p.done:
		return fmt.Errorf("%s exited while starting; see %s", p.name, p.log.Name())
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		return fmt.Errorf("%s did not start within 60s; see %s", p.name, p.log.Name())
	}
}

func (p *benchProc) kill() {
	if p.cmd != nil {
		p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *benchProc) stop() {
	if p.cmd == nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		p.kill()
	}
}

func failover(bin string, trials, count int, ttl time.Duration) (err error) {
	tmp, err := os.MkdirTemp("", "drover-bench-failover-")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w (process logs kept in %s)", err, tmp)
			return
		}
		os.RemoveAll(tmp)
	}()
	if bin == "" {
		bin = filepath.Join(tmp, "drover")
		b := exec.Command("go", "build", "-o", bin, "./cmd/drover")
		b.Stderr = os.Stderr
		if err := b.Run(); err != nil {
			return fmt.Errorf("building drover: %w", err)
		}
	}
	newProc := func(name string) (*benchProc, error) {
		f, err := os.Create(filepath.Join(tmp, name+".log"))
		return &benchProc{name: name, log: f}, err
	}
	hostPort := func(u, dflt string) string {
		if u == "" {
			return dflt
		}
		return strings.TrimPrefix(u, "http://")
	}
	s1, err := newProc("s1")
	if err != nil {
		return err
	}
	s1.args = func() []string {
		return []string{bin, "server", "--name", "s1", "--api-only", "--data-dir", filepath.Join(tmp, "s1"),
			"--http-addr", hostPort(s1.api, "127.0.0.1:0"), "--etcd-client-addr", hostPort(s1.etcd, "127.0.0.1:0"),
			"--etcd-peer-addr", "127.0.0.1:0", "--leader-ttl", ttl.String(), "--log-level", "warn"}
	}
	procs := []*benchProc{s1}
	defer func() {
		for i := len(procs) - 1; i >= 0; i-- {
			procs[i].stop()
		}
	}()
	if err := s1.start(); err != nil {
		return err
	}
	servers := map[string]*benchProc{}
	for _, name := range []string{"s2", "s3"} {
		p, err := newProc(name)
		if err != nil {
			return err
		}
		p.args = func() []string {
			return []string{bin, "server", "--name", name, "--etcd-endpoints", s1.etcd,
				"--http-addr", hostPort(p.api, "127.0.0.1:0"), "--leader-ttl", ttl.String(), "--log-level", "warn"}
		}
		procs = append(procs, p)
		if err := p.start(); err != nil {
			return err
		}
		servers[name] = p
	}
	ag, err := newProc("a1")
	if err != nil {
		return err
	}
	ag.args = func() []string {
		return []string{bin, "agent", "--name", "a1", "--data-dir", filepath.Join(tmp, "a1"), "--http-addr", "127.0.0.1:0",
			"--servers", s1.api + "," + servers["s2"].api + "," + servers["s3"].api, "--log-level", "warn"}
	}
	procs = append(procs, ag)
	if err := ag.start(); err != nil {
		return err
	}
	// The agent's tasks outlive it by design: stop the jobs at the end.
	api, _ := client.New(s1.api)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(trials)*time.Minute+5*time.Minute)
	defer cancel()
	defer func() {
		jobs, _, _ := api.Jobs(ctx, nil)
		for _, j := range jobs {
			api.StopJob(ctx, j.Name, true)
		}
		waitAllocsGone(ctx, api)
	}()
	if err := waitNode(ctx, api); err != nil {
		return err
	}
	if err := submitAndWait(ctx, api, sleepJob("standing", count), count); err != nil {
		return err
	}

	var toLeader, toPlaced []time.Duration
	lost, dup := 0, 0
	for i := 0; i < trials; i++ {
		leader, err := currentLeader(ctx, api, "")
		if err != nil {
			return err
		}
		victim := servers[leader]
		if victim == nil {
			return fmt.Errorf("leader is %q, not s2 or s3", leader)
		}
		job := sleepJob(fmt.Sprintf("failover%d", i), count)
		t0 := time.Now()
		victim.cmd.Process.Kill()
		sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
		_, err = api.SubmitJob(sctx, job, 0)
		scancel()
		if err != nil {
			return fmt.Errorf("trial %d: submit after the kill: %w", i, err)
		}
		<-victim.done
		placedC := make(chan time.Duration, 1)
		go func() {
			if waitPlaced(ctx, api, job.Name, count) == nil {
				placedC <- time.Since(t0)
			}
			close(placedC)
		}()
		if _, err := currentLeader(ctx, api, leader); err != nil {
			return err
		}
		toLeader = append(toLeader, time.Since(t0))
		d, ok := <-placedC
		if !ok {
			return fmt.Errorf("trial %d: job %s not placed", i, job.Name)
		}
		toPlaced = append(toPlaced, d)
		if err := waitRunningAll(ctx, api, job.Name, count); err != nil {
			return fmt.Errorf("trial %d: %w", i, err)
		}
		for _, name := range []string{"standing", job.Name} {
			l, d, err := lostDup(ctx, api, name, count)
			if err != nil {
				return err
			}
			lost, dup = lost+l, dup+d
		}
		if _, err := api.StopJob(ctx, job.Name, true); err != nil {
			return err
		}
		if err := victim.start(); err != nil {
			return err
		}
		time.Sleep(time.Second) // let it campaign before the next kill
		fmt.Fprintf(os.Stderr, "trial %d: killed %s; new leader %s, job placed %s\n", i+1, leader,
			toLeader[len(toLeader)-1].Round(time.Millisecond), d.Round(time.Millisecond))
	}
	fmt.Printf("drover-bench failover: %d trials, SIGKILL the leader of 3 servers (leader TTL %s) + 1 agent, %d CPUs, %s/%s\n",
		trials, ttl, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)
	fmt.Printf("kill->new leader named        %s\n", dist(toLeader))
	fmt.Printf("kill->%d instances placed      %s\n", count, dist(toPlaced))
	fmt.Printf("lost placements %d, duplicated placements %d (a standing job of %d and each trial's job, checked every trial)\n", lost, dup, count)
	return nil
}

func sleepJob(name string, n int) *spec.Job {
	job := &spec.Job{Name: name, Groups: []*spec.Group{{Name: "g", Count: n, Tasks: []*spec.Task{{
		Name: "t", Driver: "exec",
		Config:    spec.TaskConfig{Command: "/bin/sleep", Args: []string{"1000"}},
		Resources: spec.Resources{CPU: 10, MemoryMB: 10},
	}}}}}
	job.Canonicalize()
	return job
}

// currentLeader polls until a leader other than not is named.
func currentLeader(ctx context.Context, c *client.Client, not string) (string, error) {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		lctx, cancel := context.WithTimeout(ctx, time.Second)
		l, err := c.Leader(lctx)
		cancel()
		if err == nil && l != "" && l != not {
			return l, nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return "", errors.New("no new leader within 60s")
}

func waitPlaced(ctx context.Context, c *client.Client, job string, n int) error {
	var index int64
	for ctx.Err() == nil {
		allocs, idx, err := c.Allocs(ctx, job, "", &client.QueryOptions{Index: index, Wait: 30 * time.Second})
		if err != nil {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		index = idx
		if len(allocs) >= n {
			return nil
		}
	}
	return ctx.Err()
}

func submitAndWait(ctx context.Context, c *client.Client, job *spec.Job, n int) error {
	if _, err := c.SubmitJob(ctx, job, 0); err != nil {
		return err
	}
	return waitRunningAll(ctx, c, job.Name, n)
}

func waitRunningAll(ctx context.Context, c *client.Client, job string, n int) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		st, _, err := c.Job(ctx, job, nil)
		if err == nil {
			running := 0
			for _, a := range st.Allocations {
				if a.DesiredStatus == spec.DesiredRun && a.ClientStatusOr() == spec.ClientRunning {
					running++
				}
			}
			if running == n {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("job %s: %d instances not all running within 60s", job, n)
}

// lostDup counts the instances of a job with no live alloc (lost) and the
// live allocs beyond one per instance (duplicated).
func lostDup(ctx context.Context, c *client.Client, job string, n int) (lost, dup int, err error) {
	st, _, err := c.Job(ctx, job, nil)
	if err != nil {
		return 0, 0, err
	}
	live := map[int]int{}
	for _, a := range st.Allocations {
		if !a.Terminal() {
			live[a.Index]++
		}
	}
	for i := 0; i < n; i++ {
		switch k := live[i]; {
		case k == 0:
			lost++
		case k > 1:
			dup += k - 1
		}
	}
	return lost, dup, nil
}

func waitAllocsGone(ctx context.Context, c *client.Client) {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		allocs, _, err := c.Allocs(ctx, "", "", nil)
		if err == nil && len(allocs) == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}
