package registry

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestRestartJob(t *testing.T) {
	t.Parallel()
	r := open(t, startEtcd(t))
	ctx := context.Background()
	versions := func() int { return countPrefix(t, r, Prefix+dirJobVersions+"web/") }
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	r.now = func() time.Time { return now }

	_, err := r.RestartJob(ctx, "web")
	wantErr(t, err, ErrNotFound)
	_, err = r.RestartJob(ctx, "../web")
	wantErr(t, err, ErrInvalid)

	j1, _, err := r.PutJob(ctx, testJob("web", "/bin/a"), 0)
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute)
	got, err := r.RestartJob(ctx, "web")
	if err != nil {
		t.Fatal(err)
	}
	if !got.RestartRequested.Equal(now) || got.Version != 1 || got.ModifyIndex <= j1.ModifyIndex {
		t.Fatalf("restart: requested %v (want %v), version %d, modify index %d (was %d)",
			got.RestartRequested, now, got.Version, got.ModifyIndex, j1.ModifyIndex)
	}
	if n := versions(); n != 1 {
		t.Fatalf("%d job_versions keys after a restart, want 1: a restart is not a version", n)
	}
	stored, err := r.GetJob(ctx, "web")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(got, stored); diff != "" {
		t.Fatalf("GetJob differs from RestartJob's result (-restart +get):\n%s", diff)
	}
	if diff := cmp.Diff(j1.SpecOnly(), stored.SpecOnly()); diff != "" {
		t.Fatalf("a restart changed the spec (-before +after):\n%s", diff)
	}

	// Asking again moves the time forward.
	now = now.Add(time.Minute)
	again, err := r.RestartJob(ctx, "web")
	if err != nil || !again.RestartRequested.Equal(now) {
		t.Fatalf("second restart: %v, %v; want requested %v", again, err, now)
	}

	// Resubmitting the same spec is no change, and keeps the request: it
	// is not part of the spec.
	same, changed, err := r.PutJob(ctx, testJob("web", "/bin/a"), 0)
	if err != nil || changed || !same.RestartRequested.Equal(now) {
		t.Fatalf("same spec again: %+v changed=%v err=%v; want the restart request kept", same, changed, err)
	}

	// A stopped job has nothing to restart, and is left as it is.
	stopped, err := r.StopJob(ctx, "web")
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.RestartJob(ctx, "web")
	wantErr(t, err, ErrConflict)
	wantErr(t, err, ErrJobStopped)
	if err == nil || !strings.Contains(err.Error(), "job is stopped") {
		t.Fatalf("restart of a stopped job: %v; want it to say the job is stopped", err)
	}
	if after, _ := r.GetJob(ctx, "web"); after.ModifyIndex != stopped.ModifyIndex {
		t.Fatalf("a refused restart wrote the job: modify index %d, was %d", after.ModifyIndex, stopped.ModifyIndex)
	}
}

// TestPutJobKeepsRestartRequested: a new version submitted in the middle of
// a restart must not cancel it. RestartRequested is server-owned, not spec.
func TestPutJobKeepsRestartRequested(t *testing.T) {
	t.Parallel()
	// PutJob writes job.SpecOnly() for a new version, which clears the
	// stored RestartRequested; it needs next.RestartRequested =
	// cur.RestartRequested (registry.go is not this change's to edit).
	r := open(t, startEtcd(t))
	ctx := context.Background()
	if _, _, err := r.PutJob(ctx, testJob("web", "/bin/a"), 0); err != nil {
		t.Fatal(err)
	}
	req, err := r.RestartJob(ctx, "web")
	if err != nil {
		t.Fatal(err)
	}
	j2, changed, err := r.PutJob(ctx, testJob("web", "/bin/b"), 0)
	if err != nil || !changed || j2.Version != 2 {
		t.Fatalf("changed spec: %+v changed=%v err=%v", j2, changed, err)
	}
	if !j2.RestartRequested.Equal(req.RestartRequested) {
		t.Errorf("a changed spec's submit set restart_requested to %v; want the stored %v", j2.RestartRequested, req.RestartRequested)
	}
}
