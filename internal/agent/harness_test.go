package agent_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/agent"
	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/driver"
	"github.com/drover-org/drover/internal/driver/execdriver"
	"github.com/drover-org/drover/internal/registry"
	"github.com/drover-org/drover/internal/server"
	"github.com/drover-org/drover/internal/spec"
)

// The agent tests run a real control plane in the test process: an
// embedded etcd, the registry, a server with its leader loop, and one HTTP
// server serving both the API and the agent's own endpoints, as drover dev
// does. Tasks are real processes started by the exec driver.

// tLog sends log lines to t.Log until the test is over (a late line after
// the test ends would panic).
type tLog struct {
	mu   sync.Mutex
	t    *testing.T
	done bool
}

func (w *tLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func testLogger(t *testing.T, level slog.Level) *slog.Logger {
	w := &tLog{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

// cluster is a control plane whose HTTP server also serves the current
// agent's endpoints.
type cluster struct {
	t      *testing.T
	url    string
	client *client.Client
	agentH atomic.Pointer[http.Handler]

	depMu sync.Mutex
	// deploys are, by job, what the agent is told of a deployment
	// (placedBy); rewrites change, by job, what the agent is told to run
	// (tellAgent).
	deploys  map[string]deployed
	rewrites map[string]func(*spec.Alloc)

	// loseAnswer, when set, picks requests whose answer is lost: the
	// server handles them in full, then the connection drops before the
	// answer, as on a link that fails (or times out) at that moment.
	loseAnswer atomic.Pointer[func(*http.Request) bool]
}

// withLostAnswers drops the answers loseAnswer picks.
func (c *cluster) withLostAnswers(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if lose := c.loseAnswer.Load(); lose != nil && (*lose)(r) {
			h.ServeHTTP(httptest.NewRecorder(), r)
			panic(http.ErrAbortHandler) // net/http closes the connection unanswered
		}
		h.ServeHTTP(w, r)
	})
}

// tellAgent makes the agent read the job's allocs as f leaves them: what
// a server that placed them wrongly, or a node that changed since, would
// send. Call it before submitting the job.
func (c *cluster) tellAgent(job string, f func(*spec.Alloc)) {
	c.depMu.Lock()
	defer c.depMu.Unlock()
	if c.rewrites == nil {
		c.rewrites = map[string]func(*spec.Alloc){}
	}
	c.rewrites[job] = f
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	return newClusterLog(t, testLogger(t, slog.LevelWarn))
}

// newClusterLog is newCluster with the server logging to log.
func newClusterLog(t *testing.T, log *slog.Logger) *cluster {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	emb, err := registry.StartEmbedded(ctx, registry.EmbeddedConfig{
		DataDir: t.TempDir(), ClientAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0", Logger: quiet,
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	reg, err := registry.Open(ctx, emb.Endpoints(), quiet)
	if err != nil {
		cancel()
		emb.Close()
		t.Fatal(err)
	}
	srv := server.New(server.Config{Registry: reg, ID: "test", Logger: log})
	srvDone := make(chan struct{})
	go func() { srv.Run(ctx); close(srvDone) }()

	c := &cluster{t: t}
	// The agent's Address must be this server's URL, which exists only once
	// the server does: route /v1/client/ to whichever agent runs now.
	agentH := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := c.agentH.Load()
		if h == nil {
			http.Error(w, "no agent yet", http.StatusServiceUnavailable)
			return
		}
		(*h).ServeHTTP(w, r)
	})
	hs := httptest.NewServer(c.withLostAnswers(c.withDeploys(srv.Handler(agentH))))
	c.url = hs.URL
	c.client, err = client.New(hs.URL)
	if err != nil {
		t.Fatal(err)
	}
	// Cleanups run last-in first-out: agents (registered later) stop
	// before this.
	t.Cleanup(func() {
		hs.Close()
		cancel()
		<-srvDone
		reg.Close()
		emb.Close()
	})
	return c
}

// runningAgent is an agent whose Run goroutine the test controls.
type runningAgent struct {
	*agent.Agent
	cancel context.CancelFunc
	done   chan error
	name   string
}

// startAgent starts an agent on dataDir; its Run ends at cleanup (or stop).
func (c *cluster) startAgent(dataDir string, stopTasksOnExit bool) *runningAgent {
	return c.startAgentWith(agent.Config{
		DataDir:         dataDir,
		Drivers:         []driver.Driver{execdriver.New("exec"), execdriver.New("raw_exec")},
		StopTasksOnExit: stopTasksOnExit,
	})
}

// startAgentWith starts an agent "node-1" with cfg, completed with the
// cluster's address, client and (unless cfg has one) a test logger; its Run ends at cleanup
// (or stop). It returns once the node is registered, so that jobs are
// placed on it.
func (c *cluster) startAgentWith(cfg agent.Config) *runningAgent {
	t := c.t
	t.Helper()
	cfg.Name, cfg.Address, cfg.Client = "node-1", c.url, c.client
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t, slog.LevelWarn)
	}
	ag, err := agent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := ag.Handler()
	c.agentH.Store(&h)
	ctx, cancel := context.WithCancel(context.Background())
	ra := &runningAgent{Agent: ag, cancel: cancel, done: make(chan error, 1), name: "node-1"}
	go func() { ra.done <- ag.Run(ctx) }()
	t.Cleanup(func() { ra.stop(t) })
	waitFor(t, 10*time.Second, "node registration", func() bool {
		n, err := c.client.Node(context.Background(), ag.NodeID())
		return err == nil && n.ID == ag.NodeID()
	})
	return ra
}

// stop cancels the agent's context and waits for Run to return.
func (ra *runningAgent) stop(t *testing.T) {
	t.Helper()
	ra.cancel()
	select {
	case err := <-ra.done:
		if err != nil {
			t.Errorf("agent Run: %v", err)
		}
		ra.done <- nil // later calls return at once
	case <-time.After(20 * time.Second):
		t.Error("agent Run did not return within 20s of cancel")
	}
}

// jobNamesInUse are the job names the running tests submitted, with the
// test: submit's cleanup kills by job name on the whole machine, so two
// tests in parallel with one name killed each other's tasks (a test's
// running task "exited" when the other test ended).
var jobNamesInUse sync.Map // job name -> test name

// submit submits a one-group job and registers a cleanup that kills any
// process left with the job's name in its environment. A job name that
// another running test uses fails the test: give each test its own.
func (c *cluster) submit(j *spec.Job) {
	t := c.t
	t.Helper()
	if other, taken := jobNamesInUse.LoadOrStore(j.Name, t.Name()); taken && other != t.Name() {
		t.Fatalf("job name %q is in use by %s, which runs meanwhile; the cleanups kill by job name: give this test's job a name of its own", j.Name, other)
	} else if !taken {
		t.Cleanup(func() { jobNamesInUse.Delete(j.Name) })
	}
	if _, err := c.client.SubmitJob(context.Background(), j, 0); err != nil {
		t.Fatalf("submit %s: %v", j.Name, err)
	}
	t.Cleanup(func() {
		for _, pid := range envProcsAll("DROVER_JOB_NAME", j.Name) {
			if _, pgid, ok := procInfo(pid); ok && pgid == pid {
				syscall.Kill(-pid, syscall.SIGKILL)
			}
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
}

// alloc waits for the job's only alloc to exist and satisfy cond, and
// returns it. cond sees every version polled; a nil cond takes the first.
func (c *cluster) alloc(job string, within time.Duration, what string, cond func(*spec.Alloc) bool) *spec.Alloc {
	t := c.t
	t.Helper()
	var last *spec.Alloc
	deadline := time.Now().Add(within)
	for {
		as, _, err := c.client.Allocs(context.Background(), job, "", nil)
		if err != nil {
			t.Fatalf("allocs of %s: %v", job, err)
		}
		if len(as) > 1 {
			t.Fatalf("job %s has %d allocs, want 1", job, len(as))
		}
		if len(as) == 1 {
			last = as[0]
			if cond == nil || cond(last) {
				return last
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last alloc:\n%s", within, what, describe(last))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func describe(a *spec.Alloc) string {
	if a == nil {
		return "  (none)"
	}
	var b strings.Builder
	b.WriteString("  " + a.Name + " desired=" + string(a.DesiredStatus) + " client=" + string(a.ClientStatusOr()))
	if a.Status != nil {
		b.WriteString(" description=" + strconv.Quote(a.Status.Description) + "\n")
		for name, ts := range a.Status.Tasks {
			b.WriteString("  task " + name + ": " + string(ts.State) + " restarts=" + strconv.Itoa(ts.Restarts) + " pid=" + strconv.Itoa(ts.PID) + "\n")
			for _, e := range ts.Events {
				b.WriteString("    " + string(e.Type) + ": " + e.Message + "\n")
			}
		}
	}
	return b.String()
}

func taskState(a *spec.Alloc, task string) *spec.TaskState {
	if a == nil || a.Status == nil {
		return nil
	}
	return a.Status.Tasks[task]
}

func running(task string) func(*spec.Alloc) bool {
	return func(a *spec.Alloc) bool {
		ts := taskState(a, task)
		return ts != nil && ts.State == spec.TaskRunning && ts.PID > 0
	}
}

func clientStatus(s spec.ClientStatus) func(*spec.Alloc) bool {
	return func(a *spec.Alloc) bool { return a.ClientStatusOr() == s }
}

func events(ts *spec.TaskState, typ spec.EventType) []spec.TaskEvent {
	var out []spec.TaskEvent
	for _, e := range ts.Events {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

func logs(t *testing.T, c *client.Client, allocID, task string, stderr bool) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rc, err := c.Logs(ctx, allocID, client.LogOptions{Task: task, Stderr: stderr, Tail: -1})
	if err != nil {
		t.Fatalf("logs of %s/%s: %v", allocID, task, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("reading logs: %v", err)
	}
	return string(b)
}

// Job builders.

func job(name string, typ spec.JobType, tasks ...*spec.Task) *spec.Job {
	return &spec.Job{Name: name, Type: typ, Groups: []*spec.Group{{Name: "g", Count: 1, Tasks: tasks}}}
}

func shTask(name, script string) *spec.Task {
	return &spec.Task{
		Name: name, Driver: "raw_exec",
		Config:    spec.TaskConfig{Command: "sh", Args: []string{"-c", script}},
		Resources: spec.Resources{CPU: 10, MemoryMB: 10},
	}
}

func restart(attempts int, interval, delay time.Duration, mode spec.RestartMode) *spec.RestartPolicy {
	return &spec.RestartPolicy{Attempts: &attempts, Interval: spec.Duration(interval), Delay: spec.Duration(delay), Mode: mode}
}

// Processes.

// procInfo reads a process's state and process group from /proc.
func procInfo(pid int) (state string, pgid int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 3 {
		return "", 0, false
	}
	pgid, _ = strconv.Atoi(f[2])
	return f[0], pgid, true
}

// alive reports whether pid is a live (not zombie) process.
func alive(pid int) bool {
	st, _, ok := procInfo(pid)
	return ok && st != "Z" && st != "X"
}

// groupMembers returns the live processes of process group pgid.
func groupMembers(pgid int) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, g, ok := procInfo(pid); ok && g == pgid && st != "Z" && st != "X" {
			out = append(out, pid)
		}
	}
	return out
}

// envProcs returns the live process group leaders whose environment holds
// key=value: the task processes the exec driver started.
func envProcs(key, value string) []int {
	var out []int
	for _, pid := range envProcsAll(key, value) {
		if _, g, ok := procInfo(pid); ok && g == pid {
			out = append(out, pid)
		}
	}
	return out
}

// envProcsAll returns every live process whose environment holds
// key=value: task processes and whatever they started.
func envProcsAll(key, value string) []int {
	want := []byte(key + "=" + value + "\x00")
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !bytes.HasPrefix(env, want) && !bytes.Contains(env, append([]byte{0}, want...)) {
			continue
		}
		if alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

func allocProcs(allocID string) []int { return envProcs("DROVER_ALLOC_ID", allocID) }

// waitFor polls cond every 20 ms until it holds or within passes.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
