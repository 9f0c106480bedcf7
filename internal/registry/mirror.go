package registry

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/drover-org/drover/internal/spec"
)

// Mirror keeps in memory what a scheduling pass reads (jobs, allocs and
// their status, nodes with their liveness, control and usage, schedules,
// deployments and their requests), from one full read
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
type Mirror struct {
	r       *Registry
	barrier string // this mirror's barrier key
	mu      sync.Mutex
	changed chan struct{} // closed and replaced when rev moves
	rev     int64
	err     error // set when the mirror stopped
	// The mirrored state, decoded once per change.
	jobs      map[string]*spec.Job         // by name
	allocs    map[string]*mirrorAlloc      // by ID
	statuses  map[string]*mirrorStatus     // by alloc ID
	nodes     map[string]*mvccpb.KeyValue  // node records, by ID
	alive     map[string]bool              // node IDs with a liveness key
	ctls      map[string]*mirrorCtl        // node control, by node ID
	usages    map[string]*mirrorUsage      // node usage, by node ID
	views     map[string]*spec.Node        // node with its status, by ID, built on demand
	schedules map[string]*spec.JobSchedule // by job name
	deploys   map[string]*spec.Deployment  // by ID; ModifyIndex set, Request nil
	requests  map[string]*mirrorRequest    // by deployment ID
	// Sorted lists for snapshots, kept across them: allocs in sortAllocs
	// order, updated in place as allocs come and go; jobs and nodes
	// rebuilt when one of theirs changed (nil).
	order    []*mirrorAlloc
	jobList  []*spec.Job
	nodeList []*spec.Node
	// stale are the nodes whose view in nodeList must be built again
	// although their place in it is the same: their control or usage
	// changed (usage reports come every few seconds per node; re-sorting
	// every node for each would be waste).
	stale map[string]bool
	// deployList is the deployments with their requests merged, in
	// sortDeployments order; nil when one of either changed.
	deployList []*spec.Deployment
}

type mirrorCtl struct {
	c      *spec.NodeControl
	modRev int64
}

type mirrorUsage struct {
	u      *spec.NodeUsage
	modRev int64
}

type mirrorRequest struct {
	req    *spec.DeploymentRequest
	modRev int64
}

type mirrorAlloc struct {
	a                 *spec.Alloc
	createRev, modRev int64
}

// compareMirrorAllocs is sortAllocs's order.
func compareMirrorAllocs(x, y *mirrorAlloc) int {
	return cmp.Or(cmp.Compare(x.a.Job, y.a.Job), cmp.Compare(x.a.Group, y.a.Group), cmp.Compare(x.a.Index, y.a.Index),
		cmp.Compare(x.createRev, y.createRev), cmp.Compare(x.a.ID, y.a.ID))
}

// setAlloc puts an alloc in allocs and in order; m.mu is held.
func (m *Mirror) setAlloc(id string, e *mirrorAlloc) {
	if old := m.allocs[id]; old != nil {
		m.dropOrder(old)
	}
	m.allocs[id] = e
	i, _ := slices.BinarySearchFunc(m.order, e, compareMirrorAllocs)
	m.order = slices.Insert(m.order, i, e)
}

// dropOrder takes an alloc out of order; m.mu is held.
func (m *Mirror) dropOrder(e *mirrorAlloc) {
	if i, ok := slices.BinarySearchFunc(m.order, e, compareMirrorAllocs); ok && m.order[i] == e {
		m.order = slices.Delete(m.order, i, i+1)
	}
}

type mirrorStatus struct {
	st     *spec.AllocStatus
	modRev int64
}

// mirrorDirs are the dirs a pass reads.
var mirrorDirs = []string{dirJobs, dirAllocs, dirAllocStatus, dirNodes, dirSchedules, dirNodeAlive, dirDeployments, dirDeploymentRequests,
	dirNodeCtl, dirNodeUsage}

// dirMirrorBarrier holds each server's mirror barrier key (see Mirror),
// written only by that server's mirror.
const dirMirrorBarrier = "mirror_barrier/"

// mirrorLoaded, when set (by tests), runs between the mirror's full read
// and the start of its watch.
var mirrorLoaded func()

// NewMirror reads the registry and keeps a copy of it up to date until ctx
// ends. owner names the server it belongs to (its barrier key's name);
// one server runs at most one mirror at a time.
func (r *Registry) NewMirror(ctx context.Context, owner string) (*Mirror, error) {
	name := owner
	if checkName("server id", owner) != nil {
		// A server's name is not checked as a key segment: any will do,
		// as long as each server's is its own.
		name = fmt.Sprintf("%x", sha256.Sum256([]byte(owner)))[:32]
	}
	m := &Mirror{r: r, barrier: r.prefix + dirMirrorBarrier + name, changed: make(chan struct{})}
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
	m.mu.Lock()
	defer m.mu.Unlock()
	m.jobs, m.allocs, m.statuses = map[string]*spec.Job{}, map[string]*mirrorAlloc{}, map[string]*mirrorStatus{}
	m.nodes, m.alive, m.views, m.schedules = map[string]*mvccpb.KeyValue{}, map[string]bool{}, map[string]*spec.Node{}, map[string]*spec.JobSchedule{}
	m.deploys, m.requests = map[string]*spec.Deployment{}, map[string]*mirrorRequest{}
	m.ctls, m.usages, m.stale = map[string]*mirrorCtl{}, map[string]*mirrorUsage{}, map[string]bool{}
	m.order, m.jobList, m.nodeList, m.deployList = nil, nil, nil, nil
	for _, res := range resp.Responses {
		for _, kv := range res.GetResponseRange().Kvs {
			m.put(kv)
		}
	}
	m.setRev(resp.Header.Revision)
	return resp.Header.Revision, nil
}

// setRev moves the revision and wakes the waiters; m.mu is held.
func (m *Mirror) setRev(rev int64) {
	if rev > m.rev {
		m.rev = rev
		close(m.changed)
		m.changed = make(chan struct{})
	}
}

// put applies a key's new value; m.mu is held. A value that does not
// decode is left out and logged: the registry's writers validate, so it
// is not expected.
func (m *Mirror) put(kv *mvccpb.KeyValue) {
	dir, name, ok := m.split(string(kv.Key))
	if !ok {
		return
	}
	var err error
	switch dir {
	case dirJobs:
		var j *spec.Job
		if j, err = decodeJob(kv); err == nil {
			m.jobs[name] = j
			m.jobList = nil
		}
	case dirAllocs:
		var a spec.Alloc
		if err = json.Unmarshal(kv.Value, &a); err == nil {
			m.setAlloc(name, &mirrorAlloc{&a, kv.CreateRevision, kv.ModRevision})
		}
	case dirAllocStatus:
		var rec statusRecord
		if err = json.Unmarshal(kv.Value, &rec); err == nil {
			m.statuses[name] = &mirrorStatus{&rec.AllocStatus, kv.ModRevision}
		}
	case dirNodes:
		m.nodes[name] = kv
		delete(m.views, name)
		m.nodeList = nil
	case dirNodeAlive:
		m.alive[name] = true
		delete(m.views, name)
		m.nodeList = nil
	case dirNodeCtl:
		var c *spec.NodeControl
		if c, err = decodeControl(kv); err == nil {
			m.ctls[name] = &mirrorCtl{c, kv.ModRevision}
			m.restale(name)
		}
	case dirNodeUsage:
		var u *spec.NodeUsage
		if u, err = decodeUsage(kv); err == nil {
			m.usages[name] = &mirrorUsage{u, kv.ModRevision}
			m.restale(name)
		}
	case dirSchedules:
		var js spec.JobSchedule
		if err = json.Unmarshal(kv.Value, &js); err == nil {
			m.schedules[name] = &js
		}
	case dirDeployments:
		var d *spec.Deployment
		if d, err = decodeDeployment(kv); err == nil {
			m.deploys[name] = d
			m.deployList = nil
		}
	case dirDeploymentRequests:
		var rec *requestRecord
		if rec, err = decodeRequest(kv); err == nil {
			m.requests[name] = &mirrorRequest{&rec.DeploymentRequest, kv.ModRevision}
			m.deployList = nil
		}
	}
	if err != nil {
		m.r.log.Warn("leader's mirror: cannot decode a key; leaving it out", "key", string(kv.Key), "err", err)
	}
}

// del applies a key's deletion; m.mu is held.
func (m *Mirror) del(key string) {
	dir, name, ok := m.split(key)
	if !ok {
		return
	}
	switch dir {
	case dirJobs:
		delete(m.jobs, name)
		m.jobList = nil
	case dirAllocs:
		if e := m.allocs[name]; e != nil {
			m.dropOrder(e)
			delete(m.allocs, name)
		}
	case dirAllocStatus:
		delete(m.statuses, name)
	case dirNodes:
		delete(m.nodes, name)
		delete(m.views, name)
		m.nodeList = nil
	case dirNodeAlive:
		delete(m.alive, name)
		delete(m.views, name)
		m.nodeList = nil
	case dirNodeCtl:
		delete(m.ctls, name)
		m.restale(name)
	case dirNodeUsage:
		delete(m.usages, name)
		m.restale(name)
	case dirSchedules:
		delete(m.schedules, name)
	case dirDeployments:
		delete(m.deploys, name)
		m.deployList = nil
	case dirDeploymentRequests:
		delete(m.requests, name)
		m.deployList = nil
	}
}

// restale drops node id's view after its control or usage changed; its
// place in nodeList stays; m.mu is held.
func (m *Mirror) restale(id string) {
	delete(m.views, id)
	if m.nodeList != nil && m.nodes[id] != nil {
		m.stale[id] = true
	}
}

// view returns node id's view, with its status, control and usage,
// building it when there is none; m.mu is held.
func (m *Mirror) view(id string, kv *mvccpb.KeyValue) (*spec.Node, error) {
	if n := m.views[id]; n != nil {
		return n, nil
	}
	n, err := decodeNode(kv)
	if err != nil {
		return nil, err
	}
	n.Status = spec.NodeDown
	if m.alive[id] {
		n.Status = spec.NodeReady
	}
	var x nodeExtras
	if c := m.ctls[id]; c != nil {
		x.ctl, x.ctlRev = c.c, c.modRev
	}
	if u := m.usages[id]; u != nil {
		x.usage, x.usageRev = u.u, u.modRev
	}
	x.apply(n)
	m.views[id] = n
	return n, nil
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
	defer func() {
		m.mu.Lock()
		m.err = fmt.Errorf("registry: the mirror stopped: %w", context.Cause(ctx))
		close(m.changed)
		m.changed = make(chan struct{})
		m.mu.Unlock()
	}()
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
			m.mu.Lock()
			// Progress notifications (no events) are ignored: see Mirror.
			// Nothing in drover asks for them (RequestProgress) on this
			// client: the client resumes a broken watch after the last
			// response's header revision, and a progress notification's may
			// be ahead of events not sent yet.
			for _, ev := range resp.Events {
				// Events come in revision order; a response's header
				// revision may be ahead of the events sent so far while
				// the watch catches up, so progress is the events' own.
				rev = max(rev, ev.Kv.ModRevision)
				if ev.Type == clientv3.EventTypeDelete {
					m.del(string(ev.Kv.Key))
				} else {
					m.put(ev.Kv)
				}
			}
			m.setRev(rev)
			m.mu.Unlock()
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
// later, waiting at most until ctx ends. Jobs, nodes, statuses,
// schedules and deployments are shared with the mirror and later
// snapshots: callers must not modify them (copy a deployment to change
// it). Allocs are copies (the leader marks NodeDown on them).
//
// A revision not reached within barrierAfter is proven with a barrier
// write (see Mirror), again every barrierEvery while it is not reached.
func (m *Mirror) Snapshot(ctx context.Context, atLeast int64) (*Snapshot, error) {
	m.mu.Lock()
	wait := barrierAfter
	for m.rev < atLeast && m.err == nil {
		ch := m.changed
		m.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-ch:
		case <-t.C:
			wait = barrierEvery
			m.writeBarrier(ctx, atLeast)
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("registry: the leader's mirror is not at revision %d yet: %w", atLeast, ctx.Err())
		}
		t.Stop()
		m.mu.Lock()
	}
	defer m.mu.Unlock()
	if m.err != nil {
		return nil, m.err
	}
	s := &Snapshot{Rev: m.rev, Schedules: make(map[string]*spec.JobSchedule, len(m.schedules))}
	if m.jobList == nil {
		m.jobList = make([]*spec.Job, 0, len(m.jobs))
		for _, j := range m.jobs {
			m.jobList = append(m.jobList, j)
		}
		slices.SortFunc(m.jobList, func(a, b *spec.Job) int { return cmp.Compare(a.Name, b.Name) })
	}
	s.Jobs = slices.Clone(m.jobList)
	copies := make([]spec.Alloc, len(m.order)) // one allocation for all
	s.Allocs = make([]*spec.Alloc, len(m.order))
	for i, d := range m.order {
		a := &copies[i]
		*a = *d.a
		a.CreateIndex, a.ModifyIndex, a.Status = d.createRev, d.modRev, nil
		if st := m.statuses[d.a.ID]; st != nil {
			a.Status = st.st
			a.ModifyIndex = max(a.ModifyIndex, st.modRev)
		}
		s.Allocs[i] = a
	}
	if err := m.nodesList(); err != nil {
		return nil, err
	}
	s.Nodes = slices.Clone(m.nodeList)
	maps.Copy(s.Schedules, m.schedules)
	if m.deployList == nil {
		list := make([]*spec.Deployment, 0, len(m.deploys))
		for id, d := range m.deploys {
			if rq := m.requests[id]; rq != nil {
				d = withRequest(d, rq.req, rq.modRev)
			}
			list = append(list, d)
		}
		sortDeployments(list)
		m.deployList = list
	}
	s.Deployments = slices.Clone(m.deployList)
	return s, nil
}

const (
	barrierAfter = 250 * time.Millisecond
	barrierEvery = 500 * time.Millisecond
)

// writeBarrier puts the mirror's barrier key: its event, once the watch
// brings it, proves the mirror has applied everything before it. A
// failed write is logged; Snapshot writes again.
func (m *Mirror) writeBarrier(ctx context.Context, want int64) {
	pctx, cancel := context.WithTimeout(ctx, barrierEvery)
	defer cancel()
	if _, err := m.r.cli.Put(pctx, m.barrier, strconv.FormatInt(want, 10)); err != nil && ctx.Err() == nil {
		m.r.log.Debug("leader's mirror: cannot write its barrier key; will again", "key", m.barrier, "err", err)
	}
}

// nodesList brings nodeList up to date: built again when a node came,
// went or changed its record or liveness; only the stale views replaced
// in place otherwise. m.mu is held. Snapshots hold clones of nodeList, so
// replacing an element does not change theirs.
func (m *Mirror) nodesList() error {
	if m.nodeList != nil {
		for id := range m.stale {
			kv := m.nodes[id]
			if kv == nil {
				continue
			}
			n, err := m.view(id, kv)
			if err != nil {
				return err
			}
			i, ok := slices.BinarySearchFunc(m.nodeList, n, compareNodes)
			if !ok || m.nodeList[i].ID != id {
				m.nodeList = nil // not expected: its name is unchanged
				break
			}
			m.nodeList[i] = n
		}
		clear(m.stale)
		if m.nodeList != nil {
			return nil
		}
	}
	list := make([]*spec.Node, 0, len(m.nodes))
	for id, kv := range m.nodes {
		n, err := m.view(id, kv)
		if err != nil {
			return err
		}
		list = append(list, n)
	}
	sortNodes(list)
	m.nodeList = list
	clear(m.stale)
	return nil
}
