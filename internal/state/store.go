// Package state is a server's one in-memory copy of the registry: jobs,
// allocations with their agents' status, nodes with their liveness,
// control and usage, schedules, deployments with their operators'
// requests, and the event history, each decoded once (by the registry,
// which alone speaks to etcd) and kept once, with the indexes the server
// reads by.
//
// It is built on go-memdb's immutable radix trees: a write makes new
// versions of the paths it changes and shares the rest, so a Snapshot is
// O(1) and never changes under its reader, however long it is kept. The
// values in it are shared by every snapshot: readers must not modify
// them (copy one to change it), and the writer replaces, never mutates.
//
// The store knows no clock and does no I/O: the registry feeds it a
// batch of changes at a time, each batch at the etcd revision it brings
// the store to (Txn.Commit), and readers wait for a revision they need
// (Store.WaitRev).
package state

import (
	"container/heap"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	memdb "github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/internal/spec"
)

// Store holds the state and its revision. One writer at a time (the
// registry's feed); any number of readers, who take no lock: a commit
// publishes what they read (view) at once.
type Store struct {
	db   *memdb.MemDB
	view atomic.Pointer[view]
	mu   sync.Mutex // guards the fields below: the writer's and the waiters'
	// rev is the etcd revision the state is at; err is set once the
	// store stops. waiters are the readers waiting for a later revision
	// (WaitRev), each woken alone once the store reaches its own: a
	// commit wakes only the readers it satisfies, not every reader.
	rev     int64
	err     error
	waiters revWaiters
	// log holds the allocs changed by recent commits, oldest first, for
	// readers that keep their own work across snapshots (AllocsChanged).
	// A commit appends; the oldest entries are dropped past maxLog, and
	// logFrom is then the revision from which it is complete.
	log     []allocChange
	logFrom int64
	// nodes is the node list of the latest commit: see nodeList.
	nodes *nodeList
}

// view is the store as readers see it, as of one commit.
type view struct {
	rev     int64
	err     error
	db      *memdb.MemDB // the tables at rev (memdb's O(1) snapshot)
	log     []allocChange
	logFrom int64
	nodes   *nodeList
}

// publishLocked makes the store's state what readers see; s.mu is held.
func (s *Store) publishLocked() {
	s.view.Store(&view{rev: s.rev, err: s.err, db: s.db.Snapshot(), log: s.log, logFrom: s.logFrom, nodes: s.nodes})
}

type allocChange struct {
	rev int64
	id  string
}

// maxLog bounds the change log: a reader further behind reads everything.
const maxLog = 1 << 16

// New returns an empty store at revision 0.
func New() *Store {
	db, err := memdb.NewMemDB(schema())
	if err != nil {
		panic(fmt.Sprintf("state: the schema is invalid: %v", err)) // a programming error
	}
	s := &Store{db: db, nodes: &nodeList{}}
	s.publishLocked()
	return s
}

// Snapshot returns the state as it is now, in O(1), without a lock.
func (s *Store) Snapshot() *Snapshot {
	v := s.view.Load()
	return &Snapshot{Rev: v.rev, tx: v.db.Txn(false), log: v.log, logFrom: v.logFrom, nodes: v.nodes}
}

// WaitRev waits until the store is at revision rev or later. It returns
// the store's error once it stopped short of rev, or ctx's. A stopped
// store still serves the revisions it reached: what it holds is true of
// them (a server shutting down answers its agents' last queries so).
func (s *Store) WaitRev(ctx context.Context, rev int64) error {
	if v := s.view.Load(); v.rev >= rev || v.err != nil {
		return stoppedShort(v.rev, rev, v.err)
	}
	s.mu.Lock()
	if s.rev >= rev || s.err != nil {
		err := stoppedShort(s.rev, rev, s.err)
		s.mu.Unlock()
		return err
	}
	w := &revWaiter{rev: rev, done: make(chan struct{})}
	heap.Push(&s.waiters, w)
	s.mu.Unlock()
	select {
	case <-w.done:
		return w.err
	case <-ctx.Done():
		s.mu.Lock()
		defer s.mu.Unlock()
		if w.index < 0 {
			return w.err // woken as it gave up
		}
		heap.Remove(&s.waiters, w.index)
		return fmt.Errorf("the server's state is at revision %d, not yet %d: %w", s.rev, rev, ctx.Err())
	}
}

// stoppedShort is err when a store at revision at stopped with it short
// of rev, else nil.
func stoppedShort(at, rev int64, err error) error {
	if at >= rev {
		return nil
	}
	return err
}

// wakeLocked wakes the readers whose revision the store has reached, or
// all of them once it stopped. s.mu is held.
func (s *Store) wakeLocked() {
	for len(s.waiters) > 0 && (s.err != nil || s.waiters[0].rev <= s.rev) {
		w := heap.Pop(&s.waiters).(*revWaiter)
		w.err = stoppedShort(s.rev, w.rev, s.err)
		close(w.done)
	}
}

// Stop marks the store as no longer fed: waiters get err.
func (s *Store) Stop(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
	s.publishLocked()
	s.wakeLocked()
}

// revWaiter is one reader waiting for revision rev: done is closed when
// the store reaches it or stops (err: the store's error then). index is
// its place in the heap, -1 once out of it. All but done under s.mu
// until done is closed.
type revWaiter struct {
	rev   int64
	done  chan struct{}
	err   error
	index int
}

// revWaiters is a min-heap of waiters by revision (container/heap).
type revWaiters []*revWaiter

func (h revWaiters) Len() int           { return len(h) }
func (h revWaiters) Less(i, j int) bool { return h[i].rev < h[j].rev }
func (h revWaiters) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *revWaiters) Push(x any) {
	w := x.(*revWaiter)
	w.index = len(*h)
	*h = append(*h, w)
}
func (h *revWaiters) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	w.index = -1
	return w
}

// Write starts a batch of changes. Only one batch may be open at a time;
// Commit ends it.
func (s *Store) Write() *Txn {
	return &Txn{s: s, tx: s.db.Txn(true)}
}

// Txn is one batch of changes, applied at once by Commit.
type Txn struct {
	s       *Store
	tx      *memdb.Txn
	changed []string // alloc IDs
	reset   bool
	// nodes holds the merged value of each node the batch changed (nil:
	// gone); moved says some node came, went or was renamed, which
	// changes the order of the node list.
	nodes  map[string]*spec.Node
	moved  bool
	counts map[string]*countDelta // by countsRow ID: "" for the cluster, "node/<id>" for a node
}

// Commit applies the batch and moves the store to revision rev (never
// back).
func (t *Txn) Commit(rev int64) {
	t.applyCounts()
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	t.tx.Commit()
	t.commitNodes()
	if t.reset {
		// Everything may have changed: readers must start over.
		s.log, s.logFrom = nil, rev
	} else if len(t.changed) > 0 {
		if len(s.log)+len(t.changed) > maxLog {
			drop := min(len(s.log), len(s.log)+len(t.changed)-maxLog/2)
			if drop > 0 {
				s.logFrom = s.log[drop-1].rev
			}
			s.log = append([]allocChange(nil), s.log[drop:]...)
		}
		for _, id := range t.changed {
			s.log = append(s.log, allocChange{rev, id})
		}
	}
	s.rev = max(s.rev, rev)
	s.publishLocked() // before the wake: a woken reader's snapshot holds rev
	s.wakeLocked()
}

// commitNodes brings the store's node list up to date with the batch:
// a copy of the pointers with the changed nodes' new values when the
// order stays and the list was built; else a list built on first use.
func (t *Txn) commitNodes() {
	s := t.s
	if len(t.nodes) == 0 && !t.reset {
		return
	}
	old := s.nodes.built.Load()
	if t.reset || t.moved || old == nil {
		s.nodes = &nodeList{}
		return
	}
	b := &builtNodes{nodes: slices.Clone(old.nodes), at: old.at}
	for id, n := range t.nodes {
		b.nodes[b.at[id]] = n
	}
	s.nodes = &nodeList{}
	s.nodes.built.Store(b)
}

// nodeList is every node, by name then ID, with each one's place in the
// list, shared by the snapshots of the commits that changed no node
// since: so that listing the nodes costs a reader what changed since (a
// copy of the pointers, at the commit), not a walk of the table. A
// commit that adds, removes or renames nodes starts a list that the
// first reader builds, once, from its snapshot: every snapshot that
// shares the list holds the same nodes.
type nodeList struct {
	mu    sync.Mutex
	built atomic.Pointer[builtNodes]
}

type builtNodes struct {
	nodes []*spec.Node
	at    map[string]int // never modified once built: shared by the copies
}

func (l *nodeList) get(tx *memdb.Txn) []*spec.Node {
	if b := l.built.Load(); b != nil {
		return b.nodes
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if b := l.built.Load(); b != nil {
		return b.nodes
	}
	it, err := tx.Get(tableNodes, "name_prefix", "")
	if err != nil {
		panic(fmt.Sprintf("state: read nodes: %v", err))
	}
	b := &builtNodes{nodes: list(it, func(o any) *spec.Node { return o.(*nodeRow).Node })}
	b.at = make(map[string]int, len(b.nodes))
	for i, n := range b.nodes {
		b.at[n.ID] = i
	}
	l.built.Store(b)
	return b.nodes
}

// Reset empties the store, before a full read replaces it.
func (t *Txn) Reset() {
	for _, table := range tables {
		if _, err := t.tx.DeleteAll(table, "id_prefix", ""); err != nil {
			panic(fmt.Sprintf("state: reset %s: %v", table, err)) // a programming error
		}
	}
	t.reset, t.counts = true, nil
}

func (t *Txn) insert(table string, obj any) {
	if err := t.tx.Insert(table, obj); err != nil {
		panic(fmt.Sprintf("state: insert into %s: %v", table, err)) // the indexers never fail
	}
}

func (t *Txn) delete(table string, id string) {
	if raw, err := t.tx.First(table, "id", id); err == nil && raw != nil {
		if err := t.tx.Delete(table, raw); err != nil {
			panic(fmt.Sprintf("state: delete from %s: %v", table, err))
		}
	}
}

func (t *Txn) first(table, id string) any {
	raw, err := t.tx.First(table, "id", id)
	if err != nil {
		panic(fmt.Sprintf("state: read %s: %v", table, err))
	}
	return raw
}

// ---- Jobs and schedules ----

// PutJob stores the job as its registry key holds it.
func (t *Txn) PutJob(j *spec.Job) { t.insert(tableJobs, j) }

// DeleteJob removes a job.
func (t *Txn) DeleteJob(name string) { t.delete(tableJobs, name) }

// PutSchedule stores the leader's schedule record of a job.
func (t *Txn) PutSchedule(js *spec.JobSchedule) { t.insert(tableSchedules, js) }

// DeleteSchedule removes a job's schedule record.
func (t *Txn) DeleteSchedule(job string) { t.delete(tableSchedules, job) }

// ---- Allocations ----

// allocRow is an alloc and its agent's status, which are two keys with
// two writers (the leader and the agent); Alloc is the two merged, nil
// while only the status is known.
type allocRow struct {
	ID        string
	Alloc     *spec.Alloc
	allocRev  int64
	status    *spec.AllocStatus
	statusRev int64
	// job and node are the alloc's, as its status record names them
	// too: what a deletion concerns when the alloc itself is gone.
	job, node string
}

// putAllocRow replaces old (nil: none) with row, counting the change.
func (t *Txn) putAllocRow(old, row *allocRow) {
	if old != nil {
		t.count(old.Alloc, -1)
	}
	t.count(row.Alloc, 1)
	t.insert(tableAllocs, row)
}

// PutAlloc stores an alloc as the leader wrote it, at its key's create
// and mod revisions. The store takes a: it sets its Status and indexes.
func (t *Txn) PutAlloc(a *spec.Alloc, createRev, modRev int64) {
	row := &allocRow{ID: a.ID, Alloc: a, allocRev: modRev, job: a.Job, node: a.NodeID}
	old, _ := t.first(tableAllocs, a.ID).(*allocRow)
	if old != nil {
		row.status, row.statusRev = old.status, old.statusRev
	}
	a.Status, a.CreateIndex, a.ModifyIndex = row.status, createRev, max(modRev, row.statusRev)
	t.putAllocRow(old, row)
	t.changed = append(t.changed, a.ID)
}

// DeleteAlloc removes an alloc; its status, if any, stays until its own
// key goes.
func (t *Txn) DeleteAlloc(id string) {
	old, _ := t.first(tableAllocs, id).(*allocRow)
	if old == nil {
		return
	}
	if old.status == nil {
		t.count(old.Alloc, -1)
		t.delete(tableAllocs, id)
	} else {
		t.putAllocRow(old, &allocRow{ID: id, status: old.status, statusRev: old.statusRev, job: old.job, node: old.node})
	}
	t.changed = append(t.changed, id)
}

// PutAllocStatus stores an agent's report on alloc id of job on node, at
// its key's mod revision.
func (t *Txn) PutAllocStatus(id, job, node string, st *spec.AllocStatus, modRev int64) {
	row := &allocRow{ID: id, status: st, statusRev: modRev, job: job, node: node}
	old, _ := t.first(tableAllocs, id).(*allocRow)
	if old != nil && old.Alloc != nil {
		a := *old.Alloc
		a.Status, a.ModifyIndex = st, max(old.allocRev, modRev)
		row.Alloc, row.allocRev = &a, old.allocRev
	}
	t.putAllocRow(old, row)
	t.changed = append(t.changed, id)
}

// DeleteAllocStatus removes an agent's report.
func (t *Txn) DeleteAllocStatus(id string) {
	old, _ := t.first(tableAllocs, id).(*allocRow)
	if old == nil {
		return
	}
	if old.Alloc == nil {
		t.delete(tableAllocs, id)
	} else {
		a := *old.Alloc
		a.Status, a.ModifyIndex = nil, old.allocRev
		t.putAllocRow(old, &allocRow{ID: id, Alloc: &a, allocRev: old.allocRev, job: old.job, node: old.node})
	}
	t.changed = append(t.changed, id)
}

// ---- Nodes ----

// nodeRow is a node's four keys (its record, liveness, control and usage,
// each with its own writer) and Node, the four merged; Node is nil while
// there is no record.
type nodeRow struct {
	ID     string
	Node   *spec.Node
	record *spec.Node
	alive  bool
	ctl    *spec.NodeControl
	ctlRev int64
	usage  *spec.NodeUsage
	useRev int64
}

func (t *Txn) node(id string) nodeRow {
	if old, _ := t.first(tableNodes, id).(*nodeRow); old != nil {
		return *old
	}
	return nodeRow{ID: id}
}

// putNode stores row with its merged view built anew, or drops it when
// nothing of the node is left.
func (t *Txn) putNode(row nodeRow) {
	old, _ := t.first(tableNodes, row.ID).(*nodeRow)
	if row.record == nil && !row.alive && row.ctl == nil && row.usage == nil {
		t.delete(tableNodes, row.ID)
		t.noteNode(row.ID, old, nil)
		return
	}
	row.Node = nil
	if row.record != nil {
		n := *row.record
		n.Status = spec.NodeDown
		if row.alive {
			n.Status = spec.NodeReady
		}
		n.Ineligible, n.Drain, n.Usage = false, nil, row.usage
		if row.ctl != nil {
			n.Ineligible, n.Drain = row.ctl.Ineligible, row.ctl.Drain
		}
		n.ModifyIndex = max(n.ModifyIndex, row.ctlRev, row.useRev)
		row.Node = &n
	}
	t.insert(tableNodes, &row)
	t.noteNode(row.ID, old, row.Node)
}

// noteNode records that a node's merged value went from old's to n
// (either may be nil) for commitNodes.
func (t *Txn) noteNode(id string, old *nodeRow, n *spec.Node) {
	var was *spec.Node
	if old != nil {
		was = old.Node
	}
	if was == nil && n == nil {
		return
	}
	if was == nil || n == nil || was.Name != n.Name {
		t.moved = true
	}
	if t.nodes == nil {
		t.nodes = map[string]*spec.Node{}
	}
	t.nodes[id] = n
}

// PutNodeRecord stores a node's record (ModifyIndex set); nil deletes it.
func (t *Txn) PutNodeRecord(id string, n *spec.Node) {
	row := t.node(id)
	row.record = n
	t.putNode(row)
}

// SetNodeAlive records whether the node's liveness key exists.
func (t *Txn) SetNodeAlive(id string, alive bool) {
	row := t.node(id)
	row.alive = alive
	t.putNode(row)
}

// PutNodeControl stores an operator's control of a node; nil deletes it.
func (t *Txn) PutNodeControl(id string, c *spec.NodeControl, modRev int64) {
	row := t.node(id)
	row.ctl, row.ctlRev = c, modRev
	if c == nil {
		row.ctlRev = 0
	}
	t.putNode(row)
}

// PutNodeUsage stores a node's usage report; nil deletes it.
func (t *Txn) PutNodeUsage(id string, u *spec.NodeUsage, modRev int64) {
	row := t.node(id)
	row.usage, row.useRev = u, modRev
	if u == nil {
		row.useRev = 0
	}
	t.putNode(row)
}

// ---- Deployments ----

// deployRow is a deployment (the leader's record) and its request (an
// operator's), merged in Deployment; nil while there is no record.
type deployRow struct {
	ID         string
	Deployment *spec.Deployment
	record     *spec.Deployment
	req        *spec.DeploymentRequest
	reqRev     int64
	job        string // as either record names it
}

func (t *Txn) deploy(id string) deployRow {
	if old, _ := t.first(tableDeployments, id).(*deployRow); old != nil {
		return *old
	}
	return deployRow{ID: id}
}

func (t *Txn) putDeploy(row deployRow) {
	if row.record == nil && row.req == nil {
		t.delete(tableDeployments, row.ID)
		return
	}
	row.Deployment = nil
	if row.record != nil {
		d := *row.record
		d.Request = nil
		if row.req != nil {
			r := *row.req
			d.Request = &r
			d.ModifyIndex = max(d.ModifyIndex, row.reqRev)
		}
		row.Deployment = &d
	}
	t.insert(tableDeployments, &row)
}

// PutDeployment stores a deployment's record (ModifyIndex set); nil
// deletes it.
func (t *Txn) PutDeployment(id string, d *spec.Deployment) {
	row := t.deploy(id)
	row.record = d
	if d != nil {
		row.job = d.Job
	}
	t.putDeploy(row)
}

// PutDeploymentRequest stores an operator's request on a deployment of
// job; nil deletes it.
func (t *Txn) PutDeploymentRequest(id, job string, req *spec.DeploymentRequest, modRev int64) {
	row := t.deploy(id)
	row.req, row.reqRev = req, modRev
	if req != nil {
		row.job = job
	}
	t.putDeploy(row)
}

// ---- What a batch replaces ----

// AllocOwner returns the job and node of alloc id, from the alloc or its
// status record, as the batch has them so far: what a deletion concerns.
func (t *Txn) AllocOwner(id string) (job, node string) {
	if row, _ := t.first(tableAllocs, id).(*allocRow); row != nil {
		return row.job, row.node
	}
	return "", ""
}

// AllocStatus returns the agent's last report on alloc id as the batch
// has it so far, or nil.
func (t *Txn) AllocStatus(id string) *spec.AllocStatus {
	if row, _ := t.first(tableAllocs, id).(*allocRow); row != nil {
		return row.status
	}
	return nil
}

// DeploymentJob returns the job of deployment id, from its record or its
// request, as the batch has them so far: what a deletion concerns.
func (t *Txn) DeploymentJob(id string) string {
	if row, _ := t.first(tableDeployments, id).(*deployRow); row != nil {
		return row.job
	}
	return ""
}

// ---- Counts ----

// countsRow is what /metrics reads without listing every alloc: the
// allocs by client status and the restarts of the live ones, for the
// whole cluster (ID "") and, counting only live allocs, for each node
// (ID the node's), so that a node's going down moves its live allocs to
// "lost" at no cost.
type countsRow struct {
	ID       string
	ByStatus map[spec.ClientStatus]int
	Restarts int
}

type countDelta struct {
	byStatus map[spec.ClientStatus]int
	restarts int
}

// count adds sign times a's part to the counts (a may be nil).
func (t *Txn) count(a *spec.Alloc, sign int) {
	if a == nil {
		return
	}
	st, live := a.ClientStatusOr(), !a.Terminal()
	add := func(key string) {
		if t.counts == nil {
			t.counts = map[string]*countDelta{}
		}
		d := t.counts[key]
		if d == nil {
			d = &countDelta{byStatus: map[spec.ClientStatus]int{}}
			t.counts[key] = d
		}
		d.byStatus[st] += sign
		if live {
			d.restarts += sign * a.Restarts()
		}
	}
	add("")
	if live {
		add("node/" + a.NodeID)
	}
}

// applyCounts writes the batch's count changes, one new row per key.
func (t *Txn) applyCounts() {
	for key, d := range t.counts {
		row := &countsRow{ID: key, ByStatus: map[spec.ClientStatus]int{}}
		if old, _ := t.first(tableCounts, key).(*countsRow); old != nil {
			maps.Copy(row.ByStatus, old.ByStatus)
			row.Restarts = old.Restarts
		}
		for st, n := range d.byStatus {
			if row.ByStatus[st] += n; row.ByStatus[st] == 0 {
				delete(row.ByStatus, st)
			}
		}
		row.Restarts += d.restarts
		if len(row.ByStatus) == 0 {
			t.delete(tableCounts, key)
		} else {
			t.insert(tableCounts, row)
		}
	}
	t.counts = nil
}
