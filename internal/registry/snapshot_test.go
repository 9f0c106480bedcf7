package registry

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/drover-org/drover/internal/spec"
)

// Snapshot is the whole registry at one revision, read from etcd: what
// the tests compare the server's state with.
type Snapshot struct {
	Rev       int64
	Jobs      []*spec.Job
	Allocs    []*spec.Alloc
	Nodes     []*spec.Node
	Schedules map[string]*spec.JobSchedule
	// Deployments are every deployment with its request merged in, by
	// job, then oldest first.
	Deployments []*spec.Deployment
}

// Snapshot reads jobs, allocs (with status), nodes (with liveness,
// control and usage), schedules and deployments in one transaction, so all of them are as of the same
// revision.
func (r *Registry) Snapshot(ctx context.Context) (*Snapshot, error) {
	ctx, cancel := r.opCtx(ctx)
	defer cancel()
	resp, err := r.cli.Txn(ctx).Then(
		clientv3.OpGet(r.prefix+dirJobs, clientv3.WithPrefix()),
		clientv3.OpGet(r.prefix+dirAllocs, clientv3.WithPrefix()),
		clientv3.OpGet(r.prefix+dirAllocStatus, clientv3.WithPrefix()),
		clientv3.OpGet(r.prefix+dirNodes, clientv3.WithPrefix()),
		clientv3.OpGet(r.prefix+dirSchedules, clientv3.WithPrefix()),
		clientv3.OpGet(r.prefix+dirNodeAlive, clientv3.WithPrefix(), clientv3.WithKeysOnly()),
		clientv3.OpGet(r.prefix+dirDeployments, clientv3.WithPrefix()),
		clientv3.OpGet(r.prefix+dirDeploymentRequests, clientv3.WithPrefix()),
		clientv3.OpGet(r.prefix+dirNodeCtl, clientv3.WithPrefix()),
		clientv3.OpGet(r.prefix+dirNodeUsage, clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return nil, wrap("read snapshot", err)
	}
	kvs := func(i int) []*mvccpb.KeyValue { return resp.Responses[i].GetResponseRange().Kvs }
	s := &Snapshot{Rev: resp.Header.Revision, Schedules: map[string]*spec.JobSchedule{}}
	if s.Jobs, err = decodeJobs(kvs(0)); err != nil {
		return nil, err
	}
	if s.Allocs, err = r.mergeAllocs(kvs(1), kvs(2)); err != nil {
		return nil, err
	}
	if s.Nodes, err = r.snapshotNodes(kvs(3), kvs(5), kvs(8), kvs(9)); err != nil {
		return nil, err
	}
	for _, kv := range kvs(4) {
		var js spec.JobSchedule
		if err := json.Unmarshal(kv.Value, &js); err != nil {
			return nil, fmt.Errorf("registry: decode %s: %w", kv.Key, err)
		}
		s.Schedules[string(kv.Key[len(r.prefix+dirSchedules):])] = &js
	}
	if s.Deployments, err = r.mergeDeployments(kvs(6), kvs(7)); err != nil {
		return nil, err
	}
	sortDeployments(s.Deployments)
	return s, nil
}

func decodeJobs(kvs []*mvccpb.KeyValue) ([]*spec.Job, error) {
	out := make([]*spec.Job, 0, len(kvs))
	for _, kv := range kvs {
		j, err := decodeJob(kv)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	slices.SortFunc(out, func(a, b *spec.Job) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// sortDeployments is the snapshot's order: by job, then oldest first.
func sortDeployments(ds []*spec.Deployment) {
	slices.SortFunc(ds, func(a, b *spec.Deployment) int {
		return cmp.Or(cmp.Compare(a.Job, b.Job), a.CreateTime.Compare(b.CreateTime), cmp.Compare(a.ID, b.ID))
	})
}

// snapshotNodes decodes the nodes of a snapshot with their status from
// the liveness keys and their control and usage merged in.
func (r *Registry) snapshotNodes(kvs, alive, ctls, usages []*mvccpb.KeyValue) ([]*spec.Node, error) {
	up := make(map[string]bool, len(alive))
	for _, kv := range alive {
		up[string(kv.Key[len(r.prefix+dirNodeAlive):])] = true
	}
	ctlOf, usageOf := r.byNodeID(dirNodeCtl, ctls), r.byNodeID(dirNodeUsage, usages)
	out := make([]*spec.Node, 0, len(kvs))
	for _, kv := range kvs {
		id := string(kv.Key)[len(r.prefix+dirNodes):]
		n, err := decodeNode(kv)
		if err != nil {
			return nil, err
		}
		n.Status = spec.NodeDown
		if up[id] {
			n.Status = spec.NodeReady
		}
		x, err := extrasOf(ctlOf[id], usageOf[id])
		if err != nil {
			return nil, err
		}
		x.apply(n)
		out = append(out, n)
	}
	sortNodes(out)
	return out, nil
}
