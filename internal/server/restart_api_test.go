package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/registry"
	"github.com/drover-org/drover/internal/spec"
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

// TestConsistentReadSeesAnotherServersWrite: with ?consistent, a read
// through one server sees a write made through another (here, another
// registry client on the same etcd) just before it: the server waits until
// its state holds etcd's revision as a linearizable read gives it.
func TestConsistentReadSeesAnotherServersWrite(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := slog.New(slog.DiscardHandler)
	emb, err := registry.StartEmbedded(ctx, registry.EmbeddedConfig{DataDir: t.TempDir(), ClientAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Close()
	mine, err := registry.Open(ctx, emb.Endpoints(), log)
	if err != nil {
		t.Fatal(err)
	}
	defer mine.Close()
	other, err := registry.Open(ctx, emb.Endpoints(), log)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	srv := New(Config{Registry: mine, ID: "a", Logger: log, APIOnly: true})
	done := make(chan struct{})
	go func() { srv.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	hs := httptest.NewServer(srv.Handler(nil))
	defer hs.Close()
	for deadline := time.Now().Add(10 * time.Second); !srv.ready.Load(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the server was not ready within 10s")
		}
	}
	for i := range 30 {
		job := &spec.Job{Name: fmt.Sprintf("elsewhere-%d", i), Groups: []*spec.Group{{Name: "g", Count: 1, Tasks: []*spec.Task{{
			Name: "t", Driver: "exec", Config: spec.TaskConfig{Command: "/bin/true"}, Resources: spec.Resources{CPU: 10, MemoryMB: 10}}}}}}
		job.Canonicalize()
		if _, _, err := other.PutJob(ctx, job, 0); err != nil {
			t.Fatal(err)
		}
		if status, e, _ := do(t, "GET", hs.URL+"/v1/jobs/"+job.Name+"?consistent", ""); status != 200 {
			t.Fatalf("consistent read of %s right after another server wrote it: %d %+v", job.Name, status, e)
		}
	}
}
