// Package leader is the scheduling loop of the server that holds the
// election: campaign, then, for as long as the term lasts, passes
// (snapshot -> planner.Decide -> one fenced commit), each woken by a
// change, a delayed replacement coming due or the periodic resync.
//
// It reaches the rest of the server through small interfaces: an Elector
// that wins Terms (every write through a Term is fenced on it, so a
// deposed leader cannot place anything), the Registry's reads and
// unfenced writes, and the State the server's watch keeps. The
// registry's *Registry and *Leader satisfy them (Elect adapts the
// election); the server wires them and serves the API.
package leader

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/drover-org/drover/internal/metrics"
	"github.com/drover-org/drover/internal/planner"
	"github.com/drover-org/drover/internal/registry"
	"github.com/drover-org/drover/internal/spec"
	"github.com/drover-org/drover/internal/state"
)

// Elector wins elections: Campaign blocks until this server (id) leads,
// with a lease of ttl, or ctx ends.
type Elector interface {
	Campaign(ctx context.Context, id string, ttl time.Duration) (Term, error)
}

// Term is a won election. Commit and PutJob are fenced on it: once it is
// lost they write nothing (registry.ErrNotLeader), even before Done says
// so.
type Term interface {
	Epoch() int64
	// Done is closed when the term's lease is lost or it was resigned.
	Done() <-chan struct{}
	// Commit writes a plan; it returns the revision of its last write.
	Commit(ctx context.Context, p *spec.Plan) (int64, error)
	// PutJob stores job as the job's next version if its key is still at
	// checkIndex: a revert.
	PutJob(ctx context.Context, job *spec.Job, checkIndex int64, why string) (*spec.Job, error)
	Resign(ctx context.Context) error
}

// Registry is what the loop reads of the registry, and writes outside a
// term's fence (the history's records).
type Registry interface {
	// Revision is etcd's revision now, from a linearizable read.
	Revision(ctx context.Context) (int64, error)
	GetJobVersion(ctx context.Context, job string, version uint64) (*spec.Job, error)
	AppendEvents(ctx context.Context, evs []spec.Event) error
	TrimEvents(ctx context.Context, before time.Time, keep int) (int, error)
}

// State is the server's copy of the registry, which its watch keeps
// current, and what that watch tells the loop.
type State interface {
	// Snapshot returns the state once it holds revision atLeast.
	Snapshot(ctx context.Context, atLeast int64) (*state.Snapshot, error)
	// SeenRev is the revision of the latest change the watch published:
	// a pass must see at least that much.
	SeenRev() int64
	// TakeDirty returns the jobs the changes since the last call concern,
	// or all when any job may be concerned, and starts afresh.
	TakeDirty() (jobs map[string]bool, all bool)
	// Kick is signalled, coalesced, when a change can change a decision.
	Kick() <-chan struct{}
}

// Elect is the registry's election as an Elector.
func Elect(r *registry.Registry) Elector { return elector{r} }

type elector struct{ r *registry.Registry }

func (e elector) Campaign(ctx context.Context, id string, ttl time.Duration) (Term, error) {
	l, err := e.r.Campaign(ctx, id, ttl)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// Config is what the loop needs. Every duration and bound is used as
// given (the server resolves its defaults).
type Config struct {
	// ID names this server in the election and in its history.
	ID string
	// LeaderTTL is the election lease's TTL.
	LeaderTTL time.Duration
	// Resync is the period of the full pass when nothing changes.
	Resync time.Duration
	// NodeTTL is a node's heartbeat TTL, which the history's down events
	// quote.
	NodeTTL time.Duration
	// NodeGrace is how long a new leader waits before it acts on nodes
	// being down, so that agents cut off by a control-plane outage can
	// register again first.
	NodeGrace time.Duration
	// Policy is the planner's move policy (memory pressure).
	Policy planner.Policy
	// EventRetention and EventMaxRecords bound the history, which the
	// leader trims (EventMaxRecords <= 0: no count limit).
	EventRetention  time.Duration
	EventMaxRecords int

	// What the loop works through, all required; Logger defaults to
	// slog's.
	Elector  Elector
	Registry Registry
	State    State
	Metrics  *metrics.Server
	Logger   *slog.Logger

	// sweepSlice, when not 0, replaces sweepSliceAllocs (tests).
	sweepSlice int
}

// FullPassShare bounds the periodic resync to a quarter of a percent of a
// core: a sweep over every job (sweep.go) starts every Resync, or every
// FullPassShare times what the last full pass or sweep took when that is
// longer (every job at 100,000 allocations takes about 200 ms on 2 cores:
// then one every minute or so). It is a safety net: passes woken by
// changes, due times and the node grace do not wait for it. At 1% (100
// times), a 30 s window with a full pass in it measured 3% of a core on
// an idle server of that size.
const FullPassShare = 400

// eventTrimInterval is how often the leader trims the history.
const eventTrimInterval = time.Minute

// Loop campaigns and, while it leads, schedules.
type Loop struct {
	cfg      Config
	log      *slog.Logger
	isLeader atomic.Bool
}

// New returns a loop; Run starts it.
func New(cfg Config) *Loop {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Loop{cfg: cfg, log: cfg.Logger}
}

// IsLeader reports whether the loop holds a term now.
func (l *Loop) IsLeader() bool { return l.isLeader.Load() }

// Run takes part in the election, and leads each term it wins, until ctx
// ends.
func (l *Loop) Run(ctx context.Context) {
	for ctx.Err() == nil {
		t, err := l.cfg.Elector.Campaign(ctx, l.cfg.ID, l.cfg.LeaderTTL)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			l.log.Warn("election failed; retrying", "err", err)
			sleep(ctx, time.Second)
			continue
		}
		l.log.Info("elected leader", "server", l.cfg.ID, "epoch", t.Epoch())
		l.isLeader.Store(true)
		err = l.lead(ctx, t)
		l.isLeader.Store(false)
		rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		t.Resign(rctx)
		cancel()
		if ctx.Err() == nil {
			l.log.Warn("lost leadership", "err", err)
		}
	}
}

// lead runs the scheduling loop until leadership is lost or ctx ends. It is
// level-triggered: a change only makes it run sooner, and every pass looks
// at the whole state, from the server's copy of the registry, which its
// own watch keeps current.
func (l *Loop) lead(ctx context.Context, t Term) error {
	m := l.cfg.Metrics
	m.IsLeader.Set(1)
	defer m.IsLeader.Set(0)
	// What the passes carry from one to the next starts afresh: down-times
	// seen in an earlier term may be stale.
	ls := newLeadership(l, t, time.Now())
	// A pass ends when the leadership does: a leader resumed after its
	// lease ran out (SIGSTOP, a long pause) writes nothing more, not even
	// its mirror's barrier key, once it learns it.
	lctx, unlead := context.WithCancel(ctx)
	defer unlead()
	go func() {
		select {
		case <-t.Done():
			unlead()
		case <-lctx.Done():
		}
	}()
	// The first pass must see every write acknowledged before this
	// leader won: the registry's revision now, from a linearizable read.
	for {
		rev, err := l.cfg.Registry.Revision(lctx)
		if err == nil {
			ls.committed = rev
			break
		}
		l.log.Error("cannot read the registry's revision to lead; will retry", "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.Done():
			return errors.New("election session lost")
		case <-time.After(500 * time.Millisecond):
		}
	}
	if err := l.cfg.Registry.AppendEvents(ctx, []spec.Event{{Topic: spec.TopicLeader, Type: spec.EventElected, Message: "server " + l.cfg.ID + " leads"}}); err != nil {
		l.log.Warn("cannot store the election event", "err", err)
	}
	go l.trimEvents(ctx, t)
	resync := time.NewTimer(l.cfg.Resync)
	defer resync.Stop()
	var due *time.Timer
	dueC := func() <-chan time.Time {
		if due == nil {
			return nil
		}
		return due.C
	}
	// full says the next pass looks at every job: the first one, one after
	// a failure, a delayed replacement coming due, and after a change that
	// may concern any job (a node, a resync of the watch). Otherwise a pass
	// looks at the jobs the changes concern, and the periodic resync at
	// every job a slice at a time (sweep.go).
	full := true
	var dueAt time.Time // the earliest delayed replacement known
	for {
		jobs, all := l.cfg.State.TakeDirty()
		var only map[string]bool
		if !full && !all {
			only = jobs
			if only == nil {
				only = map[string]bool{}
			}
		}
		began := time.Now()
		next, err := ls.schedule(lctx, time.Since(ls.elected) >= l.cfg.NodeGrace, only)
		took := time.Since(began)
		if only == nil {
			m.FullPassSeconds.Observe(took.Seconds())
			resync.Reset(max(l.cfg.Resync, FullPassShare*took))
		} else if done, work := ls.sweep.passed(took); done {
			m.FullPassSeconds.Observe(work.Seconds())
			resync.Reset(max(l.cfg.Resync, FullPassShare*work))
		}
		full = false
		switch {
		case errors.Is(err, registry.ErrNotLeader):
			return err
		case lctx.Err() != nil && ctx.Err() == nil:
			return errors.New("election session lost")
		case err != nil && ctx.Err() == nil:
			l.log.Error("scheduling pass failed; will retry", "err", err)
			full = true
			sleep(ctx, 500*time.Millisecond)
		}
		// A full pass knows every due time; a partial one only its jobs'.
		if only == nil || (!next.IsZero() && (dueAt.IsZero() || next.Before(dueAt))) {
			dueAt = next
		}
		if due != nil {
			due.Stop()
			due = nil
		}
		if !dueAt.IsZero() {
			due = time.NewTimer(max(time.Until(dueAt), 0))
		} else if time.Since(ls.elected) < l.cfg.NodeGrace {
			// Look again when the grace ends, in case nodes are down.
			due = time.NewTimer(l.cfg.NodeGrace - time.Since(ls.elected))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.Done():
			return errors.New("election session lost")
		case <-l.cfg.State.Kick():
		case <-resync.C:
			ls.sweep.start(cmp.Or(l.cfg.sweepSlice, sweepSliceAllocs))
		case <-sweepC(ls.sweep.pending()):
		case <-dueC():
			full = true
		}
	}
}

// sweepC is ready at once while a sweep has slices left, so that they
// follow one another, and never otherwise.
func sweepC(pending bool) <-chan struct{} {
	if pending {
		return closed
	}
	return nil
}

var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// trimEvents keeps the history within its bounds while this server leads.
func (l *Loop) trimEvents(ctx context.Context, t Term) {
	tick := time.NewTicker(eventTrimInterval)
	defer tick.Stop()
	for {
		if n, err := l.cfg.Registry.TrimEvents(ctx, time.Now().Add(-l.cfg.EventRetention), l.cfg.EventMaxRecords); err != nil && ctx.Err() == nil {
			l.log.Warn("cannot trim the event history", "err", err)
		} else if n > 0 {
			l.log.Debug("event history trimmed", "records", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.Done():
			return
		case <-tick.C:
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
