package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/drover-org/drover/internal/spec"
)

// A deployment is two keys with one writer each:
// deployments/<id> is the leader's record, written only in its fenced
// plans; deployment_requests/<id> is what operators asked of it (promote,
// fail), written by any server for the API. They are merged on read, as
// an alloc's desired and observed halves are.
const (
	dirDeployments        = "deployments/"
	dirDeploymentRequests = "deployment_requests/"
)

// requestRecord is what deployment_requests/<id> holds: the request with
// the deployment's job alongside, so that a watcher can tell whom it
// concerns without reading the deployment.
type requestRecord struct {
	Job string `json:"job"`
	spec.DeploymentRequest
}

func decodeDeployment(kv *mvccpb.KeyValue) (*spec.Deployment, error) {
	var d spec.Deployment
	if err := json.Unmarshal(kv.Value, &d); err != nil {
		return nil, fmt.Errorf("registry: decode %s: %w", kv.Key, err)
	}
	d.Request, d.ModifyIndex = nil, kv.ModRevision
	return &d, nil
}

func decodeRequest(kv *mvccpb.KeyValue) (*requestRecord, error) {
	var rec requestRecord
	if err := json.Unmarshal(kv.Value, &rec); err != nil {
		return nil, fmt.Errorf("registry: decode %s: %w", kv.Key, err)
	}
	return &rec, nil
}

// PutDeploymentRequest records an operator's request about a deployment
// for the leader to act on. Requests accumulate: a promote asked earlier
// stays asked when a fail follows (the leader decides what both mean);
// Time is the latest request's (now when zero). ErrNotFound: no such
// deployment. ErrConflict: the deployment is final (its status is in the
// message), checked in the same transaction as the write. ErrInvalid: the
// request asks for nothing.
func (r *Registry) PutDeploymentRequest(ctx context.Context, id string, req *spec.DeploymentRequest) error {
	if req == nil || (!req.Promote && !req.Fail) {
		return fmt.Errorf("registry: deployment %q: the request asks for neither promote nor fail: %w", id, ErrInvalid)
	}
	return r.changeRequest(ctx, id, req.Time, func(rec *requestRecord) {
		rec.Promote = rec.Promote || req.Promote
		rec.Fail = rec.Fail || req.Fail
	})
}

// PauseDeployment records that an operator paused a running deployment
// (paused) or resumed it (drover deployment pause|resume): while paused,
// the leader starts no new batch of it. Errors as PutDeploymentRequest's.
func (r *Registry) PauseDeployment(ctx context.Context, id string, paused bool) error {
	now := r.now().UTC()
	return r.changeRequest(ctx, id, now, func(rec *requestRecord) {
		if rec.Paused && !paused {
			rec.Resumed = now
		}
		rec.Paused = paused
	})
}

// changeRequest applies change to deployment id's request record, and
// sets its Time to at (now when zero), in a transaction guarded by both
// keys' revisions; a final deployment is an ErrConflict.
func (r *Registry) changeRequest(ctx context.Context, id string, at time.Time, change func(*requestRecord)) error {
	ctx, cancel := r.opCtx(ctx)
	defer cancel()
	dkey, err := r.key(dirDeployments, "deployment id", id)
	if err != nil {
		return err
	}
	rkey := r.prefix + dirDeploymentRequests + id
	for range casAttempts {
		resp, err := r.cli.Txn(ctx).Then(clientv3.OpGet(dkey), clientv3.OpGet(rkey)).Commit()
		if err != nil {
			return wrap("read deployment "+id, err)
		}
		dkvs, rkvs := resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs
		if len(dkvs) == 0 {
			return fmt.Errorf("registry: deployment %q: %w", id, ErrNotFound)
		}
		d, err := decodeDeployment(dkvs[0])
		if err != nil {
			return err
		}
		if d.Status.Final() {
			return fmt.Errorf("registry: deployment %q of job %q is %s: %w", id, d.Job, d.Status, ErrConflict)
		}
		rec := &requestRecord{Job: d.Job}
		var reqRev int64
		if len(rkvs) > 0 {
			if rec, err = decodeRequest(rkvs[0]); err != nil {
				return err
			}
			rec.Job, reqRev = d.Job, rkvs[0].ModRevision
		}
		change(rec)
		rec.Time = at
		if rec.Time.IsZero() {
			rec.Time = r.now().UTC()
		}
		val, err := json.Marshal(rec)
		if err != nil {
			return fmt.Errorf("registry: encode deployment request %q: %w", id, err)
		}
		tresp, err := r.cli.Txn(ctx).If(
			clientv3.Compare(clientv3.ModRevision(dkey), "=", dkvs[0].ModRevision),
			clientv3.Compare(clientv3.ModRevision(rkey), "=", reqRev),
		).Then(clientv3.OpPut(rkey, string(val))).Commit()
		if err != nil {
			return wrap("write deployment request "+id, err)
		}
		if tresp.Succeeded {
			return nil
		}
		// The leader moved the deployment, or another request came in:
		// look again (it may have become final).
	}
	return fmt.Errorf("registry: deployment %q keeps changing under concurrent writes: %w", id, ErrConflict)
}

// deploymentPuts are a plan's deployment writes (see planOps).
func (r *Registry) deploymentPuts(p *spec.Plan, add func(opGroup, subject, ...string) error) error {
	for _, d := range p.Deployments {
		if d == nil {
			return fmt.Errorf("registry: plan has a nil deployment: %w", ErrInvalid)
		}
		key, err := r.key(dirDeployments, "deployment id", d.ID)
		if err != nil {
			return err
		}
		if err := checkName("deployment job name", d.Job); err != nil {
			return err
		}
		c := *d
		c.Request, c.ModifyIndex = nil, 0
		val, err := json.Marshal(&c)
		if err != nil {
			return fmt.Errorf("registry: encode deployment %q: %w", d.ID, err)
		}
		if err := add(opGroup{ops: []clientv3.Op{clientv3.OpPut(key, string(val))}, bytes: len(key) + len(val)}, subject{deployment: d.ID}, key); err != nil {
			return err
		}
	}
	return nil
}

// deploymentDeletes are a plan's deletions of deployments, each with its
// request (see planOps).
func (r *Registry) deploymentDeletes(p *spec.Plan, add func(opGroup, subject, ...string) error) error {
	for _, id := range p.DeleteDeployments {
		key, err := r.key(dirDeployments, "deployment id", id)
		if err != nil {
			return err
		}
		rkey := r.prefix + dirDeploymentRequests + id
		g := opGroup{ops: []clientv3.Op{clientv3.OpDelete(key), clientv3.OpDelete(rkey)}, bytes: len(key) + len(rkey)}
		if err := add(g, subject{deployment: id}, key, rkey); err != nil {
			return err
		}
	}
	return nil
}
