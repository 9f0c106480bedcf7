package registry

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/drover-org/drover/internal/spec"
)

// Kind says what a Change is about.
type Kind int

const (
	KindJob Kind = iota + 1
	KindAlloc
	KindAllocStatus
	KindNode
	KindSchedule
	// KindResync: changes may have been missed (compaction, broken watch);
	// list again at Rev or later. Only Rev is set.
	KindResync
	// KindDeployment: a deployment's record (the leader's) or its request
	// (an operator's) changed. ID is the deployment's, Job its job's.
	KindDeployment
	// KindNodeUsage: a node's usage report changed (node_usage/). Apart
	// from KindNode because it comes every few seconds per node and
	// changes nothing the leader must act on at once. ID and NodeID are
	// the node's.
	KindNodeUsage
	// KindEvents: an event record was stored or trimmed (events/), for
	// the server's event streams: only its Mirror reports it, not Watch.
	// ID is the record's name.
	KindEvents
)

func (k Kind) String() string {
	switch k {
	case KindJob:
		return "job"
	case KindAlloc:
		return "alloc"
	case KindAllocStatus:
		return "alloc_status"
	case KindNode:
		return "node"
	case KindSchedule:
		return "schedule"
	case KindDeployment:
		return "deployment"
	case KindNodeUsage:
		return "node_usage"
	case KindEvents:
		return "events"
	case KindResync:
		return "resync"
	}
	return "unknown"
}

// Change says that something changed at Rev, not what it became: readers
// read the registry for that.
type Change struct {
	Rev  int64
	Kind Kind
	// ID is the job name (KindJob, KindSchedule), alloc id, node id or
	// deployment id.
	ID string
	// Job is the job concerned (alloc kinds, KindJob, KindSchedule,
	// KindDeployment).
	Job string
	// NodeID is the node concerned (alloc kinds, KindNode, KindNodeUsage).
	NodeID string
	// Deleted: the key was deleted.
	Deleted bool
	// Terminal (KindAllocStatus): the status reported is terminal
	// (complete, failed, lost); a report of pending or running is not.
	Terminal bool
	// Judged (KindAllocStatus): the report brings the alloc's deployment
	// health verdict, which a deployment or move waits on.
	Judged bool
}

const watchRetryMax = 2 * time.Second

// Watch reports changes after afterRev (afterRev <= 0: from now on), one
// batch per etcd watch response. When changes may have been missed (the
// revision was compacted, or the watch broke), it re-establishes the watch
// at the current revision and sends a batch with a single KindResync
// change. The channel is closed when ctx is done.
func (r *Registry) Watch(ctx context.Context, afterRev int64) <-chan []Change {
	out := make(chan []Change, 16)
	go r.watch(ctx, afterRev, out)
	return out
}

func (r *Registry) watch(ctx context.Context, afterRev int64, out chan<- []Change) {
	defer close(out)
	send := func(b []Change) bool {
		select {
		case out <- b:
			return true
		case <-ctx.Done():
			return false
		}
	}
	start := afterRev + 1
	if afterRev <= 0 {
		start = 0 // from now
	}
	retry := 50 * time.Millisecond
	for ctx.Err() == nil {
		if start < 0 { // resync needed
			rev, err := r.Revision(ctx)
			if err != nil {
				r.log.Warn("registry watch: cannot read revision; retrying", "err", err, "in", retry)
				select {
				case <-time.After(retry):
				case <-ctx.Done():
					return
				}
				retry = min(2*retry, watchRetryMax)
				continue
			}
			if !send([]Change{{Rev: rev, Kind: KindResync}}) {
				return
			}
			start = rev + 1
		}
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithPrevKV()}
		if start > 0 {
			opts = append(opts, clientv3.WithRev(start))
		}
		for resp := range r.cli.Watch(wctx, r.prefix, opts...) {
			if err := resp.Err(); err != nil {
				switch {
				case ctx.Err() != nil:
				case resp.CompactRevision != 0:
					r.log.Info("registry watch fell behind a compaction; re-listing", "compact_revision", resp.CompactRevision)
				default:
					r.log.Warn("registry watch broken; re-listing", "err", err)
				}
				break
			}
			retry = 50 * time.Millisecond
			if b := r.changes(resp.Events); len(b) > 0 && !send(b) {
				cancel()
				return
			}
		}
		cancel()
		start = -1
	}
}

type ownerFields struct {
	Job          string            `json:"job"`
	NodeID       string            `json:"node_id"`
	ClientStatus spec.ClientStatus `json:"client_status"`
	// Judged: an alloc status that holds a deployment health verdict.
	Judged *json.RawMessage `json:"deployment_health"`
}

// judgedNow reports whether an alloc status event brings a deployment
// health verdict its previous value did not have.
func judgedNow(ev *clientv3.Event) bool {
	if ev.Type == mvccpb.DELETE || owner(ev).Judged == nil {
		return false
	}
	var prev ownerFields
	if ev.PrevKv != nil && json.Unmarshal(ev.PrevKv.Value, &prev) == nil && prev.Judged != nil {
		return false
	}
	return true
}

// owner reads the owner fields of an event's value (its previous value
// for a deletion); zero when they cannot be read.
func owner(ev *clientv3.Event) ownerFields {
	val := ev.Kv.Value
	if ev.Type == mvccpb.DELETE && ev.PrevKv != nil {
		val = ev.PrevKv.Value
	}
	var o ownerFields
	if len(val) == 0 || json.Unmarshal(val, &o) != nil {
		return ownerFields{}
	}
	return o
}

func (r *Registry) changes(evs []*clientv3.Event) []Change {
	var out []Change
	for _, ev := range evs {
		key := strings.TrimPrefix(string(ev.Kv.Key), r.prefix)
		dir, id, ok := strings.Cut(key, "/")
		if !ok || id == "" {
			continue
		}
		c := Change{Rev: ev.Kv.ModRevision, ID: id, Deleted: ev.Type == mvccpb.DELETE}
		switch dir + "/" {
		case dirJobs:
			c.Kind, c.Job = KindJob, id
		case dirSchedules:
			c.Kind, c.Job = KindSchedule, id
		case dirNodes, dirNodeAlive, dirNodeCtl:
			// Liveness coming or going, and an operator's eligibility or
			// drain, are node changes.
			c.Kind, c.NodeID = KindNode, id
		case dirNodeUsage:
			c.Kind, c.NodeID = KindNodeUsage, id
		case dirAllocs, dirAllocStatus:
			c.Kind = KindAlloc
			if dir+"/" == dirAllocStatus {
				c.Kind = KindAllocStatus
			}
			o := owner(ev)
			c.Job, c.NodeID = o.Job, o.NodeID
			c.Terminal = c.Kind == KindAllocStatus && o.ClientStatus.Terminal()
			c.Judged = c.Kind == KindAllocStatus && judgedNow(ev)
		case dirDeployments, dirDeploymentRequests: // both records carry "job"
			c.Kind, c.Job = KindDeployment, owner(ev).Job
		default: // job_versions/ follow jobs/; leader/ is the election's; events/ the server's
			continue
		}
		out = append(out, c)
	}
	return out
}
