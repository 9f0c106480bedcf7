package registry

import (
	"context"
	"encoding/json"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/drover-org/drover/internal/spec"
)

// ErrJobStopped: the job is stopped, so there is nothing to restart. It is
// an ErrConflict.
var ErrJobStopped = fmt.Errorf("job is stopped: %w", ErrConflict)

// RestartJob asks for every instance of the job to be replaced without a
// spec change (`drover restart`): it sets the stored job's RestartRequested
// to now, and the leader replaces the instances created before it, a batch
// at a time. The spec and its version stay as they are, and no
// job_versions entry is written: the write is guarded by the job key's mod
// revision, as StopJob's is. Asking again moves the time forward, so
// instances started by an unfinished restart are replaced too. A stopped
// job has no instances to restart: ErrJobStopped (an ErrConflict); an
// unknown one ErrNotFound.
func (r *Registry) RestartJob(ctx context.Context, name string) (*spec.Job, error) {
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
		if cur.Stopped {
			return nil, fmt.Errorf("registry: restart job %q: %w", name, ErrJobStopped)
		}
		cur.RestartRequested = r.now().UTC()
		cur.ModifyIndex = 0
		val, err := json.Marshal(cur)
		if err != nil {
			return nil, fmt.Errorf("registry: encode job %q: %w", name, err)
		}
		resp, err := r.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", modRev)).
			Then(clientv3.OpPut(key, string(val))).Commit()
		if err != nil {
			return nil, wrap("restart job "+name, err)
		}
		if resp.Succeeded {
			cur.ModifyIndex = resp.Header.Revision
			return cur, nil
		}
		// Someone else wrote the job between our read and write; look again.
	}
	return nil, fmt.Errorf("registry: job %q keeps changing under concurrent writes: %w", name, ErrConflict)
}
