package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/drover-org/drover/internal/spec"
)

// Prefix is where drover's keys live.
const Prefix = "/drover/"

const (
	dirJobs        = "jobs/"
	dirJobVersions = "job_versions/"
	dirAllocs      = "allocs/"
	dirAllocStatus = "alloc_status/"
	dirNodes       = "nodes/"
	dirSchedules   = "schedules/"
	dirLeader      = "leader" // concurrency.NewElection appends "/"

	dialTimeout = 5 * time.Second
	// opTimeout bounds a call whose context has no deadline, so that an
	// unreachable etcd yields ErrUnavailable instead of a hang.
	opTimeout   = 15 * time.Second
	casAttempts = 5
	maxTxnOps   = 256
	maxTxnBytes = 1 << 20 // under etcd's default 1.5 MiB request limit
)

// Registry is a client of drover's keyspace in etcd. It is safe for
// concurrent use.
type Registry struct {
	cli    *clientv3.Client
	log    *slog.Logger
	prefix string
	now    func() time.Time
	ownCli bool
	live   liveness
	// written is the latest revision this registry's writes were answered
	// at (see Written).
	written *atomic.Int64
	// statuses gathers status reports judged at once into one transaction
	// (see statusGroup).
	statuses statusGroup
}

// Written is the latest revision a write of this registry's was answered
// at, 0 before any: a server's reads wait until its state holds it, so
// that a client sees what it wrote through that server.
func (r *Registry) Written() int64 {
	if r.written == nil {
		return 0
	}
	return r.written.Load()
}

// Open connects to etcd at endpoints and checks that it answers; when it
// does not, the error wraps ErrUnavailable.
// It is OpenWithOptions without TLS.
func Open(ctx context.Context, endpoints []string, log *slog.Logger) (*Registry, error) {
	return OpenWithOptions(ctx, Options{Endpoints: endpoints}, log)
}

func newRegistry(cli *clientv3.Client, log *slog.Logger) *Registry {
	return &Registry{cli: cli, log: log, prefix: Prefix, now: time.Now}
}

// opCtx gives ctx a deadline of opTimeout when it has none.
func (r *Registry) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, opTimeout)
}

// Close closes the connection to etcd.
func (r *Registry) Close() error {
	r.stopLiveness()
	if !r.ownCli {
		return nil
	}
	return r.cli.Close()
}

// Revision returns etcd's current revision.
func (r *Registry) Revision(ctx context.Context) (int64, error) {
	ctx, cancel := r.opCtx(ctx)
	defer cancel()
	resp, err := r.cli.Get(ctx, r.prefix+"revision", clientv3.WithCountOnly())
	if err != nil {
		return 0, wrap("read revision", err)
	}
	return resp.Header.Revision, nil
}

// key builds prefix+dir+segs joined by "/", checking each segment.
func (r *Registry) key(dir, what string, segs ...string) (string, error) {
	k := r.prefix + dir
	for i, s := range segs {
		if err := checkName(what, s); err != nil {
			return "", err
		}
		if i > 0 {
			k += "/"
		}
		k += s
	}
	return k, nil
}

func versionKey(prefix, name string, v uint64) string {
	return fmt.Sprintf("%s%s%s/%020d", prefix, dirJobVersions, name, v)
}

// ---- Jobs ----

func decodeJob(kv *mvccpb.KeyValue) (*spec.Job, error) {
	var j spec.Job
	if err := json.Unmarshal(kv.Value, &j); err != nil {
		return nil, fmt.Errorf("registry: decode %s: %w", kv.Key, err)
	}
	j.ModifyIndex = kv.ModRevision
	return &j, nil
}

func (r *Registry) getJob(ctx context.Context, key string) (*spec.Job, int64, error) {
	resp, err := r.cli.Get(ctx, key)
	if err != nil {
		return nil, 0, wrap("read job", err)
	}
	if len(resp.Kvs) == 0 {
		return nil, 0, nil
	}
	j, err := decodeJob(resp.Kvs[0])
	if err != nil {
		return nil, 0, err
	}
	return j, resp.Kvs[0].ModRevision, nil
}

func specBytes(j *spec.Job) []byte {
	b, err := json.Marshal(j.SpecOnly())
	if err != nil {
		panic("registry: job does not marshal: " + err.Error())
	}
	return b
}

// PutJob stores a canonicalized, validated job. When the stored job has the
// same spec and is not stopped, nothing is written and changed is false.
// Otherwise the job is written with its Version bumped when the spec changed
// (1 for a new job; unchanged when only un-stopping the same spec), along
// with a job_versions entry for a new version, in one transaction guarded by
// the job's mod revision. checkIndex > 0 requires the stored job's
// ModifyIndex to equal it (ErrConflict otherwise). A job of that name in
// another namespace is a *JobNamespaceError.
func (r *Registry) PutJob(ctx context.Context, job *spec.Job, checkIndex int64) (stored *spec.Job, changed bool, err error) {
	return r.putJob(ctx, job, checkIndex, false, nil)
}

// PutJobOver is PutJob for a caller whose copy of the registry (the
// server's store) holds seen for the job, nil when it holds none: its
// first attempt writes over seen without reading etcd, one round trip
// instead of two. The transaction's comparison of the job's mod revision
// with seen's makes that safe; whatever seen cannot decide alone (the
// write lost that comparison, the namespace or checkIndex differ, the
// spec is the same) is decided again on a read of etcd, as PutJob does.
// So is a first write that fails or takes over fastWriteTimeout (an etcd
// leader election): if it was applied after all, the read finds the job
// written and the answer is "unchanged", never a second version.
func (r *Registry) PutJobOver(ctx context.Context, job *spec.Job, checkIndex int64, seen *spec.Job) (stored *spec.Job, changed bool, err error) {
	return r.putJob(ctx, job, checkIndex, true, seen)
}

func (r *Registry) putJob(ctx context.Context, job *spec.Job, checkIndex int64, hinted bool, seen *spec.Job) (stored *spec.Job, changed bool, err error) {
	ctx, cancel := r.opCtx(ctx)
	defer cancel()
	if job == nil {
		return nil, false, fmt.Errorf("registry: put job: no job: %w", ErrInvalid)
	}
	key, err := r.key(dirJobs, "job name", job.Name)
	if err != nil {
		return nil, false, err
	}
	for attempt := range casAttempts {
		var cur *spec.Job
		var modRev int64
		fast := hinted && attempt == 0
		if fast {
			cur = seen
			if cur != nil {
				modRev = cur.ModifyIndex
			}
			if !seenDecides(cur, modRev, job, checkIndex) {
				fast = false
				cur, modRev, err = r.getJob(ctx, key)
			}
		} else {
			cur, modRev, err = r.getJob(ctx, key)
		}
		if err != nil {
			return nil, false, err
		}
		// Checked on what the transaction's comparison pins (the job as of
		// modRev), so that no interleaving of two first submissions moves
		// a job between namespaces.
		if cur != nil && spec.NamespaceOf(cur.Namespace) != spec.NamespaceOf(job.Namespace) {
			return nil, false, &JobNamespaceError{Job: job.Name, Namespace: spec.NamespaceOf(cur.Namespace)}
		}
		if checkIndex > 0 && modRev != checkIndex {
			return nil, false, &CheckIndexError{Job: job.Name, CheckIndex: checkIndex, ModifyIndex: modRev}
		}
		next, sameSpec := NextVersion(cur, job, r.now())
		if sameSpec && !cur.Stopped {
			return cur, false, nil
		}
		ops, err := r.jobOps(key, next, !sameSpec, actorOf(ctx))
		if err != nil {
			return nil, false, err
		}
		tctx, cancelTxn := ctx, context.CancelFunc(func() {})
		if fast {
			// Unread, the write may meet an etcd leader election it would
			// have waited out behind a read (a proposal to a leader that
			// died is answered only at etcd's request timeout): bounded,
			// and on failure decided again on a read, which waits for the
			// new leader. The comparison keeps a late first write from
			// being written twice.
			tctx, cancelTxn = context.WithTimeout(ctx, fastWriteTimeout)
		}
		resp, err := r.cli.Txn(tctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", modRev)).Then(ops...).Commit()
		cancelTxn()
		if err != nil && fast && ctx.Err() == nil {
			r.log.Debug("job write over the store's copy failed; reading etcd and writing again", "job", job.Name, "err", err)
			continue
		}
		if err != nil {
			return nil, false, wrap("write job "+job.Name, err)
		}
		if resp.Succeeded {
			next.ModifyIndex = resp.Header.Revision
			return next, true, nil
		}
		// Someone else wrote the job between our read and write; look again.
	}
	return nil, false, fmt.Errorf("registry: job %q keeps changing under concurrent writes: %w", job.Name, ErrConflict)
}

// fastWriteTimeout bounds PutJobOver's first write, made without a read:
// well above a write's time on a loaded disk, well under the operation's
// own timeout, so that a write lost to an etcd leader election leaves time
// to read and write again.
const fastWriteTimeout = 2 * time.Second

// seenDecides says whether a write over cur (a caller's copy, at modRev)
// can go ahead without reading etcd: only a write, since the transaction
// then proves cur current. A refusal or an "unchanged" answer read from a
// copy that may be behind could be wrong, so those are read again.
func seenDecides(cur *spec.Job, modRev int64, job *spec.Job, checkIndex int64) bool {
	if cur != nil && spec.NamespaceOf(cur.Namespace) != spec.NamespaceOf(job.Namespace) {
		return false
	}
	if checkIndex > 0 && modRev != checkIndex {
		return false
	}
	return cur == nil || cur.Stopped || !bytes.Equal(specBytes(cur), specBytes(job))
}

// NextVersion is the job that storing job over cur (nil: none) writes,
// stamped now: version 1 for a new job, cur's version for cur's spec
// (same), else the next one. A restart in progress goes on across
// versions. It is the one place a job's version is decided: for
// submissions (PutJob), the leader's reverts (Leader.PutJob) and the
// version `drover plan` predicts.
func NextVersion(cur, job *spec.Job, now time.Time) (next *spec.Job, same bool) {
	next = job.SpecOnly()
	next.Version = 1
	next.SubmitTime = now.UTC()
	if cur == nil {
		return next, false
	}
	same = bytes.Equal(specBytes(cur), specBytes(job))
	next.Version, next.RestartRequested, next.StopAllocs = cur.Version, cur.RestartRequested, cur.StopAllocs
	if !same {
		next.Version++
	}
	return next, same
}

// jobOps are the puts that store next at key: the job, its version's entry
// when newVersion, and the history's Submitted entry, "version N submitted"
// followed by by (who, and why). The entry goes in the same transaction as
// the job: it precedes the leader's placements of this version.
func (r *Registry) jobOps(key string, next *spec.Job, newVersion bool, by string) ([]clientv3.Op, error) {
	val, err := json.Marshal(next)
	if err != nil {
		return nil, fmt.Errorf("registry: encode job %q: %w", next.Name, err)
	}
	if err := checkSize(fmt.Sprintf("job %q", next.Name), val); err != nil {
		return nil, err
	}
	ops := []clientv3.Op{clientv3.OpPut(key, string(val))}
	if newVersion {
		ops = append(ops, clientv3.OpPut(versionKey(r.prefix, next.Name, next.Version), string(val)))
	}
	evOps, _, err := r.eventOps([]spec.Event{{Topic: spec.TopicJob, Type: spec.EventSubmitted, Job: next.Name,
		Namespace: spec.NamespaceOf(next.Namespace), Message: fmt.Sprintf("version %d submitted%s", next.Version, by)}}, next.SubmitTime)
	if err != nil {
		return nil, err
	}
	return append(ops, evOps...), nil
}

// StopJob marks the job stopped; it is a no-op when it already is.
func (r *Registry) StopJob(ctx context.Context, name string) (*spec.Job, error) {
	return r.changeJob(ctx, name, "stop", func(j *spec.Job) (bool, error) {
		if j.Stopped {
			return false, nil
		}
		j.Stopped = true
		return true, nil
	})
}

// changeJob applies change to the stored job and writes it back, guarded by
// the job key's mod revision (retried when another write came between), as
// the same version: for the server-owned fields outside the spec. change
// returns false to write nothing (the job is returned as stored), or an
// error to refuse. An unknown job is ErrNotFound.
func (r *Registry) changeJob(ctx context.Context, name, verb string, change func(*spec.Job) (bool, error)) (*spec.Job, error) {
	ctx, cancel := r.opCtx(ctx)
	defer cancel()
	key, err := r.key(dirJobs, "job name", name)
	if err != nil {
		return nil, err
	}
	for range casAttempts {
		cur, modRev, err := r.getJob(ctx, key)
		if err != nil {
			return nil, err
		}
		if cur == nil {
			return nil, fmt.Errorf("registry: job %q: %w", name, ErrNotFound)
		}
		changed, err := change(cur)
		if err != nil {
			return nil, fmt.Errorf("registry: %s job %q: %w", verb, name, err)
		}
		if !changed {
			return cur, nil
		}
		cur.ModifyIndex = 0
		val, err := json.Marshal(cur)
		if err != nil {
			return nil, fmt.Errorf("registry: encode job %q: %w", name, err)
		}
		// The history's entry goes with the change, before what the
		// leader does about it.
		typ := map[string]spec.EventType{"stop": spec.EventStopped, "restart": spec.EventRestartRequested}[verb]
		ops := []clientv3.Op{clientv3.OpPut(key, string(val))}
		if typ != "" {
			evOps, _, err := r.eventOps([]spec.Event{{Topic: spec.TopicJob, Type: typ, Job: name,
				Namespace: spec.NamespaceOf(cur.Namespace), Message: strings.TrimPrefix(actorOf(ctx), " ")}}, r.now())
			if err != nil {
				return nil, err
			}
			ops = append(ops, evOps...)
		}
		resp, err := r.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", modRev)).Then(ops...).Commit()
		if err != nil {
			return nil, wrap(verb+" job "+name, err)
		}
		if resp.Succeeded {
			cur.ModifyIndex = resp.Header.Revision
			return cur, nil
		}
		// Someone else wrote the job between our read and write; look again.
	}
	return nil, fmt.Errorf("registry: job %q keeps changing under concurrent writes: %w", name, ErrConflict)
}

// PurgeJob deletes the job and its version history. Its allocs are the
// leader's to stop and delete.
func (r *Registry) PurgeJob(ctx context.Context, name string) error {
	ctx, cancel := r.opCtx(ctx)
	defer cancel()
	key, err := r.key(dirJobs, "job name", name)
	if err != nil {
		return err
	}
	resp, err := r.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), ">", 0)).
		Then(clientv3.OpDelete(key), clientv3.OpDelete(r.prefix+dirJobVersions+name+"/", clientv3.WithPrefix())).Commit()
	if err != nil {
		return wrap("purge job "+name, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("registry: job %q: %w", name, ErrNotFound)
	}
	return nil
}

// GetJob returns the job; ModifyIndex is the revision of its last write.
func (r *Registry) GetJob(ctx context.Context, name string) (*spec.Job, error) {
	ctx, cancel := r.opCtx(ctx)
	defer cancel()
	key, err := r.key(dirJobs, "job name", name)
	if err != nil {
		return nil, err
	}
	j, _, err := r.getJob(ctx, key)
	if err != nil {
		return nil, err
	}
	if j == nil {
		return nil, fmt.Errorf("registry: job %q: %w", name, ErrNotFound)
	}
	return j, nil
}

// JobVersions returns every stored version of the job, oldest first.
func (r *Registry) JobVersions(ctx context.Context, name string) ([]*spec.Job, error) {
	ctx, cancel := r.opCtx(ctx)
	defer cancel()
	if err := checkName("job name", name); err != nil {
		return nil, err
	}
	resp, err := r.cli.Get(ctx, r.prefix+dirJobVersions+name+"/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, wrap("read job versions", err)
	}
	out := make([]*spec.Job, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		j, err := decodeJob(kv)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, nil
}

// GetJobVersion returns one stored version of the job; ErrNotFound when
// the job never had it (or was purged).
func (r *Registry) GetJobVersion(ctx context.Context, name string, version uint64) (*spec.Job, error) {
	ctx, cancel := r.opCtx(ctx)
	defer cancel()
	if err := checkName("job name", name); err != nil {
		return nil, err
	}
	j, _, err := r.getJob(ctx, versionKey(r.prefix, name, version))
	if err != nil {
		return nil, err
	}
	if j == nil {
		return nil, fmt.Errorf("registry: job %q has no version %d: %w", name, version, ErrNotFound)
	}
	return j, nil
}

// ---- Allocs ----

// statusRecord is what alloc_status/<id> holds: the AllocStatus with the
// alloc's job and node alongside, so a watcher can tell whom it concerns.
type statusRecord struct {
	Job    string `json:"job"`
	NodeID string `json:"node_id"`
	spec.AllocStatus
}

var knownClientStatus = []spec.ClientStatus{spec.ClientPending, spec.ClientRunning, spec.ClientComplete, spec.ClientFailed, spec.ClientLost}

// PutAllocStatus stores the status an agent reports for an alloc on its
// node, with its history events: a batch of one (PutAllocStatuses).
// ErrNotFound: no such alloc. ErrConflict: the alloc is on another node,
// or its stored status is terminal and st would change it.
func (r *Registry) PutAllocStatus(ctx context.Context, id, nodeID string, st *spec.AllocStatus) error {
	if st == nil {
		return fmt.Errorf("registry: alloc %q: no status: %w", id, ErrInvalid)
	}
	errs, err := r.PutAllocStatuses(ctx, nodeID, []StatusUpdate{{ID: id, Status: st}})
	if err != nil {
		return err
	}
	return errs[0]
}

// ---- Nodes ----

func decodeNode(kv *mvccpb.KeyValue) (*spec.Node, error) {
	var n spec.Node
	if err := json.Unmarshal(kv.Value, &n); err != nil {
		return nil, fmt.Errorf("registry: decode %s: %w", kv.Key, err)
	}
	n.ModifyIndex = kv.ModRevision
	return &n, nil
}

// PutNode stores the node and returns it with its new ModifyIndex.
func (r *Registry) PutNode(ctx context.Context, n *spec.Node) (*spec.Node, error) {
	ctx, cancel := r.opCtx(ctx)
	defer cancel()
	if n == nil {
		return nil, fmt.Errorf("registry: put node: no node: %w", ErrInvalid)
	}
	key, err := r.key(dirNodes, "node id", n.ID)
	if err != nil {
		return nil, err
	}
	c := *n
	// The operator's fields and the usage have keys of their own
	// (nodectl.go): a registration never writes them.
	c.ModifyIndex, c.Ineligible, c.Drain, c.Usage = 0, false, nil, nil
	val, err := json.Marshal(&c)
	if err != nil {
		return nil, fmt.Errorf("registry: encode node %q: %w", n.ID, err)
	}
	if err := checkSize(fmt.Sprintf("node %q", n.ID), val); err != nil {
		return nil, err
	}
	resp, err := r.cli.Txn(ctx).Then(
		clientv3.OpPut(key, string(val)),
		clientv3.OpGet(r.prefix+dirNodeCtl+n.ID),
		clientv3.OpGet(r.prefix+dirNodeUsage+n.ID),
	).Commit()
	if err != nil {
		return nil, wrap("write node "+n.ID, err)
	}
	// Return a copy decoded from what was stored, sharing nothing with n,
	// with what is merged on read.
	out, err := decodeNode(&mvccpb.KeyValue{Key: []byte(key), Value: val, ModRevision: resp.Header.Revision})
	if err != nil {
		return nil, err
	}
	x, err := extrasOf(firstKV(resp, 1), firstKV(resp, 2))
	if err != nil {
		return nil, err
	}
	x.apply(out)
	return out, nil
}

// ---- Schedules ----

// ---- Snapshot ----
