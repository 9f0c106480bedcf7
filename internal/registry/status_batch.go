package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/drover-org/drover/internal/spec"
)

// StatusUpdate is one alloc's observed state in a node's batched report.
type StatusUpdate struct {
	ID     string
	Status *spec.AllocStatus
	// Known is the alloc as the server's state holds it, nil when it holds
	// none: see PutAllocStatuses.
	Known *KnownAlloc
}

// KnownAlloc is an alloc as a server's state holds it: its record (Status
// the stored report, nil when none) and the mod revisions of its record
// and of its status record (0: none).
type KnownAlloc struct {
	Alloc               *spec.Alloc
	AllocRev, StatusRev int64
}

// PutAllocStatuses writes a node's reports for many allocs in one
// transaction, so that an agent starting a hundred tasks costs a few etcd
// writes, not hundreds. The rules are PutAllocStatus's, per alloc: the
// alloc must exist and be on nodeID, and a terminal status does not move.
// errs[i] is the outcome of updates[i] (nil when written); err is for the
// batch as a whole (etcd unreachable, or it kept changing underneath).
//
// When every update brings the alloc as the server's state knows it
// (Known), the first attempt judges by that and writes guarded by its
// revisions: no read, and one transaction shared with the reports of other
// nodes made at the same moment (statusGroup). Otherwise, and when etcd moved on
// since (the guard fails), the allocs are read from etcd first. A refusal
// judged by what the state knows stands without a read: an alloc's node
// never changes, nor does a terminal status.
func (r *Registry) PutAllocStatuses(ctx context.Context, nodeID string, updates []StatusUpdate) (errs []error, err error) {
	ctx, cancel := r.opCtx(ctx)
	defer cancel()
	if err := checkName("node id", nodeID); err != nil {
		return nil, err
	}
	errs = make([]error, len(updates))
	akeys := make([]string, len(updates))
	known := true
	seen := make(map[string]bool, len(updates))
	for i, u := range updates {
		akeys[i], errs[i] = r.key(dirAllocs, "alloc id", u.ID)
		if errs[i] == nil && (u.Status == nil || !slices.Contains(knownClientStatus, u.Status.ClientStatus)) {
			errs[i] = fmt.Errorf("registry: alloc %q: missing or unknown client status: %w", u.ID, ErrInvalid)
		}
		if errs[i] == nil && seen[u.ID] {
			// One put per key in a transaction: etcd refuses the
			// whole of it otherwise (and with it a group's others).
			errs[i] = fmt.Errorf("registry: alloc %q is reported twice in one batch; the first report stands: %w", u.ID, ErrInvalid)
		}
		seen[u.ID] = true
		known = known && (errs[i] != nil || u.Known != nil)
	}
	for range casAttempts {
		var cur []currentAlloc
		judgedByKnown := known
		if known {
			cur = knownAllocs(updates, errs)
			known = false // a failed guard reads
		} else if cur, err = r.readAllocs(ctx, updates, akeys, errs); err != nil {
			return nil, err
		}
		if len(cur) == 0 {
			return errs, nil
		}
		var cmps []clientv3.Cmp
		var puts []clientv3.Op
		var evs []spec.Event
		for _, c := range cur {
			i, a := c.i, c.alloc
			u := updates[i]
			skey := r.prefix + dirAllocStatus + u.ID
			if a.NodeID != nodeID {
				errs[i] = fmt.Errorf("registry: alloc %q belongs to node %q, not %q: %w", u.ID, a.NodeID, nodeID, ErrConflict)
				continue
			}
			old := c.status
			if old != nil && old.ClientStatus.Terminal() && u.Status.ClientStatus != old.ClientStatus {
				errs[i] = fmt.Errorf("registry: alloc %q is %s; it cannot become %s: %w", u.ID, old.ClientStatus, u.Status.ClientStatus, ErrConflict)
				continue
			}
			evs = append(evs, statusEvents(a, old, u.Status)...)
			val, err := json.Marshal(statusRecord{Job: a.Job, NodeID: a.NodeID, AllocStatus: *u.Status})
			if err != nil {
				errs[i] = fmt.Errorf("registry: encode status of alloc %q: %w", u.ID, err)
				continue
			}
			cmps = append(cmps,
				clientv3.Compare(clientv3.ModRevision(akeys[i]), "=", c.allocRev),
				clientv3.Compare(clientv3.ModRevision(skey), "=", c.statusRev))
			puts = append(puts, clientv3.OpPut(skey, string(val)))
		}
		if len(puts) == 0 {
			return errs, nil
		}
		if judgedByKnown {
			// Judged by what the state knows: written together with
			// other nodes' reports of the moment, in one transaction.
			if r.statuses.write(ctx, r, &statusWrite{cmps: cmps, puts: puts, evs: evs}) {
				return errs, nil
			}
			if ctx.Err() != nil {
				return nil, fmt.Errorf("registry: status report of node %q not written: %w", nodeID, context.Cause(ctx))
			}
			continue // a guard failed, or the group's transaction: read and write alone
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
		// Something changed since what the batch was judged by (the
		// leader stopped an alloc, say, or the server's state was behind):
		// read again. Per-alloc errors stay.
	}
	return nil, fmt.Errorf("registry: allocs of node %q keep changing under concurrent writes: %w", nodeID, ErrConflict)
}

// currentAlloc is what a status update is judged by: updates[i]'s alloc,
// its stored report (nil: none) and the revisions of both records.
type currentAlloc struct {
	i                   int
	alloc               *spec.Alloc
	status              *spec.AllocStatus
	allocRev, statusRev int64
}

// knownAllocs is the current state of the updates not refused yet, as the
// server's state holds it.
func knownAllocs(updates []StatusUpdate, errs []error) []currentAlloc {
	var cur []currentAlloc
	for i, u := range updates {
		if errs[i] == nil {
			k := u.Known
			cur = append(cur, currentAlloc{i: i, alloc: k.Alloc, status: k.Alloc.Status, allocRev: k.AllocRev, statusRev: k.StatusRev})
		}
	}
	return cur
}

// readAllocs reads the current state of the updates not refused yet from
// etcd, in one transaction; an alloc that is gone or cannot be decoded
// is refused in errs.
func (r *Registry) readAllocs(ctx context.Context, updates []StatusUpdate, akeys []string, errs []error) ([]currentAlloc, error) {
	var gets []clientv3.Op
	var idx []int
	for i, u := range updates {
		if errs[i] == nil {
			gets = append(gets, clientv3.OpGet(akeys[i]), clientv3.OpGet(r.prefix+dirAllocStatus+u.ID))
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return nil, nil
	}
	resp, err := r.cli.Txn(ctx).Then(gets...).Commit()
	if err != nil {
		return nil, wrap("read allocs for a status batch", err)
	}
	var cur []currentAlloc
	for n, i := range idx {
		akvs := resp.Responses[2*n].GetResponseRange().Kvs
		skvs := resp.Responses[2*n+1].GetResponseRange().Kvs
		if len(akvs) == 0 {
			errs[i] = fmt.Errorf("registry: alloc %q: %w", updates[i].ID, ErrNotFound)
			continue
		}
		c := currentAlloc{i: i, alloc: new(spec.Alloc), allocRev: akvs[0].ModRevision}
		if err := json.Unmarshal(akvs[0].Value, c.alloc); err != nil {
			errs[i] = fmt.Errorf("registry: decode %s: %w", akvs[0].Key, err)
			continue
		}
		if len(skvs) > 0 {
			c.statusRev = skvs[0].ModRevision
			var rec statusRecord
			if err := json.Unmarshal(skvs[0].Value, &rec); err == nil {
				c.status = &rec.AllocStatus
			}
		}
		cur = append(cur, c)
	}
	return cur, nil
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

// statusGroup writes status reports judged by what the server knows in
// one transaction per moment rather than one each: with thousands of
// agents reporting at once, etcd's cost per transaction (a request, a
// raft entry, a watch response) was most of a report's. A report joins
// the queue; one writer at a time takes what is queued (up to what a
// transaction holds) and commits it with every report's guards; those
// that came meanwhile go in the next. When the transaction's guards fail
// (one alloc changed since the server saw it), the reports whose guards
// held are committed again together, and the others are each written
// again alone, as they would have been without the group; when it fails
// otherwise, each report is.
type statusGroup struct {
	mu      sync.Mutex
	queue   []*statusWrite
	writing bool
}

// statusWrite is one report's guarded writes in a group, and its outcome.
type statusWrite struct {
	ctx  context.Context // the report's: its session learns the revision
	cmps []clientv3.Cmp
	puts []clientv3.Op
	evs  []spec.Event
	done chan struct{}
	ok   bool // written
}

// Bounds of a group's transaction, under etcd's default limits (128
// operations of each kind, 1.5 MiB a request): a report alone may be
// larger, and is then written alone.
const (
	groupMaxOps   = 120
	groupMaxBytes = maxTxnBytes / 2
)

// write queues w and waits until its group was written; false when it
// was not (guards, etcd: the caller writes alone; or ctx ended while it
// was queued, and it never will be).
func (g *statusGroup) write(ctx context.Context, r *Registry, w *statusWrite) bool {
	if ctx.Err() != nil {
		return false
	}
	w.ctx, w.done = ctx, make(chan struct{})
	g.mu.Lock()
	g.queue = append(g.queue, w)
	if !g.writing {
		g.writing = true
		go g.run(r)
	}
	g.mu.Unlock()
	select {
	case <-w.done:
		return w.ok
	case <-ctx.Done():
	}
	// Given up: taken out while still queued, so that what the caller is
	// told (not written) stays true; once taken, it is being written,
	// and the outcome is waited for (opTimeout bounds the transaction).
	g.mu.Lock()
	if i := slices.Index(g.queue, w); i >= 0 {
		g.queue = slices.Delete(g.queue, i, i+1)
		g.mu.Unlock()
		return false
	}
	g.mu.Unlock()
	<-w.done
	return w.ok
}

// run writes groups until the queue is empty.
func (g *statusGroup) run(r *Registry) {
	for {
		g.mu.Lock()
		n, cmps, puts, bytes := 0, 0, 1, 0 // 1: the group's events
		for _, w := range g.queue {
			wb := 0
			for _, p := range w.puts {
				wb += len(p.KeyBytes()) + len(p.ValueBytes())
			}
			if n > 0 && (cmps+len(w.cmps) > groupMaxOps || puts+len(w.puts) > groupMaxOps || bytes+wb > groupMaxBytes) {
				break
			}
			n, cmps, puts, bytes = n+1, cmps+len(w.cmps), puts+len(w.puts), bytes+wb
		}
		if n == 0 {
			g.writing = false
			g.mu.Unlock()
			return
		}
		batch := g.queue[:n:n]
		g.queue = g.queue[n:]
		if len(g.queue) == 0 {
			g.queue = nil
		}
		g.mu.Unlock()
		g.commit(r, batch)
	}
}

// commit writes one group and tells its reports how it went. When guards
// fail, the transaction's else branch has read every guarded key's
// revision: the reports whose guards held are committed again as one
// group, once, and only the others are written alone by their callers.
func (g *statusGroup) commit(r *Registry, batch []*statusWrite) {
	defer func() {
		for _, w := range batch {
			close(w.done)
		}
	}()
	held := g.try(r, batch, true)
	if len(held) > 0 && len(held) < len(batch) {
		g.try(r, held, false)
	}
}

// try commits batch as one transaction and marks its reports written;
// when its guards fail and reread is set, it returns the reports whose
// guards held, judged by the revisions the transaction read instead.
func (g *statusGroup) try(r *Registry, batch []*statusWrite, reread bool) []*statusWrite {
	var cmps []clientv3.Cmp
	var puts []clientv3.Op
	var evs []spec.Event
	for _, w := range batch {
		cmps = append(cmps, w.cmps...)
		puts = append(puts, w.puts...)
		evs = append(evs, w.evs...)
	}
	if len(evs) > 0 {
		ops, _, err := r.eventOps(evs, r.now())
		if err != nil {
			return nil
		}
		puts = append(puts, ops...)
	}
	var keys []string
	if reread && len(batch) > 1 {
		seen := make(map[string]bool, len(cmps))
		for i := range cmps {
			if k := string(cmps[i].KeyBytes()); !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
		if len(keys) > groupMaxOps {
			keys = nil // past what etcd takes in a branch: each goes alone
		}
	}
	gets := make([]clientv3.Op, len(keys))
	for i, k := range keys {
		gets[i] = clientv3.OpGet(k, clientv3.WithKeysOnly())
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	resp, err := r.cli.Txn(ctx).If(cmps...).Then(puts...).Else(gets...).Commit()
	if err != nil {
		return nil
	}
	if !resp.Succeeded {
		if len(keys) == 0 || len(resp.Responses) != len(keys) {
			return nil
		}
		revs := make(map[string]int64, len(keys))
		for i, k := range keys {
			if kvs := resp.Responses[i].GetResponseRange().GetKvs(); len(kvs) > 0 {
				revs[k] = kvs[0].ModRevision
			} else {
				revs[k] = 0
			}
		}
		var held []*statusWrite
		for _, w := range batch {
			if guardsHold(w.cmps, revs) {
				held = append(held, w)
			}
		}
		return held
	}
	for _, w := range batch {
		w.ok = true
		if s := sessionOf(w.ctx); s != nil {
			raise(&s.written, resp.Header.Revision)
		}
	}
	return nil
}

// guardsHold says whether every guard of a report (each "the key's
// revision is R") holds at the revisions read; a guard of another kind
// counts as failed, and its report is written alone.
func guardsHold(cmps []clientv3.Cmp, revs map[string]int64) bool {
	for i := range cmps {
		c := cmps[i].GetCompare()
		mod, ok := c.TargetUnion.(*etcdserverpb.Compare_ModRevision)
		if !ok || c.Target != etcdserverpb.Compare_MOD || c.Result != etcdserverpb.Compare_EQUAL || len(c.RangeEnd) > 0 {
			return false
		}
		if rev, read := revs[string(c.Key)]; !read || rev != mod.ModRevision {
			return false
		}
	}
	return true
}
