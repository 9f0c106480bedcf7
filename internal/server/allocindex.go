package server

import (
	"slices"
	"sync"

	"github.com/drover-org/drover/internal/registry"
	"github.com/drover-org/drover/internal/state"
)

// allocIndex knows which allocs are on each node, kept from the registry's
// watch, so that an agent's read of its assignments (GET
// /v1/nodes/{id}/allocations, the agents' hot path) reads that node's
// allocs and not the whole cluster's.
//
// rev is the revision the index is complete up to: the watch batches it
// applied. A read returns that revision as its index, not the later one
// etcd served the values at, so that a change after it always wakes the
// reader's next blocking query, even one the read already saw.
type allocIndex struct {
	mu     sync.Mutex
	loaded bool // false until the server's Run has read it
	rev    int64
	byNode map[string]map[string]struct{}
	nodeOf map[string]string
}

// load replaces the index with the owners read at rev.
func (x *allocIndex) load(owners map[string]string, rev int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.loaded, x.rev = true, rev
	x.byNode = map[string]map[string]struct{}{}
	x.nodeOf = make(map[string]string, len(owners))
	for id, node := range owners {
		x.add(id, node)
	}
}

func (x *allocIndex) add(id, node string) {
	x.nodeOf[id] = node
	if x.byNode[node] == nil {
		x.byNode[node] = map[string]struct{}{}
	}
	x.byNode[node][id] = struct{}{}
}

// apply takes one watch batch. It reports false for a resync: the index
// must then be loaded again.
func (x *allocIndex) apply(changes []registry.Change) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, c := range changes {
		switch {
		case c.Kind == registry.KindResync:
			return false
		case c.Kind != registry.KindAlloc:
		case c.Deleted:
			if node, ok := x.nodeOf[c.ID]; ok {
				delete(x.byNode[node], c.ID)
				if len(x.byNode[node]) == 0 {
					delete(x.byNode, node)
				}
				delete(x.nodeOf, c.ID)
			}
		default:
			if _, ok := x.nodeOf[c.ID]; !ok { // an alloc never moves
				x.add(c.ID, c.NodeID)
			}
		}
		x.rev = max(x.rev, c.Rev)
	}
	return true
}

// of returns the IDs of node's allocs, sorted, and the revision they are
// complete up to; ok is false while the index is not loaded.
func (x *allocIndex) of(node string) (ids []string, rev int64, ok bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.loaded {
		return nil, 0, false
	}
	ids = make([]string, 0, len(x.byNode[node]))
	for id := range x.byNode[node] {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, x.rev, true
}

// loadFrom replaces the index with the allocs of a snapshot.
func (x *allocIndex) loadFrom(ss *state.Snapshot) {
	owners := map[string]string{}
	for _, a := range ss.Allocs() {
		owners[a.ID] = a.NodeID
	}
	x.load(owners, ss.Rev)
}
