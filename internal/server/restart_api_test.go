package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/client"
)

func TestRestartAPI(t *testing.T) {
	e := apiServer(t)
	hs, c := e.hs, e.c
	ctx := context.Background()
	_, err := c.RestartJob(ctx, "web")
	wantStatus(t, err, http.StatusNotFound, `no job named "web"`)
	if status, e, _ := do(t, "POST", hs.URL+"/v1/jobs/a%2Fb/restart", ""); status != 400 {
		t.Fatalf("bad job name: %d %+v, want 400", status, e)
	}
	if status, e, _ := do(t, "POST", hs.URL+"/v1/jobs", goodJob); status != 200 {
		t.Fatalf("submit: %d %+v", status, e)
	}
	// A read through the server that took the write sees it.
	before, idx, err := c.Job(ctx, "web", nil)
	if err != nil {
		t.Fatal(err)
	}
	job, err := c.RestartJob(ctx, "web")
	if err != nil {
		t.Fatal(err)
	}
	if job.RestartRequested.IsZero() || job.Version != before.Job.Version || job.ModifyIndex <= before.Job.ModifyIndex {
		t.Fatalf("restart answered requested %v, version %d, modify index %d; want a time, version %d, past %d",
			job.RestartRequested, job.Version, job.ModifyIndex, before.Job.Version, before.Job.ModifyIndex)
	}
	if vs, err := c.JobVersions(ctx, "web"); err != nil || len(vs) != 1 {
		t.Fatalf("versions after a restart: %d, %v; want 1: a restart is no new version", len(vs), err)
	}
	after, _, err := c.Job(ctx, "web", &client.QueryOptions{Index: idx, Wait: 10 * time.Second})
	if err != nil || !after.Job.RestartRequested.Equal(job.RestartRequested) {
		t.Fatalf("GET after restart: requested %v, %v; want %v", after.Job.RestartRequested, err, job.RestartRequested)
	}

	if _, err := c.StopJob(ctx, "web", false); err != nil {
		t.Fatal(err)
	}
	_, err = c.RestartJob(ctx, "web")
	wantStatus(t, err, http.StatusConflict, "is stopped")
}

// TestReadsSeeTheirOwnWrites: a client that writes through a server and
// then reads through it sees its write, although the server answers reads
// from its state store, which the registry's watch feeds a moment later.
func TestReadsSeeTheirOwnWrites(t *testing.T) {
	e := apiServer(t)
	for i := range 30 {
		name := fmt.Sprintf("own-%d", i)
		body := strings.Replace(goodJob, `"web"`, fmt.Sprintf("%q", name), 1)
		if status, e, _ := do(t, "POST", e.hs.URL+"/v1/jobs", body); status != 200 {
			t.Fatalf("submit %s: %d %+v", name, status, e)
		}
		if _, _, err := e.c.Job(context.Background(), name, nil); err != nil {
			t.Fatalf("read of %s right after its submit, through the same server: %v", name, err)
		}
	}
}
