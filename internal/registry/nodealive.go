package registry

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/drover-org/drover/internal/spec"
)

// Node liveness lives in etcd leases, not in any server's memory:
//
//	node_alive/<id>   empty value, attached to a lease of the node's TTL
//
// Registration grants the lease; each heartbeat, through whichever server
// the agent reaches, renews it (a lease renewal is not a raft proposal, so
// heartbeats cost etcd little). When the heartbeats stop, etcd deletes the
// key at the lease's expiry, and the watch tells the leader. A drover leader
// change therefore loses no liveness state, and a node is "down" exactly
// when its key is gone.
const dirNodeAlive = "node_alive/"

// leaseCache remembers each node's lease so that a heartbeat costs one
// keep-alive call, not a read too.
type leaseCache struct {
	mu sync.Mutex
	m  map[string]clientv3.LeaseID
}

func (c *leaseCache) get(id string) (clientv3.LeaseID, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, ok := c.m[id]
	return l, ok
}

func (c *leaseCache) set(id string, l clientv3.LeaseID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]clientv3.LeaseID{}
	}
	if l == 0 {
		delete(c.m, id)
	} else {
		c.m[id] = l
	}
}

// NodeAlive starts node id's liveness: a fresh lease of ttl (rounded up to
// whole seconds) holding node_alive/<id>. The node stays up while
// Heartbeat is called more often than ttl.
func (r *Registry) NodeAlive(ctx context.Context, id string, ttl time.Duration) error {
	ctx, cancel := r.opCtx(ctx)
	defer cancel()
	key, err := r.key(dirNodeAlive, "node id", id)
	if err != nil {
		return err
	}
	secs := int64((ttl + time.Second - 1) / time.Second)
	lease, err := r.cli.Grant(ctx, max(secs, 1))
	if err != nil {
		return wrap("grant liveness lease of node "+id, err)
	}
	if _, err := r.cli.Put(ctx, key, "", clientv3.WithLease(lease.ID)); err != nil {
		return wrap("mark node "+id+" alive", err)
	}
	if old, ok := r.leases.get(id); ok && old != lease.ID {
		r.cli.Revoke(ctx, old) // the previous registration's; best effort
	}
	r.leases.set(id, lease.ID)
	return nil
}

// Heartbeat renews node id's liveness. ErrNotFound means the node has no
// live lease (it expired, or the node never registered here): the agent
// must register again.
func (r *Registry) Heartbeat(ctx context.Context, id string) error {
	ctx, cancel := r.opCtx(ctx)
	defer cancel()
	key, err := r.key(dirNodeAlive, "node id", id)
	if err != nil {
		return err
	}
	lease, ok := r.leases.get(id)
	if !ok {
		resp, err := r.cli.Get(ctx, key)
		if err != nil {
			return wrap("read liveness of node "+id, err)
		}
		if len(resp.Kvs) == 0 || resp.Kvs[0].Lease == 0 {
			return fmt.Errorf("registry: node %q is not alive; register again: %w", id, ErrNotFound)
		}
		lease = clientv3.LeaseID(resp.Kvs[0].Lease)
		r.leases.set(id, lease)
	}
	if _, err := r.cli.KeepAliveOnce(ctx, lease); err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			r.leases.set(id, 0)
			return fmt.Errorf("registry: node %q's liveness expired; register again: %w", id, ErrNotFound)
		}
		return wrap("renew liveness of node "+id, err)
	}
	return nil
}

// applyAlive sets each node's Status from the liveness keys.
func (r *Registry) applyAlive(nodes []*spec.Node, alive []*mvccpb.KeyValue) {
	up := make(map[string]bool, len(alive))
	for _, kv := range alive {
		up[string(kv.Key[len(r.prefix+dirNodeAlive):])] = true
	}
	for _, n := range nodes {
		n.Status = spec.NodeDown
		if up[n.ID] {
			n.Status = spec.NodeReady
		}
	}
}

// nodeViews keeps the nodes of the last snapshot, each with its status,
// so that a node that did not change (same revision, same liveness) is the
// same *spec.Node in the next snapshot. The scheduler's cache compares
// node lists by pointer; a leader pass then does not pay for nodes that
// did not change. Snapshot nodes are shared between snapshots: callers
// copy a node before changing it.
type nodeViews struct {
	mu sync.Mutex
	m  map[string]nodeView
}

type nodeView struct {
	rev  int64
	node *spec.Node
}

// snapshotNodes decodes the nodes of a snapshot with their status from
// the liveness keys, reusing the previous snapshot's value of each node
// that did not change, in the order decodeNodes gives.
func (r *Registry) snapshotNodes(kvs, alive []*mvccpb.KeyValue) ([]*spec.Node, error) {
	up := make(map[string]bool, len(alive))
	for _, kv := range alive {
		up[string(kv.Key[len(r.prefix+dirNodeAlive):])] = true
	}
	r.views.mu.Lock()
	defer r.views.mu.Unlock()
	seen := make(map[string]nodeView, len(kvs))
	out := make([]*spec.Node, 0, len(kvs))
	for _, kv := range kvs {
		key := string(kv.Key)
		status := spec.NodeDown
		if up[key[len(r.prefix+dirNodes):]] {
			status = spec.NodeReady
		}
		v, ok := r.views.m[key]
		if !ok || v.rev != kv.ModRevision || v.node.Status != status {
			n, err := decodeNode(kv)
			if err != nil {
				return nil, err
			}
			n.Status = status
			v = nodeView{rev: kv.ModRevision, node: n}
		}
		seen[key] = v
		out = append(out, v.node)
	}
	r.views.m = seen
	sortNodes(out)
	return out, nil
}
