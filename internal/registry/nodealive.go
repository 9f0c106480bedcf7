package registry

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Node liveness is a key per node, attached to a lease of the server the
// node heartbeats to:
//
//	node_alive/<id>   empty value, on the lease of the server that last
//	                  took the node's heartbeat
//
// Each server holds one lease, as long as the longest TTL it gives a node
// (the node TTL; longer on a server that takes many nodes: liveLease), for
// all the nodes that heartbeat to it, and keeps it alive with one stream.
// A heartbeat costs
// etcd nothing: the server notes the time in memory. The server deletes a
// node's key when the node has been silent for the TTL (a sweep, a few
// times a TTL, compares the key's lease with its own so that it never
// deletes a key another server has taken over). When a server dies, its
// lease runs out a TTL later; the agents have moved to another server by
// then (they rotate after two failed heartbeats, a TTL/5 apart), and that
// server's first heartbeat of each node put its key on its own lease, so
// the key outlives the dead server's lease. The leader sees a node down
// exactly when its key is gone, through the watch; a leader change loses
// nothing, since the keys are in etcd.
const dirNodeAlive = "node_alive/"

// liveness is this registry's part of node liveness: its lease, and by
// when each node whose key is on it must heartbeat again (its last
// heartbeat plus the TTL it was given then: a server gives a longer one
// to each of many nodes).
type liveness struct {
	mu    sync.Mutex
	ttl   time.Duration
	lease clientv3.LeaseID // 0 until the first node, and after it is lost
	seen  map[string]time.Time
	stop  context.CancelFunc
}

// LiveNodes is how many nodes heartbeat to this registry's server.
func (r *Registry) LiveNodes() int {
	l := &r.live
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.seen)
}

// liveLease returns this registry's liveness lease for a node given ttl,
// granting it (and starting its keep-alive and the sweep) when there is
// none. The lease lasts as long as the longest TTL the server gives: a
// server that dies leaves its nodes that long to move to another, as
// their own TTL does. When ttl outgrows it (the server takes more nodes
// and gives each a longer TTL), a lease twice as long replaces it and the
// nodes' keys move onto it (moveLiveness).
func (r *Registry) liveLease(ctx context.Context, ttl time.Duration) (clientv3.LeaseID, error) {
	l := &r.live
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lease != 0 && ttl <= l.ttl {
		return l.lease, nil
	}
	want := ttl
	if l.lease != 0 {
		want = max(ttl, 2*l.ttl) // doubling: a few moves as a cluster grows
	}
	secs := int64((want + time.Second - 1) / time.Second)
	g, err := r.cli.Grant(ctx, max(secs, 1))
	if err != nil {
		return 0, wrap("grant the node liveness lease", err)
	}
	kctx, cancel := context.WithCancel(context.Background())
	ch, err := r.cli.KeepAlive(kctx, g.ID)
	if err != nil {
		cancel()
		return 0, wrap("keep the node liveness lease alive", err)
	}
	old, seen := l.lease, l.seen
	if old != 0 {
		// The old lease's keep-alive and watch end: the keys still on it
		// run out with it, its own TTL from now.
		l.stop()
	} else {
		seen = map[string]time.Time{}
	}
	l.ttl, l.lease, l.seen, l.stop = want, g.ID, seen, cancel
	// Watch the liveness keys from the grant on: a key another server
	// moves onto its lease, or that goes away, is this server's no more.
	wch := r.cli.Watch(clientv3.WithRequireLeader(kctx), r.prefix+dirNodeAlive, clientv3.WithPrefix(), clientv3.WithRev(g.Revision+1))
	go r.keepLiveness(kctx, g.ID, ch, wch)
	if old != 0 {
		r.moveLiveness(ctx, old, g.ID)
	}
	return g.ID, nil
}

// moveLives is how many nodes' keys one transaction moves.
const moveLives = 64

// moveLiveness moves the keys of the nodes this server keeps from lease
// old to lease to, each only if it is still on old (another server may
// have taken it). A node whose key did not move is forgotten: its next
// heartbeat puts it on this lease again, or finds it gone. l.mu is held.
func (r *Registry) moveLiveness(ctx context.Context, old, to clientv3.LeaseID) {
	l := &r.live
	ids := make([]string, 0, len(l.seen))
	for id := range l.seen {
		ids = append(ids, id)
	}
	for start := 0; start < len(ids); start += moveLives {
		batch := ids[start:min(len(ids), start+moveLives)]
		ops := make([]clientv3.Op, len(batch))
		for i, id := range batch {
			key := r.prefix + dirNodeAlive + id
			ops[i] = clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.LeaseValue(key), "=", old)},
				[]clientv3.Op{clientv3.OpPut(key, "", clientv3.WithLease(to))}, nil)
		}
		octx, cancel := r.opCtx(ctx)
		resp, err := r.cli.Txn(octx).Then(ops...).Commit()
		cancel()
		if err != nil {
			r.log.Warn("cannot move nodes to the longer liveness lease; they register again when it runs out", "nodes", len(batch), "err", err)
			for _, id := range batch {
				delete(l.seen, id)
			}
			continue
		}
		for i, id := range batch {
			if !resp.Responses[i].GetResponseTxn().GetSucceeded() {
				delete(l.seen, id)
			}
		}
	}
}

// keepLiveness drains the lease's keep-alive answers, forgets the nodes
// whose key another server took over or that went away (their next
// heartbeat here moves the key back, or finds it gone), and sweeps silent
// nodes, until the lease is lost or the registry closes. A lost lease
// took its keys with it: the nodes on it must register again, which their
// next heartbeat tells them.
func (r *Registry) keepLiveness(ctx context.Context, lease clientv3.LeaseID, ch <-chan *clientv3.LeaseKeepAliveResponse, wch clientv3.WatchChan) {
	l := &r.live
	l.mu.Lock()
	// A twentieth of the TTL: a silent node goes down at most 5% late.
	// Each sweep reads every node this server keeps (10,000 past 1,000
	// nodes a server), and their TTL grows with their number, so the
	// sweeps thin out as they grow.
	every := max(l.ttl/20, 50*time.Millisecond)
	l.mu.Unlock()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case _, ok := <-ch:
			if ok {
				continue
			}
			r.dropLease(lease)
			if ctx.Err() == nil {
				r.log.Warn("lost the node liveness lease; nodes will register again")
			}
			return
		case resp, ok := <-wch:
			if !ok || resp.Err() != nil {
				// Without the watch, a heartbeat cannot trust its memory:
				// give the lease up; the nodes register again.
				r.dropLease(lease)
				if ctx.Err() == nil {
					r.log.Warn("lost the watch on node liveness; nodes will register again", "err", resp.Err())
				}
				return
			}
			l.mu.Lock()
			if l.lease != lease {
				// A longer lease replaced this one: its nodes moved.
				l.mu.Unlock()
				return
			}
			for _, ev := range resp.Events {
				if ev.Type == clientv3.EventTypeDelete || clientv3.LeaseID(ev.Kv.Lease) != lease {
					delete(l.seen, string(ev.Kv.Key[len(r.prefix+dirNodeAlive):]))
				}
			}
			l.mu.Unlock()
		case <-t.C:
			r.sweep(ctx, lease)
		case <-ctx.Done():
			return
		}
	}
}

// dropLease forgets lease, unless another has replaced it already: the
// next node to register or move here gets a new one.
func (r *Registry) dropLease(lease clientv3.LeaseID) {
	l := &r.live
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lease == lease {
		l.lease, l.seen = 0, nil
		l.stop()
	}
}

// putOnLease runs put with this registry's liveness lease, and once more
// with a new one when etcd no longer has it: a lease that ran out while
// the server was starved of CPU is known lost by etcd before its
// keep-alive tells this server.
func (r *Registry) putOnLease(ctx context.Context, ttl time.Duration, put func(clientv3.LeaseID) error) (clientv3.LeaseID, error) {
	for attempt := 0; ; attempt++ {
		lease, err := r.liveLease(ctx, ttl)
		if err != nil {
			return 0, err
		}
		err = put(lease)
		if attempt == 0 && errors.Is(err, rpctypes.ErrLeaseNotFound) {
			r.dropLease(lease)
			continue
		}
		return lease, err
	}
}

// sweep deletes the keys of the nodes on lease that have been silent for
// the TTL, unless another server has taken them over.
func (r *Registry) sweep(ctx context.Context, lease clientv3.LeaseID) {
	l := &r.live
	now := r.now()
	var silent []string
	l.mu.Lock()
	if l.lease != lease {
		l.mu.Unlock()
		return // a longer lease replaced this one: its own sweep runs
	}
	for id, due := range l.seen {
		if now.After(due) {
			silent = append(silent, id)
			delete(l.seen, id)
		}
	}
	l.mu.Unlock()
	for _, id := range silent {
		key := r.prefix + dirNodeAlive + id
		octx, cancel := r.opCtx(ctx)
		_, err := r.cli.Txn(octx).If(clientv3.Compare(clientv3.LeaseValue(key), "=", lease)).Then(clientv3.OpDelete(key)).Commit()
		cancel()
		if err != nil && ctx.Err() == nil {
			// Not deleted: the lease still holds it. Try again next sweep.
			l.mu.Lock()
			if l.lease == lease {
				l.seen[id] = time.Time{}
			}
			l.mu.Unlock()
			r.log.Warn("cannot mark a silent node down; will retry", "node", id, "err", err)
		}
	}
}

// stopLiveness ends the keep-alive and the sweep (Close).
func (r *Registry) stopLiveness() {
	l := &r.live
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stop != nil {
		l.stop()
	}
}

// NodeAlive starts node id's liveness: its key on this registry's lease
// (of ttl, rounded up to whole seconds). The node stays up while
// Heartbeat is called more often than ttl.
func (r *Registry) NodeAlive(ctx context.Context, id string, ttl time.Duration) error {
	ctx, cancel := r.opCtx(ctx)
	defer cancel()
	key, err := r.key(dirNodeAlive, "node id", id)
	if err != nil {
		return err
	}
	lease, err := r.putOnLease(ctx, ttl, func(lease clientv3.LeaseID) error {
		_, err := r.cli.Put(ctx, key, "", clientv3.WithLease(lease))
		return err
	})
	if err != nil {
		return wrap("mark node "+id+" alive", err)
	}
	r.noteSeen(id, lease, ttl)
	return nil
}

func (r *Registry) noteSeen(id string, lease clientv3.LeaseID, ttl time.Duration) {
	l := &r.live
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lease == lease {
		l.seen[id] = r.now().Add(ttl)
	}
}

// Heartbeat renews node id's liveness, ttl being the node TTL. A node whose
// key is on this registry's lease costs etcd nothing; one that heartbeated
// to another server until now has its key moved to this lease. ErrNotFound
// means the node is not alive (its key is gone: it was silent for the TTL,
// or never registered): the agent must register again.
func (r *Registry) Heartbeat(ctx context.Context, id string, ttl time.Duration) error {
	key, err := r.key(dirNodeAlive, "node id", id)
	if err != nil {
		return err
	}
	l := &r.live
	l.mu.Lock()
	if _, ok := l.seen[id]; ok && l.lease != 0 {
		l.seen[id] = r.now().Add(ttl)
		l.mu.Unlock()
		return nil
	}
	l.mu.Unlock()
	ctx, cancel := r.opCtx(ctx)
	defer cancel()
	var resp *clientv3.TxnResponse
	lease, err := r.putOnLease(ctx, ttl, func(lease clientv3.LeaseID) (err error) {
		resp, err = r.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), ">", 0)).
			Then(clientv3.OpPut(key, "", clientv3.WithLease(lease))).Commit()
		return err
	})
	if err != nil {
		return wrap("renew liveness of node "+id, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("registry: node %q is not alive (silent for longer than its TTL, or never registered); register again: %w", id, ErrNotFound)
	}
	r.noteSeen(id, lease, ttl)
	return nil
}
