package state

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	memdb "github.com/hashicorp/go-memdb"

	"github.com/drover-org/drover/internal/spec"
)

// ---- Events ----

// The store holds the event history as etcd does: one row per record
// (the events of one write), put and deleted as its key is, so that a
// read of the store answers what a read of etcd at the same revision
// would, and the leader's trimming of etcd's history trims every
// server's store with it.

// EventQuery bounds a read of the history. Records are read from Since on
// (by the time their key names), keep only those stored after index
// After, and at most the newest MaxRecords of them (by that time); a zero
// field bounds nothing.
type EventQuery struct {
	After      int64
	Since      time.Time
	MaxRecords int
}

// eventRecord is one events/ key: Name, the key's name, which orders
// records of the same time; At, the time it names (unix nanoseconds),
// which orders them for retention; Rev, the revision that stored it,
// which is its events' index.
type eventRecord struct {
	Name   string
	At     int64
	Rev    int64
	Events []spec.Event
}

// eventsTable is the records by name, by time (then name: the order of
// etcd's keys) and by revision (then name: the order readers resume in).
func eventsTable() *memdb.TableSchema {
	return &memdb.TableSchema{Name: tableEvents, Indexes: map[string]*memdb.IndexSchema{
		"id": {Name: "id", Unique: true, Indexer: keyIndex{func(o any) ([]byte, bool) { return str(nil, o.(*eventRecord).Name), true }}},
		// Not unique: go-memdb appends the name to each key.
		"time": {Name: "time", Indexer: int64Index{func(o any) int64 { return o.(*eventRecord).At }}},
		"rev":  {Name: "rev", Indexer: int64Index{func(o any) int64 { return o.(*eventRecord).Rev }}},
	}}
}

// int64Index is an index on an integer of the row, in signed order; it is
// looked up by an int64 (LowerBound), or with no argument for every row.
type int64Index struct {
	key func(any) int64
}

// ordered is n with its sign bit flipped, so that signed order is byte
// order.
func ordered(n int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(n)^1<<63) }

func (x int64Index) FromObject(o any) (bool, []byte, error) { return true, ordered(x.key(o)), nil }

func (x int64Index) FromArgs(args ...any) ([]byte, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("state: an integer index lookup takes one argument, not %d", len(args))
	}
	n, ok := args[0].(int64)
	if !ok {
		return nil, fmt.Errorf("state: an integer index lookup takes an int64, not %T", args[0])
	}
	return ordered(n), nil
}

// PutEvents stores the events of record name, which names time at and was
// stored at revision rev (their index, set already).
func (t *Txn) PutEvents(name string, at time.Time, rev int64, evs []spec.Event) {
	t.insert(tableEvents, &eventRecord{Name: name, At: at.UnixNano(), Rev: rev, Events: evs})
}

// DeleteEvents removes a record.
func (t *Txn) DeleteEvents(name string) { t.delete(tableEvents, name) }

// Events returns the events q selects, oldest first (by index; the
// records of one index by name).
func (s *Snapshot) Events(q EventQuery) []spec.Event {
	since := int64(-1 << 63)
	if !q.Since.IsZero() {
		since = q.Since.UnixNano()
	}
	var recs []*eventRecord
	each := func(it memdb.ResultIterator, err error, f func(*eventRecord) bool) {
		if err != nil {
			panic(fmt.Sprintf("state: read %s: %v", tableEvents, err)) // a programming error
		}
		for raw := it.Next(); raw != nil && f(raw.(*eventRecord)); raw = it.Next() {
		}
	}
	switch {
	case q.MaxRecords > 0: // the newest first, back to Since
		it, err := s.tx.GetReverse(tableEvents, "time")
		each(it, err, func(r *eventRecord) bool {
			if r.Rev > q.After && r.At >= since {
				recs = append(recs, r)
			}
			return r.At >= since && len(recs) < q.MaxRecords
		})
	case q.Since.IsZero() || q.After > 0: // a reader resuming: what is new
		it, err := s.tx.LowerBound(tableEvents, "rev", q.After+1)
		each(it, err, func(r *eventRecord) bool {
			if r.At >= since {
				recs = append(recs, r)
			}
			return true
		})
	default: // from Since on
		it, err := s.tx.LowerBound(tableEvents, "time", since)
		each(it, err, func(r *eventRecord) bool {
			recs = append(recs, r)
			return true
		})
	}
	slices.SortFunc(recs, func(a, b *eventRecord) int { return cmp.Or(cmp.Compare(a.Rev, b.Rev), cmp.Compare(a.Name, b.Name)) })
	var out []spec.Event
	for _, r := range recs {
		out = append(out, r.Events...)
	}
	return out
}
