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
