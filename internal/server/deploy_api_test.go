package server

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/registry"
	"github.com/drover-org/drover/internal/spec"
)

// apiEnv is a server that serves the API but never leads, on a real
// embedded etcd, with the test as the leader: deployments are what the
// test commits, not what a leader's passes would make of them.
type apiEnv struct {
	hs  *httptest.Server
	c   *client.Client
	srv *Server
	l   *registry.Leader
}

func apiServer(t *testing.T) *apiEnv {
	t.Helper()
	return apiServerWith(t, Config{})
}

// apiServerWith is apiServer with cfg's other settings (NodeTTL, say);
// it takes a testing.TB so that a fuzz target can share it.
func apiServerWith(t testing.TB, cfg Config) *apiEnv {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	emb, err := registry.StartEmbedded(ctx, registry.EmbeddedConfig{DataDir: t.TempDir(), ClientAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := registry.Open(ctx, emb.Endpoints(), log)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Registry, cfg.ID, cfg.Logger, cfg.APIOnly = reg, "api", log, true
	srv := New(cfg)
	done := make(chan struct{})
	go func() { srv.Run(ctx); close(done) }()
	hs := httptest.NewServer(srv.Handler(nil))
	cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
	defer ccancel()
	l, err := reg.Campaign(cctx, "test-leader", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		hs.Close()
		l.Resign(context.Background())
		cancel()
		<-done
		reg.Close()
		emb.Close()
	})
	deadline := time.Now().Add(10 * time.Second)
	for !srv.ready.Load() {
		if time.Now().After(deadline) {
			t.Fatal("the server was not ready within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	c, err := client.New(hs.URL)
	if err != nil {
		t.Fatal(err)
	}
	return &apiEnv{hs: hs, c: c, srv: srv, l: l}
}

// commit writes a plan as the leader and waits until the server's hub has
// published it, so that a blocking query started next is not woken by it.
func (e *apiEnv) commit(t *testing.T, p *spec.Plan) int64 {
	t.Helper()
	rev, err := e.l.Commit(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for e.srv.hub.seenRev() < rev {
		if time.Now().After(deadline) {
			t.Fatalf("the server's hub did not see revision %d", rev)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return rev
}

func deployment(id, job string, version uint64, status spec.DeploymentStatus, created int64, canaries int) *spec.Deployment {
	return &spec.Deployment{
		ID: id, Job: job, JobVersion: version, Status: status,
		Groups:     map[string]*spec.DeploymentGroup{"g": {Desired: 2, DesiredCanaries: canaries}},
		CreateTime: time.Unix(created, 0).UTC(), ModifyTime: time.Unix(created, 0).UTC(),
	}
}

func ids(ds []*spec.Deployment) []string {
	out := []string{}
	for _, d := range ds {
		out = append(out, d.ID)
	}
	return out
}

func wantStatus(t *testing.T, err error, status int, contains string) {
	t.Helper()
	var e *client.Error
	if !client.IsStatus(err, status) {
		t.Fatalf("error %v, want status %d", err, status)
	}
	if contains != "" {
		if e = err.(*client.Error); !strings.Contains(e.APIError.Error, contains) {
			t.Fatalf("error %q does not say %q", e.APIError.Error, contains)
		}
	}
}

func TestJobVersionsAndRevert(t *testing.T) {
	e := apiServer(t)
	hs, c := e.hs, e.c
	ctx := context.Background()
	if _, err := c.RevertJob(ctx, "web", 1, 0); !client.IsStatus(err, 404) {
		t.Fatalf("revert of an unknown job: %v, want 404", err)
	}
	if _, err := c.JobVersions(ctx, "web"); !client.IsStatus(err, 404) {
		t.Fatalf("versions of an unknown job: %v, want 404", err)
	}
	for _, body := range []string{goodJob, strings.Replace(goodJob, `"count":2`, `"count":3`, 1)} {
		if status, e, _ := do(t, "POST", hs.URL+"/v1/jobs", body); status != 200 {
			t.Fatalf("submit: %d %+v", status, e)
		}
	}
	vs, err := c.JobVersions(ctx, "web")
	if err != nil || len(vs) != 2 || vs[0].Version != 2 || vs[1].Version != 1 {
		t.Fatalf("versions = %d, %v; want 2 then 1", len(vs), err)
	}

	res, err := c.RevertJob(ctx, "web", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Changed || res.Job.Version != 3 || res.Job.Groups[0].Count != 2 || res.Index != res.Job.ModifyIndex {
		t.Fatalf("revert to 1 = changed %v, version %d, count %d", res.Changed, res.Job.Version, res.Job.Groups[0].Count)
	}
	// Version 1's spec is now the current one: nothing to do.
	again, err := c.RevertJob(ctx, "web", 1, 0)
	if err != nil || again.Changed || again.Job.Version != 3 {
		t.Fatalf("revert to the current spec = %+v, %v; want unchanged version 3", again, err)
	}
	_, err = c.RevertJob(ctx, "web", 2, res.Job.ModifyIndex-1)
	wantStatus(t, err, http.StatusConflict, "changed since")
	back, err := c.RevertJob(ctx, "web", 2, res.Job.ModifyIndex)
	if err != nil || back.Job.Version != 4 || back.Job.Groups[0].Count != 3 {
		t.Fatalf("revert to 2 with a matching check index = %+v, %v", back, err)
	}
	if vs, _ := c.JobVersions(ctx, "web"); len(vs) != 4 || vs[0].Version != 4 {
		t.Fatalf("versions after reverts: %d", len(vs))
	}
	_, err = c.RevertJob(ctx, "web", 9, 0)
	wantStatus(t, err, http.StatusNotFound, "no version 9")

	for _, tc := range []struct {
		name, path, body string
		status           int
		contains         string
	}{
		{"no version", "/v1/jobs/web/revert", `{}`, 400, "version"},
		{"version not a number", "/v1/jobs/web/revert", `{"version":"one"}`, 400, "version"},
		{"negative version", "/v1/jobs/web/revert", `{"version":-1}`, 400, "version"},
		{"unknown field", "/v1/jobs/web/revert", `{"version":1,"force":true}`, 400, "force"},
		{"not json", "/v1/jobs/web/revert", `version 1`, 400, "revert request"},
		{"negative check index", "/v1/jobs/web/revert", `{"version":1,"check_index":-2}`, 400, "check_index"},
		{"bad job name", "/v1/jobs/a%2Fb/revert", `{"version":1}`, 400, "job name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, e, _ := do(t, "POST", hs.URL+tc.path, tc.body)
			if status != tc.status || !strings.Contains(e.Error, tc.contains) {
				t.Fatalf("status %d %q, want %d mentioning %q", status, e.Error, tc.status, tc.contains)
			}
		})
	}
}

func TestDeploymentsAPI(t *testing.T) {
	e := apiServer(t)
	hs, c := e.hs, e.c
	ctx := context.Background()
	if _, _, err := c.LatestDeployment(ctx, "web", nil); !client.IsStatus(err, 404) {
		t.Fatalf("latest deployment of a job without one: %v, want 404", err)
	}
	d1 := deployment("aaaa1111-0000", "web", 2, spec.DeploymentRunning, 100, 1)
	d2 := deployment("aaaa2222-0000", "web", 1, spec.DeploymentSuccessful, 50, 0)
	d3 := deployment("bbbb3333-0000", "db", 1, spec.DeploymentRunning, 200, 0)
	rev := e.commit(t, &spec.Plan{Deployments: []*spec.Deployment{d1, d2, d3}})

	web, idx, err := c.JobDeployments(ctx, "web", nil)
	if err != nil || idx < rev {
		t.Fatalf("job deployments: index %d, %v", idx, err)
	}
	if diff := cmp.Diff([]string{d1.ID, d2.ID}, ids(web)); diff != "" {
		t.Fatalf("web's deployments, newest first (-want +got):\n%s", diff)
	}
	if none, _, err := c.JobDeployments(ctx, "ghost", nil); err != nil || len(none) != 0 {
		t.Fatalf("an unknown job's deployments = %v, %v; want []", none, err)
	}
	latest, _, err := c.LatestDeployment(ctx, "web", nil)
	want := *d1
	want.ModifyIndex = rev
	if diff := cmp.Diff(&want, latest); err != nil || diff != "" {
		t.Fatalf("latest (-want +got), %v:\n%s", err, diff)
	}
	all, _, err := c.Deployments(ctx, nil)
	if diff := cmp.Diff([]string{d3.ID, d1.ID, d2.ID}, ids(all)); err != nil || diff != "" {
		t.Fatalf("all deployments (-want +got), %v:\n%s", err, diff)
	}
	for _, id := range []string{d3.ID, "bbbb", "bbbb33"} {
		if got, _, err := c.Deployment(ctx, id, nil); err != nil || got.ID != d3.ID {
			t.Fatalf("deployment %q = %v, %v", id, got, err)
		}
	}
	_, _, err = c.Deployment(ctx, "aaaa", nil)
	wantStatus(t, err, http.StatusConflict, "matches 2 deployments")
	_, _, err = c.Deployment(ctx, "abc", nil)
	wantStatus(t, err, http.StatusNotFound, "at least 4")
	_, _, err = c.Deployment(ctx, "cccc", nil)
	wantStatus(t, err, http.StatusNotFound, "cccc")

	// Requests.
	before := time.Now().UTC()
	promoted, err := c.PromoteDeployment(ctx, "aaaa1")
	if err != nil {
		t.Fatal(err)
	}
	if r := promoted.Request; r == nil || !r.Promote || r.Fail || r.Time.Before(before.Add(-time.Second)) || promoted.ModifyIndex <= rev {
		t.Fatalf("promoted = request %+v, index %d", promoted.Request, promoted.ModifyIndex)
	}
	_, err = c.PromoteDeployment(ctx, d3.ID)
	wantStatus(t, err, http.StatusBadRequest, "deployment has no canaries to promote")
	_, err = c.FailDeployment(ctx, d2.ID)
	wantStatus(t, err, http.StatusConflict, "successful")
	_, err = c.PromoteDeployment(ctx, d2.ID)
	wantStatus(t, err, http.StatusConflict, "successful")
	_, err = c.FailDeployment(ctx, "ffff0000")
	wantStatus(t, err, http.StatusNotFound, "")
	failed, err := c.FailDeployment(ctx, d3.ID)
	if err != nil || failed.Request == nil || !failed.Request.Fail {
		t.Fatalf("fail = %+v, %v", failed, err)
	}
	for _, path := range []string{"/v1/deployments/a%2Fb", "/v1/jobs/a%2Fb/deployments", "/v1/jobs/a%2Fb/deployment"} {
		if status, e, _ := do(t, "GET", hs.URL+path, ""); status != 400 {
			t.Errorf("GET %s: %d %+v, want 400", path, status, e)
		}
	}
	if status, e, _ := do(t, "POST", hs.URL+"/v1/deployments/a%2Fb/promote", ""); status != 400 {
		t.Errorf("promote with a bad id: %d %+v, want 400", status, e)
	}
	if status, e, _ := do(t, "GET", hs.URL+"/v1/deployments?index=x", ""); status != 400 {
		t.Errorf("a bad index: %d %+v, want 400", status, e)
	}
}

// A CLI follows a rollout with blocking queries: each returns when the
// deployment changes (the leader's progress or an operator's request).
func TestDeploymentBlockingQuery(t *testing.T) {
	e := apiServer(t)
	c := e.c
	ctx := context.Background()
	d := deployment("dddd4444-0000", "web", 1, spec.DeploymentRunning, 100, 1)
	e.commit(t, &spec.Plan{Deployments: []*spec.Deployment{d}})
	_, idx, err := c.LatestDeployment(ctx, "web", nil)
	if err != nil || idx == 0 {
		t.Fatalf("latest: index %d, %v", idx, err)
	}

	type answer struct {
		d   *spec.Deployment
		idx int64
		err error
	}
	follow := func(get func() (*spec.Deployment, int64, error)) <-chan answer {
		ch := make(chan answer, 1)
		go func() {
			d, idx, err := get()
			ch <- answer{d, idx, err}
		}()
		return ch
	}
	latest := follow(func() (*spec.Deployment, int64, error) {
		return c.LatestDeployment(ctx, "web", &client.QueryOptions{Index: idx, Wait: 30 * time.Second})
	})
	one := follow(func() (*spec.Deployment, int64, error) {
		return c.Deployment(ctx, "dddd", &client.QueryOptions{Index: idx, Wait: 30 * time.Second})
	})
	// Another job's deployment wakes neither.
	e.commit(t, &spec.Plan{Deployments: []*spec.Deployment{deployment("eeee5555-0000", "db", 1, spec.DeploymentRunning, 100, 0)}})
	select {
	case a := <-latest:
		t.Fatalf("returned before a change of its own: %+v", a)
	case a := <-one:
		t.Fatalf("returned before a change of its own: %+v", a)
	case <-time.After(300 * time.Millisecond):
	}

	moved := *d
	moved.Description = "1 of 2 healthy"
	e.commit(t, &spec.Plan{Deployments: []*spec.Deployment{&moved}})
	asked := idx
	for _, ch := range []<-chan answer{latest, one} {
		select {
		case a := <-ch:
			if a.err != nil || a.d.Description != "1 of 2 healthy" || a.idx <= asked {
				t.Fatalf("woken query = %+v, index %d (asked past %d), %v", a.d, a.idx, asked, a.err)
			}
			idx = max(idx, a.idx)
		case <-time.After(5 * time.Second):
			t.Fatal("a blocking query did not wake when the deployment changed")
		}
	}

	// An operator's request wakes it too.
	one = follow(func() (*spec.Deployment, int64, error) {
		return c.Deployment(ctx, d.ID, &client.QueryOptions{Index: idx, Wait: 30 * time.Second})
	})
	time.Sleep(100 * time.Millisecond)
	if _, err := c.PromoteDeployment(ctx, d.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-one:
		if a.err != nil || a.d.Request == nil || !a.d.Request.Promote {
			t.Fatalf("woken by the promote = %+v, %v", a.d, a.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a blocking query did not wake on a promote")
	}
}
