package registry

import (
	"context"
	"fmt"

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
	return r.changeJob(ctx, name, "restart", func(j *spec.Job) (bool, error) {
		if j.Stopped {
			return false, ErrJobStopped
		}
		j.RestartRequested = r.now().UTC()
		return true, nil
	})
}

// StopAlloc asks for one instance of the job to be stopped and replaced
// (`drover alloc stop`): it adds the alloc to the stored job's StopAllocs,
// and the leader stops it at once and places its replacement. live says
// which of the entries already there still name a live alloc: the others
// are dropped, so that the map stays as small as the job's instances. As
// RestartJob's, the write is guarded by the job key's mod revision and
// makes no new version.
func (r *Registry) StopAlloc(ctx context.Context, name, allocID string, live func(id string) bool) (*spec.Job, error) {
	if msg := spec.CheckName(allocID); msg != "" {
		return nil, fmt.Errorf("registry: alloc id %s: %w", msg, ErrInvalid)
	}
	return r.changeJob(ctx, name, "stop-alloc", func(j *spec.Job) (bool, error) {
		if j.Stopped {
			return false, ErrJobStopped
		}
		if !j.StopRequested(allocID).IsZero() {
			return false, nil // asked already: the leader is on it
		}
		var next []spec.AllocStopRequest
		for _, s := range j.StopAllocs {
			if live(s.Alloc) {
				next = append(next, s)
			}
		}
		j.StopAllocs = append(next, spec.AllocStopRequest{Alloc: allocID, Time: r.now().UTC()})
		return true, nil
	})
}
