package registry

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/drover-org/drover/internal/spec"
	"github.com/drover-org/drover/internal/state"
)

// Events, the cluster's durable history:
//
//	events/<unix nanos, 20 digits>-<8 random hex>   a JSON array of events
//
// One key holds the events of one write (a plan the leader commits, a
// batch of status reports, a submit), written in the same transaction as
// the change they describe where there is one. An event's index is its
// key's etcd revision: every server sees the same order, and a reader
// resumes after the index it last saw. The key's time orders keys for
// retention (TrimEvents).
const dirEvents = "events/"

// maxEventBatch bounds one key's events (a plan of 10,000 placements is
// written as several keys).
const maxEventBatch = 500

type actorKey struct{}

// WithActor names who makes the writes done with ctx, for the history
// ("token \"ci\""): never a secret.
func WithActor(ctx context.Context, who string) context.Context {
	return context.WithValue(ctx, actorKey{}, who)
}

func actorOf(ctx context.Context) string {
	if who, _ := ctx.Value(actorKey{}).(string); who != "" {
		return " by " + who
	}
	return ""
}

// eventOps returns the puts that store evs, stamped with now.
func (r *Registry) eventOps(evs []spec.Event, now time.Time) ([]clientv3.Op, int, error) {
	var ops []clientv3.Op
	bytes := 0
	for len(evs) > 0 {
		n := min(len(evs), maxEventBatch)
		batch := evs[:n]
		evs = evs[n:]
		for i := range batch {
			if batch[i].Time.IsZero() {
				batch[i].Time = now
			}
		}
		val, err := json.Marshal(batch)
		if err != nil {
			return nil, 0, fmt.Errorf("registry: encode events: %w", err)
		}
		b := make([]byte, 4)
		rand.Read(b)
		key := fmt.Sprintf("%s%s%020d-%s", r.prefix, dirEvents, now.UnixNano(), hex.EncodeToString(b))
		ops = append(ops, clientv3.OpPut(key, string(val)))
		bytes += len(key) + len(val)
	}
	return ops, bytes, nil
}

// AppendEvents stores evs on their own (a change that is not a
// transaction of the registry's, or a leader's election).
func (r *Registry) AppendEvents(ctx context.Context, evs []spec.Event) error {
	if len(evs) == 0 {
		return nil
	}
	ctx, cancel := r.opCtx(ctx)
	defer cancel()
	ops, _, err := r.eventOps(evs, r.now())
	if err != nil {
		return err
	}
	if _, err := r.cli.Txn(ctx).Then(ops...).Commit(); err != nil {
		return wrap("store events", err)
	}
	return nil
}

// decodeEvents reads one key's events, indexed by its revision.
func decodeEvents(kv interface {
	GetValue() []byte
	GetModRevision() int64
}) ([]spec.Event, error) {
	var evs []spec.Event
	if err := json.Unmarshal(kv.GetValue(), &evs); err != nil {
		return nil, err
	}
	// Exactly as long: the decoder's slice may have twice the room.
	evs = append(make([]spec.Event, 0, len(evs)), evs...)
	for i := range evs {
		evs[i].Index = kv.GetModRevision()
	}
	return evs, nil
}

// EventQuery bounds a read of the history: the server's store answers the
// same query as ListEvents does (state.Snapshot.Events).
type EventQuery = state.EventQuery

// ListEvents returns the events q selects, oldest first, and the revision
// read at.
func (r *Registry) ListEvents(ctx context.Context, q EventQuery) ([]spec.Event, int64, error) {
	ctx, cancel := r.opCtx(ctx)
	defer cancel()
	prefix := r.prefix + dirEvents
	from := prefix
	if !q.Since.IsZero() {
		from = fmt.Sprintf("%s%020d", prefix, q.Since.UnixNano())
	}
	// Newest first, so that a limit keeps the newest; reversed below.
	opts := []clientv3.OpOption{clientv3.WithRange(clientv3.GetPrefixRangeEnd(prefix)),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend)}
	if q.After > 0 {
		opts = append(opts, clientv3.WithMinModRev(q.After+1))
	}
	if q.MaxRecords > 0 {
		opts = append(opts, clientv3.WithLimit(int64(q.MaxRecords)))
	}
	resp, err := r.cli.Get(ctx, from, opts...)
	if err != nil {
		return nil, 0, wrap("list events", err)
	}
	kvs := resp.Kvs
	// Records written in the same nanosecond by two servers sort by their
	// random suffix; the index (revision) is the order readers resume by.
	slices.SortFunc(kvs, func(a, b *mvccpb.KeyValue) int { return cmp.Compare(a.ModRevision, b.ModRevision) })
	var out []spec.Event
	for _, kv := range kvs {
		evs, err := decodeEvents(kv)
		if err != nil {
			r.log.Warn("skipping an undecodable event record", "key", string(kv.Key), "err", err)
			continue
		}
		out = append(out, evs...)
	}
	return out, resp.Header.Revision, nil
}

// putEvents applies an event record to the server's store (Mirror.put):
// its events, indexed by its revision, and the time its name holds.
func putEvents(tx *state.Txn, name string, kv *mvccpb.KeyValue, in *interner) error {
	nanos, _, _ := strings.Cut(name, "-")
	at, err := strconv.ParseInt(nanos, 10, 64)
	if err != nil {
		return fmt.Errorf("an event record's name is not <unix nanos>-<suffix>: %w", err)
	}
	evs, err := decodeEvents(kv)
	if err != nil {
		return err
	}
	in.events(evs)
	tx.PutEvents(name, time.Unix(0, at), kv.ModRevision, evs)
	return nil
}

// TrimEvents deletes the event records older than before, and the oldest
// beyond keep records (keep <= 0: no count limit). It returns how many it
// deleted.
func (r *Registry) TrimEvents(ctx context.Context, before time.Time, keep int) (int, error) {
	ctx, cancel := r.opCtx(ctx)
	defer cancel()
	prefix := r.prefix + dirEvents
	resp, err := r.cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return 0, wrap("list event records", err)
	}
	cutoff := fmt.Sprintf("%s%020d", prefix, before.UnixNano())
	n := 0
	for i, kv := range resp.Kvs {
		old := string(kv.Key) < cutoff
		over := keep > 0 && len(resp.Kvs)-i > keep
		if !old && !over {
			break // keys sort by time: the rest are newer and within the count
		}
		n++
	}
	for start := 0; start < n; start += maxTxnOps {
		var ops []clientv3.Op
		for _, kv := range resp.Kvs[start:min(n, start+maxTxnOps)] {
			ops = append(ops, clientv3.OpDelete(string(kv.Key)))
		}
		if _, err := r.cli.Txn(ctx).Then(ops...).Commit(); err != nil {
			return start, wrap("delete old events", err)
		}
	}
	return n, nil
}

// StorageSize is etcd's database size and the part of it in use, as the
// first endpoint reports them: for measuring what the history costs.
func (r *Registry) StorageSize(ctx context.Context) (size, inUse int64, err error) {
	ctx, cancel := r.opCtx(ctx)
	defer cancel()
	eps := r.cli.Endpoints()
	if len(eps) == 0 {
		return 0, 0, fmt.Errorf("registry: no etcd endpoint: %w", ErrUnavailable)
	}
	st, err := r.cli.Status(ctx, eps[0])
	if err != nil {
		return 0, 0, wrap("etcd status", err)
	}
	return st.DbSize, st.DbSizeInUse, nil
}
