package clustertest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/testbin"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/spec"
)

// droverBin is the binary under test, built once by TestMain.
var droverBin string

func TestMain(m *testing.M) { testbin.Main(m, &droverBin) }

var sourcesOnce sync.Once

const leaderTTL = 2 * time.Second

// proc is one drover process (server or agent), restartable with the
// same data dir and addresses.
type proc struct {
	t    *testing.T
	c    *cluster
	name string
	args func() []string // the command line; reads the addresses learned so far
	cmd  *exec.Cmd
	out  *syncBuffer // every run's stderr, appended
	done chan error

	httpAddr string // host:port once known
	api      string // https://host:port
	etcd     string // s1: http://host:port of its etcd
}

var (
	serverLine = regexp.MustCompile(`drover server \S+: API at (https://[^,\s]+), (?:embedded )?etcd at (http://[^,\s]+)`)
	agentLine  = regexp.MustCompile(`drover agent \S+ \(node (\S+)\): servers`)
)

// start runs the process and waits (60 s at most) for its announcement.
func (p *proc) start() {
	p.t.Helper()
	sourcesOnce.Do(func() { touchSources("../..") })
	cmd := exec.Command(droverBin, p.args()...)
	pr, pw, err := os.Pipe()
	if err != nil {
		p.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	pw.Close()
	p.cmd = cmd
	p.done = make(chan error, 1)
	p.out.Write([]byte(fmt.Sprintf("--- %s started (pid %d): %s\n", p.name, cmd.Process.Pid, strings.Join(cmd.Args, " "))))
	ready := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.out.Write([]byte(line + "\n"))
			if m := serverLine.FindStringSubmatch(line); m != nil {
				ready <- m
			} else if m := agentLine.FindStringSubmatch(line); m != nil {
				ready <- m
			}
		}
	}()
	go func() { p.done <- cmd.Wait() }()
	select {
	case m := <-ready:
		if len(m) == 3 {
			p.api, p.etcd = m[1], m[2]
			p.httpAddr = strings.TrimPrefix(m[1], "https://")
		}
	case err := <-p.done:
		p.done <- err
		p.t.Fatalf("%s exited early: %v\n%s", p.name, err, p.out)
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		p.t.Fatalf("%s did not start within 60s\n%s", p.name, p.out)
	}
}

func (p *proc) running() bool {
	if p.cmd == nil {
		return false
	}
	select {
	case err := <-p.done:
		p.done <- err
		return false
	default:
		return true
	}
}

func (p *proc) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("%s %s: %v", sig, p.name, err)
	}
	p.t.Logf("%s: %s (pid %d)", sig, p.name, p.cmd.Process.Pid)
}

// wait waits for the process to exit, SIGKILLing it after timeout.
func (p *proc) wait(timeout time.Duration) error {
	select {
	case err := <-p.done:
		p.done <- err
		return err
	case <-time.After(timeout):
		p.cmd.Process.Signal(syscall.SIGCONT)
		p.cmd.Process.Kill()
		err := <-p.done
		p.done <- err
		return fmt.Errorf("%s did not exit within %s; killed", p.name, timeout)
	}
}

func (p *proc) client() *client.Client { return p.c.client(p.api) }

// cluster is s1 (embedded etcd, API only), s2, s3 and some agents.
type cluster struct {
	t       *testing.T
	dir     string
	tlsDir  string  // the cluster's CA and certificates, made by s1; every process uses it
	token   string  // the management token's secret, bootstrapped once a leader is elected
	servers []*proc // s1, s2, s3
	agents  []*proc
	nodeIDs map[string]string // agent name -> node ID
	s1Peer  string            // s1's embedded etcd's peer address
}

// freeAddr is a free 127.0.0.1:port.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func addrOr(a string) string {
	if a == "" {
		return "127.0.0.1:0"
	}
	return a
}

// startCluster starts s1, s2, s3 and n agents and waits until a leader is
// elected and every agent's node is registered.
func startCluster(t *testing.T, agents int) *cluster {
	t.Helper()
	c := &cluster{t: t, dir: t.TempDir(), nodeIDs: map[string]string{}}
	c.tlsDir = filepath.Join(c.dir, "tls")
	t.Cleanup(c.cleanup)
	ttl := leaderTTL.String()
	s1 := &proc{t: t, c: c, name: "s1", out: &syncBuffer{}}
	c.s1Peer = freeAddr(t) // fixed: a restore gives the member its peer URL
	s1.args = func() []string {
		etcdAddr := "127.0.0.1:0"
		if s1.etcd != "" {
			etcdAddr = strings.TrimPrefix(s1.etcd, "http://") // same endpoint across restarts
		}
		return []string{"server", "--name", "s1", "--api-only", "--data-dir", filepath.Join(c.dir, "s1"),
			"--http-addr", addrOr(s1.httpAddr), "--etcd-client-addr", etcdAddr, "--etcd-peer-addr", c.s1Peer,
			"--leader-ttl", ttl, "--tls-dir", c.tlsDir}
	}
	s1.start()
	c.servers = append(c.servers, s1)
	for _, name := range []string{"s2", "s3"} {
		p := &proc{t: t, c: c, name: name, out: &syncBuffer{}}
		p.args = func() []string {
			return []string{"server", "--name", p.name, "--etcd-endpoints", s1.etcd,
				"--http-addr", addrOr(p.httpAddr), "--leader-ttl", ttl, "--tls-dir", c.tlsDir}
		}
		p.start()
		c.servers = append(c.servers, p)
	}
	c.waitLeader(nil, 20*time.Second)
	c.bootstrap()
	for i := 0; i < agents; i++ {
		c.startAgent(fmt.Sprintf("a%d", i+1), (i+1)%len(c.servers))
	}
	c.waitNodes(30 * time.Second)
	return c
}

// startAgent starts an agent whose server list begins at servers[first].
func (c *cluster) startAgent(name string, first int) *proc {
	c.t.Helper()
	return c.startAgentWith(name, first)
}

// startAgentWith starts an agent with extra flags, such as --meta k=v.
func (c *cluster) startAgentWith(name string, first int, extra ...string) *proc {
	c.t.Helper()
	var addrs []string
	for k := range c.servers {
		addrs = append(addrs, c.servers[(first+k)%len(c.servers)].api)
	}
	p := &proc{t: c.t, c: c, name: name, out: &syncBuffer{}}
	p.args = func() []string {
		return append([]string{"agent", "--name", name, "--data-dir", filepath.Join(c.dir, name),
			"--http-addr", "127.0.0.1:0", "--servers", strings.Join(addrs, ","), "--tls-dir", c.tlsDir}, extra...)
	}
	p.start()
	if m := agentLine.FindStringSubmatch(p.out.String()); m != nil {
		c.nodeIDs[name] = m[1]
	}
	c.agents = append(c.agents, p)
	return p
}

func (c *cluster) server(name string) *proc {
	for _, p := range c.servers {
		if p.name == name {
			return p
		}
	}
	c.t.Fatalf("no server %q", name)
	return nil
}

// live returns the servers whose process runs.
func (c *cluster) live() []*proc {
	var out []*proc
	for _, p := range c.servers {
		if p.running() {
			out = append(out, p)
		}
	}
	return out
}

// client returns a client of addrs (failing over between them) that
// speaks mutual TLS with the cluster's CLI certificate and sends the
// management token (once bootstrapped).
func (c *cluster) client(addrs ...string) *client.Client {
	cl, err := client.Config{Addresses: addrs, TLSDir: c.tlsDir, Token: c.token}.Client()
	if err != nil {
		c.t.Fatal(err)
	}
	return cl
}

// api returns a client failing over between the running servers.
func (c *cluster) api() *client.Client {
	var addrs []string
	for _, p := range c.live() {
		addrs = append(addrs, p.api)
	}
	return c.client(addrs...)
}

// bootstrap makes the cluster's management token, which every later
// request through client carries.
func (c *cluster) bootstrap() {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tok, err := c.api().ACLBootstrap(ctx)
	if err != nil {
		c.t.Fatalf("ACL bootstrap: %v", err)
	}
	c.token = tok.SecretID
}

// leaderSeen asks every running server for the leader; it returns the name
// when all that answer agree on one that is not excluded.
func (c *cluster) leaderSeen(exclude *proc) string {
	seen := ""
	for _, p := range c.live() {
		if p == exclude {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		l, err := p.client().Leader(ctx)
		cancel()
		if err != nil || l == "" || (exclude != nil && l == exclude.name) || (seen != "" && l != seen) {
			return ""
		}
		seen = l
	}
	return seen
}

// waitLeader waits until the running servers other than exclude agree on a
// leader other than exclude, and returns it with the time it took.
func (c *cluster) waitLeader(exclude *proc, timeout time.Duration) (*proc, time.Duration) {
	c.t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	for time.Now().Before(deadline) {
		if l := c.leaderSeen(exclude); l != "" {
			return c.server(l), time.Since(start)
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatalf("no leader (other than %v) within %s", exclude, timeout)
	return nil, 0
}

// waitNodes waits until every agent's node is registered.
func (c *cluster) waitNodes(timeout time.Duration) {
	c.t.Helper()
	waitFor(c.t, timeout, "every agent registered", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		nodes, _, err := c.api().Nodes(ctx, nil)
		if err != nil {
			return false
		}
		// Ready: registered to the end (the liveness key is written
		// last), not only recorded.
		have := map[string]bool{}
		for _, n := range nodes {
			have[n.ID] = n.Status == spec.NodeReady
		}
		for _, id := range c.nodeIDs {
			if !have[id] {
				return false
			}
		}
		return true
	})
}

// sleepJob is a service of count /bin/sleep instances.
func sleepJob(name string, count int) *spec.Job {
	job := &spec.Job{Name: name, Groups: []*spec.Group{{Name: "g", Count: count, Tasks: []*spec.Task{{
		Name: "t", Driver: "exec",
		Config:    spec.TaskConfig{Command: "/bin/sh", Args: []string{"-c", "exec sleep 1000"}},
		Resources: spec.Resources{CPU: 10, MemoryMB: 10},
	}}}}}
	job.Canonicalize()
	return job
}

// submit applies a job through the running servers (retrying while a
// server answers with an error, e.g. during a failover).
func (c *cluster) submit(job *spec.Job) {
	c.t.Helper()
	var last error
	waitFor(c.t, 30*time.Second, "job "+job.Name+" submitted", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, last = c.api().SubmitJob(ctx, job, 0)
		return last == nil
	})
}

// jobStatus reads a job through the running servers.
func (c *cluster) jobStatus(name string) (*spec.JobStatus, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, _, err := c.api().Job(ctx, name, nil)
	return st, err
}

// waitRunning waits until every instance of the job runs, and returns its
// status.
func (c *cluster) waitRunning(name string, count int, timeout time.Duration) *spec.JobStatus {
	c.t.Helper()
	var st *spec.JobStatus
	waitFor(c.t, timeout, fmt.Sprintf("job %s: %d instances running", name, count), func() bool {
		s, err := c.jobStatus(name)
		if err != nil {
			return false
		}
		st = s
		return len(runningAllocs(s)) == count && len(liveAllocs(s)) == count
	})
	return st
}

// liveAllocs are the allocs not known to be done: a copy may run.
func liveAllocs(st *spec.JobStatus) []*spec.Alloc {
	var out []*spec.Alloc
	for _, a := range st.Allocations {
		if !a.Terminal() {
			out = append(out, a)
		}
	}
	return out
}

func runningAllocs(st *spec.JobStatus) []*spec.Alloc {
	var out []*spec.Alloc
	for _, a := range st.Allocations {
		if a.DesiredStatus == spec.DesiredRun && a.ClientStatusOr() == spec.ClientRunning {
			out = append(out, a)
		}
	}
	return out
}

// checkExactlyOnce asserts that every (group, index) of the job has exactly
// one live alloc, and that the job's task processes are exactly count.
func (c *cluster) checkExactlyOnce(name string, count int) {
	c.t.Helper()
	st, err := c.jobStatus(name)
	if err != nil {
		c.t.Fatalf("status of %s: %v", name, err)
	}
	per := map[string][]string{}
	for _, a := range liveAllocs(st) {
		k := fmt.Sprintf("%s[%d]", a.Group, a.Index)
		per[k] = append(per[k], fmt.Sprintf("%s on %s (%s/%s)", short(a.ID), a.NodeName, a.DesiredStatus, a.ClientStatusOr()))
	}
	for k, v := range per {
		if len(v) > 1 {
			c.t.Errorf("job %s: %s has %d live allocs (duplicate placement): %v", name, k, len(v), v)
		}
	}
	for i := 0; i < count; i++ {
		if k := fmt.Sprintf("g[%d]", i); len(per[k]) == 0 {
			c.t.Errorf("job %s: %s has no live alloc (lost placement)", name, k)
		}
	}
	if pids := c.taskProcs(name); len(pids) != count {
		c.t.Errorf("job %s: %d task processes run, want %d: %v", name, len(pids), count, pids)
	}
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil && !zombie(pid) }

// cleanup kills every process the cluster started, and the tasks its
// agents started (they outlive their agent by design). On failure it logs
// each process's output.
func (c *cluster) cleanup() {
	for _, p := range append(append([]*proc(nil), c.agents...), c.servers...) {
		if p.running() {
			p.cmd.Process.Signal(syscall.SIGCONT)
			p.cmd.Process.Kill()
			p.wait(10 * time.Second)
		}
		if c.t.Failed() {
			c.t.Logf("output of %s:\n%s", p.name, tail(p.out.String(), 80))
		}
	}
	for _, pid := range c.taskProcs("") {
		syscall.Kill(-pid, syscall.SIGKILL)
	}
}

func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// Shared with the other end-to-end packages (internal/testbin).
type syncBuffer = testbin.SyncBuffer

var (
	waitFor      = testbin.WaitFor
	zombie       = testbin.Zombie
	touchSources = testbin.TouchSources
	tail         = testbin.Tail
)

// taskProcs returns the PIDs of this cluster's task processes of job, or
// of every job when job is "".
func (c *cluster) taskProcs(job string) []int { return testbin.TaskProcs(job, c.dir+"/") }
