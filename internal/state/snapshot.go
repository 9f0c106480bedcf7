package state

import (
	"fmt"
	"maps"
	"sort"

	memdb "github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/internal/spec"
)

// Snapshot is the state at revision Rev. It never changes, and may be
// read by several goroutines at once. What it returns is shared with the
// store and other snapshots: never modify it.
type Snapshot struct {
	Rev     int64
	tx      *memdb.Txn
	log     []allocChange
	logFrom int64
	nodes   *nodeList
}

func (s *Snapshot) get(table, index, arg string) memdb.ResultIterator {
	it, err := s.tx.Get(table, index, arg)
	if err != nil {
		panic(fmt.Sprintf("state: read %s by %s: %v", table, index, err)) // a programming error
	}
	return it
}

func (s *Snapshot) first(table, id string) any {
	raw, err := s.tx.First(table, "id", id)
	if err != nil {
		panic(fmt.Sprintf("state: read %s: %v", table, err))
	}
	return raw
}

// list collects the non-nil values of the rows an iterator yields.
func list[T any](it memdb.ResultIterator, val func(any) *T) []*T {
	out := []*T{} // an empty list, not nil: it encodes as []
	for raw := it.Next(); raw != nil; raw = it.Next() {
		if v := val(raw); v != nil {
			out = append(out, v)
		}
	}
	return out
}

// ---- Jobs and schedules ----

// Job returns the job, or nil.
func (s *Snapshot) Job(name string) *spec.Job {
	j, _ := s.first(tableJobs, name).(*spec.Job)
	return j
}

// Jobs returns every job, by name.
func (s *Snapshot) Jobs() []*spec.Job {
	return list(s.get(tableJobs, "id_prefix", ""), func(o any) *spec.Job { return o.(*spec.Job) })
}

// Schedule returns the leader's schedule record of a job, or nil.
func (s *Snapshot) Schedule(job string) *spec.JobSchedule {
	js, _ := s.first(tableSchedules, job).(*spec.JobSchedule)
	return js
}

// Schedules returns every schedule record, by job.
func (s *Snapshot) Schedules() []*spec.JobSchedule {
	return list(s.get(tableSchedules, "id_prefix", ""), func(o any) *spec.JobSchedule { return o.(*spec.JobSchedule) })
}

// ---- Allocations ----

func allocOf(o any) *spec.Alloc { return o.(*allocRow).Alloc }

// Alloc returns the alloc with its status, or nil.
func (s *Snapshot) Alloc(id string) *spec.Alloc {
	row, _ := s.first(tableAllocs, id).(*allocRow)
	if row == nil {
		return nil
	}
	return row.Alloc
}

// AllocRevs returns an alloc (its Status the agent's latest report, nil
// when none) with the mod revisions of its record and of its status record
// (0: none), for a write guarded by them; nil when the store has no alloc
// id.
func (s *Snapshot) AllocRevs(id string) (a *spec.Alloc, allocRev, statusRev int64) {
	row, _ := s.first(tableAllocs, id).(*allocRow)
	if row == nil || row.Alloc == nil {
		return nil, 0, 0
	}
	return row.Alloc, row.allocRev, row.statusRev
}

// Allocs returns every alloc, by job, group, index, then oldest first.
func (s *Snapshot) Allocs() []*spec.Alloc {
	return list(s.get(tableAllocs, "job_prefix", ""), allocOf)
}

// JobAllocs returns a job's allocs in Allocs' order.
func (s *Snapshot) JobAllocs(job string) []*spec.Alloc {
	return list(s.get(tableAllocs, "job", job), allocOf)
}

// JobAllocCount is the number of a job's allocs, without listing them.
func (s *Snapshot) JobAllocCount(job string) int {
	n := 0
	for it := s.get(tableAllocs, "job", job); it.Next() != nil; {
		n++
	}
	return n
}

// AllocJobs returns, in order, the name of each job that has allocs: the
// jobs of Jobs that were placed, and jobs purged whose allocs the leader
// has yet to stop. It seeks from one job's allocs to the next's, so it
// costs the number of such jobs, not of allocs.
func (s *Snapshot) AllocJobs() []string {
	var names []string
	from := ""
	for {
		it, err := s.tx.LowerBound(tableAllocs, "job", from)
		if err != nil {
			panic(fmt.Sprintf("state: read allocs by job: %v", err)) // a programming error
		}
		o := it.Next()
		if o == nil {
			return names
		}
		job := allocOf(o).Job
		names = append(names, job)
		// The index's keys are the job's name and a 0 byte, then the
		// rest: the least key past this job's is its name and a 1 byte.
		from = job + "\x01"
	}
}

// NodeAllocs returns the allocs placed on a node, by ID.
func (s *Snapshot) NodeAllocs(node string) []*spec.Alloc {
	return list(s.get(tableAllocs, "node", node), allocOf)
}

// AllocsChanged returns the IDs of the allocs (or their status) put or
// deleted after revision since, up to this snapshot's, oldest first and
// possibly repeated; ok is false when the store no longer knows (since is
// too old, or the store was read afresh after it): read every alloc.
func (s *Snapshot) AllocsChanged(since int64) (ids []string, ok bool) {
	if since < s.logFrom {
		return nil, false
	}
	i := sort.Search(len(s.log), func(i int) bool { return s.log[i].rev > since })
	for _, c := range s.log[i:] {
		if c.rev > s.Rev {
			break
		}
		ids = append(ids, c.id)
	}
	return ids, true
}

// ---- Nodes ----

// Node returns the node with its status, control and usage, or nil. It
// is a map lookup once the node list is built (Nodes), which a pass that
// looks up the node of every alloc needs.
func (s *Snapshot) Node(id string) *spec.Node {
	if b := s.nodes.built.Load(); b != nil {
		if i, ok := b.at[id]; ok {
			return b.nodes[i]
		}
		return nil
	}
	row, _ := s.first(tableNodes, id).(*nodeRow)
	if row == nil {
		return nil
	}
	return row.Node
}

// Nodes returns every node, by name, then ID, in O(1) but after a commit
// that added, removed or renamed nodes (see nodeList). The list is
// shared by every snapshot that saw no node change since, so that a
// reader that keeps it can tell an unchanged cluster by comparing
// pointers.
func (s *Snapshot) Nodes() []*spec.Node { return s.nodes.get(s.tx) }

// ---- Deployments ----

func deploymentOf(o any) *spec.Deployment { return o.(*deployRow).Deployment }

// Deployments returns every deployment, by job, then oldest first.
func (s *Snapshot) Deployments() []*spec.Deployment {
	return list(s.get(tableDeployments, "job_prefix", ""), deploymentOf)
}

// JobDeployments returns a job's deployments, oldest first.
func (s *Snapshot) JobDeployments(job string) []*spec.Deployment {
	return list(s.get(tableDeployments, "job", job), deploymentOf)
}

// ---- Counts ----

// AllocCounts is how many allocs there are by client status, counting an
// alloc whose node is not ready and that has not ended as lost, and the
// restarts of the live ones: what /metrics exports, at the cost of the
// nodes that are not ready rather than of every alloc.
func (s *Snapshot) AllocCounts() (byStatus map[spec.ClientStatus]int, restarts int) {
	byStatus = map[spec.ClientStatus]int{}
	if all, _ := s.first(tableCounts, "").(*countsRow); all != nil {
		maps.Copy(byStatus, all.ByStatus)
		restarts = all.Restarts
	}
	ready := map[string]bool{}
	for _, n := range s.Nodes() {
		ready[n.ID] = n.Status == spec.NodeReady
	}
	// The live allocs of every node that is not ready, or not known.
	it := s.get(tableCounts, "id_prefix", "node/")
	for raw := it.Next(); raw != nil; raw = it.Next() {
		c := raw.(*countsRow)
		if ready[c.ID[len("node/"):]] {
			continue
		}
		for st, n := range c.ByStatus {
			byStatus[st] -= n
			byStatus[spec.ClientLost] += n
		}
	}
	for st, n := range byStatus {
		if n == 0 {
			delete(byStatus, st)
		}
	}
	return byStatus, restarts
}
