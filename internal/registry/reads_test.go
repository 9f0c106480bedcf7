package registry

// The registry's reads of jobs' allocs, nodes, schedules and deployments
// straight from etcd: the server reads its state store instead
// (internal/state), and these serve only the tests, which compare the
// registry's writes with what etcd holds.

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

// AllocFilter selects allocs; an empty field matches any.
type AllocFilter struct {
	Job, NodeID string
}

func (f AllocFilter) match(a *spec.Alloc) bool {
	return (f.Job == "" || a.Job == f.Job) && (f.NodeID == "" || a.NodeID == f.NodeID)
}

// mergeAllocs decodes desired halves and attaches status halves by id.
// CreateIndex is the desired key's create revision; ModifyIndex is the
// later of the two halves' mod revisions.
func (r *Registry) mergeAllocs(allocKVs, statusKVs []*mvccpb.KeyValue) ([]*spec.Alloc, error) {
	statuses := make(map[string]*mvccpb.KeyValue, len(statusKVs))
	for _, kv := range statusKVs {
		statuses[string(kv.Key[len(r.prefix+dirAllocStatus):])] = kv
	}
	out := make([]*spec.Alloc, 0, len(allocKVs))
	for _, kv := range allocKVs {
		var a spec.Alloc
		if err := json.Unmarshal(kv.Value, &a); err != nil {
			return nil, fmt.Errorf("registry: decode %s: %w", kv.Key, err)
		}
		a.CreateIndex, a.ModifyIndex = kv.CreateRevision, kv.ModRevision
		a.Status = nil
		if skv := statuses[string(kv.Key[len(r.prefix+dirAllocs):])]; skv != nil {
			var rec statusRecord
			if err := json.Unmarshal(skv.Value, &rec); err != nil {
				return nil, fmt.Errorf("registry: decode %s: %w", skv.Key, err)
			}
			a.Status = &rec.AllocStatus
			a.ModifyIndex = max(a.ModifyIndex, skv.ModRevision)
		}
		out = append(out, &a)
	}
	sortAllocs(out)
	return out, nil
}

func sortAllocs(as []*spec.Alloc) {
	slices.SortFunc(as, func(a, b *spec.Alloc) int {
		return cmp.Or(cmp.Compare(a.Job, b.Job), cmp.Compare(a.Group, b.Group), cmp.Compare(a.Index, b.Index),
			cmp.Compare(a.CreateIndex, b.CreateIndex), cmp.Compare(a.ID, b.ID))
	})
}

// ListAllocs returns the allocs matching f, with their status, read at one
// revision (returned).
func (r *Registry) ListAllocs(ctx context.Context, f AllocFilter) ([]*spec.Alloc, int64, error) {
	ctx, cancel := r.opCtx(ctx)
	defer cancel()
	resp, err := r.cli.Txn(ctx).Then(
		clientv3.OpGet(r.prefix+dirAllocs, clientv3.WithPrefix()),
		clientv3.OpGet(r.prefix+dirAllocStatus, clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return nil, 0, wrap("list allocs", err)
	}
	all, err := r.mergeAllocs(resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs)
	if err != nil {
		return nil, 0, err
	}
	out := all[:0]
	for _, a := range all {
		if f.match(a) {
			out = append(out, a)
		}
	}
	return out, resp.Header.Revision, nil
}

// GetAlloc returns one alloc with its status.
func (r *Registry) GetAlloc(ctx context.Context, id string) (*spec.Alloc, error) {
	ctx, cancel := r.opCtx(ctx)
	defer cancel()
	akey, err := r.key(dirAllocs, "alloc id", id)
	if err != nil {
		return nil, err
	}
	resp, err := r.cli.Txn(ctx).Then(clientv3.OpGet(akey), clientv3.OpGet(r.prefix+dirAllocStatus+id)).Commit()
	if err != nil {
		return nil, wrap("read alloc "+id, err)
	}
	as, err := r.mergeAllocs(resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs)
	if err != nil {
		return nil, err
	}
	if len(as) == 0 {
		return nil, fmt.Errorf("registry: alloc %q: %w", id, ErrNotFound)
	}
	return as[0], nil
}

// GetNode returns one node.
func (r *Registry) GetNode(ctx context.Context, id string) (*spec.Node, error) {
	ctx, cancel := r.opCtx(ctx)
	defer cancel()
	key, err := r.key(dirNodes, "node id", id)
	if err != nil {
		return nil, err
	}
	resp, err := r.cli.Txn(ctx).Then(clientv3.OpGet(key), clientv3.OpGet(r.prefix+dirNodeAlive+id),
		clientv3.OpGet(r.prefix+dirNodeCtl+id), clientv3.OpGet(r.prefix+dirNodeUsage+id)).Commit()
	if err != nil {
		return nil, wrap("read node "+id, err)
	}
	kv := firstKV(resp, 0)
	if kv == nil {
		return nil, fmt.Errorf("registry: node %q: %w", id, ErrNotFound)
	}
	n, err := decodeNode(kv)
	if err != nil {
		return nil, err
	}
	r.applyAlive([]*spec.Node{n}, resp.Responses[1].GetResponseRange().Kvs)
	x, err := extrasOf(firstKV(resp, 2), firstKV(resp, 3))
	if err != nil {
		return nil, err
	}
	x.apply(n)
	return n, nil
}

// ListNodes returns every node sorted by name, then id, and the revision.
func (r *Registry) ListNodes(ctx context.Context) ([]*spec.Node, int64, error) {
	ctx, cancel := r.opCtx(ctx)
	defer cancel()
	resp, err := r.cli.Txn(ctx).Then(
		clientv3.OpGet(r.prefix+dirNodes, clientv3.WithPrefix()),
		clientv3.OpGet(r.prefix+dirNodeAlive, clientv3.WithPrefix(), clientv3.WithKeysOnly()),
		clientv3.OpGet(r.prefix+dirNodeCtl, clientv3.WithPrefix()),
		clientv3.OpGet(r.prefix+dirNodeUsage, clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return nil, 0, wrap("list nodes", err)
	}
	kvs := func(i int) []*mvccpb.KeyValue { return resp.Responses[i].GetResponseRange().Kvs }
	nodes, err := decodeNodes(kvs(0))
	if err != nil {
		return nil, 0, err
	}
	r.applyAlive(nodes, kvs(1))
	if err := r.mergeNodes(nodes, kvs(2), kvs(3)); err != nil {
		return nil, 0, err
	}
	return nodes, resp.Header.Revision, nil
}

func decodeNodes(kvs []*mvccpb.KeyValue) ([]*spec.Node, error) {
	out := make([]*spec.Node, 0, len(kvs))
	for _, kv := range kvs {
		n, err := decodeNode(kv)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	sortNodes(out)
	return out, nil
}

// sortNodes orders nodes by name, then ID.
func sortNodes(ns []*spec.Node) { slices.SortFunc(ns, compareNodes) }

func compareNodes(a, b *spec.Node) int {
	return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID))
}

// GetSchedule returns the leader's schedule record for a job, or nil, nil.
func (r *Registry) GetSchedule(ctx context.Context, job string) (*spec.JobSchedule, error) {
	ctx, cancel := r.opCtx(ctx)
	defer cancel()
	key, err := r.key(dirSchedules, "job name", job)
	if err != nil {
		return nil, err
	}
	resp, err := r.cli.Get(ctx, key)
	if err != nil {
		return nil, wrap("read schedule "+job, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	var s spec.JobSchedule
	if err := json.Unmarshal(resp.Kvs[0].Value, &s); err != nil {
		return nil, fmt.Errorf("registry: decode %s: %w", resp.Kvs[0].Key, err)
	}
	return &s, nil
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

// byNodeID indexes the keys of dir by the node ID after it.
func (r *Registry) byNodeID(dir string, kvs []*mvccpb.KeyValue) map[string]*mvccpb.KeyValue {
	m := make(map[string]*mvccpb.KeyValue, len(kvs))
	for _, kv := range kvs {
		m[string(kv.Key[len(r.prefix+dir):])] = kv
	}
	return m
}

// mergeNodes applies the control and usage keys to nodes.
func (r *Registry) mergeNodes(nodes []*spec.Node, ctls, usages []*mvccpb.KeyValue) error {
	if len(ctls) == 0 && len(usages) == 0 {
		return nil
	}
	c, u := r.byNodeID(dirNodeCtl, ctls), r.byNodeID(dirNodeUsage, usages)
	for _, n := range nodes {
		x, err := extrasOf(c[n.ID], u[n.ID])
		if err != nil {
			return err
		}
		x.apply(n)
	}
	return nil
}

// withRequest returns a copy of d with the request merged in; ModifyIndex
// is the later of the two keys' revisions, so that a request moves it.
func withRequest(d *spec.Deployment, req *spec.DeploymentRequest, reqRev int64) *spec.Deployment {
	c := *d
	if req != nil {
		r := *req
		c.Request = &r
		c.ModifyIndex = max(c.ModifyIndex, reqRev)
	}
	return &c
}

// mergeDeployments decodes the leader's records and attaches the requests
// by ID. A request whose deployment is gone is left out.
func (r *Registry) mergeDeployments(depKVs, reqKVs []*mvccpb.KeyValue) ([]*spec.Deployment, error) {
	reqs := make(map[string]*mvccpb.KeyValue, len(reqKVs))
	for _, kv := range reqKVs {
		reqs[string(kv.Key[len(r.prefix+dirDeploymentRequests):])] = kv
	}
	out := make([]*spec.Deployment, 0, len(depKVs))
	for _, kv := range depKVs {
		d, err := decodeDeployment(kv)
		if err != nil {
			return nil, err
		}
		if rkv := reqs[string(kv.Key[len(r.prefix+dirDeployments):])]; rkv != nil {
			rec, err := decodeRequest(rkv)
			if err != nil {
				return nil, err
			}
			d = withRequest(d, &rec.DeploymentRequest, rkv.ModRevision)
		}
		out = append(out, d)
	}
	return out, nil
}

// sortNewestFirst is the API's order: the newest deployment first, whatever
// its job; ties (one pass creating several) by job version, then ID.
func sortNewestFirst(ds []*spec.Deployment) {
	slices.SortFunc(ds, func(a, b *spec.Deployment) int {
		return cmp.Or(b.CreateTime.Compare(a.CreateTime), cmp.Compare(b.JobVersion, a.JobVersion),
			cmp.Compare(a.Job, b.Job), cmp.Compare(a.ID, b.ID))
	})
}

// ListDeployments returns the deployments of job ("" for every job) with
// their requests, newest first, and the revision read at.
func (r *Registry) ListDeployments(ctx context.Context, job string) ([]*spec.Deployment, int64, error) {
	ctx, cancel := r.opCtx(ctx)
	defer cancel()
	if job != "" {
		if err := checkName("job name", job); err != nil {
			return nil, 0, err
		}
	}
	resp, err := r.cli.Txn(ctx).Then(
		clientv3.OpGet(r.prefix+dirDeployments, clientv3.WithPrefix()),
		clientv3.OpGet(r.prefix+dirDeploymentRequests, clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return nil, 0, wrap("list deployments", err)
	}
	all, err := r.mergeDeployments(resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs)
	if err != nil {
		return nil, 0, err
	}
	out := all[:0]
	for _, d := range all {
		if job == "" || d.Job == job {
			out = append(out, d)
		}
	}
	sortNewestFirst(out)
	return out, resp.Header.Revision, nil
}

// GetDeployment returns one deployment with its request.
func (r *Registry) GetDeployment(ctx context.Context, id string) (*spec.Deployment, error) {
	ctx, cancel := r.opCtx(ctx)
	defer cancel()
	dkey, err := r.key(dirDeployments, "deployment id", id)
	if err != nil {
		return nil, err
	}
	resp, err := r.cli.Txn(ctx).Then(clientv3.OpGet(dkey), clientv3.OpGet(r.prefix+dirDeploymentRequests+id)).Commit()
	if err != nil {
		return nil, wrap("read deployment "+id, err)
	}
	ds, err := r.mergeDeployments(resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs)
	if err != nil {
		return nil, err
	}
	if len(ds) == 0 {
		return nil, fmt.Errorf("registry: deployment %q: %w", id, ErrNotFound)
	}
	return ds[0], nil
}
