package main

// The agents scenario: one real server in this process, speaking mutual
// TLS as `drover server` does by default (a CA and certificates made by
// internal/pki, the listener and limits of httpapi.Serve with no flags),
// and K simulated agents in a child process (this binary run again as
// `drover-bench agents-child`). Each simulated agent is a real
// client.Client with the agent certificate, doing what an agent does: it
// registers, heartbeats at the interval the server gives, keeps a
// blocking query for its assignments open, and reports the instance the
// server places on it running. Only the agent around the client is
// simulated (no driver, no data directory, no fingerprint), which keeps
// 10,000 of them affordable on one machine.
//
// The agents run in their own process so that the server's memory is the
// server's: this process's heap and stacks (runtime.MemStats, after a GC)
// hold the server, its embedded etcd and nothing of the agents. Its
// connections are counted on the agents' side: the child's established
// TCP connections to the server's port, from /proc/net/tcp and the
// child's socket descriptors.

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/httpapi"
	"github.com/drover-org/drover/internal/pki"
	"github.com/drover-org/drover/internal/registry"
	"github.com/drover-org/drover/internal/server"
	"github.com/drover-org/drover/internal/spec"
)

func init() {
	register(scenario{
		name:  "agents",
		about: "K simulated agents over mutual TLS to one server: connections and server memory per agent, heartbeat latency",
		flags: agentsFlags,
	})
}

// The targets for 10,000 agents on one server.
const (
	agentsConnsTarget     = 1.0
	agentsBytesTarget     = 20 << 10
	agentsHeartbeatTarget = 100 * time.Millisecond
)

// agentsChildCmd is the hidden subcommand the child process runs.
const agentsChildCmd = "agents-child"

func agentsFlags(fs *flag.FlagSet, o *options) func() (*report, error) {
	n := fs.Int("agents", 10000, fmt.Sprintf("simulated agents (-quick: %d unless given)", quickAgents))
	d := fs.Duration("duration", 30*time.Second, "how long the agents are measured once their instances run (-quick: 3s unless given)")
	placeProfile := fs.String("placeprofile", "", "write a CPU profile of the server's process while the instances are placed and reported running, alone, to this file (and heap profiles and a runtime trace beside it: FILE.heap0, FILE.heap1, FILE.trace)")
	return func() (*report, error) {
		return agentsScenario(sized(fs, o, "agents", *n, quickAgents), sized(fs, o, "duration", *d, 3*time.Second), o.memProfile, *placeProfile)
	}
}

// agentsServer is the server side: etcd, registry, server and its TLS API.
type agentsServer struct {
	dir, tlsDir string
	emb         *registry.Embedded
	reg         *registry.Registry
	hs          *httpapi.Server
	url         string
	port        int
	client      *client.Client // the operator's
	stop        context.CancelFunc
	done        chan struct{}
}

func startAgentsServer(ctx context.Context) (_ *agentsServer, err error) {
	s := &agentsServer{done: make(chan struct{})}
	if s.dir, err = os.MkdirTemp("", "drover-bench-agents-"); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s.tlsDir = filepath.Join(s.dir, "tls")
	if _, err := pki.Init(s.tlsDir, pki.InitOptions{}); err != nil {
		return nil, err
	}
	s.emb, err = registry.StartEmbedded(ctx, registry.EmbeddedConfig{
		DataDir: filepath.Join(s.dir, "etcd"), ClientAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0", Logger: log,
	})
	if err != nil {
		return nil, err
	}
	if s.reg, err = registry.Open(ctx, s.emb.Endpoints(), log); err != nil {
		return nil, err
	}
	srv := server.New(server.Config{Registry: s.reg, ID: "bench", Logger: log})
	serve, err := pki.ServerConfig(pki.DirFiles(s.tlsDir, pki.RoleServer))
	if err != nil {
		return nil, err
	}
	serve.ClientAuth = tls.VerifyClientCertIfGiven // as drover server serves
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.port = ln.Addr().(*net.TCPAddr).Port
	s.url = "https://" + ln.Addr().String()
	// Default limits: what `drover server` serves with no flags.
	s.hs = httpapi.Serve(ln, srv.Handler(nil), httpapi.Limits{TLS: serve, LinkContext: srv.LinkContext}, log)
	cli, err := pki.ClientConfig(pki.DirFiles(s.tlsDir, pki.RoleCLI), pki.ServerName)
	if err != nil {
		return nil, err
	}
	if s.client, err = client.NewWithOptions([]string{s.url}, client.Options{TLS: cli}); err != nil {
		return nil, err
	}
	srvCtx, stop := context.WithCancel(context.Background())
	s.stop = stop
	go func() { srv.Run(srvCtx); close(s.done) }()
	err = waitUntil(ctx, 30*time.Second, "server to be elected leader", func() (bool, string) {
		id, err := s.client.Leader(ctx)
		return err == nil && id != "", fmt.Sprintf("leader %q, last error %v", id, err)
	})
	return s, err
}

func (s *agentsServer) close() {
	if s.hs != nil {
		s.hs.Close()
	}
	if s.stop != nil {
		s.stop()
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			fmt.Fprintln(os.Stderr, "drover-bench: server did not stop within 10s; carrying on")
		}
	}
	if s.reg != nil {
		s.reg.Close()
	}
	if s.emb != nil {
		if err := s.emb.Close(); err != nil {
			// Its files stay: removing them under an etcd still
			// stopping makes it fail, and exit the process.
			fmt.Fprintf(os.Stderr, "drover-bench: %v; leaving %s\n", err, s.dir)
			return
		}
	}
	os.RemoveAll(s.dir)
}

// serverMemory is this process's heap and goroutine stacks in use after
// collections: the server's memory, the agents being elsewhere. Three, as
// a server running for a while has had: sync.Pool's idle buffers go at
// the second, and the stacks that TLS handshakes grew shrink by half at
// each. live leaves out the free space inside the heap's spans.
func serverMemory() (inUse, live, stacks int64) {
	for range 3 {
		runtime.GC()
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse + m.StackInuse), int64(m.HeapAlloc + m.StackInuse), int64(m.StackInuse)
}

// agentsChildResult is what the child says, one JSON object per line:
// how many agents are connected (registered, their assignment query
// waiting) and how many report their instance running; its last line
// (Done) has the heartbeats it timed.
type agentsChildResult struct {
	Connected       int     `json:"connected"`
	Running         int     `json:"running"`
	Done            bool    `json:"done,omitempty"`
	Heartbeats      int     `json:"heartbeats,omitempty"`
	HeartbeatErrors int     `json:"heartbeat_errors,omitempty"`
	Reregistrations int64   `json:"reregistrations,omitempty"`
	P50ms           float64 `json:"p50_ms,omitempty"`
	P99ms           float64 `json:"p99_ms,omitempty"`
	MaxMs           float64 `json:"max_ms,omitempty"`
	// Phases: the same figures for the heartbeats sent in each phase the
	// parent named (idle, placing, steady), in its order.
	Phases []agentsPhase `json:"phases,omitempty"`
}

// agentsPhase is what the heartbeats sent during one phase took.
type agentsPhase struct {
	Name  string  `json:"name"`
	N     int     `json:"n"`
	P50ms float64 `json:"p50_ms"`
	P99ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
}

func agentsScenario(n int, d time.Duration, memProfile, placeProfile string) (*report, error) {
	if err := need("/proc/net/tcp"); err != nil {
		return nil, err
	}
	ctx := context.Background()
	s, err := startAgentsServer(ctx)
	if err != nil {
		return nil, err
	}
	defer s.close()
	mem0, live0, stack0 := serverMemory()
	g0 := runtime.NumGoroutine()

	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	child := exec.Command(self, agentsChildCmd, "-url", s.url, "-tls-dir", s.tlsDir, "-agents", strconv.Itoa(n))
	child.Stderr = os.Stderr
	stdin, err := child.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := child.Start(); err != nil {
		return nil, err
	}
	defer func() {
		stdin.Close()
		child.Process.Kill()
		child.Wait()
	}()
	st := &agentsStatus{done: make(chan agentsChildResult, 1), ended: make(chan struct{})}
	go st.read(stdout)

	t0 := time.Now()
	conn := st.waitFor("agents connected", agentsConnectTimeout(n), func(r agentsChildResult) (int, int) { return r.Connected, n })
	connectTime := time.Since(t0)
	io.WriteString(stdin, "measure idle\n") // heartbeats are timed from now
	// Idle: a few heartbeats each, nothing placed.
	time.Sleep(agentsSettle)
	mem1, live1, stack1 := serverMemory()
	if err := writeHeapProfile(memProfile); err != nil {
		return nil, err
	}
	g1 := runtime.NumGoroutine()

	rep := newReport("agents")
	rep.set("agents", n)
	rep.set("connected", conn.Connected)
	perAgent := func(v float64) float64 { return v / float64(max(conn.Connected, 1)) }
	bpa := perAgent(float64(mem1 - mem0))
	rep.set("server_bytes_per_agent", bpa)
	rep.linef("agents: %d simulated agents over mutual TLS to one server (agents in a child process)", n)
	rep.linef("  connected:             %d in %s (registered, assignment query waiting)", conn.Connected, connectTime.Round(time.Millisecond))
	rep.linef("  server memory/agent:   %.1f KB heap and stacks in use when idle (%.1f -> %.1f MB; live objects and stacks %.1f KB, of which stacks %.1f KB), %.1f goroutines/agent  [target <= %d KB: %s]",
		bpa/1024, float64(mem0)/(1<<20), float64(mem1)/(1<<20), perAgent(float64(live1-live0))/1024, perAgent(float64(stack1-stack0))/1024, perAgent(float64(g1-g0)), agentsBytesTarget>>10, verdict(bpa <= agentsBytesTarget))

	// Then work: one instance per agent, each reported running, and the
	// heartbeats timed through it and for d after.
	if conn.Connected > 0 {
		job := &spec.Job{Name: "agents-bench", Groups: []*spec.Group{{Name: "g", Count: conn.Connected, Tasks: []*spec.Task{{
			Name: "t", Driver: "exec", Resources: agentsInstance,
			Config: spec.TaskConfig{Command: "/bin/sleep", Args: []string{"infinity"}},
		}}}}}
		job.Canonicalize()
		io.WriteString(stdin, "measure placing\n")
		stopProfile, err := startCPUProfile(placeProfile)
		if err != nil {
			return nil, err
		}
		srv0, _ := cpuTime(os.Getpid())
		kid0, _ := cpuTime(child.Process.Pid)
		if _, err := s.client.SubmitJob(ctx, job, 0); err != nil {
			return nil, fmt.Errorf("submitting the job: %w", err)
		}
		t1 := time.Now()
		run := st.waitFor("instances running", agentsRunTimeout(n), func(r agentsChildResult) (int, int) { return r.Running, conn.Connected })
		span := time.Since(t1)
		stopProfile()
		srv1, _ := cpuTime(os.Getpid())
		kid1, _ := cpuTime(child.Process.Pid)
		rep.linef("  instances running:     %d of %d in %s (one per agent, each reported by its agent); CPU meanwhile: server %.2f cores, agents' process %.2f",
			run.Running, conn.Connected, span.Round(time.Millisecond), (srv1-srv0).Seconds()/span.Seconds(), (kid1-kid0).Seconds()/span.Seconds())
		io.WriteString(stdin, "measure steady\n")
		time.Sleep(d)
	}
	// Counted after heartbeats, queries and reports have all run.
	conns, err := establishedTo(child.Process.Pid, s.port)
	if err != nil {
		return nil, err
	}
	cpa := perAgent(float64(conns))
	rep.set("conns_per_agent", cpa)
	rep.linef("  connections per agent: %.2f (%d established to the server)  [target %.0f: %s]", cpa, conns, agentsConnsTarget, verdict(cpa <= agentsConnsTarget && conns >= conn.Connected))
	stdin.Close() // the child stops and says what it timed
	var end agentsChildResult
	select {
	case end = <-st.done:
	case <-st.ended:
		// read closes ended right after it hands over the result: when
		// both are ready, select may pick either.
		select {
		case end = <-st.done:
		default:
			return nil, errors.New("the agents' process ended without saying what its heartbeats took")
		}
	case <-time.After(time.Minute):
		return nil, errors.New("the agents' process did not say what its heartbeats took within a minute")
	}
	hb := time.Duration(end.P99ms * float64(time.Millisecond))
	rep.set("heartbeat_p99_ms", hb)
	rep.linef("  heartbeats:            n=%d errors=%d p50=%.2fms p99=%.2fms max=%.2fms, registered again %d times (node TTL ran out)  [target p99 <= %s: %s]",
		end.Heartbeats, end.HeartbeatErrors, end.P50ms, end.P99ms, end.MaxMs, end.Reregistrations, agentsHeartbeatTarget, verdict(hb <= agentsHeartbeatTarget))
	// Every phase has its keys, a phase without heartbeats n 0 and p99 0
	// (a short run may time none while it places).
	for _, name := range []string{"idle", "placing", "steady"} {
		ph := agentsPhase{Name: name}
		if i := slices.IndexFunc(end.Phases, func(p agentsPhase) bool { return p.Name == name }); i >= 0 {
			ph = end.Phases[i]
		}
		rep.set("heartbeats_"+name, ph.N)
		rep.set("heartbeat_"+name+"_p99_ms", time.Duration(ph.P99ms*float64(time.Millisecond)))
		rep.linef("    sent while %-8s n=%d p50=%.2fms p99=%.2fms max=%.2fms", name+":", ph.N, ph.P50ms, ph.P99ms, ph.MaxMs)
	}
	if conn.Connected < n {
		rep.failed = fmt.Errorf("only %d of %d agents connected", conn.Connected, n)
	}
	return rep, nil
}

// agentsSettle is how long the connected agents idle before the server's
// memory is read: three heartbeats each at the default node TTL.
const agentsSettle = 3 * server.DefaultNodeTTL / 5

// agentsConnectTimeout is how long n agents are given to connect, and
// agentsRunTimeout how long their instances to be placed and reported.
func agentsConnectTimeout(n int) time.Duration {
	return time.Minute + time.Duration(n)*10*time.Millisecond
}

func agentsRunTimeout(n int) time.Duration {
	return time.Minute + time.Duration(n)*6*time.Millisecond
}

// agentsStatus follows what the child says: its latest counts, and its
// last word.
type agentsStatus struct {
	latest atomic.Pointer[agentsChildResult]
	done   chan agentsChildResult
	ended  chan struct{} // its stdout closed
}

func (st *agentsStatus) read(stdout io.Reader) {
	defer close(st.ended)
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		var r agentsChildResult
		if json.Unmarshal(sc.Bytes(), &r) != nil {
			continue
		}
		if r.Done {
			st.done <- r
			return
		}
		st.latest.Store(&r)
	}
}

// waitFor waits until count(latest) reaches its want, the child ends, or
// timeout passes, saying how far it got every 10 s on stderr, and returns
// the latest counts.
func (st *agentsStatus) waitFor(what string, timeout time.Duration, count func(agentsChildResult) (int, int)) agentsChildResult {
	t0 := time.Now()
	said := t0
	for {
		var r agentsChildResult
		if p := st.latest.Load(); p != nil {
			r = *p
		}
		got, want := count(r)
		select {
		case <-st.ended:
			return r
		default:
		}
		if got >= want || time.Since(t0) > timeout {
			return r
		}
		if time.Since(said) >= 10*time.Second {
			said = time.Now()
			fmt.Fprintf(os.Stderr, "drover-bench agents: %d of %d %s after %s\n", got, want, what, time.Since(t0).Round(time.Second))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// The simulated nodes' capacity and the instance size: one instance fits
// a node, so a job of one instance per agent gives each agent one.
var (
	agentsNodeResources = spec.Resources{CPU: 1000, MemoryMB: 1024}
	agentsInstance      = spec.Resources{CPU: 600, MemoryMB: 600}
)

// establishedTo counts pid's established TCP connections to port on
// this machine: the sockets among its descriptors whose /proc/net/tcp
// (or tcp6) line is state 01 with that remote port.
func establishedTo(pid, port int) (int, error) {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, err
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if in, ok := strings.CutPrefix(l, "socket:["); err == nil && ok {
			inodes[strings.TrimSuffix(in, "]")] = true
		}
	}
	n := 0
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // no IPv6
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			// sl local rem st tx:rx tr:when retrnsmt uid timeout inode
			fs := strings.Fields(line)
			if len(fs) < 10 || fs[3] != "01" || !inodes[fs[9]] {
				continue
			}
			_, hexPort, _ := strings.Cut(fs[2], ":")
			if p, err := strconv.ParseInt(hexPort, 16, 32); err == nil && int(p) == port {
				n++
			}
		}
	}
	return n, nil
}

// agentsChild runs the simulated agents until its stdin closes, saying
// every second (agentsChildResult lines on stdout) how many are connected
// and how many report their instance running, and at the end what their
// heartbeats took from the moment stdin said "measure".
func agentsChild(args []string) int {
	fs := flag.NewFlagSet(agentsChildCmd, flag.ExitOnError)
	url := fs.String("url", "", "the server's API")
	tlsDir := fs.String("tls-dir", "", "the cluster's TLS directory")
	n := fs.Int("agents", 0, "agents to run")
	fs.Parse(args)
	if err := runAgentsChild(*url, *tlsDir, *n); err != nil {
		fmt.Fprintf(os.Stderr, "drover-bench %s: %v\n", agentsChildCmd, err)
		return 1
	}
	return 0
}

func runAgentsChild(url, tlsDir string, n int) error {
	tlsCfg, err := pki.ClientConfig(pki.DirFiles(tlsDir, pki.RoleAgent), pki.ServerName)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := &agentsFleet{}
	// Registrations are etcd writes: a few dozen at once, as agents coming
	// up over a while would, not ten thousand in the same instant.
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for i := range n {
		c, err := client.NewWithOptions([]string{url}, client.Options{TLS: tlsCfg.Clone(), Link: true})
		if err != nil {
			return err
		}
		// The secret made before the first registration, as an agent's.
		c.SetNodeSecret(strings.ReplaceAll(uuid.NewString()+uuid.NewString(), "-", ""))
		a := &loadAgent{c: c, f: f, node: &spec.Node{ID: uuid.NewString(), Name: fmt.Sprintf("load-%05d", i),
			Address: "https://127.0.0.1:1", Resources: agentsNodeResources, Drivers: []string{"exec"}}}
		wg.Add(1)
		go func() { defer wg.Done(); a.run(ctx, sem) }()
	}
	out := json.NewEncoder(os.Stdout)
	said := make(chan struct{})
	go func() {
		defer close(said)
		for ctx.Err() == nil {
			out.Encode(agentsChildResult{Connected: int(f.connected.Load()), Running: int(f.running.Load())})
			sleep(ctx, time.Second)
		}
	}()
	// "measure PHASE" starts the heartbeats' timing, or a new phase of
	// it; the end of stdin stops all.
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if phase, ok := strings.CutPrefix(in.Text(), "measure "); ok {
			f.startPhase(phase)
		}
	}
	cancel()
	wg.Wait()
	<-said
	hb, phases := f.heartbeats()
	res := agentsChildResult{Done: true, Connected: int(f.connected.Load()), Running: int(f.running.Load()),
		Heartbeats: len(hb), HeartbeatErrors: int(f.hbErrors.Load()), Reregistrations: f.reregistrations.Load()}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	if len(hb) > 0 {
		s := sortedCopy(hb)
		res.P50ms, res.P99ms, res.MaxMs = ms(quantile(s, 0.5)), ms(quantile(s, 0.99)), ms(s[len(s)-1])
	}
	for i, name := range f.phaseNames {
		if s := sortedCopy(phases[i]); len(s) > 0 {
			res.Phases = append(res.Phases, agentsPhase{Name: name, N: len(s),
				P50ms: ms(quantile(s, 0.5)), P99ms: ms(quantile(s, 0.99)), MaxMs: ms(s[len(s)-1])})
		}
	}
	return out.Encode(res)
}

// agentsFleet is what the child's agents share: counts and heartbeat times.
type agentsFleet struct {
	connected, running atomic.Int64
	phase              atomic.Int64 // 0 before the parent says measure, then 1 + the phase's index
	reregistrations    atomic.Int64 // after a 404: the server let the node go
	hbErrors           atomic.Int64

	mu         sync.Mutex
	phaseNames []string
	hb         [][]time.Duration // by phase
}

func (f *agentsFleet) startPhase(name string) {
	f.mu.Lock()
	f.phaseNames = append(f.phaseNames, name)
	f.hb = append(f.hb, nil)
	f.phase.Store(int64(len(f.phaseNames)))
	f.mu.Unlock()
}

// heartbeat records one heartbeat that took d, under the phase it was
// sent in (phase, from f.phase before it was sent).
func (f *agentsFleet) heartbeat(phase int64, d time.Duration, err error) {
	if phase == 0 {
		return
	}
	if err != nil {
		f.hbErrors.Add(1)
		return
	}
	f.mu.Lock()
	f.hb[phase-1] = append(f.hb[phase-1], d)
	f.mu.Unlock()
}

// heartbeats returns every timed heartbeat, and them by phase.
func (f *agentsFleet) heartbeats() ([]time.Duration, [][]time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var all []time.Duration
	for _, p := range f.hb {
		all = append(all, p...)
	}
	return all, f.hb
}

// loadAgent is one simulated agent: the requests of internal/agent's
// Run, heartbeatLoop and reportLoop, with none of the work behind them.
type loadAgent struct {
	c        *client.Client
	f        *agentsFleet
	node     *spec.Node
	interval atomic.Int64 // the heartbeat interval the server gave
}

func (a *loadAgent) run(ctx context.Context, sem chan struct{}) {
	sem <- struct{}{}
	err := a.register(ctx)
	<-sem
	if err != nil {
		return
	}
	go a.heartbeatLoop(ctx)
	var index int64
	connected, reported := false, map[string]bool{}
	for ctx.Err() == nil {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Minute+30*time.Second)
		allocs, idx, err := a.c.NodeAllocs(qctx, a.node.ID, &client.QueryOptions{Index: index, Wait: 5 * time.Minute})
		cancel()
		if err != nil {
			if client.IsStatus(err, http.StatusNotFound) {
				a.f.reregistrations.Add(1)
				a.register(ctx)
				index = 0
				continue
			}
			sleep(ctx, time.Second)
			continue
		}
		index = idx
		if !connected {
			// The next query waits: the agent is connected.
			connected = true
			a.f.connected.Add(1)
		}
		a.report(ctx, allocs, reported)
	}
}

func (a *loadAgent) register(ctx context.Context) error {
	for ctx.Err() == nil {
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		reg, err := a.c.RegisterNode(rctx, a.node)
		cancel()
		if err == nil {
			if reg.Secret != "" {
				a.c.SetNodeSecret(reg.Secret)
			}
			a.interval.Store(int64(reg.HeartbeatInterval.Std()))
			return nil
		}
		if client.IsStatus(err, http.StatusForbidden) || client.IsStatus(err, http.StatusUnprocessableEntity) {
			fmt.Fprintf(os.Stderr, "drover-bench %s: node %s: %v\n", agentsChildCmd, a.node.Name, err)
			return err
		}
		sleep(ctx, time.Second/2+rand.N(time.Second)) // jittered, as an agent's
	}
	return ctx.Err()
}

// heartbeatLoop heartbeats at the server's interval, each bounded by one
// interval as the agent's are, and times each.
func (a *loadAgent) heartbeatLoop(ctx context.Context) {
	for {
		every := time.Duration(a.interval.Load())
		sleep(ctx, every)
		if ctx.Err() != nil {
			return
		}
		hctx, cancel := context.WithTimeout(ctx, every)
		phase := a.f.phase.Load()
		t0 := time.Now()
		beat, err := a.c.Heartbeat(hctx, a.node.ID)
		d := time.Since(t0)
		cancel()
		if iv := beat.HeartbeatInterval.Std(); err == nil && iv > 0 {
			a.interval.Store(int64(iv))
		}
		if ctx.Err() != nil {
			return
		}
		a.f.heartbeat(phase, d, err)
		if client.IsStatus(err, http.StatusNotFound) {
			a.f.reregistrations.Add(1)
			a.register(ctx)
		}
	}
}

// report says each new instance placed here is running, as the agent's
// report loop does once its driver started it.
func (a *loadAgent) report(ctx context.Context, allocs []*spec.Alloc, reported map[string]bool) {
	var rep spec.NodeStatusReport
	now := time.Now().UTC()
	for _, al := range allocs {
		if reported[al.ID] || al.DesiredStatus != spec.DesiredRun {
			continue
		}
		tasks := map[string]*spec.TaskState{}
		for _, t := range al.Tasks {
			tasks[t.Name] = &spec.TaskState{State: spec.TaskRunning, StartedAt: now,
				Events: []spec.TaskEvent{{Time: now, Type: spec.EventStarted}}}
		}
		rep.Allocs = append(rep.Allocs, spec.AllocStatusEntry{ID: al.ID,
			Status: &spec.AllocStatus{ClientStatus: spec.ClientRunning, Tasks: tasks, UpdateTime: now}})
	}
	if len(rep.Allocs) == 0 {
		return
	}
	for ctx.Err() == nil {
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := a.c.ReportAllocStatuses(rctx, a.node.ID, &rep)
		cancel()
		if err == nil {
			break
		}
		var apiErr *client.Error
		if errors.As(err, &apiErr) && apiErr.Status/100 == 4 {
			fmt.Fprintf(os.Stderr, "drover-bench %s: node %s: report refused: %v\n", agentsChildCmd, a.node.Name, err)
			return
		}
		sleep(ctx, time.Second)
	}
	for _, e := range rep.Allocs {
		if !reported[e.ID] {
			reported[e.ID] = true
			a.f.running.Add(1)
		}
	}
}
