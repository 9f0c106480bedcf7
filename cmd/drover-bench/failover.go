package main

// drover-bench failover: leader loss -> scheduling again.
//
//	go run ./cmd/drover-bench failover -trials 20
//
// It starts three servers and one agent as real processes: s1 carries the
// embedded etcd and serves the API only (--api-only), s2 and s3 use s1's
// etcd and campaign; the agent may talk to any of them. Each trial streams
// single-instance batch jobs (/bin/true) through s1 at -rate per second,
// SIGKILLs the leader, and keeps streaming until shortly after a new
// leader is named. It then reads when each job was placed: the longest
// time between consecutive placements (the kill's gap in scheduling, target
// 3 s or less), kill -> the first placement after it, and jobs with no
// placement (lost) or more than one (duplicated), target 0. A standing
// service job is checked for lost and duplicated instances every trial
// too. The killed server is started again for the next trial.

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
	"slices"
	"strings"
	"sync"
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
	api  string // https://host:port
	etcd string // s1: its etcd's client URL
}

var serverLine = regexp.MustCompile(`drover server \S+: API at (https://[^,\s]+), (?:embedded )?etcd at (http://[^,\s]+)`)

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

func init() {
	register(scenario{name: "failover", about: "three servers; SIGKILL the leader during a 50 jobs/s stream: gap in scheduling, lost and duplicated placements", flags: failoverFlags})
}

// failoverGapTarget is issue 5's bound on the gap in scheduling.
const failoverGapTarget = 3 * time.Second

type failoverConfig struct {
	trials int
	// rate is jobs per second; before and after are how long the stream
	// runs before the kill and after a new leader is named.
	rate          int
	before, after time.Duration
	standing      int // instances of the standing job
	ttl           time.Duration
}

func failoverFlags(fs *flag.FlagSet, o *options) func() (*report, error) {
	trials := fs.Int("trials", 20, "leader kills (-quick: 1)")
	rate := fs.Int("rate", 50, "single-instance jobs submitted per second")
	before := fs.Duration("before", 2*time.Second, "stream this long before each kill (-quick: 500ms)")
	after := fs.Duration("after", 2*time.Second, "and this long after a new leader is named (-quick: 500ms)")
	standing := fs.Int("instances", 5, "instances of a standing service job, checked for lost and duplicated instances at every kill")
	ttl := fs.Duration("leader-ttl", 2*time.Second, "the servers' --leader-ttl (drover's default is 2s)")
	return func() (*report, error) {
		if *rate <= 0 {
			return nil, fmt.Errorf("-rate %d: want at least 1 job per second", *rate)
		}
		return failover(o.drover, failoverConfig{
			trials: sized(fs, o, "trials", *trials, 1), rate: *rate,
			before:   sized(fs, o, "before", *before, 500*time.Millisecond),
			after:    sized(fs, o, "after", *after, 500*time.Millisecond),
			standing: *standing, ttl: *ttl,
		})
	}
}

func failover(bin string, cfg failoverConfig) (rep *report, err error) {
	if err := need("/bin/sleep", "/bin/true"); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "drover-bench-failover-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w (process logs kept in %s)", err, tmp)
			return
		}
		os.RemoveAll(tmp)
	}()
	if bin, err = droverBinary(bin, tmp); err != nil {
		return nil, err
	}
	newProc := func(name string) (*benchProc, error) {
		f, err := os.Create(filepath.Join(tmp, name+".log"))
		return &benchProc{name: name, log: f}, err
	}
	hostPort := func(u, dflt string) string {
		if u == "" {
			return dflt
		}
		_, hp, _ := strings.Cut(u, "://")
		return hp
	}
	s1, err := newProc("s1")
	if err != nil {
		return nil, err
	}
	ttl := cfg.ttl.String()
	// s1 makes the cluster's CA and certificates here; the others use them.
	tlsDir := filepath.Join(tmp, "tls")
	s1.args = func() []string {
		return []string{bin, "server", "--name", "s1", "--api-only", "--data-dir", filepath.Join(tmp, "s1"), "--tls-dir", tlsDir,
			"--http-addr", hostPort(s1.api, "127.0.0.1:0"), "--etcd-client-addr", hostPort(s1.etcd, "127.0.0.1:0"),
			"--etcd-peer-addr", "127.0.0.1:0", "--leader-ttl", ttl, "--log-level", "warn"}
	}
	procs := []*benchProc{s1}
	defer func() {
		for i := len(procs) - 1; i >= 0; i-- {
			procs[i].stop()
		}
	}()
	if err := s1.start(); err != nil {
		return nil, err
	}
	servers := map[string]*benchProc{}
	for _, name := range []string{"s2", "s3"} {
		p, err := newProc(name)
		if err != nil {
			return nil, err
		}
		p.args = func() []string {
			return []string{bin, "server", "--name", name, "--etcd-endpoints", s1.etcd, "--tls-dir", tlsDir,
				"--http-addr", hostPort(p.api, "127.0.0.1:0"), "--leader-ttl", ttl, "--log-level", "warn"}
		}
		procs = append(procs, p)
		if err := p.start(); err != nil {
			return nil, err
		}
		servers[name] = p
	}
	ag, err := newProc("a1")
	if err != nil {
		return nil, err
	}
	ag.args = func() []string {
		return []string{bin, "agent", "--name", "a1", "--data-dir", filepath.Join(tmp, "a1"), "--tls-dir", tlsDir, "--http-addr", "127.0.0.1:0",
			"--servers", s1.api + "," + servers["s2"].api + "," + servers["s3"].api, "--log-level", "warn"}
	}
	procs = append(procs, ag)
	if err := ag.start(); err != nil {
		return nil, err
	}
	// Everything goes through s1, which serves the API but never leads:
	// the kills never take the harness's server away.
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(cfg.trials)*time.Minute+5*time.Minute)
	defer cancel()
	api, err := clusterClient(ctx, tlsDir, s1.api)
	if err != nil {
		return nil, err
	}
	defer stopAllJobs(ctx, api) // the agent leaves its tasks running when it stops
	if err := waitNode(ctx, api); err != nil {
		return nil, err
	}
	if err := submitAndWait(ctx, api, sleepJob("standing", cfg.standing), cfg.standing); err != nil {
		return nil, err
	}

	var toLeader, toFirst, gaps []time.Duration
	submitted, submitErrs, lost, dup := 0, 0, 0, 0
	for i := 0; i < cfg.trials; i++ {
		leader, err := currentLeader(ctx, api, "")
		if err != nil {
			return nil, err
		}
		victim := servers[leader]
		if victim == nil {
			return nil, fmt.Errorf("leader is %q, not s2 or s3", leader)
		}
		st := startStream(ctx, api, fmt.Sprintf("stream%d-", i), cfg.rate)
		time.Sleep(cfg.before)
		killed := time.Now()
		victim.cmd.Process.Kill()
		<-victim.done
		if _, err := currentLeader(ctx, api, leader); err != nil {
			st.end()
			return nil, err
		}
		toLeader = append(toLeader, time.Since(killed))
		time.Sleep(cfg.after)
		names, errs := st.end()
		submitted += len(names)
		submitErrs += len(errs)
		for _, err := range errs {
			fmt.Fprintf(os.Stderr, "trial %d: submit: %v\n", i+1, err)
		}

		t, err := streamPlacements(ctx, api, names, killed)
		if err != nil {
			return nil, fmt.Errorf("trial %d: %w", i+1, err)
		}
		lost, dup = lost+t.lost, dup+t.dup
		if t.firstAfter.IsZero() {
			return nil, fmt.Errorf("trial %d: no placement after the kill (%d jobs lost)", i+1, t.lost)
		}
		toFirst = append(toFirst, t.firstAfter.Sub(killed))
		gaps = append(gaps, t.longestGap)
		l, d, err := lostDup(ctx, api, "standing", cfg.standing)
		if err != nil {
			return nil, err
		}
		lost, dup = lost+l, dup+d
		purge(ctx, api, names)
		fmt.Fprintf(os.Stderr, "trial %d: killed %s; new leader after %s, first placement after %s, longest gap %s, %d jobs\n", i+1, leader,
			toLeader[len(toLeader)-1].Round(time.Millisecond), toFirst[len(toFirst)-1].Round(time.Millisecond), t.longestGap.Round(time.Millisecond), len(names))
		if i < cfg.trials-1 {
			if err := victim.start(); err != nil {
				return nil, err
			}
			time.Sleep(time.Second) // let it campaign before the next kill
		}
	}
	rep = newReport("failover")
	rep.linef("drover-bench failover: %d trials, SIGKILL the leader of 3 servers (leader TTL %s) + 1 agent during a stream of %d jobs/s (%s before the kill, %s after a new leader), %d CPUs, %s/%s",
		cfg.trials, cfg.ttl, cfg.rate, cfg.before, cfg.after, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)
	rep.linef("kill -> new leader named           %s", dist(toLeader))
	rep.linef("kill -> first placement            %s", dist(toFirst))
	rep.linef("longest gap between placements     %s (target <= %s: %s)", dist(gaps), failoverGapTarget, verdict(slices.Max(gaps) <= failoverGapTarget))
	rep.linef("jobs submitted %d (%d submits failed); lost placements %d, duplicated placements %d (target 0: %s)",
		submitted, submitErrs, lost, dup, verdict(lost == 0 && dup == 0))
	rep.set("trials", cfg.trials)
	rep.set("jobs_per_second", cfg.rate)
	rep.set("jobs_submitted", submitted)
	rep.set("submit_errors", submitErrs)
	rep.set("lost_placements", lost)
	rep.set("duplicated_placements", dup)
	rep.setDist("kill_to_leader", toLeader)
	rep.setDist("kill_to_first_placement", toFirst)
	rep.setDist("gap", gaps)
	return rep, nil
}

// stream submits single-instance batch jobs at a fixed rate, each in its
// own goroutine so that a slow submit does not lower the rate.
type stream struct {
	stop  chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	names []string // accepted
	errs  []error
}

func startStream(ctx context.Context, c *client.Client, prefix string, rate int) *stream {
	s := &stream{stop: make(chan struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		tick := time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-s.stop:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				job := trueJob(fmt.Sprintf("%s%d", prefix, i))
				sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				_, err := c.SubmitJob(sctx, job, 0)
				cancel()
				s.mu.Lock()
				defer s.mu.Unlock()
				if err != nil {
					s.errs = append(s.errs, fmt.Errorf("job %s: %w", job.Name, err))
				} else {
					s.names = append(s.names, job.Name)
				}
			}()
		}
	}()
	return s
}

// end stops the stream and returns the jobs it submitted and the submits
// that failed.
func (s *stream) end() ([]string, []error) {
	close(s.stop)
	s.wg.Wait()
	return s.names, s.errs
}

// trueJob is a batch job of one instance of /bin/true: it places like any
// job, and its task is gone at once, so a stream of them does not pile up
// processes on the agent.
func trueJob(name string) *spec.Job {
	job := &spec.Job{Name: name, Type: spec.JobBatch, Groups: []*spec.Group{{Name: "g", Count: 1, Tasks: []*spec.Task{{
		Name: "t", Driver: "exec",
		Config:    spec.TaskConfig{Command: "/bin/true"},
		Resources: spec.Resources{CPU: 1, MemoryMB: 1},
	}}}}}
	job.Canonicalize()
	return job
}

// trialPlacements is what became of one trial's stream.
type trialPlacements struct {
	lost, dup int // jobs without an alloc; allocs beyond one per job
	// firstAfter is the first placement made after the kill; longestGap
	// the longest time between consecutive placements of the trial.
	firstAfter time.Time
	longestGap time.Duration
}

// streamPlacements waits (up to 30 s) until every job has an alloc, then
// reads when each was placed (the leader stamps CreateTime when it plans;
// all the processes share this machine's clock).
func streamPlacements(ctx context.Context, c *client.Client, jobs []string, killed time.Time) (trialPlacements, error) {
	var t trialPlacements
	want := map[string]bool{}
	for _, j := range jobs {
		want[j] = true
	}
	var byJob map[string][]*spec.Alloc
	deadline := time.Now().Add(30 * time.Second)
	for {
		allocs, _, err := c.Allocs(ctx, "", "", nil)
		if err != nil {
			return t, err
		}
		byJob = map[string][]*spec.Alloc{}
		for _, a := range allocs {
			if want[a.Job] {
				byJob[a.Job] = append(byJob[a.Job], a)
			}
		}
		if len(byJob) == len(want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	var times []time.Time
	for _, j := range jobs {
		as := byJob[j]
		if len(as) == 0 {
			t.lost++
			fmt.Fprintf(os.Stderr, "job %s: no placement within 30s\n", j)
		}
		t.dup += max(0, len(as)-1)
		for _, a := range as {
			times = append(times, a.CreateTime)
		}
	}
	slices.SortFunc(times, time.Time.Compare)
	for i, tm := range times {
		if i > 0 {
			t.longestGap = max(t.longestGap, tm.Sub(times[i-1]))
		}
		if t.firstAfter.IsZero() && tm.After(killed) {
			t.firstAfter = tm
		}
	}
	return t, nil
}

// purge stops jobs, waits until the agent has stopped their tasks, and
// purges them, a few at a time: a purge alone leaves no alloc to wait
// for, and the agent, stopped at the end of the run, would leave the
// tasks it had not stopped yet running (as agents do).
func purge(ctx context.Context, c *client.Client, jobs []string) {
	each := func(f func(string)) {
		var wg sync.WaitGroup
		next := make(chan string)
		for range 4 {
			wg.Go(func() {
				for j := range next {
					f(j)
				}
			})
		}
		for _, j := range jobs {
			next <- j
		}
		close(next)
		wg.Wait()
	}
	each(func(j string) { c.StopJob(ctx, j, false) })
	waitTasksStopped(ctx, c, jobs)
	each(func(j string) { c.StopJob(ctx, j, true) })
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
