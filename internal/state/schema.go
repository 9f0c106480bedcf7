package state

import (
	"encoding/binary"
	"fmt"
	"maps"

	memdb "github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/internal/spec"
)

const (
	tableJobs        = "jobs"
	tableSchedules   = "schedules"
	tableAllocs      = "allocs"
	tableNodes       = "nodes"
	tableDeployments = "deployments"
	tableCounts      = "counts"
	tableEvents      = "events"
	tableTokens      = "acl_tokens"
	tablePolicies    = "acl_policies"
	tableNodeSecrets = "node_secrets"
)

var tables = []string{tableJobs, tableSchedules, tableAllocs, tableNodes, tableDeployments, tableCounts, tableEvents, tableTokens, tablePolicies, tableNodeSecrets}

// schema is the store's tables and indexes. Each index key is built by a
// function of the row (keyIndex), so that a key orders its rows the way
// readers want them listed: an index is also a sorted list.
func schema() *memdb.DBSchema {
	id := func(f func(any) string) *memdb.IndexSchema {
		return &memdb.IndexSchema{Name: "id", Unique: true, Indexer: keyIndex{func(o any) ([]byte, bool) { return str(nil, f(o)), true }}}
	}
	db := &memdb.DBSchema{Tables: map[string]*memdb.TableSchema{
		tableJobs: {Name: tableJobs, Indexes: map[string]*memdb.IndexSchema{
			"id": id(func(o any) string { return o.(*spec.Job).Name }),
		}},
		tableSchedules: {Name: tableSchedules, Indexes: map[string]*memdb.IndexSchema{
			"id": id(func(o any) string { return o.(*spec.JobSchedule).Job }),
		}},
		tableAllocs: {Name: tableAllocs, Indexes: map[string]*memdb.IndexSchema{
			"id": id(func(o any) string { return o.(*allocRow).ID }),
			// By job, then group, index and age: the order the reconciler
			// reads a job's allocs in.
			"job": {Name: "job", AllowMissing: true, Indexer: keyIndex{func(o any) ([]byte, bool) {
				a := o.(*allocRow).Alloc
				if a == nil {
					return nil, false
				}
				k := str(str(nil, a.Job), a.Group)
				k = binary.BigEndian.AppendUint64(k, uint64(a.Index))
				return binary.BigEndian.AppendUint64(k, uint64(a.CreateIndex)), true
			}}},
			"node": {Name: "node", AllowMissing: true, Indexer: keyIndex{func(o any) ([]byte, bool) {
				a := o.(*allocRow).Alloc
				if a == nil {
					return nil, false
				}
				return str(nil, a.NodeID), true
			}}},
		}},
		tableNodes: {Name: tableNodes, Indexes: map[string]*memdb.IndexSchema{
			"id": id(func(o any) string { return o.(*nodeRow).ID }),
			// By name, then ID: the order nodes are listed in.
			"name": {Name: "name", AllowMissing: true, Indexer: keyIndex{func(o any) ([]byte, bool) {
				n := o.(*nodeRow).Node
				if n == nil {
					return nil, false
				}
				return str(str(nil, n.Name), n.ID), true
			}}},
		}},
		tableCounts: {Name: tableCounts, Indexes: map[string]*memdb.IndexSchema{
			"id": id(func(o any) string { return o.(*countsRow).ID }),
		}},
		tableDeployments: {Name: tableDeployments, Indexes: map[string]*memdb.IndexSchema{
			"id": id(func(o any) string { return o.(*deployRow).ID }),
			// By job, then oldest first.
			"job": {Name: "job", AllowMissing: true, Indexer: keyIndex{func(o any) ([]byte, bool) {
				d := o.(*deployRow).Deployment
				if d == nil {
					return nil, false
				}
				k := str(nil, d.Job)
				// The sign bit flipped, so that signed order is byte order.
				return binary.BigEndian.AppendUint64(k, uint64(d.CreateTime.UnixNano())^1<<63), true
			}}},
		}},
		tableEvents: eventsTable(),
	}}
	maps.Copy(db.Tables, accessTables())
	return db
}

// str appends s and a NUL, which no name or ID holds, so that a key is
// never a prefix of a longer one's first part ("web" and "web2").
func str(b []byte, s string) []byte { return append(append(b, s...), 0) }

// keyIndex is an index whose key is key(row); it is looked up by a
// string, which is the key's first part (str's form of it). A lookup is a
// prefix seek: every row whose key starts with that part, in key order.
type keyIndex struct {
	key func(any) ([]byte, bool)
}

func (x keyIndex) FromObject(o any) (bool, []byte, error) {
	k, ok := x.key(o)
	return ok, k, nil
}

func (x keyIndex) FromArgs(args ...any) ([]byte, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("state: an index lookup takes one argument, not %d", len(args))
	}
	s, ok := args[0].(string)
	if !ok {
		return nil, fmt.Errorf("state: an index lookup takes a string, not %T", args[0])
	}
	return str(nil, s), nil
}

// PrefixFromArgs makes "<index>_prefix" lookups match on the raw prefix:
// Get(table, "id_prefix", "") lists every row.
func (x keyIndex) PrefixFromArgs(args ...any) ([]byte, error) {
	k, err := x.FromArgs(args...)
	if err != nil {
		return nil, err
	}
	return k[:len(k)-1], nil
}
