package registry

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/drover-org/drover/internal/spec"
	"github.com/drover-org/drover/internal/state"
)

// Mirror keeps in memory what a scheduling pass reads (jobs, allocs and
// their status, nodes with their liveness, control and usage, schedules,
// deployments and their requests) and the event history, from one full read
// and then its own watch, decoding each change once as it arrives, so that
// the leader's pass does not read and decode the whole registry each time.
//
// Snapshot(ctx, rev) answers with the state as of a revision at least rev:
// the leader passes the revision of its own last commit and of the latest
// change its server published, so that a pass never decides on a state
// that lacks what the previous pass wrote or what woke it.
//
// The mirror's revision moves only with what it has applied: the full read
// (a linearizable read, so a new leader's first pass sees every write
// acknowledged before it won) and the events of its watch, which etcd
// sends in revision order. It never trusts a watch progress notification:
// etcd before 3.4.24 and 3.5.8 (etcd-io/etcd#15220) can send one with a
// revision ahead of events it has not sent yet, and a leader that trusted
// it placed again what it had just placed. A revision with no event under
// the prefix (a key written by someone else on a shared etcd) is reached by
// writing a barrier key of this mirror's own: once its event arrives,
// every event before it has been applied.
//
// After each batch it applies, it tells publish what changed (a Change per
// key, with the job and node it concerns, from the values it decoded and
// the ones they replace), or, after reading everything again, a
// KindResync: the server's one change feed, for its blocking queries and
// its leader's loop, which never runs ahead of the store.
type Mirror struct {
	r       *Registry
	barrier string // this mirror's barrier key
	store   *state.Store
	publish func([]Change)
	// tasks holds the task lists decoded so far by their stored form, for
	// allocs that carry the same (decodeAlloc); the mirror's goroutine
	// alone uses it.
	tasks map[string][]*spec.Task
	// strings holds one copy of each repeated string of the decoded
	// values (interner).
	interned interner
	// bmu guards the barrier's writing: one at a time (barrierBusy), and
	// the latest revision one was answered at (barrierRev).
	bmu         sync.Mutex
	barrierBusy bool
	barrierRev  int64
}

// mirrorDirs are the dirs a pass reads, the event history, and the
// credentials every request is checked against (acl_secrets/ is etcd's
// index of tokens by secret; the store keeps its own).
var mirrorDirs = []string{dirJobs, dirAllocs, dirAllocStatus, dirNodes, dirSchedules, dirNodeAlive, dirDeployments, dirDeploymentRequests,
	dirNodeCtl, dirNodeUsage, dirEvents, dirACLTokens, dirACLPolicies, dirNodeSecrets}

// dirMirrorBarrier holds each server's mirror barrier key (see Mirror),
// written only by that server's mirror.
const dirMirrorBarrier = "mirror_barrier/"

// mirrorLoaded, when set (by tests), runs between the mirror's full read
// and the start of its watch.
var mirrorLoaded func()

// NewMirror reads the registry into store and keeps it up to date until
// ctx ends, telling publish (when not nil) what changed after each batch.
// owner names the server it belongs to (its barrier key's name); one
// server runs at most one mirror at a time.
func (r *Registry) NewMirror(ctx context.Context, owner string, store *state.Store, publish func([]Change)) (*Mirror, error) {
	name := owner
	if checkName("server id", owner) != nil {
		// A server's name is not checked as a key segment: any will do,
		// as long as each server's is its own.
		name = fmt.Sprintf("%x", sha256.Sum256([]byte(owner)))[:32]
	}
	m := &Mirror{r: r, barrier: r.prefix + dirMirrorBarrier + name, store: store, publish: publish}
	rev, err := m.load(ctx)
	if err != nil {
		return nil, err
	}
	if mirrorLoaded != nil {
		mirrorLoaded()
	}
	go m.run(ctx, rev)
	return m, nil
}

// load reads every mirrored key at one revision and replaces the copy.
func (m *Mirror) load(ctx context.Context) (int64, error) {
	octx, cancel := m.r.opCtx(ctx)
	defer cancel()
	ops := make([]clientv3.Op, len(mirrorDirs))
	for i, d := range mirrorDirs {
		ops[i] = clientv3.OpGet(m.r.prefix+d, clientv3.WithPrefix())
	}
	resp, err := m.r.cli.Txn(octx).Then(ops...).Commit()
	if err != nil {
		return 0, wrap("read the registry for the leader's mirror", err)
	}
	tx := m.store.Write()
	tx.Reset()
	for _, res := range resp.Responses {
		for _, kv := range res.GetResponseRange().Kvs {
			m.put(tx, kv)
		}
	}
	tx.Commit(resp.Header.Revision)
	m.tell([]Change{{Rev: resp.Header.Revision, Kind: KindResync}})
	return resp.Header.Revision, nil
}

// put applies a key's new value. A value that does not decode is left
// out and logged: the registry's writers validate, so it is not expected.
func (m *Mirror) put(tx *state.Txn, kv *mvccpb.KeyValue) (Change, bool) {
	dir, name, ok := m.split(string(kv.Key))
	if !ok {
		return Change{}, false
	}
	c := Change{Rev: kv.ModRevision, ID: name}
	var err error
	switch dir {
	case dirJobs:
		var j *spec.Job
		if j, err = decodeJob(kv); err == nil {
			tx.PutJob(j)
			c.Kind, c.Job = KindJob, name
		}
	case dirAllocs:
		var a *spec.Alloc
		if a, err = m.decodeAlloc(kv.Value); err == nil {
			c.Kind, c.Job, c.NodeID = KindAlloc, a.Job, a.NodeID
			tx.PutAlloc(a, kv.CreateRevision, kv.ModRevision)
		}
	case dirAllocStatus:
		var rec statusRecord
		if err = json.Unmarshal(kv.Value, &rec); err == nil {
			old := tx.AllocStatus(name)
			c.Kind, c.Job, c.NodeID = KindAllocStatus, rec.Job, rec.NodeID
			c.Terminal = rec.ClientStatus.Terminal()
			c.Judged = rec.DeploymentHealth != nil && (old == nil || old.DeploymentHealth == nil)
			st := rec.AllocStatus // a copy, as for an alloc
			m.interned.status(&st)
			tx.PutAllocStatus(name, intern(&m.interned, rec.Job), intern(&m.interned, rec.NodeID), &st, kv.ModRevision)
		}
	case dirNodes:
		var n *spec.Node
		if n, err = decodeNode(kv); err == nil {
			tx.PutNodeRecord(name, n)
			c.Kind, c.NodeID = KindNode, name
		}
	case dirNodeAlive:
		tx.SetNodeAlive(name, true)
		c.Kind, c.NodeID = KindNode, name
	case dirNodeCtl:
		var nc *spec.NodeControl
		if nc, err = decodeControl(kv); err == nil {
			tx.PutNodeControl(name, nc, kv.ModRevision)
			c.Kind, c.NodeID = KindNode, name
		}
	case dirNodeUsage:
		var u *spec.NodeUsage
		if u, err = decodeUsage(kv); err == nil {
			tx.PutNodeUsage(name, u, kv.ModRevision)
			c.Kind, c.NodeID = KindNodeUsage, name
		}
	case dirSchedules:
		var js spec.JobSchedule
		if err = json.Unmarshal(kv.Value, &js); err == nil {
			tx.PutSchedule(&js)
			c.Kind, c.Job = KindSchedule, name
		}
	case dirDeployments:
		var d *spec.Deployment
		if d, err = decodeDeployment(kv); err == nil {
			tx.PutDeployment(name, d)
			c.Kind, c.Job = KindDeployment, d.Job
		}
	case dirDeploymentRequests:
		var rec *requestRecord
		if rec, err = decodeRequest(kv); err == nil {
			tx.PutDeploymentRequest(name, rec.Job, &rec.DeploymentRequest, kv.ModRevision)
			c.Kind, c.Job = KindDeployment, rec.Job
		}
	case dirEvents:
		if err = putEvents(tx, name, kv, &m.interned); err == nil {
			c.Kind = KindEvents
		}
	// Credentials change no state a pass or a blocking query reads: the
	// store has them, and nothing is told.
	case dirACLTokens:
		var st storedToken
		if err = json.Unmarshal(kv.Value, &st); err == nil {
			tx.PutToken(&st.ACLToken, st.SecretHash)
		}
	case dirACLPolicies:
		var p spec.ACLPolicy
		if err = json.Unmarshal(kv.Value, &p); err == nil {
			p.ModifyIndex = kv.ModRevision
			tx.PutPolicy(&p)
		}
	case dirNodeSecrets:
		tx.PutNodeSecret(name, string(kv.Value))
	}
	if err != nil {
		m.r.log.Warn("server state: cannot decode a key; leaving it out", "key", string(kv.Key), "err", err)
	}
	return c, c.Kind != 0
}

// allocRecord is an alloc as stored, its tasks left encoded: the field
// shadows spec.Alloc's, which stays nil.
type allocRecord struct {
	spec.Alloc
	Tasks json.RawMessage `json:"tasks"`
}

// maxSharedTasks bounds the decoded task lists kept for sharing; past it
// the table starts afresh (the allocs keep theirs).
const maxSharedTasks = 4096

// decodeAlloc decodes an alloc, sharing its tasks with every other alloc
// whose tasks were stored the same: the instances of a job version carry
// the same tasks, which are most of an alloc's size, and a server keeps
// every alloc. The tasks are read-only, as everything in the store is.
func (m *Mirror) decodeAlloc(b []byte) (*spec.Alloc, error) {
	var rec allocRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, err
	}
	// A copy: a pointer into rec would keep its encoded tasks alive too.
	a := new(spec.Alloc)
	*a = rec.Alloc
	m.interned.alloc(a)
	if len(rec.Tasks) == 0 || string(rec.Tasks) == "null" {
		return a, nil
	}
	if tasks, ok := m.tasks[string(rec.Tasks)]; ok {
		a.Tasks = tasks
		return a, nil
	}
	if err := json.Unmarshal(rec.Tasks, &a.Tasks); err != nil {
		return nil, err
	}
	if m.tasks == nil || len(m.tasks) >= maxSharedTasks {
		m.tasks = map[string][]*spec.Task{}
	}
	m.tasks[string(rec.Tasks)] = a.Tasks
	return a, nil
}

// del applies a key's deletion at revision rev; the job and node it
// concerns come from the value it removes.
func (m *Mirror) del(tx *state.Txn, key string, rev int64) (Change, bool) {
	dir, name, ok := m.split(key)
	if !ok {
		return Change{}, false
	}
	c := Change{Rev: rev, ID: name, Deleted: true}
	switch dir {
	case dirJobs:
		tx.DeleteJob(name)
		c.Kind, c.Job = KindJob, name
	case dirAllocs, dirAllocStatus:
		c.Kind = KindAlloc
		if dir == dirAllocStatus {
			c.Kind = KindAllocStatus
		}
		c.Job, c.NodeID = tx.AllocOwner(name)
		if st := tx.AllocStatus(name); dir == dirAllocStatus && st != nil {
			c.Terminal = st.ClientStatus.Terminal()
		}
		if dir == dirAllocs {
			tx.DeleteAlloc(name)
		} else {
			tx.DeleteAllocStatus(name)
		}
	case dirNodes:
		tx.PutNodeRecord(name, nil)
		c.Kind, c.NodeID = KindNode, name
	case dirNodeAlive:
		tx.SetNodeAlive(name, false)
		c.Kind, c.NodeID = KindNode, name
	case dirNodeCtl:
		tx.PutNodeControl(name, nil, 0)
		c.Kind, c.NodeID = KindNode, name
	case dirNodeUsage:
		tx.PutNodeUsage(name, nil, 0)
		c.Kind, c.NodeID = KindNodeUsage, name
	case dirSchedules:
		tx.DeleteSchedule(name)
		c.Kind, c.Job = KindSchedule, name
	case dirDeployments, dirDeploymentRequests:
		c.Kind, c.Job = KindDeployment, tx.DeploymentJob(name)
		if dir == dirDeployments {
			tx.PutDeployment(name, nil)
		} else {
			tx.PutDeploymentRequest(name, "", nil, 0)
		}
	case dirEvents:
		tx.DeleteEvents(name)
		c.Kind = KindEvents
	case dirACLTokens:
		tx.DeleteToken(name)
	case dirACLPolicies:
		tx.DeletePolicy(name)
	case dirNodeSecrets:
		tx.DeleteNodeSecret(name)
	}
	return c, c.Kind != 0
}

// tell passes what changed to publish.
func (m *Mirror) tell(changes []Change) {
	if m.publish != nil && len(changes) > 0 {
		m.publish(changes)
	}
}

// split returns a mirrored key's dir and the name after it.
func (m *Mirror) split(key string) (dir, name string, ok bool) {
	rest, ok := strings.CutPrefix(key, m.r.prefix)
	if !ok {
		return "", "", false
	}
	for _, d := range mirrorDirs {
		if name, ok := strings.CutPrefix(rest, d); ok {
			return d, name, true
		}
	}
	return "", "", false
}

// run applies the watch from rev on; when the watch breaks or falls
// behind a compaction, it reads everything again.
func (m *Mirror) run(ctx context.Context, rev int64) {
	defer func() { m.store.Stop(fmt.Errorf("registry: the mirror stopped: %w", context.Cause(ctx))) }()
	retry := 50 * time.Millisecond
	for ctx.Err() == nil {
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		broken := false
		for resp := range m.r.cli.Watch(wctx, m.r.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
			if err := resp.Err(); err != nil {
				if ctx.Err() == nil {
					m.r.log.Info("leader's mirror: watch broken; reading again", "err", err)
				}
				broken = true
				break
			}
			// Progress notifications (no events) are ignored: see Mirror.
			// Nothing in drover asks for them (RequestProgress) on this
			// client: the client resumes a broken watch after the last
			// response's header revision, and a progress notification's may
			// be ahead of events not sent yet.
			if len(resp.Events) == 0 {
				continue
			}
			tx := m.store.Write()
			var changes []Change
			for _, ev := range resp.Events {
				// Events come in revision order; a response's header
				// revision may be ahead of the events sent so far while
				// the watch catches up, so progress is the events' own.
				rev = max(rev, ev.Kv.ModRevision)
				var c Change
				var ok bool
				if ev.Type == clientv3.EventTypeDelete {
					c, ok = m.del(tx, string(ev.Kv.Key), ev.Kv.ModRevision)
				} else {
					c, ok = m.put(tx, ev.Kv)
				}
				if ok {
					changes = append(changes, c)
				}
			}
			tx.Commit(rev)
			m.tell(changes)
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
		if !broken {
			continue // the channel closed without an error: watch again
		}
		for ctx.Err() == nil {
			r, err := m.load(ctx)
			if err == nil {
				rev = r
				retry = 50 * time.Millisecond
				break
			}
			m.r.log.Warn("leader's mirror: cannot read the registry; retrying", "err", err, "in", retry)
			select {
			case <-time.After(retry):
			case <-ctx.Done():
			}
			retry = min(2*retry, watchRetryMax)
		}
	}
}

// Snapshot returns the mirrored state once it is at revision atLeast or
// later, waiting at most until ctx ends.
//
// A revision not reached within barrierAfter is proven with a barrier
// write (see Mirror), again every barrierEvery while it is not reached.
func (m *Mirror) Snapshot(ctx context.Context, atLeast int64) (*state.Snapshot, error) {
	wait := barrierAfter
	for {
		wctx, cancel := context.WithTimeout(ctx, wait)
		err := m.store.WaitRev(wctx, atLeast)
		cancel()
		switch {
		case err == nil:
			return m.store.Snapshot(), nil
		case ctx.Err() != nil:
			// ErrUnavailable: an API read answers 503, which a client retries.
			return nil, fmt.Errorf("registry: the server's state has not reached revision %d yet (its watch of etcd is behind; retry, and check etcd if it persists): %w: %w",
				atLeast, ErrUnavailable, ctx.Err())
		case !errors.Is(err, context.DeadlineExceeded):
			return nil, err // the mirror stopped
		}
		wait = barrierEvery
		m.writeBarrier(ctx, atLeast)
	}
}

const (
	barrierAfter = 250 * time.Millisecond
	barrierEvery = 500 * time.Millisecond
)

// writeBarrier puts the mirror's barrier key: its event, once the watch
// brings it, proves the mirror has applied everything before it. A
// failed write is logged; Snapshot writes again.
func (m *Mirror) writeBarrier(ctx context.Context, want int64) {
	// One barrier at a time, and none while one answered at want or later
	// is on its way through the watch: readers waiting together under load
	// wrote one each, more writes for a watch already behind.
	m.bmu.Lock()
	if m.barrierBusy || m.barrierRev >= want {
		m.bmu.Unlock()
		return
	}
	m.barrierBusy = true
	m.bmu.Unlock()
	pctx, cancel := context.WithTimeout(ctx, barrierEvery)
	defer cancel()
	resp, err := m.r.cli.Put(pctx, m.barrier, strconv.FormatInt(want, 10))
	m.bmu.Lock()
	m.barrierBusy = false
	if err == nil {
		m.barrierRev = max(m.barrierRev, resp.Header.Revision)
	}
	m.bmu.Unlock()
	if err != nil && ctx.Err() == nil {
		m.r.log.Debug("leader's mirror: cannot write its barrier key; will again", "key", m.barrier, "err", err)
	}
}
