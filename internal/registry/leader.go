package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/drover-org/drover/internal/spec"
)

// Leader is a won election. Its writes (Commit) are fenced on its election
// key: once the key is gone, etcd refuses them.
type Leader struct {
	r        *Registry
	id       string
	ttl      int
	session  *concurrency.Session
	election *concurrency.Election
	key      string
	epoch    int64

	mu          sync.Mutex
	maxOps      int // ops per txn; halved if etcd's max-txn-ops is lower
	resignOnce  sync.Once
	resignError error
}

// ttlSeconds rounds ttl up to whole seconds, at least 1. It never returns 0,
// which etcd's session would replace with its 60 s default.
func ttlSeconds(ttl time.Duration) int {
	return max(1, int(math.Ceil(ttl.Seconds())))
}

// Campaign blocks until this server (id) is elected leader or ctx is done.
// The session's lease has the given TTL (rounded up to whole seconds; etcd
// may raise it to its own minimum, which is logged): when the server stops
// refreshing it, the lease expires after ttl and another server takes over.
func (r *Registry) Campaign(ctx context.Context, id string, ttl time.Duration) (*Leader, error) {
	if id == "" {
		return nil, fmt.Errorf("registry: campaign: empty server id: %w", ErrInvalid)
	}
	secs := ttlSeconds(ttl)
	for {
		grant, err := r.cli.Grant(ctx, int64(secs))
		if err != nil {
			return nil, wrap("campaign: grant lease", err)
		}
		if grant.TTL != int64(secs) {
			r.log.Warn("etcd granted a different leader lease TTL than asked", "asked_s", secs, "granted_s", grant.TTL)
		}
		// The session lives until Resign or lease loss, not until ctx ends.
		s, err := concurrency.NewSession(r.cli, concurrency.WithTTL(secs), concurrency.WithLease(grant.ID))
		if err != nil {
			r.revoke(grant.ID)
			return nil, wrap("campaign: session", err)
		}
		e := concurrency.NewElection(s, r.prefix+dirLeader)
		// etcd's Campaign, when ctx ends while it waits, resigns with no
		// deadline of its own: with etcd unreachable it would never return,
		// and a server told to stop would hang. So it runs apart, and ctx
		// ends the wait here; it finishes once etcd answers or the client
		// closes.
		campaigned := make(chan error, 1)
		go func() { campaigned <- e.Campaign(ctx, id) }()
		select {
		case err = <-campaigned:
		case <-ctx.Done():
			s.Close() // revokes the lease, bounded by its TTL
			return nil, fmt.Errorf("registry: campaign: %w", ctx.Err())
		}
		if err != nil {
			s.Close()
			if ctx.Err() != nil {
				return nil, fmt.Errorf("registry: campaign: %w", ctx.Err())
			}
			return nil, wrap("campaign", err)
		}
		// Campaign returns when earlier candidates are gone; make sure our
		// own key outlived the wait (the lease may have expired meanwhile).
		resp, err := r.cli.Get(ctx, e.Key())
		if err != nil {
			s.Close()
			return nil, wrap("campaign: check election key", err)
		}
		if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != e.Rev() || clientv3.LeaseID(resp.Kvs[0].Lease) != s.Lease() {
			r.log.Warn("election key lost while campaigning; campaigning again", "id", id)
			s.Close()
			continue
		}
		l := &Leader{r: r, id: id, ttl: secs, session: s, election: e, key: e.Key(), epoch: e.Rev(), maxOps: maxTxnOps}
		r.log.Info("elected leader", "id", id, "epoch", l.epoch, "ttl_s", secs)
		return l, nil
	}
}

func (r *Registry) revoke(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
	defer cancel()
	r.cli.Revoke(ctx, id)
}

// LeaderID returns the current leader's id, or "" when there is none.
func (r *Registry) LeaderID(ctx context.Context) (string, error) {
	ctx, cancel := r.opCtx(ctx)
	defer cancel()
	resp, err := r.cli.Get(ctx, r.prefix+dirLeader+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		return "", wrap("read leader", err)
	}
	if len(resp.Kvs) == 0 {
		return "", nil
	}
	return string(resp.Kvs[0].Value), nil
}

// Epoch is the election key's create revision; it orders leaderships.
func (l *Leader) Epoch() int64 { return l.epoch }

// Done is closed when the session's lease is lost (expired, revoked) or
// the leader resigned. A leader that has not noticed yet is still fenced.
func (l *Leader) Done() <-chan struct{} { return l.session.Done() }

// Resign gives up leadership: deletes the election key and revokes the
// lease, so another server can take over at once.
func (l *Leader) Resign(ctx context.Context) error {
	ctx, cancel := l.r.opCtx(ctx)
	defer cancel()
	l.resignOnce.Do(func() {
		err := l.election.Resign(ctx)
		l.session.Orphan()
		_, rerr := l.r.cli.Revoke(ctx, l.session.Lease())
		if rerr != nil && errors.Is(rerr, rpctypes.ErrLeaseNotFound) {
			rerr = nil
		}
		if err = errors.Join(err, rerr); err != nil {
			l.resignError = wrap("resign", err)
		}
		l.r.log.Info("resigned leadership", "id", l.id, "epoch", l.epoch)
	})
	return l.resignError
}

// opGroup is writes that must be in the same txn, and the events that
// describe them, stored in that txn too.
type opGroup struct {
	ops   []clientv3.Op
	evs   []spec.Event
	bytes int // the ops' keys and values, and the events as encoded
}

// subject is what a plan's event is about: the write it is stored with.
type subject struct{ alloc, deployment string }

func subjectOf(e spec.Event) subject {
	if e.AllocID != "" {
		return subject{alloc: e.AllocID}
	}
	return subject{deployment: e.DeploymentID}
}

// planOps turns the plan into groups in the order they are committed, so
// that a leader deposed between two txns leaves only complete parts (see
// Commit): the events about nothing the plan writes (a node's), then the
// deployments before the allocs that name them, the allocs in plan order,
// the deletions of allocs, the schedules, the deletions of schedules and
// of deployments. Each event goes with the write it is about.
func (l *Leader) planOps(p *spec.Plan, now time.Time) ([]opGroup, error) {
	r := l.r
	groups := []opGroup{{}} // the events about nothing written
	seen := map[string]bool{}
	subjects := map[subject]int{}
	add := func(g opGroup, about subject, keys ...string) error {
		for _, k := range keys {
			if seen[k] {
				return fmt.Errorf("registry: plan writes %s twice: %w", k, ErrInvalid)
			}
			seen[k] = true
		}
		if about != (subject{}) {
			subjects[about] = len(groups)
		}
		groups = append(groups, g)
		return nil
	}
	if err := r.deploymentPuts(p, add); err != nil {
		return nil, err
	}
	for _, a := range p.Allocs {
		if a == nil {
			return nil, fmt.Errorf("registry: plan has a nil alloc: %w", ErrInvalid)
		}
		key, err := r.key(dirAllocs, "alloc id", a.ID)
		if err != nil {
			return nil, err
		}
		c := *a
		c.Status, c.CreateIndex, c.ModifyIndex = nil, 0, 0
		val, err := json.Marshal(&c)
		if err != nil {
			return nil, fmt.Errorf("registry: encode alloc %q: %w", a.ID, err)
		}
		if err := add(opGroup{ops: []clientv3.Op{clientv3.OpPut(key, string(val))}, bytes: len(key) + len(val)}, subject{alloc: a.ID}, key); err != nil {
			return nil, err
		}
	}
	for _, id := range p.DeleteAllocs {
		key, err := r.key(dirAllocs, "alloc id", id)
		if err != nil {
			return nil, err
		}
		skey := r.prefix + dirAllocStatus + id
		g := opGroup{ops: []clientv3.Op{clientv3.OpDelete(key), clientv3.OpDelete(skey)}, bytes: len(key) + len(skey)}
		if err := add(g, subject{alloc: id}, key, skey); err != nil {
			return nil, err
		}
	}
	for _, s := range p.Schedules {
		if s == nil {
			return nil, fmt.Errorf("registry: plan has a nil schedule: %w", ErrInvalid)
		}
		key, err := r.key(dirSchedules, "job name", s.Job)
		if err != nil {
			return nil, err
		}
		val, err := json.Marshal(s)
		if err != nil {
			return nil, fmt.Errorf("registry: encode schedule %q: %w", s.Job, err)
		}
		if err := add(opGroup{ops: []clientv3.Op{clientv3.OpPut(key, string(val))}, bytes: len(key) + len(val)}, subject{}, key); err != nil {
			return nil, err
		}
	}
	for _, job := range p.DeleteSchedules {
		key, err := r.key(dirSchedules, "job name", job)
		if err != nil {
			return nil, err
		}
		if err := add(opGroup{ops: []clientv3.Op{clientv3.OpDelete(key)}, bytes: len(key)}, subject{}, key); err != nil {
			return nil, err
		}
	}
	if err := r.deploymentDeletes(p, add); err != nil {
		return nil, err
	}
	for _, e := range p.Events {
		if e.Time.IsZero() {
			e.Time = now
		}
		b, err := json.Marshal(e)
		if err != nil {
			return nil, fmt.Errorf("registry: encode events: %w", err)
		}
		g := &groups[subjects[subjectOf(e)]] // 0, the first, when about nothing written
		g.evs = append(g.evs, e)
		g.bytes += len(b) + 1
	}
	if len(groups[0].evs) == 0 {
		groups = groups[1:]
	}
	return groups, nil
}

// eventRecordBytes bounds what an event record adds to a txn besides its
// events: its key and brackets.
const eventRecordBytes = 64

// eventRecords is how many records n events are stored in.
func eventRecords(n int) int { return (n + maxEventBatch - 1) / maxEventBatch }

// chunk returns how many groups from the front of gs go in one txn: as
// many as fit, with their event records, in maxOps ops and maxTxnBytes
// bytes (always at least one).
func chunk(gs []opGroup, maxOps int) int {
	ops, evs, bytes := 0, 0, 0
	for n, g := range gs {
		ops, evs, bytes = ops+len(g.ops), evs+len(g.evs), bytes+g.bytes
		recs := eventRecords(evs)
		if n > 0 && (ops+recs > maxOps || bytes+recs*eventRecordBytes > maxTxnBytes) {
			return n
		}
	}
	return len(gs)
}

// txnOps is one txn's writes: the groups' ops, then their events' records.
func (r *Registry) txnOps(gs []opGroup, now time.Time) ([]clientv3.Op, error) {
	var ops []clientv3.Op
	var evs []spec.Event
	for _, g := range gs {
		ops = append(ops, g.ops...)
		evs = append(evs, g.evs...)
	}
	evOps, _, err := r.eventOps(evs, now)
	return append(ops, evOps...), err
}

// Commit writes the plan in one transaction when it fits in one (at most
// 256 ops and 1 MiB), else in several, each fenced on the election key:
// If(CreateRevision(key) == Epoch). When the fence fails the error is
// ErrNotLeader and that transaction wrote nothing; earlier ones, if any,
// stand. They stand complete: a transaction holds whole groups of planOps
// (an alloc with its events; a deployment, with its events, before the
// allocs that name it), so a leader deposed between two leaves a prefix
// of its plan that any plan could have written, and the next leader's
// pass, which looks at the whole state, places what is missing. It
// returns the revision of the last transaction; an empty plan sends none
// and returns 0.
func (l *Leader) Commit(ctx context.Context, p *spec.Plan) (rev int64, err error) {
	ctx, cancel := l.r.opCtx(ctx)
	defer cancel()
	if p.Empty() {
		return 0, nil
	}
	now := l.r.now()
	groups, err := l.planOps(p, now)
	if err != nil {
		return 0, err
	}
	select {
	case <-l.session.Done():
		return 0, fmt.Errorf("registry: commit: leader %s lost its lease: %w", l.id, ErrNotLeader)
	default:
	}
	fence := clientv3.Compare(clientv3.CreateRevision(l.key), "=", l.epoch)
	txns := 0
	for len(groups) > 0 {
		l.mu.Lock()
		maxOps := l.maxOps
		l.mu.Unlock()
		n := chunk(groups, maxOps)
		ops, err := l.r.txnOps(groups[:n], now)
		if err != nil {
			return rev, err
		}
		resp, err := l.r.cli.Txn(ctx).If(fence).Then(ops...).Commit()
		if errors.Is(err, rpctypes.ErrTooManyOps) && maxOps > 2 {
			// An external etcd with a lower --max-txn-ops: use smaller txns.
			l.mu.Lock()
			l.maxOps = max(2, maxOps/2)
			l.mu.Unlock()
			l.r.log.Warn("etcd refused a txn with too many ops; splitting smaller", "ops", len(ops), "now", max(2, maxOps/2))
			continue
		}
		if err != nil {
			return rev, wrap(fmt.Sprintf("commit plan (after %d txns)", txns), err)
		}
		if !resp.Succeeded {
			return rev, fmt.Errorf("registry: commit: leader %s (epoch %d) was deposed; %d earlier txns applied: %w", l.id, l.epoch, txns, ErrNotLeader)
		}
		rev = resp.Header.Revision
		txns++
		groups = groups[n:]
	}
	return rev, nil
}

// PutJob stores job as the job's next version, as Registry.PutJob does
// (the same keys, the same Submitted event, whose message names this
// leader and says why): the leader's automatic revert. The one
// transaction is fenced on the election key, as Commit is, and on the job
// key's ModRevision being checkIndex (0: the job must not exist), so that
// a revert never overwrites a job an operator changed after the leader
// decided. ErrNotLeader: the fence failed; ErrConflict: the job moved.
// Either way nothing was written.
//
// A spec equal to the stored one writes nothing and returns the stored
// job. A stopped job stays stopped: a revert must not start what an
// operator stopped.
func (l *Leader) PutJob(ctx context.Context, job *spec.Job, checkIndex int64, why string) (*spec.Job, error) {
	ctx, cancel := l.r.opCtx(ctx)
	defer cancel()
	r := l.r
	if job == nil {
		return nil, fmt.Errorf("registry: leader put job: no job: %w", ErrInvalid)
	}
	key, err := r.key(dirJobs, "job name", job.Name)
	if err != nil {
		return nil, err
	}
	select {
	case <-l.session.Done():
		return nil, fmt.Errorf("registry: put job %q: leader %s lost its lease: %w", job.Name, l.id, ErrNotLeader)
	default:
	}
	cur, modRev, err := r.getJob(ctx, key)
	if err != nil {
		return nil, err
	}
	if modRev != checkIndex {
		return nil, &CheckIndexError{Job: job.Name, CheckIndex: checkIndex, ModifyIndex: modRev}
	}
	next, same := NextVersion(cur, job, r.now())
	if same {
		return cur, nil
	}
	if cur != nil {
		next.Stopped = cur.Stopped
	}
	ops, err := r.jobOps(key, next, true, fmt.Sprintf(" by leader %s: %s", l.id, why))
	if err != nil {
		return nil, err
	}
	resp, err := r.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(l.key), "=", l.epoch),
		clientv3.Compare(clientv3.ModRevision(key), "=", checkIndex),
	).Then(ops...).Else(clientv3.OpGet(l.key)).Commit()
	if err != nil {
		return nil, wrap("leader write job "+job.Name, err)
	}
	if !resp.Succeeded {
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 0 || kvs[0].CreateRevision != l.epoch {
			return nil, fmt.Errorf("registry: put job %q: leader %s (epoch %d) was deposed: %w", job.Name, l.id, l.epoch, ErrNotLeader)
		}
		return nil, fmt.Errorf("registry: job %q changed since index %d: %w", job.Name, checkIndex, ErrConflict)
	}
	next.ModifyIndex = resp.Header.Revision
	return next, nil
}
