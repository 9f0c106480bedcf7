package leader

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/metrics"
	"github.com/drover-org/drover/internal/registry"
	"github.com/drover-org/drover/internal/spec"
	"github.com/drover-org/drover/internal/state"
)

// harness is the loop on a real registry over an embedded etcd, reading
// a real mirror of it. Only the wake-ups are the test's (testState), so
// that a test decides when a pass runs and what the watch has told it.
type harness struct {
	t     *testing.T
	ctx   context.Context
	reg   *registry.Registry
	state *testState
	terms chan *testTerm
	loop  *Loop
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	emb, err := registry.StartEmbedded(ctx, registry.EmbeddedConfig{DataDir: t.TempDir(), ClientAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := registry.Open(ctx, emb.Endpoints(), log)
	if err != nil {
		t.Fatal(err)
	}
	m, err := reg.NewMirror(ctx, "test", state.New(), func([]registry.Change) {})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		reg.Close()
		emb.Close()
	})
	return &harness{t: t, ctx: ctx, reg: reg, state: &testState{m: m, kick: make(chan struct{}, 1)}, terms: make(chan *testTerm, 10)}
}

// run starts the loop with the configuration as set changes it; it stops
// when the test ends.
func (h *harness) run(set func(*Config)) {
	cfg := Config{
		ID: "test", LeaderTTL: 2 * time.Second, Resync: time.Hour, NodeTTL: 5 * time.Second,
		EventRetention: time.Hour, EventMaxRecords: 1000,
		Elector: testElector{Elect(h.reg), h.terms}, Registry: h.reg, State: h.state,
		Metrics: metrics.NewServer(func(context.Context) (metrics.State, error) { return metrics.State{}, nil }),
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	set(&cfg)
	h.loop = New(cfg)
	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan struct{})
	go func() { h.loop.Run(ctx); close(done) }()
	h.t.Cleanup(func() {
		cancel()
		<-done
	})
}

// term waits for the loop's next term.
func (h *harness) term() *testTerm {
	h.t.Helper()
	select {
	case t := <-h.terms:
		return t
	case <-time.After(10 * time.Second):
		h.t.Fatal("the loop was not elected within 10s")
		return nil
	}
}

// passes waits until the loop has begun n passes, and returns them.
func (h *harness) passes(n int, within time.Duration) []pass {
	h.t.Helper()
	deadline := time.Now().Add(within)
	for {
		if ps := h.state.taken(); len(ps) >= n {
			return ps
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("the loop began %d passes within %s, want %d", len(h.state.taken()), within, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// kick wakes the loop as the watch would once it has applied a change at
// revision rev.
func (h *harness) kick(rev int64) {
	h.state.mu.Lock()
	h.state.seen = max(h.state.seen, rev)
	h.state.mu.Unlock()
	select {
	case h.state.kick <- struct{}{}:
	default:
	}
}

// readyNode registers a node that can run exec tasks and stays alive
// for the test.
func (h *harness) readyNode(id string) {
	h.t.Helper()
	n := &spec.Node{ID: id, Name: id, Drivers: []string{"exec"}, Resources: spec.Resources{CPU: 4000, MemoryMB: 4000, DiskMB: 10000}}
	if _, err := h.reg.PutNode(h.ctx, n); err != nil {
		h.t.Fatal(err)
	}
	if err := h.reg.NodeAlive(h.ctx, id, time.Minute); err != nil {
		h.t.Fatal(err)
	}
}

// submit stores a job of one instance and returns the revision of its
// write.
func (h *harness) submit(name string) int64 {
	h.t.Helper()
	j := &spec.Job{Name: name, Groups: []*spec.Group{{Name: "g", Count: 1,
		Tasks: []*spec.Task{{Name: "t", Driver: "exec", Config: spec.TaskConfig{Command: "/bin/sleep"}, Resources: spec.Resources{CPU: 10, MemoryMB: 10}}}}}}
	j.Canonicalize()
	stored, _, err := h.reg.PutJob(h.ctx, j, 0)
	if err != nil {
		h.t.Fatal(err)
	}
	return stored.ModifyIndex
}

// allocs are the job's allocs in the registry at revision rev or later.
func (h *harness) allocs(job string, rev int64) []*spec.Alloc {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(h.ctx, 10*time.Second)
	defer cancel()
	ss, err := h.state.m.Snapshot(ctx, rev)
	if err != nil {
		h.t.Fatal(err)
	}
	return ss.JobAllocs(job)
}

// pass is one Snapshot call of the loop's: a pass beginning.
type pass struct {
	began   time.Time
	atLeast int64
}

// testState is the loop's State in these tests: the mirror's store, and
// wake-ups only when the test kicks. SeenRev is only what the test's kicks
// said (the test's writes, not the leader's own): what else a pass must
// see, the loop must know itself.
type testState struct {
	m    *registry.Mirror
	kick chan struct{}

	mu    sync.Mutex
	seen  int64
	ps    []pass
	delay time.Duration // each Snapshot takes this much longer: a slow pass
	hold  chan struct{} // when not nil, the next Snapshot waits for it to close
	held  chan error    // then says how the wait ended: nil, or its ctx's error
	read  int           // Snapshots that returned a snapshot
	// partial: TakeDirty says no job changed, as a watch that missed a
	// change would; else every pass looks at every job.
	partial bool
}

func (s *testState) Snapshot(ctx context.Context, atLeast int64) (*state.Snapshot, error) {
	s.mu.Lock()
	s.ps = append(s.ps, pass{began: time.Now(), atLeast: atLeast})
	delay, hold, held := s.delay, s.hold, s.held
	s.hold = nil
	s.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
			held <- nil
		case <-ctx.Done():
			held <- ctx.Err()
			return nil, ctx.Err()
		}
	}
	time.Sleep(delay)
	ss, err := s.m.Snapshot(ctx, atLeast)
	if err == nil {
		s.mu.Lock()
		s.read++
		s.mu.Unlock()
	}
	return ss, err
}

func (s *testState) SeenRev() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen
}
func (s *testState) TakeDirty() (jobs map[string]bool, all bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.partial {
		return map[string]bool{}, false
	}
	return nil, true
}
func (s *testState) Kick() <-chan struct{} { return s.kick }

func (s *testState) taken() []pass {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]pass(nil), s.ps...)
}

// holdNext makes the next pass wait in its Snapshot until release is
// called; held then says how the wait ended.
func (s *testState) holdNext() (held <-chan error, release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	hold, h := make(chan struct{}), make(chan error, 1)
	s.hold, s.held = hold, h
	return h, sync.OnceFunc(func() { close(hold) })
}

// testElector hands the test each term the registry's election wins.
type testElector struct {
	Elector
	terms chan<- *testTerm
}

func (e testElector) Campaign(ctx context.Context, id string, ttl time.Duration) (Term, error) {
	t, err := e.Elector.Campaign(ctx, id, ttl)
	if err != nil {
		return nil, err
	}
	tt := &testTerm{Term: t}
	e.terms <- tt
	return tt, nil
}

// testTerm is the registry's term, with a record of its commits.
type testTerm struct {
	Term
	mu      sync.Mutex
	commits []commit
}

type commit struct {
	rev       int64
	err       error
	afterDone bool // called once the term's Done was closed
}

func (t *testTerm) Commit(ctx context.Context, p *spec.Plan) (int64, error) {
	c := commit{}
	select {
	case <-t.Done():
		c.afterDone = true
	default:
	}
	c.rev, c.err = t.Term.Commit(ctx, p)
	t.mu.Lock()
	t.commits = append(t.commits, c)
	t.mu.Unlock()
	return c.rev, c.err
}

func (t *testTerm) committed() []commit {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]commit(nil), t.commits...)
}

// waitCommits waits until the term has made n commits, and returns them.
func (t *testTerm) waitCommits(tb testing.TB, n int) []commit {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(t.committed()) < n {
		if time.Now().After(deadline) {
			tb.Fatalf("the term made %d commits within 10s, want %d", len(t.committed()), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return t.committed()
}

// A new leader's first pass must see every write acknowledged before it
// won, though its watch has told it of none: it asks its state for the
// registry's revision as read at election, not less.
func TestFirstPassWaitsForTheRevisionReadAtElection(t *testing.T) {
	h := newHarness(t)
	h.readyNode("n1")
	acked := h.submit("web")
	h.run(func(*Config) {})
	term := h.term()
	first := h.passes(1, 10*time.Second)[0]
	if first.atLeast < acked {
		t.Fatalf("the first pass asked for the state at revision %d; a write was acknowledged at %d before the election", first.atLeast, acked)
	}
	// And it acted on it: the job acknowledged before the election is
	// placed, once.
	c := term.waitCommits(t, 1)[0]
	if c.err != nil {
		t.Fatal(c.err)
	}
	if got := h.allocs("web", c.rev); len(got) != 1 {
		t.Fatalf("the job has %d allocs, want 1", len(got))
	}
}

// A pass commits, and the next pass waits for its state to hold that
// commit (though the watch has not said it saw it), so it never decides
// again what it already wrote: the job is placed once however many
// passes follow.
func TestNextPassSeesItsOwnCommit(t *testing.T) {
	h := newHarness(t)
	h.readyNode("n1")
	h.run(func(*Config) {})
	term := h.term()
	h.passes(1, 10*time.Second)
	h.kick(h.submit("web"))
	c := term.waitCommits(t, 1)[0]
	if c.err != nil {
		t.Fatal(c.err)
	}
	n := len(h.state.taken())
	for i := 1; i <= 3; i++ {
		h.kick(0)
		h.passes(n+i, 10*time.Second)
	}
	// The third of them began, so the second ended: each pass runs after
	// the last.
	for _, p := range h.state.taken()[n:] {
		if p.atLeast < c.rev {
			t.Errorf("a pass after the commit at revision %d asked for the state at %d", c.rev, p.atLeast)
		}
	}
	if cs := term.committed(); len(cs) != 1 {
		t.Errorf("the term committed %d times, want once (the passes after the first had nothing to do)", len(cs))
	}
	if got := h.allocs("web", c.rev); len(got) != 1 {
		t.Errorf("the job has %d allocs, want 1", len(got))
	}
}

// A pass in progress when the term's lease is lost ends with it (its
// context is cancelled), and the term commits nothing after; the loop
// steps down and campaigns again, and the next term does the work.
func TestLosingTheLeaseEndsThePass(t *testing.T) {
	h := newHarness(t)
	h.readyNode("n1")
	// Passes read their state slowly, as on a loaded machine: the first
	// one must not see the job submitted below.
	h.state.delay = 100 * time.Millisecond
	h.run(func(*Config) {})
	term := h.term()
	h.passes(1, 10*time.Second)
	if !h.loop.IsLeader() {
		t.Fatal("the loop leads, but says it does not")
	}
	// The first pass has read its state: the job below is not in it (a
	// pass counts from its start, before it reads).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		h.state.mu.Lock()
		read := h.state.read
		h.state.mu.Unlock()
		if read >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first pass did not read its state within 10s")
		}
	}
	held, release := h.state.holdNext()
	defer release()
	h.kick(h.submit("web"))
	h.passes(2, 10*time.Second) // the pass is held in its Snapshot
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := term.Term.Resign(ctx); err != nil { // revokes the lease
		t.Fatal(err)
	}
	select {
	case err := <-held:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the held pass ended with %v, want its context cancelled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the pass in progress did not end within 5s of the lease's loss")
	}
	next := h.term()
	for _, c := range term.committed() {
		t.Errorf("the lost term committed (at revision %d, err %v, after Done: %v)", c.rev, c.err, c.afterDone)
	}
	if next.Epoch() <= term.Epoch() {
		t.Errorf("the next term's epoch %d is not after the lost one's %d", next.Epoch(), term.Epoch())
	}
	c := next.waitCommits(t, 1)[0]
	if c.err != nil || c.afterDone {
		t.Fatalf("the next term's commit: %+v", c)
	}
	if got := h.allocs("web", c.rev); len(got) != 1 {
		t.Fatalf("the job has %d allocs, want 1", len(got))
	}
}

// With nothing changing, the full pass runs every Resync, or every
// FullPassShare times the last one's duration when that is longer.
func TestFullPassPeriod(t *testing.T) {
	for _, c := range []struct {
		name          string
		resync, delay time.Duration
		min           time.Duration // the least gap between two passes' starts
	}{
		{"resync", 300 * time.Millisecond, 0, 300 * time.Millisecond},
		{"share of a slow pass", 50 * time.Millisecond, 5 * time.Millisecond, FullPassShare * 5 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			h.state.delay = c.delay
			h.run(func(cfg *Config) { cfg.Resync = c.resync })
			h.term()
			ps := h.passes(3, 3*c.min+10*time.Second)
			for i := 1; i < 3; i++ {
				if gap := ps[i].began.Sub(ps[i-1].began); gap < c.min {
					t.Errorf("pass %d began %s after the one before, want at least %s", i, gap, c.min)
				}
			}
		})
	}
}

// The periodic resync looks at every job a slice at a time, one pass
// after another: here a slice of one job. What it finds is what no change
// reported: a job purged behind the watch's back (the test does not kick)
// has its instance stopped, which only a sweep that also looks at the
// jobs that have allocs and no record finds.
func TestResyncSweepsEveryJobASliceAtATime(t *testing.T) {
	h := newHarness(t)
	const resync = 700 * time.Millisecond
	h.run(func(cfg *Config) { cfg.Resync, cfg.sweepSlice = resync, 1 })
	h.term()
	h.readyNode("n1")
	var rev int64
	for _, name := range []string{"a", "b", "c"} {
		rev = h.submit(name)
	}
	h.kick(rev)
	deadline := time.Now().Add(10 * time.Second)
	for _, name := range []string{"a", "b", "c"} {
		for len(h.allocs(name, rev)) == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("job %s not placed within 10s", name)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	h.state.mu.Lock()
	h.state.partial = true
	h.state.mu.Unlock()
	if err := h.reg.PurgeJob(h.ctx, "b"); err != nil {
		t.Fatal(err)
	}
	from := len(h.state.taken())
	deadline = time.Now().Add(10 * time.Second)
	for {
		rev, err := h.reg.Revision(h.ctx)
		if err != nil {
			t.Fatal(err)
		}
		running := 0
		for _, a := range h.allocs("b", rev) {
			if a.DesiredStatus == spec.DesiredRun {
				running++
			}
		}
		if running == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the purged job's instance still runs 10s later: the resync did not look at it")
		}
		time.Sleep(20 * time.Millisecond)
	}

	// The passes since: bursts of back-to-back passes (a sweep's slices)
	// a resync apart. With a slice of one job, a sweep over a, b and c is
	// three passes; one pass would be a full pass.
	time.Sleep(2 * resync)
	ps := h.state.taken()[from:]
	var bursts []int
	for i, p := range ps {
		if i == 0 || p.began.Sub(ps[i-1].began) > resync/2 {
			bursts = append(bursts, 0)
		}
		bursts[len(bursts)-1]++
	}
	sliced := false
	for _, n := range bursts {
		if n > 3 {
			t.Errorf("a burst of %d passes (bursts %v): a sweep over 3 jobs takes 3", n, bursts)
		}
		sliced = sliced || n > 1
	}
	if !sliced {
		t.Errorf("passes in bursts %v: each resync was one pass, not a sweep of slices", bursts)
	}
}
