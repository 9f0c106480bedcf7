package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/drover-org/drover/internal/spec"
)

// StatusUpdate is one alloc's observed state in a node's batched report.
type StatusUpdate struct {
	ID     string
	Status *spec.AllocStatus
}

// PutAllocStatuses writes a node's reports for many allocs in one read and
// one transaction, so that an agent starting a hundred tasks costs a few
// etcd writes, not hundreds. The rules are PutAllocStatus's, per alloc: the
// alloc must exist and be on nodeID, and a terminal status does not move.
// errs[i] is the outcome of updates[i] (nil when written); err is for the
// batch as a whole (etcd unreachable, or it kept changing underneath).
func (r *Registry) PutAllocStatuses(ctx context.Context, nodeID string, updates []StatusUpdate) (errs []error, err error) {
	ctx, cancel := r.opCtx(ctx)
	defer cancel()
	if err := checkName("node id", nodeID); err != nil {
		return nil, err
	}
	errs = make([]error, len(updates))
	akeys := make([]string, len(updates))
	for i, u := range updates {
		akeys[i], errs[i] = r.key(dirAllocs, "alloc id", u.ID)
		if errs[i] == nil && (u.Status == nil || !slices.Contains(knownClientStatus, u.Status.ClientStatus)) {
			errs[i] = fmt.Errorf("registry: alloc %q: missing or unknown client status: %w", u.ID, ErrInvalid)
		}
	}
	for range casAttempts {
		var gets []clientv3.Op
		var idx []int
		for i, u := range updates {
			if errs[i] == nil {
				gets = append(gets, clientv3.OpGet(akeys[i]), clientv3.OpGet(r.prefix+dirAllocStatus+u.ID))
				idx = append(idx, i)
			}
		}
		if len(idx) == 0 {
			return errs, nil
		}
		resp, err := r.cli.Txn(ctx).Then(gets...).Commit()
		if err != nil {
			return nil, wrap("read allocs for a status batch", err)
		}
		var cmps []clientv3.Cmp
		var puts []clientv3.Op
		var evs []spec.Event
		for n, i := range idx {
			u := updates[i]
			akvs := resp.Responses[2*n].GetResponseRange().Kvs
			skvs := resp.Responses[2*n+1].GetResponseRange().Kvs
			skey := r.prefix + dirAllocStatus + u.ID
			if len(akvs) == 0 {
				errs[i] = fmt.Errorf("registry: alloc %q: %w", u.ID, ErrNotFound)
				continue
			}
			var a spec.Alloc
			if err := json.Unmarshal(akvs[0].Value, &a); err != nil {
				errs[i] = fmt.Errorf("registry: decode %s: %w", akvs[0].Key, err)
				continue
			}
			if a.NodeID != nodeID {
				errs[i] = fmt.Errorf("registry: alloc %q belongs to node %q, not %q: %w", u.ID, a.NodeID, nodeID, ErrConflict)
				continue
			}
			var statusRev int64
			var old *spec.AllocStatus
			if len(skvs) > 0 {
				statusRev = skvs[0].ModRevision
				var rec statusRecord
				if err := json.Unmarshal(skvs[0].Value, &rec); err == nil {
					old = &rec.AllocStatus
					if old.ClientStatus.Terminal() && u.Status.ClientStatus != old.ClientStatus {
						errs[i] = fmt.Errorf("registry: alloc %q is %s; it cannot become %s: %w", u.ID, old.ClientStatus, u.Status.ClientStatus, ErrConflict)
						continue
					}
				}
			}
			evs = append(evs, statusEvents(&a, old, u.Status)...)
			val, err := json.Marshal(statusRecord{Job: a.Job, NodeID: a.NodeID, AllocStatus: *u.Status})
			if err != nil {
				errs[i] = fmt.Errorf("registry: encode status of alloc %q: %w", u.ID, err)
				continue
			}
			cmps = append(cmps,
				clientv3.Compare(clientv3.ModRevision(akeys[i]), "=", akvs[0].ModRevision),
				clientv3.Compare(clientv3.ModRevision(skey), "=", statusRev))
			puts = append(puts, clientv3.OpPut(skey, string(val)))
		}
		if len(puts) == 0 {
			return errs, nil
		}
		if len(evs) > 0 {
			ops, _, err := r.eventOps(evs, r.now())
			if err != nil {
				return nil, err
			}
			puts = append(puts, ops...)
		}
		tresp, err := r.cli.Txn(ctx).If(cmps...).Then(puts...).Commit()
		if err != nil {
			return nil, wrap("write a status batch", err)
		}
		if tresp.Succeeded {
			return errs, nil
		}
		// Something changed between the read and the write (the leader
		// stopped an alloc, say): read again. Per-alloc errors stay.
	}
	return nil, fmt.Errorf("registry: allocs of node %q keep changing under concurrent writes: %w", nodeID, ErrConflict)
}

// statusEvents are the history entries of one status report: the alloc's
// client status when it changed, and each task event newer than the
// stored report's newest for that task.
func statusEvents(a *spec.Alloc, old, now *spec.AllocStatus) []spec.Event {
	ev := func(typ spec.EventType, task, msg string, at time.Time) spec.Event {
		return spec.Event{Time: at, Topic: spec.TopicAlloc, Type: typ, Job: a.Job, Namespace: spec.NamespaceOf(a.Namespace),
			Node: a.NodeName, Alloc: a.Name, AllocID: a.ID, Task: task, Message: msg}
	}
	var out []spec.Event
	names := make([]string, 0, len(now.Tasks))
	for name := range now.Tasks {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		var since time.Time
		if old != nil {
			if ot := old.Tasks[name]; ot != nil {
				for _, e := range ot.Events {
					if e.Time.After(since) {
						since = e.Time
					}
				}
			}
		}
		for _, e := range now.Tasks[name].Events {
			if e.Time.After(since) {
				out = append(out, ev(e.Type, name, e.Message, e.Time))
			}
		}
	}
	// A deployment's step: the agent's verdict on an instance it placed.
	if v := now.DeploymentHealth; v != nil && (old == nil || old.DeploymentHealth == nil) {
		e := ev(spec.EventUnhealthy, "", v.Reason, v.Time)
		if v.Healthy {
			e.Type, e.Message = spec.EventHealthy, "healthy for deployment "+a.DeploymentID[:min(8, len(a.DeploymentID))]
		}
		e.Topic, e.DeploymentID = spec.TopicDeployment, a.DeploymentID
		out = append(out, e)
	}
	if old == nil || old.ClientStatus != now.ClientStatus {
		if cs := now.ClientStatus; cs != "" {
			out = append(out, ev(cs.EventType(), "", now.Description, time.Time{}))
		}
	}
	return out
}
