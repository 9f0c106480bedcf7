package registry

import (
	"bytes"
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

// ID is the id this leader campaigned with.
func (l *Leader) ID() string { return l.id }

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

// Plan is a set of leader writes.
type Plan struct {
	// Allocs are stored as their desired half: Status, CreateIndex and
	// ModifyIndex are not stored.
	Allocs []*spec.Alloc
	// DeleteAllocs deletes both halves of each alloc.
	DeleteAllocs    []string
	Schedules       []*spec.JobSchedule
	DeleteSchedules []string
	// Deployments are stored as the leader's record: Request and
	// ModifyIndex are not stored (an operator's request lives apart).
	Deployments []*spec.Deployment
	// DeleteDeployments deletes each deployment and its request.
	DeleteDeployments []string
	// Events describe the plan for the cluster's history; they are
	// written with it (events.go).
	Events []spec.Event
}

func (p *Plan) empty() bool {
	return p == nil || len(p.Allocs)+len(p.DeleteAllocs)+len(p.Schedules)+len(p.DeleteSchedules)+
		len(p.Deployments)+len(p.DeleteDeployments) == 0
}

// opGroup is ops that must be in the same txn.
type opGroup struct {
	ops   []clientv3.Op
	bytes int
}

func (l *Leader) planOps(p *Plan) ([]opGroup, error) {
	r := l.r
	var groups []opGroup
	seen := map[string]bool{}
	add := func(g opGroup, keys ...string) error {
		for _, k := range keys {
			if seen[k] {
				return fmt.Errorf("registry: plan writes %s twice: %w", k, ErrInvalid)
			}
			seen[k] = true
		}
		groups = append(groups, g)
		return nil
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
		if err := add(opGroup{ops: []clientv3.Op{clientv3.OpPut(key, string(val))}, bytes: len(key) + len(val)}, key); err != nil {
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
		if err := add(g, key, skey); err != nil {
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
		if err := add(opGroup{ops: []clientv3.Op{clientv3.OpPut(key, string(val))}, bytes: len(key) + len(val)}, key); err != nil {
			return nil, err
		}
	}
	for _, job := range p.DeleteSchedules {
		key, err := r.key(dirSchedules, "job name", job)
		if err != nil {
			return nil, err
		}
		if err := add(opGroup{ops: []clientv3.Op{clientv3.OpDelete(key)}, bytes: len(key)}, key); err != nil {
			return nil, err
		}
	}
	if err := r.deploymentOps(p, add); err != nil {
		return nil, err
	}
	if len(p.Events) > 0 {
		ops, n, err := r.eventOps(p.Events, r.now())
		if err != nil {
			return nil, err
		}
		for _, op := range ops {
			groups = append(groups, opGroup{ops: []clientv3.Op{op}, bytes: n / len(ops)})
		}
	}
	return groups, nil
}

// chunk takes groups from the front of gs while they fit in maxOps ops and
// maxTxnBytes bytes (always at least one group).
func chunk(gs []opGroup, maxOps int) (ops []clientv3.Op, n int) {
	bytes := 0
	for n < len(gs) {
		g := gs[n]
		if n > 0 && (len(ops)+len(g.ops) > maxOps || bytes+g.bytes > maxTxnBytes) {
			break
		}
		ops = append(ops, g.ops...)
		bytes += g.bytes
		n++
	}
	return ops, n
}

// Commit writes the plan in transactions of at most 256 ops, each one
// fenced on the election key: If(CreateRevision(key) == Epoch). When the
// fence fails the error is ErrNotLeader and that transaction wrote nothing
// (earlier ones, if any, stand). It returns the revision of the last
// transaction; an empty plan sends none and returns 0.
func (l *Leader) Commit(ctx context.Context, p *Plan) (rev int64, err error) {
	ctx, cancel := l.r.opCtx(ctx)
	defer cancel()
	if p.empty() {
		return 0, nil
	}
	groups, err := l.planOps(p)
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
		ops, n := chunk(groups, maxOps)
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
// (the same keys, Version bumped, SubmitTime now): the leader's automatic
// revert. The one transaction is fenced on the election key, as Commit
// is, and on the job key's ModRevision being checkIndex (0: the job must
// not exist), so that a revert never overwrites a job an operator changed
// after the leader decided. ErrNotLeader: the fence failed; ErrConflict:
// the job moved. Either way nothing was written.
//
// A spec equal to the stored one writes nothing and returns the stored
// job. A stopped job stays stopped: a revert must not start what an
// operator stopped.
func (l *Leader) PutJob(ctx context.Context, job *spec.Job, checkIndex int64) (*spec.Job, error) {
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
	if cur != nil && bytes.Equal(specBytes(cur), specBytes(job)) {
		return cur, nil
	}
	next := job.SpecOnly()
	next.Version = 1
	if cur != nil {
		next.Version, next.Stopped = cur.Version+1, cur.Stopped
	}
	next.SubmitTime = r.now().UTC()
	val, err := json.Marshal(next)
	if err != nil {
		return nil, fmt.Errorf("registry: encode job %q: %w", job.Name, err)
	}
	resp, err := r.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(l.key), "=", l.epoch),
		clientv3.Compare(clientv3.ModRevision(key), "=", checkIndex),
	).Then(
		clientv3.OpPut(key, string(val)),
		clientv3.OpPut(versionKey(r.prefix, job.Name, next.Version), string(val)),
	).Else(clientv3.OpGet(l.key)).Commit()
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
