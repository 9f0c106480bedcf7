package registry

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/drover-org/drover/internal/spec"
)

// Mirror keeps in memory the keys a scheduling pass reads (jobs, allocs
// and their status, nodes and their liveness, schedules), from one full
// read and then its own watch, so that the leader's pass does not read the
// whole registry from etcd each time: a pass pays for decoding what
// changed, not for a round trip over everything.
//
// Snapshot(ctx, rev) answers with the state as of a revision at least rev:
// the leader passes the revision of its own last commit, so that a pass
// never decides on a state that lacks what the previous pass wrote.
type Mirror struct {
	r       *Registry
	mu      sync.Mutex
	changed chan struct{} // closed and replaced when rev moves
	rev     int64
	kvs     map[string]*mvccpb.KeyValue // by key, for the dirs below
	err     error                       // set when the mirror stopped

	decMu sync.Mutex          // one Snapshot decodes at a time
	jobs  map[string]jobEntry // decoded jobs, by key
}

type jobEntry struct {
	rev int64
	job *spec.Job
}

// mirrorDirs are the dirs a pass reads.
var mirrorDirs = []string{dirJobs, dirAllocs, dirAllocStatus, dirNodes, dirSchedules, dirNodeAlive}

// NewMirror reads the registry and keeps a copy of it up to date until ctx
// ends.
func (r *Registry) NewMirror(ctx context.Context) (*Mirror, error) {
	m := &Mirror{r: r, changed: make(chan struct{}), jobs: map[string]jobEntry{}}
	rev, err := m.load(ctx)
	if err != nil {
		return nil, err
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
	kvs := map[string]*mvccpb.KeyValue{}
	for _, res := range resp.Responses {
		for _, kv := range res.GetResponseRange().Kvs {
			kvs[string(kv.Key)] = kv
		}
	}
	m.mu.Lock()
	m.kvs = kvs
	m.setRev(resp.Header.Revision)
	m.mu.Unlock()
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

// mirrored reports whether key is in one of the mirrored dirs.
func (m *Mirror) mirrored(key string) bool {
	rest, ok := strings.CutPrefix(key, m.r.prefix)
	if !ok {
		return false
	}
	for _, d := range mirrorDirs {
		if strings.HasPrefix(rest, d) {
			return true
		}
	}
	return false
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
			if resp.IsProgressNotify() {
				// All events up to the header's revision are delivered
				// (see Snapshot, which asks for these).
				rev = max(rev, resp.Header.Revision)
			}
			for _, ev := range resp.Events {
				// Events come in revision order; a response's header
				// revision may be ahead of the events sent so far while
				// the watch catches up, so progress is the events' own.
				rev = max(rev, ev.Kv.ModRevision)
				key := string(ev.Kv.Key)
				if !m.mirrored(key) {
					continue
				}
				if ev.Type == clientv3.EventTypeDelete {
					delete(m.kvs, key)
				} else {
					m.kvs[key] = ev.Kv
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
// later, waiting at most until ctx ends.
func (m *Mirror) Snapshot(ctx context.Context, atLeast int64) (*Snapshot, error) {
	m.mu.Lock()
	asked := false
	for m.rev < atLeast && m.err == nil {
		ch := m.changed
		m.mu.Unlock()
		// A revision can come from a key outside the mirrored prefix (an
		// etcd shared with others): after a short wait, ask etcd to tell
		// the watch how far it is.
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-ch:
		case <-t.C:
			if !asked {
				asked = true
				m.r.cli.RequestProgress(clientv3.WithRequireLeader(ctx))
			}
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("registry: the leader's mirror is not at revision %d yet: %w", atLeast, ctx.Err())
		}
		t.Stop()
		m.mu.Lock()
	}
	if m.err != nil {
		m.mu.Unlock()
		return nil, m.err
	}
	rev := m.rev
	by := map[string][]*mvccpb.KeyValue{}
	for key, kv := range m.kvs {
		rest := key[len(m.r.prefix):]
		for _, d := range mirrorDirs {
			if strings.HasPrefix(rest, d) {
				by[d] = append(by[d], kv)
				break
			}
		}
	}
	m.mu.Unlock()

	m.decMu.Lock()
	defer m.decMu.Unlock()
	s := &Snapshot{Rev: rev, Schedules: map[string]*spec.JobSchedule{}}
	var err error
	if s.Jobs, err = m.decodeJobs(by[dirJobs]); err != nil {
		return nil, err
	}
	if s.Allocs, err = m.r.mergeAllocs(by[dirAllocs], by[dirAllocStatus], true); err != nil {
		return nil, err
	}
	if s.Nodes, err = m.r.snapshotNodes(by[dirNodes], by[dirNodeAlive]); err != nil {
		return nil, err
	}
	for _, kv := range by[dirSchedules] {
		var js spec.JobSchedule
		if err := json.Unmarshal(kv.Value, &js); err != nil {
			return nil, fmt.Errorf("registry: decode %s: %w", kv.Key, err)
		}
		s.Schedules[string(kv.Key[len(m.r.prefix+dirSchedules):])] = &js
	}
	return s, nil
}

// decodeJobs decodes the job keys, reusing the value decoded for a key
// whose revision did not change. The jobs are shared between snapshots:
// callers must not modify them.
func (m *Mirror) decodeJobs(kvs []*mvccpb.KeyValue) ([]*spec.Job, error) {
	out := make([]*spec.Job, 0, len(kvs))
	seen := make(map[string]jobEntry, len(kvs))
	for _, kv := range kvs {
		key := string(kv.Key)
		e, ok := m.jobs[key]
		if !ok || e.rev != kv.ModRevision {
			j, err := decodeJob(kv)
			if err != nil {
				return nil, err
			}
			e = jobEntry{kv.ModRevision, j}
		}
		seen[key] = e
		out = append(out, e.job)
	}
	m.jobs = seen
	slices.SortFunc(out, func(a, b *spec.Job) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}
