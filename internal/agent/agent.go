// Package agent is drover's node: it registers the machine, waits on the
// server for the allocations placed on it, runs them through drivers, and
// reports what it observes. It speaks only the HTTP API, never etcd.
//
// The loop is level-triggered: each answer of the assignment query is the
// whole desired state of this node, compared with what runs here.
package agent

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mathrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/driver"
	"github.com/drover-org/drover/internal/logstream"
	"github.com/drover-org/drover/internal/metrics"
	"github.com/drover-org/drover/internal/netbridge"
	"github.com/drover-org/drover/internal/proc"
	"github.com/drover-org/drover/internal/spec"
)

// Config is what an agent needs.
type Config struct {
	// DataDir holds the node ID and the alloc directories.
	DataDir string
	// Name is the node's name; the hostname by default.
	Name string
	// Address is this agent's own HTTP address, for log requests.
	Address string
	Meta    map[string]string
	Drivers []driver.Driver
	Client  *client.Client
	Logger  *slog.Logger
	// Monitor is the process's log stream, for GET /v1/client/monitor
	// (drover monitor --node); nil: none.
	Monitor *logstream.Hub

	// Datacenter, NodeClass and NodePool place the node for jobs and
	// constraints (spec.Node); "" is spec.DefaultDatacenter, no class,
	// spec.DefaultNodePool.
	Datacenter string
	NodeClass  string
	NodePool   string

	// StopTasksOnExit stops every task when Run returns (drover dev). A
	// standalone agent leaves them running.
	StopTasksOnExit bool
	// ReleaseStartupPages gives back, once the agent runs what it should,
	// the pages of the binary that start-up touched (proc.ReleaseExecutable):
	// for a standalone agent, whose binary also holds the server and etcd.
	ReleaseStartupPages bool
	// NetworkIP is the address the node's ports are reached at; by default
	// Address's host if that is an IP, else the first IPv4 of an interface.
	NetworkIP string
	// MinDynamicPort and MaxDynamicPort bound the node's dynamic ports; 0:
	// spec.DynamicPortMin and spec.DynamicPortMax.
	MinDynamicPort, MaxDynamicPort int
	// HostVolumes are the directories the node offers jobs by name
	// (hostvolume.go); New refuses one that is not an existing directory.
	HostVolumes []HostVolume
	// Bridge is the bridge and subnet of groups in network mode bridge
	// (netbridge.ParseConfig; zero: netbridge's defaults). Its Owner is
	// the node's ID. Where the agent cannot make network namespaces (not
	// root), nftables rules or the bridge, the node does not say it runs
	// those modes, and such groups are not placed on it.
	Bridge netbridge.Config
	// DirPool is at most how many alloc directory trees, and how many
	// task directory trees, the agent keeps made ahead for starts to take
	// (dirpool.go): 0 is the default (512), a negative number none.
	DirPool int
	// ArtifactTimeout bounds the fetch of each of a task's artifacts (0:
	// DefaultArtifactTimeout); ArtifactMaxBytes an http(s) download and
	// what an archive unpacks to (0: DefaultArtifactMaxBytes).
	ArtifactTimeout  time.Duration
	ArtifactMaxBytes int64
}

// Agent runs one node.
type Agent struct {
	cfg       Config
	client    *client.Client
	log       *slog.Logger
	drivers   map[string]driver.Driver
	allocsDir string
	nodeID    string
	nodeName  string
	// node is what the agent last registered: its tasks' ${attr.*},
	// ${meta.*} and ${node.*} (nodeValues).
	node atomic.Pointer[spec.Node]

	metrics *metrics.Agent

	mu      sync.Mutex
	runners map[string]*allocRunner
	// left holds, by alloc ID, the task processes an earlier agent left
	// running, until the first assignments decide their fate (adopt.go).
	left map[string][]leftTask
	// stoppedOnExit: the earlier agent stopped its tasks when it exited
	// (StopTasksOnExit), so none that is gone died; until the first
	// assignments.
	stoppedOnExit bool

	// heartbeatEvery is the interval the server asked for, in nanoseconds.
	heartbeatEvery atomic.Int64
	// lastContact is when a server last answered a heartbeat or a
	// registration, in Unix nanoseconds (fence.go).
	lastContact atomic.Int64
	regMu       sync.Mutex // one registration at a time
	queryMu     sync.Mutex
	queryCancel context.CancelFunc // of the assignment query in flight

	// startSlots bounds how many tasks are being set up and forked at once.
	startSlots chan struct{}
	// removing counts the removals of forgotten allocs' directories under
	// way (removeDirs).
	removing sync.WaitGroup
	// dirPools hold directory trees made ahead (dirpool.go); nil: none.
	dirPools *dirPools
	// holds are the alloc directories log readers hold open (dirholds.go).
	holds *dirHolds
	// net makes the network namespaces of allocs in network mode bridge
	// or none (network.go); nil where this node cannot.
	net *netbridge.Manager

	repMu    sync.Mutex
	repDirty map[string]*allocRunner // allocs whose status changed since last sent
	repKick  chan struct{}
	// usage samples what the running tasks use (usage.go).
	usage *usageSampler
	// repUrgent skips the next report's coalescing wait (reportSoon).
	repUrgent atomic.Bool
}

// New prepares an agent; Run starts it.
func New(cfg Config) (*Agent, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("agent: no data dir")
	}
	if cfg.Client == nil {
		return nil, errors.New("agent: no server client")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Name == "" {
		cfg.Name, _ = os.Hostname()
	}
	if msg := spec.CheckName(cfg.Name); msg != "" {
		return nil, fmt.Errorf("agent: node name %s", msg)
	}
	cfg.Datacenter = cmp.Or(cfg.Datacenter, spec.DefaultDatacenter)
	cfg.NodePool = cmp.Or(cfg.NodePool, spec.DefaultNodePool)
	if msg := spec.CheckNodeScope(cfg.Datacenter, cfg.NodeClass, cfg.NodePool); msg != "" {
		return nil, fmt.Errorf("agent: %s", msg)
	}
	if err := checkHostVolumes(cfg.HostVolumes); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	a := &Agent{
		cfg:       cfg,
		client:    cfg.Client,
		log:       cfg.Logger,
		drivers:   map[string]driver.Driver{},
		allocsDir: filepath.Join(cfg.DataDir, "allocs"),
		holds:     newDirHolds(),
		nodeName:  cfg.Name,
		runners:   map[string]*allocRunner{},
		repDirty:  map[string]*allocRunner{},
		repKick:   make(chan struct{}, 1),
		// A few at a time: each start is file system calls and a fork that
		// block a thread; a hundred at once only makes the runtime spawn a
		// hundred threads that then queue on the same kernel locks.
		startSlots: make(chan struct{}, 2*runtime.NumCPU()),
	}
	pool := cfg.DirPool
	if pool == 0 {
		pool = defaultDirPool
	}
	a.dirPools = newDirPools(cfg.DataDir, pool, makeAllocTree, makeTaskTree)
	a.metrics = metrics.NewAgent(a.metricsState)
	for _, d := range cfg.Drivers {
		a.drivers[d.Name()] = d
	}
	if err := os.MkdirAll(a.allocsDir, 0o755); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	// Tasks run as other users walk through it, whatever the umask.
	if err := os.Chmod(a.allocsDir, 0o755); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	id, err := loadOrCreateID(filepath.Join(cfg.DataDir, "node-id"))
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	secret, err := loadOrCreateSecret(filepath.Join(cfg.DataDir, "node-secret"))
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	cfg.Client.SetNodeSecret(secret)
	a.nodeID = id
	a.openNetwork()
	mhz, _ := cpuMHz()
	a.usage = newUsageSampler(a.nodeID, mhz)
	return a, nil
}

// NodeID is this node's ID, stable across restarts with the same data dir.
func (a *Agent) NodeID() string { return a.nodeID }

func loadOrCreateID(path string) (string, error) {
	if b, err := os.ReadFile(path); err == nil {
		id := strings.TrimSpace(string(b))
		if spec.CheckName(id) == "" {
			return id, nil
		}
	}
	id := uuid.NewString()
	if err := os.WriteFile(path, []byte(id+"\n"), 0o600); err != nil {
		return "", err
	}
	return id, nil
}

// loadOrCreateSecret returns the node's secret, making and keeping one
// first when there is none: the first registration brings it, so that one
// whose answer is lost can be sent again with the same secret (a secret
// the server made would be lost with the answer, and the node locked
// out).
func loadOrCreateSecret(path string) (string, error) {
	if b, err := os.ReadFile(path); err == nil {
		if s := strings.TrimSpace(string(b)); s != "" {
			return s, nil
		}
	}
	b := make([]byte, 32)
	rand.Read(b)
	secret := hex.EncodeToString(b)
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("cannot keep the node secret in %s: %w", path, err)
	}
	return secret, nil
}

// Node describes this machine for registration.
func (a *Agent) Node() *spec.Node {
	res, attrs := a.fingerprint()
	var drivers []string
	for name := range a.drivers {
		drivers = append(drivers, name)
	}
	sort.Strings(drivers)
	return &spec.Node{
		ID: a.nodeID, Name: a.nodeName, Address: a.cfg.Address,
		Datacenter: a.cfg.Datacenter, NodeClass: a.cfg.NodeClass, NodePool: a.cfg.NodePool,
		Attributes: attrs, Meta: a.cfg.Meta, Resources: res, Drivers: drivers,
		HostVolumes:    nodeHostVolumes(a.cfg.HostVolumes),
		MinDynamicPort: a.cfg.MinDynamicPort, MaxDynamicPort: a.cfg.MaxDynamicPort,
	}
}

// nodeValues is the node as last registered, or as it is now before the
// first registration.
func (a *Agent) nodeValues() *spec.Node {
	if n := a.node.Load(); n != nil {
		return n
	}
	n := a.Node()
	a.node.CompareAndSwap(nil, n)
	return a.node.Load()
}

// Run registers the node and keeps it converged until ctx ends.
func (a *Agent) Run(ctx context.Context) error {
	// Tasks an earlier agent left running are adopted, stopped or killed
	// once the server says what this node should run (adopt.go).
	left := append(findLeftTasks(a.nodeID), a.findDriverTasks(ctx)...)
	a.mu.Lock()
	a.left = map[string][]leftTask{}
	for _, l := range left {
		a.left[l.alloc] = append(a.left[l.alloc], l)
	}
	if len(a.left) > 0 {
		a.log.Info("found tasks left running by an earlier agent", "allocs", len(a.left))
	}
	_, err := os.Stat(a.stoppedMarker())
	a.stoppedOnExit = err == nil
	a.mu.Unlock()
	// Tasks run under their own context so that the agent stopping does not
	// stop them, unless configured to (dev mode).
	taskCtx, cancelTasks := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelTasks()
	reportCtx, cancelReports := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelReports()

	if err := a.register(ctx); err != nil {
		return err
	}
	go a.reportLoop(reportCtx)
	poolCtx, stopPool := context.WithCancel(ctx)
	defer a.dirPools.wait()
	defer stopPool()
	a.dirPools.run(poolCtx, a.log.Warn)
	go a.heartbeatLoop(ctx)
	go a.usage.run(ctx, a.reportUsage)
	go a.fenceLoop(ctx)
	var index int64
	backoff := time.Duration(0)
	released := false
	for ctx.Err() == nil {
		qctx, cancel := a.queryContext(ctx)
		allocs, idx, err := a.client.NodeAllocs(qctx, a.nodeID, &client.QueryOptions{Index: index, Wait: assignmentWait})
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			if client.IsStatus(err, http.StatusNotFound) {
				a.log.Warn("server does not know this node; registering again")
				if err := a.register(ctx); err != nil {
					return err
				}
				index = 0
				continue
			}
			backoff = min(max(2*backoff, 250*time.Millisecond), 10*time.Second)
			a.log.Warn("cannot fetch assignments; tasks keep running; will retry", "err", err, "in", backoff)
			sleep(ctx, backoff)
			continue
		}
		backoff = 0
		if idx < index {
			index = 0 // the registry was reset; start over
		} else {
			index = idx
		}
		a.converge(taskCtx, allocs)
		if a.cfg.ReleaseStartupPages && !released {
			released = true
			if n, err := proc.ReleaseExecutable(); err != nil {
				a.log.Debug("cannot give back start-up pages", "err", err)
			} else {
				a.log.Debug("gave back start-up pages", "mapped_bytes", n)
			}
		}
	}
	if a.cfg.StopTasksOnExit {
		// Stop reporting first: the server keeps these allocs as running,
		// so the next start of this node starts them again rather than the
		// scheduler replacing them.
		cancelReports()
		a.stopAll()
		if err := os.WriteFile(a.stoppedMarker(), nil, 0o644); err != nil {
			a.log.Warn("cannot note that the tasks were stopped; the next start will count them as died", "err", err)
		}
	} else {
		// Leave the tasks running for the next agent to adopt: stop
		// reading their output first, so that none is in flight.
		cancelTasks()
		a.waitDetached(5 * time.Second)
	}
	a.removing.Wait()
	return nil
}

// assignmentWait bounds one blocking query; the server answers sooner when
// anything for this node changes.
const assignmentWait = 5 * time.Minute

func (a *Agent) register(ctx context.Context) error {
	a.regMu.Lock()
	defer a.regMu.Unlock()
	backoff := time.Duration(0)
	for {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		n := a.Node()
		a.node.Store(n)
		reg, err := a.client.RegisterNode(rctx, n)
		cancel()
		if err == nil && reg.Secret != "" {
			// A server that makes the secret itself (one older than this
			// agent) gave one: keep it in place of ours.
			if werr := os.WriteFile(filepath.Join(a.cfg.DataDir, "node-secret"), []byte(reg.Secret+"\n"), 0o600); werr != nil {
				return fmt.Errorf("cannot keep the node secret in %s: %w", a.cfg.DataDir, werr)
			}
			a.client.SetNodeSecret(reg.Secret)
		}
		if err == nil {
			a.contact()
			if iv := reg.HeartbeatInterval.Std(); iv > 0 {
				a.heartbeatEvery.Store(int64(iv))
			}
			a.log.Info("node registered", "node", a.nodeName, "id", a.nodeID, "heartbeat", reg.HeartbeatInterval)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var apiErr *client.Error
		if errors.As(err, &apiErr) && apiErr.Status/100 == 4 {
			return fmt.Errorf("server refused node registration: %w", err)
		}
		var netErr net.Error
		timedOut := errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) && netErr.Timeout()
		if timedOut && len(a.client.Addresses()) > 1 {
			// The server took the connection and never answered (a
			// stopped process still accepts them; the attempt's deadline
			// or the TLS handshake's timeout, whichever ends first): try
			// the next one, or every retry would wait on the same server.
			a.log.Warn("server not answering the registration; moving to the next one", "server", a.client.Rotate())
		}
		backoff = min(max(2*backoff, 250*time.Millisecond), 10*time.Second)
		// Jittered: agents that came up together (a server back after an
		// outage) spread their next tries instead of arriving at once.
		wait := jitter(backoff)
		a.log.Warn("cannot register; will retry", "err", err, "in", wait)
		sleep(ctx, wait)
	}
}

// converge compares the server's view of this node with what runs here.
func (a *Agent) converge(taskCtx context.Context, allocs []*spec.Alloc) {
	a.mu.Lock()
	defer a.mu.Unlock()
	seen := map[string]bool{}
	for _, al := range allocs {
		seen[al.ID] = true
		ar := a.runners[al.ID]
		switch {
		case ar != nil && al.DesiredStatus == spec.DesiredStop:
			if !ar.stopRequested() {
				ar.log.Info("stopping alloc", "reason", al.DesiredReason)
				ar.stop(al.DesiredReason)
			}
		case ar != nil:
			// Running as asked.
		case al.DesiredStatus == spec.DesiredRun && !al.Terminal():
			ar = newAllocRunner(a, al)
			a.runners[al.ID] = ar
			adopt, died := a.adoptLeft(al)
			if len(adopt) > 0 {
				ar.log.Info("adopting alloc left running by an earlier agent", "version", al.JobVersion, "tasks", len(adopt))
			} else {
				ar.log.Info("starting alloc", "version", al.JobVersion)
			}
			ar.start(taskCtx, adopt, died)
		case al.DesiredStatus == spec.DesiredStop && !al.Terminal():
			ar = newAllocRunner(a, al)
			a.runners[al.ID] = ar
			if adopt, _ := a.adoptLeft(al); len(adopt) > 0 {
				// Still running from an earlier agent: adopt and stop it.
				ar.log.Info("stopping alloc left running by an earlier agent", "reason", al.DesiredReason)
				ar.stop(al.DesiredReason)
				ar.start(taskCtx, adopt, nil)
				continue
			}
			// Nothing of it runs here (an earlier agent ran it): say so.
			for _, t := range al.Tasks {
				ar.taskDead(t.Name, false, spec.EventKilled, "not running on this node: "+al.DesiredReason)
			}
			close(ar.done)
		}
	}
	if a.left != nil {
		a.settleLeft(allocs)
		a.cleanupNetworks()
		if a.stoppedOnExit {
			a.stoppedOnExit = false
			os.Remove(a.stoppedMarker())
		}
	}
	// Allocs the server no longer has (garbage collected or purged): stop
	// what still runs and forget them once done.
	var gone []goneDir
	for id, ar := range a.runners {
		if seen[id] {
			continue
		}
		ar.stop("no longer assigned to this node")
		select {
		case <-ar.done:
			delete(a.runners, id)
			gone = append(gone, goneDir{dir: ar.dir, recycle: !ar.ownFilesystem(), tasks: len(ar.tasks)})
		default:
			// Still stopping; the next answer will find it done.
		}
	}
	a.removeDirs(gone)
}

// removeDirs removes the directories of forgotten allocs in the
// background, giving their trees to the directory pool where it can
// (dirPools.recycle): a few milliseconds each (a dozen directories and the logs),
// seconds for hundreds, which converge spent holding a.mu and before
// fetching the next assignments, so the starts of a job submitted just
// after another was purged waited for the purged one's files. No alloc
// uses a directory of another's ID. Run waits for the removals before it
// returns.
//
// Nor do they run beside a burst of starts (a job replacing the one just
// purged, a deployment's next batch): they wait until the starts have been
// quiet for dirPoolQuiet, up to removeDeferMax. Removing a hundred allocs'
// files took a tenth of the agent's CPU in `drover-bench starts`, taken
// from the next job's forks.
func (a *Agent) removeDirs(dirs []goneDir) {
	if len(dirs) == 0 {
		return
	}
	for _, d := range dirs {
		if d.recycle {
			a.dirPools.expect(d.tasks)
		}
	}
	a.removing.Add(1)
	go func() {
		defer a.removing.Done()
		a.dirPools.awaitQuiet(removeDeferMax)
		for _, d := range dirs {
			if err := a.dispose(d); err != nil {
				a.log.Warn("cannot remove alloc dir", "dir", d.dir, "err", err)
			}
			if d.recycle {
				a.dirPools.arrived(d.tasks)
			}
		}
	}()
}

// removeDeferMax bounds how long removeDirs waits for starts to be quiet:
// on a node that never stops starting tasks, files are still removed.
const removeDeferMax = 2 * time.Second

// stoppedMarker is the file an agent that stopped its tasks on exit leaves
// for the next one: the server still has them running (their stop was not
// reported), and the next agent must not take them for dead.
func (a *Agent) stoppedMarker() string {
	return filepath.Join(a.cfg.DataDir, "tasks-stopped-on-exit")
}

func (a *Agent) stopAll() {
	a.mu.Lock()
	runners := make([]*allocRunner, 0, len(a.runners))
	for _, ar := range a.runners {
		ar.stop("agent shutting down")
		ar.stopPoststop() // the agent does not wait for cleanup hooks
		runners = append(runners, ar)
	}
	a.mu.Unlock()
	for _, ar := range runners {
		<-ar.done // each stop is bounded by kill_timeout
	}
}

// jitter returns a random duration between d/2 and d.
func jitter(d time.Duration) time.Duration {
	return d/2 + mathrand.N(d/2+1)
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
