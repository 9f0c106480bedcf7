package registry

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/drover-org/drover/internal/spec"
	"github.com/drover-org/drover/internal/state"
)

func testDeployment(id, job string, version uint64, status spec.DeploymentStatus, created int64, canaries int) *spec.Deployment {
	return &spec.Deployment{
		ID: id, Job: job, JobVersion: version, Status: status,
		Groups:     map[string]*spec.DeploymentGroup{"g": {Desired: 2, DesiredCanaries: canaries, Placed: 1}},
		CreateTime: time.Unix(created, 0).UTC(), ModifyTime: time.Unix(created, 0).UTC(),
	}
}

func deploymentIDs(ds []*spec.Deployment) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.ID)
	}
	return out
}

func TestDeployments(t *testing.T) {
	t.Parallel()
	r := open(t, startEtcd(t))
	ctx := context.Background()
	l := campaign(t, r, "s1")
	d1 := testDeployment("dep-1", "web", 2, spec.DeploymentRunning, 100, 1)
	d2 := testDeployment("dep-2", "web", 3, spec.DeploymentSuccessful, 200, 0)
	d3 := testDeployment("dep-3", "db", 1, spec.DeploymentRunning, 150, 0)
	// What the leader passes in as Request and ModifyIndex is not stored.
	withJunk := *d3
	withJunk.Request, withJunk.ModifyIndex = &spec.DeploymentRequest{Fail: true}, 999
	rev := mustCommit(t, l, &spec.Plan{Deployments: []*spec.Deployment{d1, d2, &withJunk}})

	got, err := r.GetDeployment(ctx, "dep-3")
	if err != nil {
		t.Fatal(err)
	}
	want := *d3
	want.ModifyIndex = rev
	if diff := cmp.Diff(&want, got); diff != "" {
		t.Fatalf("GetDeployment (-want +got):\n%s", diff)
	}
	_, err = r.GetDeployment(ctx, "ghost")
	wantErr(t, err, ErrNotFound)
	_, err = r.GetDeployment(ctx, "a/b")
	wantErr(t, err, ErrInvalid)

	all, lrev, err := r.ListDeployments(ctx, "")
	if err != nil || lrev < rev {
		t.Fatalf("ListDeployments = rev %d, %v; want rev >= %d", lrev, err, rev)
	}
	if diff := cmp.Diff([]string{"dep-2", "dep-3", "dep-1"}, deploymentIDs(all)); diff != "" {
		t.Fatalf("all, newest first (-want +got):\n%s", diff)
	}
	web, _, _ := r.ListDeployments(ctx, "web")
	if diff := cmp.Diff([]string{"dep-2", "dep-1"}, deploymentIDs(web)); diff != "" {
		t.Fatalf("web's, newest first (-want +got):\n%s", diff)
	}
	if none, _, err := r.ListDeployments(ctx, "nope"); len(none) != 0 || err != nil {
		t.Fatalf("an unknown job's deployments = %v, %v", none, err)
	}
	_, _, err = r.ListDeployments(ctx, "../x")
	wantErr(t, err, ErrInvalid)

	// Requests: refused for a final or unknown deployment, accumulated
	// for a running one, and kept when the leader rewrites its record.
	wantErr(t, r.PutDeploymentRequest(ctx, "ghost", &spec.DeploymentRequest{Promote: true}), ErrNotFound)
	wantErr(t, r.PutDeploymentRequest(ctx, "dep-1", nil), ErrInvalid)
	wantErr(t, r.PutDeploymentRequest(ctx, "dep-1", &spec.DeploymentRequest{}), ErrInvalid)
	wantErr(t, r.PutDeploymentRequest(ctx, "a/b", &spec.DeploymentRequest{Fail: true}), ErrInvalid)
	err = r.PutDeploymentRequest(ctx, "dep-2", &spec.DeploymentRequest{Fail: true})
	wantErr(t, err, ErrConflict)
	if !strings.Contains(err.Error(), "successful") {
		t.Fatalf("the refusal %q does not say the deployment's status", err)
	}
	t1, t2 := time.Unix(500, 0).UTC(), time.Unix(600, 0).UTC()
	if err := r.PutDeploymentRequest(ctx, "dep-1", &spec.DeploymentRequest{Promote: true, Time: t1}); err != nil {
		t.Fatal(err)
	}
	got, _ = r.GetDeployment(ctx, "dep-1")
	if diff := cmp.Diff(&spec.DeploymentRequest{Promote: true, Time: t1}, got.Request); diff != "" || got.ModifyIndex <= rev {
		t.Fatalf("after promote: request (-want +got):\n%s\nmodify index %d, want > %d", diff, got.ModifyIndex, rev)
	}
	if err := r.PutDeploymentRequest(ctx, "dep-1", &spec.DeploymentRequest{Fail: true, Time: t2}); err != nil {
		t.Fatal(err)
	}
	moved := *d1
	moved.Description = "canary healthy"
	mustCommit(t, l, &spec.Plan{Deployments: []*spec.Deployment{&moved}})
	got, _ = r.GetDeployment(ctx, "dep-1")
	if diff := cmp.Diff(&spec.DeploymentRequest{Promote: true, Fail: true, Time: t2}, got.Request); diff != "" || got.Description != "canary healthy" {
		t.Fatalf("after fail and the leader's rewrite: request (-want +got):\n%s\ndescription %q", diff, got.Description)
	}
	// Final: no more requests.
	done := *d1
	done.Status = spec.DeploymentFailed
	mustCommit(t, l, &spec.Plan{Deployments: []*spec.Deployment{&done}})
	wantErr(t, r.PutDeploymentRequest(ctx, "dep-1", &spec.DeploymentRequest{Promote: true}), ErrConflict)

	// The snapshot's order: by job, then oldest first, requests merged.
	snap, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"dep-3", "dep-1", "dep-2"}, deploymentIDs(snap.Deployments)); diff != "" {
		t.Fatalf("snapshot order (-want +got):\n%s", diff)
	}
	if snap.Deployments[1].Request == nil || !snap.Deployments[1].Request.Fail {
		t.Fatalf("snapshot's dep-1 has request %+v", snap.Deployments[1].Request)
	}

	// A plan names each key once; a delete takes the request along.
	_, err = l.Commit(ctx, &spec.Plan{Deployments: []*spec.Deployment{d3, d3}})
	wantErr(t, err, ErrInvalid)
	_, err = l.Commit(ctx, &spec.Plan{Deployments: []*spec.Deployment{d3}, DeleteDeployments: []string{"dep-3"}})
	wantErr(t, err, ErrInvalid)
	_, err = l.Commit(ctx, &spec.Plan{Deployments: []*spec.Deployment{testDeployment("../x", "web", 1, spec.DeploymentRunning, 1, 0)}})
	wantErr(t, err, ErrInvalid)
	_, err = l.Commit(ctx, &spec.Plan{DeleteDeployments: []string{"a/b"}})
	wantErr(t, err, ErrInvalid)
	mustCommit(t, l, &spec.Plan{DeleteDeployments: []string{"dep-1", "dep-3"}})
	if n := countPrefix(t, r, r.prefix+dirDeployments) + countPrefix(t, r, r.prefix+dirDeploymentRequests); n != 1 {
		t.Fatalf("%d deployment keys left, want dep-2's record only", n)
	}
	_, err = r.GetDeployment(ctx, "dep-1")
	wantErr(t, err, ErrNotFound)
}

func TestDeploymentsInMirrorAndWatch(t *testing.T) {
	t.Parallel()
	r := open(t, startEtcd(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l := campaign(t, r, "s1")
	m, err := r.NewMirror(ctx, "s1", state.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	rev0, _ := r.Revision(ctx)
	ch := r.Watch(ctx, rev0)

	mustCommit(t, l, &spec.Plan{Deployments: []*spec.Deployment{
		testDeployment("dep-1", "web", 1, spec.DeploymentRunning, 100, 1),
		testDeployment("dep-2", "db", 1, spec.DeploymentRunning, 100, 0),
	}})
	want := []Change{{Kind: KindDeployment, ID: "dep-1", Job: "web"}, {Kind: KindDeployment, ID: "dep-2", Job: "db"}}
	if diff := cmp.Diff(want, clean(nextBatch(t, ch))); diff != "" {
		t.Fatalf("deployment puts (-want +got):\n%s", diff)
	}
	if err := r.PutDeploymentRequest(ctx, "dep-1", &spec.DeploymentRequest{Promote: true}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Change{{Kind: KindDeployment, ID: "dep-1", Job: "web"}}, clean(nextBatch(t, ch))); diff != "" {
		t.Fatalf("request put (-want +got):\n%s", diff)
	}
	rev := mustCommit(t, l, &spec.Plan{DeleteDeployments: []string{"dep-2"}, Deployments: []*spec.Deployment{
		testDeployment("dep-3", "web", 2, spec.DeploymentRunning, 300, 0),
	}})
	// dep-2 had no request: deleting a missing key makes no event.
	want = []Change{
		{Kind: KindDeployment, ID: "dep-3", Job: "web"},
		{Kind: KindDeployment, ID: "dep-2", Job: "db", Deleted: true},
	}
	if diff := cmp.Diff(want, clean(nextBatch(t, ch))); diff != "" {
		t.Fatalf("deployment put and delete (-want +got):\n%s", diff)
	}

	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	defer wcancel()
	mirrored, err := legacySnapshot(m, wctx, rev)
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mirrored.Rev, fresh.Rev = 0, 0
	if diff := cmp.Diff(fresh, mirrored); diff != "" {
		t.Fatalf("mirror differs from a fresh snapshot (-snapshot +mirror):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"dep-1", "dep-3"}, deploymentIDs(mirrored.Deployments)); diff != "" || mirrored.Deployments[0].Request == nil {
		t.Fatalf("mirrored deployments (-want +got):\n%s\nrequest %+v", diff, mirrored.Deployments[0].Request)
	}
}

func TestLeaderPutJob(t *testing.T) {
	t.Parallel()
	r := open(t, startEtcd(t))
	ctx := context.Background()
	l := campaign(t, r, "s1")
	const why = "reverted to version 1 after deployment d1 failed"
	v1, _, err := r.PutJob(ctx, testJob("web", "/bin/a"), 0)
	if err != nil {
		t.Fatal(err)
	}
	v2, _, err := r.PutJob(ctx, testJob("web", "/bin/b"), 0)
	if err != nil {
		t.Fatal(err)
	}

	// A stale index: the job moved since the leader read it.
	_, err = l.PutJob(ctx, testJob("web", "/bin/a"), v1.ModifyIndex, why)
	wantErr(t, err, ErrConflict)
	_, err = l.PutJob(ctx, testJob("web", "/bin/a"), 0, why) // 0: must not exist
	wantErr(t, err, ErrConflict)
	if cur, _ := r.GetJob(ctx, "web"); cur.Version != 2 {
		t.Fatalf("a refused revert wrote version %d", cur.Version)
	}

	reverted, err := l.PutJob(ctx, testJob("web", "/bin/a"), v2.ModifyIndex, why)
	if err != nil {
		t.Fatal(err)
	}
	if reverted.Version != 3 || reverted.SubmitTime.IsZero() || reverted.ModifyIndex <= v2.ModifyIndex {
		t.Fatalf("reverted = version %d, submit %v, index %d", reverted.Version, reverted.SubmitTime, reverted.ModifyIndex)
	}
	// The revert is a submission like any other in the history: one
	// Submitted event, written with the job, saying who and why; the
	// refused ones wrote none.
	evs, _, err := r.ListEvents(ctx, EventQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var submitted []string
	for _, e := range evs {
		if e.Type == spec.EventSubmitted && e.Job == "web" {
			submitted = append(submitted, fmt.Sprintf("%d %s", e.Index, e.Message))
		}
	}
	want := []string{
		fmt.Sprintf("%d version 1 submitted", v1.ModifyIndex),
		fmt.Sprintf("%d version 2 submitted", v2.ModifyIndex),
		fmt.Sprintf("%d version 3 submitted by leader s1: %s", reverted.ModifyIndex, why),
	}
	if diff := cmp.Diff(want, submitted); diff != "" {
		t.Fatalf("Submitted events, by index (-want +got):\n%s", diff)
	}
	stored, _ := r.GetJob(ctx, "web")
	if diff := cmp.Diff(reverted, stored); diff != "" {
		t.Fatalf("stored job (-returned +stored):\n%s", diff)
	}
	vs, _ := r.JobVersions(ctx, "web")
	if len(vs) != 3 || vs[2].Groups[0].Tasks[0].Config.Command != "/bin/a" {
		t.Fatalf("versions after the revert: %d", len(vs))
	}
	if v, err := r.GetJobVersion(ctx, "web", 3); err != nil || v.Version != 3 {
		t.Fatalf("GetJobVersion(3) = %+v, %v", v, err)
	}
	_, err = r.GetJobVersion(ctx, "web", 9)
	wantErr(t, err, ErrNotFound)

	// The same spec again writes nothing.
	before, _ := r.Revision(ctx)
	same, err := l.PutJob(ctx, testJob("web", "/bin/a"), stored.ModifyIndex, why)
	if err != nil || same.Version != 3 {
		t.Fatalf("same spec = %+v, %v", same, err)
	}
	if after, _ := r.Revision(ctx); after != before {
		t.Fatalf("the same spec wrote: revision %d -> %d", before, after)
	}

	// A stopped job stays stopped.
	stopped, _ := r.StopJob(ctx, "web")
	got, err := l.PutJob(ctx, testJob("web", "/bin/b"), stopped.ModifyIndex, why)
	if err != nil || got.Version != 4 || !got.Stopped {
		t.Fatalf("revert of a stopped job = %+v, %v; want version 4, stopped", got, err)
	}

	// A new job with index 0.
	if got, err := l.PutJob(ctx, testJob("db", "/bin/a"), 0, why); err != nil || got.Version != 1 {
		t.Fatalf("new job = %+v, %v", got, err)
	}

	// A deposed leader whose session has not noticed: the fence refuses.
	cur, _ := r.GetJob(ctx, "web")
	if _, err := r.cli.Delete(ctx, l.key); err != nil {
		t.Fatal(err)
	}
	_, err = l.PutJob(ctx, testJob("web", "/bin/c"), cur.ModifyIndex, why)
	wantErr(t, err, ErrNotLeader)
	if now, _ := r.GetJob(ctx, "web"); now.ModifyIndex != cur.ModifyIndex {
		t.Fatal("a deposed leader's revert was written")
	}
	_, err = l.PutJob(ctx, &spec.Job{Name: "../x"}, 0, why)
	wantErr(t, err, ErrInvalid)
	_, err = l.PutJob(ctx, nil, 0, why)
	wantErr(t, err, ErrInvalid)
}
