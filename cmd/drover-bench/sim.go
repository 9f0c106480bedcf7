package main

// The simulated cluster behind the throughput, latency, steady and loss
// scenarios: one real drover server in this process (an embedded etcd
// member with fsync on, the registry, server.Server with its leader loop,
// the HTTP API on a loopback port) and N real agent.Agent instances, each
// with its own client.Client speaking HTTP to that API, its own data
// directory and node name. Only the driver is fake (simDriver): a task is
// "running" from the moment Start returns until Stop, with no process.
//
// Deviations from N real machines, each the smallest that one process on
// one machine needs:
//   - the agents' data directories are on tmpfs (/dev/shm) when there is
//     one: an agent makes one directory per alloc, and a thousand machines'
//     worth of mkdirs on the one disk etcd fsyncs to would charge etcd's
//     journal for work that real agents do on their own disks. The etcd
//     member's data stays on the ordinary temp directory (a real disk).
//   - a killed agent is one whose context is cancelled: its heartbeats and
//     queries stop and it says nothing on the way out (no deregistration
//     exists in the protocol), but its TCP connections are closed by the
//     kernel, as they would be for a crashed process (not for a machine
//     that loses power: there the server only notices through the TTL,
//     which is also how drover notices here).
//   - agents and the server share the process, so process CPU and RSS are
//     theirs together; the steady scenario measures the server alone first.

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/drover-org/drover/internal/agent"
	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/driver"
	"github.com/drover-org/drover/internal/registry"
	"github.com/drover-org/drover/internal/server"
	"github.com/drover-org/drover/internal/spec"
)

// quickAgents is the cluster size under -quick: enough agents that work
// spreads over several, small enough to start in a second or two.
const quickAgents = 50

// simFlags are the flags every simulated-cluster scenario has.
type simFlags struct {
	fs      *flag.FlagSet
	agents  int
	nodeTTL time.Duration
}

func addSimFlags(fs *flag.FlagSet) *simFlags {
	f := &simFlags{fs: fs}
	fs.IntVar(&f.agents, "agents", 1000, fmt.Sprintf("simulated agents (-quick: %d unless given)", quickAgents))
	fs.DurationVar(&f.nodeTTL, "node-ttl", server.DefaultNodeTTL, "the server's node TTL (agents heartbeat 5 times per TTL)")
	return f
}

func (f *simFlags) count(o *options) int { return sized(f.fs, o, "agents", f.agents, quickAgents) }

// simCluster is the server, its etcd, and the agents started so far.
type simCluster struct {
	dir, agentDir string
	emb           *registry.Embedded
	reg           *registry.Registry
	srv           *server.Server
	hs            *http.Server
	url           string
	client        *client.Client // the operator's: submits, lists
	obs           *observer
	drv           *simDriver
	nodeTTL       time.Duration
	started       time.Time // when the server's loops started
	warnings      atomic.Int64
	log           *slog.Logger

	stopSrv context.CancelFunc
	srvDone chan struct{}

	mu     sync.Mutex
	agents []*simAgent
}

// simAgent is one agent.Agent run by the cluster.
type simAgent struct {
	name   string
	id     string
	cancel context.CancelFunc
	done   chan struct{}
}

// startSim starts the server side: etcd, registry, server, API, observer.
// Agents come with addAgents.
func startSim(ctx context.Context, nodeTTL time.Duration) (_ *simCluster, err error) {
	c := &simCluster{nodeTTL: nodeTTL, drv: &simDriver{}, obs: newObserver(), srvDone: make(chan struct{})}
	c.log = slog.New(countWarnings{slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}), &c.warnings})
	if c.dir, err = os.MkdirTemp("", "drover-bench-sim-"); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			c.close()
		}
	}()
	c.agentDir = filepath.Join(c.dir, "agents")
	if d, err := os.MkdirTemp("/dev/shm", "drover-bench-agents-"); err == nil {
		c.agentDir = d
	}
	c.emb, err = registry.StartEmbedded(ctx, registry.EmbeddedConfig{
		DataDir: filepath.Join(c.dir, "etcd"), ClientAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0", Logger: c.log,
	})
	if err != nil {
		return nil, err
	}
	if c.reg, err = registry.Open(ctx, c.emb.Endpoints(), c.log); err != nil {
		return nil, err
	}
	// The observer's watch starts at the current revision, before anything
	// is submitted, so that it misses no alloc.
	rev, err := c.reg.Revision(ctx)
	if err != nil {
		return nil, err
	}
	c.srv = server.New(server.Config{Registry: c.reg, ID: "sim", Logger: c.log, NodeTTL: nodeTTL})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	c.url = "http://" + ln.Addr().String()
	c.hs = &http.Server{Handler: c.obs.wrap(c.srv.Handler(nil)), ReadHeaderTimeout: 10 * time.Second}
	go c.hs.Serve(ln)
	if c.client, err = client.New(c.url); err != nil {
		return nil, err
	}
	srvCtx, stop := context.WithCancel(context.Background())
	c.stopSrv = stop
	c.started = time.Now()
	go func() { c.srv.Run(srvCtx); close(c.srvDone) }()
	go c.obs.watch(srvCtx, c.reg, rev)
	err = waitUntil(ctx, 30*time.Second, "server to be elected leader", func() (bool, string) {
		id, err := c.client.Leader(ctx)
		return err == nil && id != "", fmt.Sprintf("leader %q, last error %v", id, err)
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// addAgents starts n agents named sim-<first>... and waits until every
// one of them is registered and ready.
// startSimWithAgents starts the cluster and n agents, and returns how long
// the agents took to register; the caller closes the cluster.
func startSimWithAgents(ctx context.Context, nodeTTL time.Duration, n int) (*simCluster, time.Duration, error) {
	c, err := startSim(ctx, nodeTTL)
	if err != nil {
		return nil, 0, err
	}
	startup, err := c.addAgents(ctx, n)
	if err != nil {
		c.close()
		return nil, 0, err
	}
	return c, startup, nil
}

func (c *simCluster) addAgents(ctx context.Context, n int) (time.Duration, error) {
	t0 := time.Now()
	c.mu.Lock()
	first := len(c.agents)
	c.mu.Unlock()
	names := map[string]bool{}
	for i := first; i < first+n; i++ {
		a, err := c.startAgent(fmt.Sprintf("sim-%05d", i))
		if err != nil {
			return 0, err
		}
		names[a.name] = true
	}
	// Registration is a few etcd writes per node; a thousand at once on
	// one 2-core machine take seconds.
	timeout := time.Minute + time.Duration(n)*50*time.Millisecond
	// Listing a thousand nodes is work for the server: look every 250 ms,
	// not at every 20 ms poll.
	var last time.Time
	state := "not looked yet"
	err := waitUntil(ctx, timeout, fmt.Sprintf("%d agents to register", n), func() (bool, string) {
		if time.Since(last) < 250*time.Millisecond {
			return false, state
		}
		last = time.Now()
		nodes, _, err := c.client.Nodes(ctx, nil)
		if err != nil {
			state = err.Error()
			return false, state
		}
		ready := 0
		for _, nd := range nodes {
			if names[nd.Name] && nd.Status == spec.NodeReady {
				ready++
			}
		}
		state = fmt.Sprintf("%d of %d ready", ready, n)
		return ready == n, state
	})
	return time.Since(t0), err
}

func (c *simCluster) startAgent(name string) (*simAgent, error) {
	cl, err := client.New(c.url) // one per agent: each carries its node's secret
	if err != nil {
		return nil, err
	}
	ag, err := agent.New(agent.Config{
		DataDir: filepath.Join(c.agentDir, name), Name: name,
		// No agent endpoints are served (nobody asks a simulated node for
		// logs); the server's URL keeps the node's address well-formed.
		Address: c.url,
		Drivers: []driver.Driver{c.drv}, Client: cl, Logger: c.log.With("node", name),
		// A thousand agents in one process: no directory trees made ahead.
		DirPool: -1,
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	a := &simAgent{name: name, id: ag.NodeID(), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(a.done)
		if err := ag.Run(ctx); err != nil && ctx.Err() == nil {
			c.log.Error("agent stopped", "node", name, "err", err)
		}
	}()
	c.mu.Lock()
	c.agents = append(c.agents, a)
	c.mu.Unlock()
	return a, nil
}

// kill stops agents abruptly: their contexts end, so heartbeats and
// queries stop; nothing is said to the server.
func (c *simCluster) kill(agents []*simAgent) {
	for _, a := range agents {
		a.cancel()
	}
}

// close stops everything, each step bounded, and removes the data.
func (c *simCluster) close() {
	c.mu.Lock()
	agents := c.agents
	c.mu.Unlock()
	c.kill(agents)
	deadline := time.After(30 * time.Second)
	for _, a := range agents {
		select {
		case <-a.done:
		case <-deadline:
			fmt.Fprintln(os.Stderr, "drover-bench: agents did not stop within 30s; carrying on")
		}
	}
	if c.hs != nil {
		c.hs.Close()
	}
	if c.stopSrv != nil {
		c.stopSrv()
		select {
		case <-c.srvDone:
		case <-time.After(10 * time.Second):
			fmt.Fprintln(os.Stderr, "drover-bench: server did not stop within 10s; carrying on")
		}
	}
	if c.reg != nil {
		c.reg.Close()
	}
	os.RemoveAll(c.agentDir)
	if c.emb != nil {
		if err := c.emb.Close(); err != nil {
			// Its files stay: removing them under an etcd still
			// stopping makes it fail, and exit the process.
			fmt.Fprintf(os.Stderr, "drover-bench: %v; leaving %s\n", err, c.dir)
			return
		}
	}
	os.RemoveAll(c.dir)
}

// instanceSize is the resources of one instance such that slots of them
// fill a simulated node (all nodes fingerprint this machine).
func instanceSize(slots int) spec.Resources {
	res, _ := agent.Fingerprint()
	return spec.Resources{CPU: max(res.CPU/slots, 1), MemoryMB: max(res.MemoryMB/slots, 1)}
}

// simJob is a service job of one group of count instances of one task
// for the fake driver.
func simJob(name string, count int, res spec.Resources) *spec.Job {
	j := &spec.Job{Name: name, Groups: []*spec.Group{{Name: "g", Count: count, Tasks: []*spec.Task{{
		Name: "t", Driver: simDriverName, Resources: res,
		Config: spec.TaskConfig{Command: "/bin/sleep", Args: []string{"infinity"}},
	}}}}}
	j.Canonicalize()
	return j
}

// simDriverName: jobs must name a driver the spec knows; the fake one
// stands in for exec.
const simDriverName = "exec"

// simDriver is the fake driver: Start returns at once with a task that
// runs until Stop, without a process.
type simDriver struct{ pids atomic.Int64 }

var _ driver.Driver = (*simDriver)(nil)

func (d *simDriver) Name() string { return simDriverName }

func (d *simDriver) Info() driver.Info { return driver.Info{} }

// simPIDBase is above Linux's largest pid_max (2^22), so a fake PID never
// names a real process.
const simPIDBase = 1 << 23

func (d *simDriver) Start(ctx context.Context, t driver.Task) (driver.Handle, error) {
	return &simHandle{pid: simPIDBase + int(d.pids.Add(1)), exit: make(chan driver.Exit, 1)}, nil
}

type simHandle struct {
	pid  int
	once sync.Once
	exit chan driver.Exit // gets the exit when stopped
}

func (h *simHandle) PID() int                 { return h.pid }
func (h *simHandle) Wait() <-chan driver.Exit { return h.exit }

func (h *simHandle) Stop(ctx context.Context, grace time.Duration) (driver.Exit, error) {
	e := driver.Exit{Code: -1, Signal: "SIGTERM", Time: time.Now()}
	h.once.Do(func() { h.exit <- e })
	return e, nil
}
