package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/drover-org/drover/internal/spec"
)

// A node's record has three writers, so it is three keys, merged on every
// read (GetNode, ListNodes, Snapshot, the leader's mirror):
//
//	nodes/<id>        spec.Node          the agent's registration
//	node_ctl/<id>     spec.NodeControl   the operator's: eligibility, drain
//	node_usage/<id>   spec.NodeUsage     the agent's usage report (Allocs not kept)
//
// Registering again never clobbers what an operator decided, and a usage
// report (every few seconds per node) rewrites only its own small key. A
// node's ModifyIndex is the latest of the three keys' mod revisions.
//
// A change of node_ctl/ is a KindNode change (it can change what the
// leader decides); a change of node_usage/ is a KindNodeUsage change,
// which does not wake the leader: its periodic full pass reads the
// reports.
const (
	dirNodeCtl   = "node_ctl/"
	dirNodeUsage = "node_usage/"
)

// decodeControl decodes a node_ctl/ value.
func decodeControl(kv *mvccpb.KeyValue) (*spec.NodeControl, error) {
	var c spec.NodeControl
	if err := json.Unmarshal(kv.Value, &c); err != nil {
		return nil, fmt.Errorf("registry: decode %s: %w", kv.Key, err)
	}
	return &c, nil
}

// decodeUsage decodes a node_usage/ value.
func decodeUsage(kv *mvccpb.KeyValue) (*spec.NodeUsage, error) {
	var u spec.NodeUsage
	if err := json.Unmarshal(kv.Value, &u); err != nil {
		return nil, fmt.Errorf("registry: decode %s: %w", kv.Key, err)
	}
	return &u, nil
}

// nodeExtras are what is merged into a decoded node record: its control
// and its usage, each with the mod revision of its key (0: no key).
type nodeExtras struct {
	ctl      *spec.NodeControl
	ctlRev   int64
	usage    *spec.NodeUsage
	usageRev int64
}

// apply sets n's operator fields and usage from x, whatever the node
// record held, and its ModifyIndex to the latest of the keys'.
func (x nodeExtras) apply(n *spec.Node) {
	n.Ineligible, n.Drain, n.Usage = false, nil, nil
	if x.ctl != nil {
		n.Ineligible, n.Drain = x.ctl.Ineligible, x.ctl.Drain
	}
	n.Usage = x.usage
	n.ModifyIndex = max(n.ModifyIndex, x.ctlRev, x.usageRev)
}

// extrasOf decodes the control and usage keys (either may be nil).
func extrasOf(ctl, usage *mvccpb.KeyValue) (nodeExtras, error) {
	var x nodeExtras
	var err error
	if ctl != nil {
		if x.ctl, err = decodeControl(ctl); err != nil {
			return x, err
		}
		x.ctlRev = ctl.ModRevision
	}
	if usage != nil {
		if x.usage, err = decodeUsage(usage); err != nil {
			return x, err
		}
		x.usageRev = usage.ModRevision
	}
	return x, nil
}

// firstKV is the first key of a range answer, or nil.
func firstKV(resp *clientv3.TxnResponse, i int) *mvccpb.KeyValue {
	if kvs := resp.Responses[i].GetResponseRange().Kvs; len(kvs) > 0 {
		return kvs[0]
	}
	return nil
}

// UpdateNodeControl changes node id's control by f, which gets the stored
// one (zero when none) and returns the new one, or an error that is
// returned as is and writes nothing. f may run more than once, when
// another writer changed the control between the read and the write.
// ErrNotFound: no such node.
func (r *Registry) UpdateNodeControl(ctx context.Context, id string, f func(spec.NodeControl) (spec.NodeControl, error)) error {
	ctx, cancel := r.opCtx(ctx)
	defer cancel()
	nkey, err := r.key(dirNodes, "node id", id)
	if err != nil {
		return err
	}
	ckey := r.prefix + dirNodeCtl + id
	for range casAttempts {
		resp, err := r.cli.Txn(ctx).Then(clientv3.OpGet(nkey, clientv3.WithCountOnly()), clientv3.OpGet(ckey)).Commit()
		if err != nil {
			return wrap("read control of node "+id, err)
		}
		if resp.Responses[0].GetResponseRange().Count == 0 {
			return fmt.Errorf("registry: node %q: %w", id, ErrNotFound)
		}
		var cur spec.NodeControl
		var ctlRev int64
		var old []byte
		if kv := firstKV(resp, 1); kv != nil {
			c, err := decodeControl(kv)
			if err != nil {
				return err
			}
			cur, ctlRev, old = *c, kv.ModRevision, kv.Value
		}
		next, err := f(cur)
		if err != nil {
			return err
		}
		if next.Drain != nil {
			d := *next.Drain
			d.StartedAt, d.Deadline = d.StartedAt.UTC(), d.Deadline.UTC()
			next.Drain = &d
		}
		// No key for a node nobody decided anything about.
		var op clientv3.Op
		var val []byte
		if next.Ineligible || next.Drain != nil {
			if val, err = json.Marshal(&next); err != nil {
				return fmt.Errorf("registry: encode control of node %q: %w", id, err)
			}
			op = clientv3.OpPut(ckey, string(val))
		} else {
			op = clientv3.OpDelete(ckey)
		}
		if bytes.Equal(val, old) {
			return nil // unchanged: no write, no wake-up
		}
		tresp, err := r.cli.Txn(ctx).If(
			clientv3.Compare(clientv3.CreateRevision(nkey), ">", 0),
			clientv3.Compare(clientv3.ModRevision(ckey), "=", ctlRev),
		).Then(op).Commit()
		if err != nil {
			return wrap("write control of node "+id, err)
		}
		if tresp.Succeeded {
			return nil
		}
		// The node went, or another operator wrote: look again.
	}
	return fmt.Errorf("registry: control of node %q keeps changing under concurrent writes: %w", id, ErrConflict)
}

// PutNodeUsage stores node id's usage report: its tasks in all and when
// (Allocs is not kept: per-alloc figures are the agent's to serve on
// demand, and would make each report as large as the node's work).
// ErrNotFound: no such node.
func (r *Registry) PutNodeUsage(ctx context.Context, id string, u *spec.NodeUsage) error {
	ctx, cancel := r.opCtx(ctx)
	defer cancel()
	nkey, err := r.key(dirNodes, "node id", id)
	if err != nil {
		return err
	}
	if u == nil {
		return fmt.Errorf("registry: usage of node %q: no usage: %w", id, ErrInvalid)
	}
	v := spec.NodeUsage{NodeID: id, Time: u.Time.UTC(), Tasks: u.Tasks}
	val, err := json.Marshal(&v)
	if err != nil {
		return fmt.Errorf("registry: encode usage of node %q: %w", id, err)
	}
	resp, err := r.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(nkey), ">", 0)).
		Then(clientv3.OpPut(r.prefix+dirNodeUsage+id, string(val))).Commit()
	if err != nil {
		return wrap("write usage of node "+id, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("registry: node %q: %w", id, ErrNotFound)
	}
	return nil
}
