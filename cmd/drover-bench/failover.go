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

FAILOVER_BODY
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
