package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zapcore"

	"github.com/drover-org/drover/internal/spec"
	"github.com/drover-org/drover/internal/state"
)

// tWriter sends log lines to t.Log until the test is over.
type tWriter struct {
	mu   sync.Mutex
	t    *testing.T
	done bool
}

func (w *tWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func testLogger(t *testing.T) *slog.Logger {
	w := &tWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func startEtcdIn(t *testing.T, dir string) *Embedded {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e, err := StartEmbedded(ctx, EmbeddedConfig{DataDir: dir, ClientAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0", Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})
	return e
}

// startEtcd starts an embedded etcd in a temporary directory, stopped when
// the test ends.
func startEtcd(t *testing.T) *Embedded {
	return startEtcdIn(t, t.TempDir())
}

func open(t *testing.T, e *Embedded) *Registry {
	t.Helper()
	r, err := Open(context.Background(), e.Endpoints(), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func testJob(name, cmd string) *spec.Job {
	j := &spec.Job{Name: name, Groups: []*spec.Group{{
		Name: "g", Count: 2,
		Tasks: []*spec.Task{{Name: "t", Driver: "exec", Config: spec.TaskConfig{Command: cmd}}},
	}}}
	j.Canonicalize()
	if ps := j.Validate(); len(ps) > 0 {
		panic(ps.Error())
	}
	return j
}

func testAlloc(id, job, group string, index int, node string) *spec.Alloc {
	return &spec.Alloc{
		ID: id, Name: spec.AllocName(job, group, index), Job: job, JobVersion: 1, Group: group, Index: index,
		NodeID: node, DesiredStatus: spec.DesiredRun, CreateTime: time.Unix(100, 0).UTC(), ModifyTime: time.Unix(100, 0).UTC(),
		Tasks: []*spec.Task{{Name: "t", Driver: "exec", Config: spec.TaskConfig{Command: "/bin/true"}}},
	}
}

func campaign(t *testing.T, r *Registry, id string) *Leader {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := r.Campaign(ctx, id, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Resign(context.Background()) })
	return l
}

func mustCommit(t *testing.T, l *Leader, p *spec.Plan) int64 {
	t.Helper()
	rev, err := l.Commit(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

// keys returns every key in etcd.
func keys(t *testing.T, r *Registry) []string {
	t.Helper()
	resp, err := r.cli.Get(context.Background(), "", clientv3.WithFromKey(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, kv := range resp.Kvs {
		out = append(out, string(kv.Key))
	}
	return out
}

func countPrefix(t *testing.T, r *Registry, prefix string) int {
	t.Helper()
	resp, err := r.cli.Get(context.Background(), prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return int(resp.Count)
}

func wantErr(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error = %v, want %v", err, target)
	}
}

func TestPutJobIdempotent(t *testing.T) {
	t.Parallel()
	r := open(t, startEtcd(t))
	ctx := context.Background()
	versions := func() int { return countPrefix(t, r, Prefix+dirJobVersions+"web/") }

	j1, changed, err := r.PutJob(ctx, testJob("web", "/bin/a"), 0)
	if err != nil || !changed || j1.Version != 1 || j1.ModifyIndex == 0 || j1.SubmitTime.IsZero() {
		t.Fatalf("first put: %+v changed=%v err=%v", j1, changed, err)
	}
	j2, changed, err := r.PutJob(ctx, testJob("web", "/bin/a"), 0)
	if err != nil || changed || j2.Version != 1 || j2.ModifyIndex != j1.ModifyIndex {
		t.Fatalf("same spec again: %+v changed=%v err=%v", j2, changed, err)
	}
	if n := versions(); n != 1 {
		t.Fatalf("%d job_versions keys, want 1", n)
	}
	if diff := cmp.Diff(j1, j2); diff != "" {
		t.Fatalf("idempotent put returned a different job (-first +second):\n%s", diff)
	}

	// A check index that does not match writes nothing.
	rev0, _ := r.Revision(ctx)
	_, _, err = r.PutJob(ctx, testJob("web", "/bin/b"), j1.ModifyIndex+100)
	wantErr(t, err, ErrConflict)
	_, _, err = r.PutJob(ctx, testJob("new", "/bin/b"), 5)
	wantErr(t, err, ErrConflict)
	if rev1, _ := r.Revision(ctx); rev1 != rev0 {
		t.Fatalf("revision moved from %d to %d on refused puts", rev0, rev1)
	}

	// A changed spec with the right check index bumps the version.
	j3, changed, err := r.PutJob(ctx, testJob("web", "/bin/b"), j1.ModifyIndex)
	if err != nil || !changed || j3.Version != 2 {
		t.Fatalf("changed spec: %+v changed=%v err=%v", j3, changed, err)
	}
	if n := versions(); n != 2 {
		t.Fatalf("%d job_versions keys, want 2", n)
	}
	hist, err := r.JobVersions(ctx, "web")
	if err != nil || len(hist) != 2 || hist[0].Version != 1 || hist[1].Version != 2 || hist[1].Groups[0].Tasks[0].Config.Command != "/bin/b" {
		t.Fatalf("history = %v, %v", hist, err)
	}

	// Stop, then submit the same spec: un-stopped, same version.
	st, err := r.StopJob(ctx, "web")
	if err != nil || !st.Stopped || st.Version != 2 {
		t.Fatalf("stop: %+v %v", st, err)
	}
	st2, err := r.StopJob(ctx, "web")
	if err != nil || st2.ModifyIndex != st.ModifyIndex {
		t.Fatalf("second stop wrote: %+v %v", st2, err)
	}
	j4, changed, err := r.PutJob(ctx, testJob("web", "/bin/b"), 0)
	if err != nil || !changed || j4.Stopped || j4.Version != 2 {
		t.Fatalf("resubmit after stop: %+v changed=%v err=%v", j4, changed, err)
	}
	got, err := r.GetJob(ctx, "web")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(j4, got); diff != "" {
		t.Fatalf("GetJob differs from PutJob's result (-put +get):\n%s", diff)
	}
	if n := versions(); n != 2 {
		t.Fatalf("%d job_versions keys after un-stop, want 2", n)
	}

	// Purge removes the job and its history, and nothing else.
	if _, _, err := r.PutJob(ctx, testJob("web2", "/bin/c"), 0); err != nil {
		t.Fatal(err)
	}
	if err := r.PurgeJob(ctx, "web"); err != nil {
		t.Fatal(err)
	}
	_, err = r.GetJob(ctx, "web")
	wantErr(t, err, ErrNotFound)
	if n := versions(); n != 0 {
		t.Fatalf("%d job_versions keys after purge", n)
	}
	if n := countPrefix(t, r, Prefix+dirJobVersions+"web2/"); n != 1 {
		t.Fatalf("purging web touched web2's history: %d keys", n)
	}
	wantErr(t, r.PurgeJob(ctx, "web"), ErrNotFound)
	_, err = r.StopJob(ctx, "web")
	wantErr(t, err, ErrNotFound)
}

func TestPutAllocStatus(t *testing.T) {
	t.Parallel()
	r := open(t, startEtcd(t))
	ctx := context.Background()
	l := campaign(t, r, "s1")
	mustCommit(t, l, &spec.Plan{Allocs: []*spec.Alloc{testAlloc("a1", "web", "g", 0, "n1")}})

	running := &spec.AllocStatus{ClientStatus: spec.ClientRunning, UpdateTime: time.Unix(200, 0).UTC()}
	wantErr(t, r.PutAllocStatus(ctx, "a1", "n2", running), ErrConflict)
	wantErr(t, r.PutAllocStatus(ctx, "nope", "n1", running), ErrNotFound)
	wantErr(t, r.PutAllocStatus(ctx, "a1", "n1", &spec.AllocStatus{ClientStatus: "weird"}), ErrInvalid)
	if err := r.PutAllocStatus(ctx, "a1", "n1", running); err != nil {
		t.Fatal(err)
	}
	a, err := r.GetAlloc(ctx, "a1")
	if err != nil || a.ClientStatusOr() != spec.ClientRunning || a.ModifyIndex <= a.CreateIndex {
		t.Fatalf("after running: %+v %v", a, err)
	}
	failed := &spec.AllocStatus{ClientStatus: spec.ClientFailed, Description: "exit 1"}
	if err := r.PutAllocStatus(ctx, "a1", "n1", failed); err != nil {
		t.Fatal(err)
	}
	// Terminal states do not move.
	wantErr(t, r.PutAllocStatus(ctx, "a1", "n1", running), ErrConflict)
	wantErr(t, r.PutAllocStatus(ctx, "a1", "n1", &spec.AllocStatus{ClientStatus: spec.ClientComplete}), ErrConflict)
	// The same terminal status may be refined (e.g. more task events).
	if err := r.PutAllocStatus(ctx, "a1", "n1", &spec.AllocStatus{ClientStatus: spec.ClientFailed, Description: "exit 1 after 2 restarts"}); err != nil {
		t.Fatal(err)
	}
	a, _ = r.GetAlloc(ctx, "a1")
	if a.Status.ClientStatus != spec.ClientFailed || a.Status.Description != "exit 1 after 2 restarts" {
		t.Fatalf("status = %+v", a.Status)
	}

	// The leader's rewrite of the desired half keeps the status half.
	up := testAlloc("a1", "web", "g", 0, "n1")
	up.DesiredStatus = spec.DesiredStop
	up.Status = &spec.AllocStatus{ClientStatus: spec.ClientPending} // not stored
	mustCommit(t, l, &spec.Plan{Allocs: []*spec.Alloc{up}})
	a, _ = r.GetAlloc(ctx, "a1")
	if a.DesiredStatus != spec.DesiredStop || a.Status.ClientStatus != spec.ClientFailed {
		t.Fatalf("after desired update: %+v status %+v", a, a.Status)
	}

	// Deleting the alloc deletes both halves; a late status finds nothing.
	mustCommit(t, l, &spec.Plan{DeleteAllocs: []string{"a1"}})
	wantErr(t, r.PutAllocStatus(ctx, "a1", "n1", failed), ErrNotFound)
	if n := countPrefix(t, r, Prefix+dirAllocStatus); n != 0 {
		t.Fatalf("%d orphan status keys", n)
	}
}

func TestInvalidIDs(t *testing.T) {
	t.Parallel()
	r := open(t, startEtcd(t))
	ctx := context.Background()
	l := campaign(t, r, "s1")
	mustCommit(t, l, &spec.Plan{Allocs: []*spec.Alloc{testAlloc("ok", "web", "g", 0, "n1")}})
	before := keys(t, r)
	rev0, _ := r.Revision(ctx)

	for _, bad := range []string{"a/b", "..", "", "x y", "a/../b", "a..b", "-a", strings.Repeat("a", 200)} {
		t.Run(fmt.Sprintf("%q", bad), func(t *testing.T) {
			j := testJob("web", "/bin/a")
			j.Name = bad
			_, _, err := r.PutJob(ctx, j, 0)
			wantErr(t, err, ErrInvalid)
			_, err = r.StopJob(ctx, bad)
			wantErr(t, err, ErrInvalid)
			wantErr(t, r.PurgeJob(ctx, bad), ErrInvalid)
			_, err = r.GetJob(ctx, bad)
			wantErr(t, err, ErrInvalid)
			_, err = r.JobVersions(ctx, bad)
			wantErr(t, err, ErrInvalid)
			_, err = r.GetAlloc(ctx, bad)
			wantErr(t, err, ErrInvalid)
			st := &spec.AllocStatus{ClientStatus: spec.ClientRunning}
			wantErr(t, r.PutAllocStatus(ctx, bad, "n1", st), ErrInvalid)
			wantErr(t, r.PutAllocStatus(ctx, "ok", bad, st), ErrInvalid)
			_, err = r.PutNode(ctx, &spec.Node{ID: bad, Name: "n"})
			wantErr(t, err, ErrInvalid)
			_, err = r.GetNode(ctx, bad)
			wantErr(t, err, ErrInvalid)
			_, err = r.GetSchedule(ctx, bad)
			wantErr(t, err, ErrInvalid)
			// A plan with one bad id writes none of it.
			good := testAlloc("fine", "web", "g", 1, "n1")
			for _, p := range []*spec.Plan{
				{Allocs: []*spec.Alloc{good, testAlloc(bad, "web", "g", 0, "n1")}},
				{Allocs: []*spec.Alloc{good}, DeleteAllocs: []string{bad}},
				{Allocs: []*spec.Alloc{good}, Schedules: []*spec.JobSchedule{{Job: bad}}},
				{Allocs: []*spec.Alloc{good}, DeleteSchedules: []string{bad}},
			} {
				_, err := l.Commit(ctx, p)
				wantErr(t, err, ErrInvalid)
			}
		})
	}
	// Duplicate keys in one plan are refused before anything is sent.
	_, err := l.Commit(ctx, &spec.Plan{Allocs: []*spec.Alloc{testAlloc("ok", "web", "g", 0, "n1")}, DeleteAllocs: []string{"ok"}})
	wantErr(t, err, ErrInvalid)

	if diff := cmp.Diff(before, keys(t, r)); diff != "" {
		t.Fatalf("keyspace changed (-before +after):\n%s", diff)
	}
	if rev1, _ := r.Revision(ctx); rev1 != rev0 {
		t.Fatalf("revision moved from %d to %d", rev0, rev1)
	}
}

func TestNodesAndSchedules(t *testing.T) {
	t.Parallel()
	r := open(t, startEtcd(t))
	ctx := context.Background()
	n, err := r.PutNode(ctx, &spec.Node{ID: "id-2", Name: "b", Status: spec.NodeReady, Drivers: []string{"exec"}, ModifyIndex: 999})
	if err != nil || n.ModifyIndex == 999 || n.ModifyIndex == 0 {
		t.Fatalf("PutNode = %+v, %v", n, err)
	}
	r.PutNode(ctx, &spec.Node{ID: "id-1", Name: "b"})
	r.PutNode(ctx, &spec.Node{ID: "id-0", Name: "c"})
	r.PutNode(ctx, &spec.Node{ID: "id-3", Name: "a"})
	if err := r.NodeAlive(ctx, "id-2", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	got, err := r.GetNode(ctx, "id-2")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(n, got); diff != "" {
		t.Fatalf("GetNode (-put +get):\n%s", diff)
	}
	// Status is read from liveness, whatever was stored.
	if got, _ := r.GetNode(ctx, "id-1"); got.Status != spec.NodeDown {
		t.Fatalf("a node that never heartbeat is %q, want down", got.Status)
	}
	_, err = r.GetNode(ctx, "id-9")
	wantErr(t, err, ErrNotFound)
	nodes, _, err := r.ListNodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, n := range nodes {
		ids = append(ids, n.ID)
	}
	if diff := cmp.Diff([]string{"id-3", "id-1", "id-2", "id-0"}, ids); diff != "" {
		t.Fatalf("ListNodes order (-want +got):\n%s", diff)
	}

	s, err := r.GetSchedule(ctx, "web")
	if s != nil || err != nil {
		t.Fatalf("absent schedule = %v, %v", s, err)
	}
	l := campaign(t, r, "s1")
	want := &spec.JobSchedule{Job: "web", JobVersion: 3, Failures: []spec.PlacementFailure{{Group: "g", Missing: 1}}, UpdateTime: time.Unix(5, 0).UTC()}
	mustCommit(t, l, &spec.Plan{Schedules: []*spec.JobSchedule{want}})
	if s, err = r.GetSchedule(ctx, "web"); err != nil || !cmp.Equal(s, want) {
		t.Fatalf("schedule = %+v, %v", s, err)
	}
	mustCommit(t, l, &spec.Plan{DeleteSchedules: []string{"web"}})
	if s, err = r.GetSchedule(ctx, "web"); s != nil || err != nil {
		t.Fatalf("deleted schedule = %v, %v", s, err)
	}
	if rev, err := l.Commit(ctx, &spec.Plan{}); rev != 0 || err != nil {
		t.Fatalf("empty plan = %d, %v", rev, err)
	}
}

func allocIDs(as []*spec.Alloc) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.ID)
	}
	return out
}

func TestListAllocsFilter(t *testing.T) {
	t.Parallel()
	r := open(t, startEtcd(t))
	ctx := context.Background()
	l := campaign(t, r, "s1")
	mustCommit(t, l, &spec.Plan{Allocs: []*spec.Alloc{
		testAlloc("z1", "web", "g", 1, "n1"),
		testAlloc("z2", "web", "g", 0, "n2"),
		testAlloc("z3", "web", "a", 5, "n1"),
		testAlloc("z4", "db", "g", 0, "n2"),
	}})
	for _, tc := range []struct {
		f    AllocFilter
		want []string
	}{
		{AllocFilter{}, []string{"z4", "z3", "z2", "z1"}},
		{AllocFilter{Job: "web"}, []string{"z3", "z2", "z1"}},
		{AllocFilter{NodeID: "n2"}, []string{"z4", "z2"}},
		{AllocFilter{Job: "web", NodeID: "n1"}, []string{"z3", "z1"}},
		{AllocFilter{Job: "nope"}, nil},
	} {
		as, rev, err := r.ListAllocs(ctx, tc.f)
		if err != nil || rev == 0 {
			t.Fatal(rev, err)
		}
		if diff := cmp.Diff(tc.want, allocIDs(as)); diff != "" {
			t.Errorf("ListAllocs(%+v) (-want +got):\n%s", tc.f, diff)
		}
	}
	_, err := r.GetAlloc(ctx, "z9")
	wantErr(t, err, ErrNotFound)
}

func TestSnapshotConsistent(t *testing.T) {
	t.Parallel()
	r := open(t, startEtcd(t))
	ctx := context.Background()
	l := campaign(t, r, "s1")
	r.PutJob(ctx, testJob("web", "/bin/a"), 0)
	r.PutNode(ctx, &spec.Node{ID: "n1", Name: "one"})
	mustCommit(t, l, &spec.Plan{
		Allocs:    []*spec.Alloc{testAlloc("a1", "web", "g", 0, "n1"), testAlloc("a2", "web", "g", 1, "n1")},
		Schedules: []*spec.JobSchedule{{Job: "web", JobVersion: 1}},
	})
	if err := r.PutAllocStatus(ctx, "a2", "n1", &spec.AllocStatus{ClientStatus: spec.ClientRunning}); err != nil {
		t.Fatal(err)
	}
	s, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cur, _ := r.Revision(ctx)
	if s.Rev != cur || len(s.Jobs) != 1 || len(s.Nodes) != 1 || len(s.Allocs) != 2 || s.Schedules["web"] == nil {
		t.Fatalf("snapshot = %+v (current rev %d)", s, cur)
	}
	if s.Allocs[0].Status != nil || s.Allocs[1].Status.ClientStatus != spec.ClientRunning {
		t.Fatalf("statuses not merged: %+v %+v", s.Allocs[0].Status, s.Allocs[1].Status)
	}

	// Under concurrent writes every snapshot is one revision: the job's
	// counter (in its meta) and the count of allocs written with it agree.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			// Two separate writes: job meta says i+1, then alloc i is added.
			// A snapshot may see allocs == i+1 or i+2 of them (job first);
			// never an alloc without its job counter.
			j := testJob("counter", "/bin/a")
			j.Meta = map[string]string{"n": fmt.Sprint(i + 1)}
			if _, _, err := r.PutJob(ctx, j, 0); err != nil {
				t.Error(err)
				return
			}
			if _, err := l.Commit(ctx, &spec.Plan{Allocs: []*spec.Alloc{testAlloc(fmt.Sprintf("c%04d", i), "counter", "g", i, "n1")}}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for range 30 {
		s, err := r.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, a := range s.Allocs {
			if a.Job == "counter" {
				n++
				if a.ModifyIndex > s.Rev {
					t.Fatalf("alloc modified at %d in snapshot at %d", a.ModifyIndex, s.Rev)
				}
			}
		}
		var meta string
		for _, j := range s.Jobs {
			if j.Name == "counter" {
				meta = j.Meta["n"]
			}
		}
		if meta != "" && meta != fmt.Sprint(n) && meta != fmt.Sprint(n+1) {
			t.Fatalf("snapshot at %d: job counter %s with %d allocs", s.Rev, meta, n)
		}
		if meta == "" && n > 0 {
			t.Fatalf("snapshot at %d: %d allocs without their job", s.Rev, n)
		}
	}
	close(stop)
	wg.Wait()
}

func nextBatch(t *testing.T, ch <-chan []Change) []Change {
	t.Helper()
	select {
	case b, ok := <-ch:
		if !ok {
			t.Fatal("watch channel closed")
		}
		return b
	case <-time.After(5 * time.Second):
		t.Fatal("no change within 5s")
	}
	return nil
}

// clean drops revisions so changes compare by meaning.
func clean(b []Change) []Change {
	out := make([]Change, len(b))
	for i, c := range b {
		c.Rev = 0
		out[i] = c
	}
	return out
}

func TestWatch(t *testing.T) {
	t.Parallel()
	r := open(t, startEtcd(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rev0, err := r.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ch := r.Watch(ctx, rev0)
	l := campaign(t, r, "s1") // leader/ keys are not reported

	mustCommit(t, l, &spec.Plan{Allocs: []*spec.Alloc{testAlloc("a1", "web", "g", 0, "n1"), testAlloc("a2", "web", "g", 1, "n2")}})
	b := nextBatch(t, ch)
	if b[0].Rev <= rev0 {
		t.Fatalf("change at %d, not after %d", b[0].Rev, rev0)
	}
	want := []Change{{Kind: KindAlloc, ID: "a1", Job: "web", NodeID: "n1"}, {Kind: KindAlloc, ID: "a2", Job: "web", NodeID: "n2"}}
	if diff := cmp.Diff(want, clean(b)); diff != "" {
		t.Fatalf("alloc puts (-want +got):\n%s", diff)
	}
	r.PutAllocStatus(ctx, "a2", "n2", &spec.AllocStatus{ClientStatus: spec.ClientRunning})
	if diff := cmp.Diff([]Change{{Kind: KindAllocStatus, ID: "a2", Job: "web", NodeID: "n2"}}, clean(nextBatch(t, ch))); diff != "" {
		t.Fatalf("status put (-want +got):\n%s", diff)
	}
	mustCommit(t, l, &spec.Plan{DeleteAllocs: []string{"a2"}, Schedules: []*spec.JobSchedule{{Job: "web"}}})
	want = []Change{
		{Kind: KindAlloc, ID: "a2", Job: "web", NodeID: "n2", Deleted: true},
		{Kind: KindAllocStatus, ID: "a2", Job: "web", NodeID: "n2", Deleted: true},
		{Kind: KindSchedule, ID: "web", Job: "web"},
	}
	if diff := cmp.Diff(want, clean(nextBatch(t, ch))); diff != "" {
		t.Fatalf("alloc delete (-want +got):\n%s", diff)
	}
	r.PutJob(ctx, testJob("web", "/bin/a"), 0) // jobs/ and job_versions/: one change
	if diff := cmp.Diff([]Change{{Kind: KindJob, ID: "web", Job: "web"}}, clean(nextBatch(t, ch))); diff != "" {
		t.Fatalf("job put (-want +got):\n%s", diff)
	}
	r.PutNode(ctx, &spec.Node{ID: "n1"})
	if diff := cmp.Diff([]Change{{Kind: KindNode, ID: "n1", NodeID: "n1"}}, clean(nextBatch(t, ch))); diff != "" {
		t.Fatalf("node put (-want +got):\n%s", diff)
	}
	l.Resign(ctx)
	r.PurgeJob(ctx, "web")
	if diff := cmp.Diff([]Change{{Kind: KindJob, ID: "web", Job: "web", Deleted: true}}, clean(nextBatch(t, ch))); diff != "" {
		t.Fatalf("job purge after resign (-want +got):\n%s", diff)
	}
	cancel()
	for range ch {
	}
}

func TestWatchResyncAfterCompaction(t *testing.T) {
	t.Parallel()
	r := open(t, startEtcd(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rev0, _ := r.Revision(ctx)
	for i := range 5 {
		r.PutNode(ctx, &spec.Node{ID: fmt.Sprintf("n%d", i)})
	}
	cur, _ := r.Revision(ctx)
	if _, err := r.cli.Compact(ctx, cur, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	// The watcher is behind the compaction: it is told to re-list.
	ch := r.Watch(ctx, rev0)
	b := nextBatch(t, ch)
	if len(b) != 1 || b[0].Kind != KindResync || b[0].Rev < cur {
		t.Fatalf("first batch = %+v, want one resync at >= %d", b, cur)
	}
	// Then it carries on from the resync revision.
	r.PutNode(ctx, &spec.Node{ID: "late"})
	b = nextBatch(t, ch)
	if diff := cmp.Diff([]Change{{Kind: KindNode, ID: "late", NodeID: "late"}}, clean(b)); diff != "" || b[0].Rev <= cur {
		t.Fatalf("after resync (-want +got):\n%s (rev %d)", diff, b[0].Rev)
	}
	cancel()
	select {
	case _, ok := <-ch:
		for ok {
			_, ok = <-ch
		}
	case <-time.After(5 * time.Second):
		t.Fatal("watch channel not closed after cancel")
	}
}

func TestPersistence(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e1 := startEtcdIn(t, dir)
	r1 := open(t, e1)
	put, _, err := r1.PutJob(context.Background(), testJob("web", "/bin/a"), 0)
	if err != nil {
		t.Fatal(err)
	}
	r1.Close()
	if err := e1.Close(); err != nil {
		t.Fatal(err)
	}
	r2 := open(t, startEtcdIn(t, dir))
	got, err := r2.GetJob(context.Background(), "web")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(put, got); diff != "" {
		t.Fatalf("job after restart (-before +after):\n%s", diff)
	}
}

func TestCommitSplitsLargePlans(t *testing.T) {
	t.Parallel()
	r := open(t, startEtcd(t))
	ctx := context.Background()
	l := campaign(t, r, "s1")
	var allocs []*spec.Alloc
	var ids []string
	for i := range 1000 {
		id := fmt.Sprintf("a%04d", i)
		allocs = append(allocs, testAlloc(id, "web", "g", i, "n1"))
		ids = append(ids, id)
	}
	rev0, _ := r.Revision(ctx)
	rev := mustCommit(t, l, &spec.Plan{Allocs: allocs})
	if txns := rev - rev0; txns != 4 { // ceil(1000/256); each txn is one revision
		t.Fatalf("1000 allocs took %d txns, want 4", txns)
	}
	as, _, err := r.ListAllocs(ctx, AllocFilter{Job: "web"})
	if err != nil || len(as) != 1000 {
		t.Fatalf("%d allocs stored, %v", len(as), err)
	}
	for _, id := range ids[:300] {
		if err := r.PutAllocStatus(ctx, id, "n1", &spec.AllocStatus{ClientStatus: spec.ClientRunning}); err != nil {
			t.Fatal(err)
		}
	}
	rev0, _ = r.Revision(ctx)
	rev = mustCommit(t, l, &spec.Plan{DeleteAllocs: ids})
	if txns := rev - rev0; txns != 8 { // 2 ops per delete: 128 per txn
		t.Fatalf("1000 deletes took %d txns, want 8", txns)
	}
	if n := countPrefix(t, r, Prefix+dirAllocs) + countPrefix(t, r, Prefix+dirAllocStatus); n != 0 {
		t.Fatalf("%d alloc keys left", n)
	}
}

// A plan larger than one transaction whose leader is deposed between two
// of them leaves only complete parts: the allocs written are a prefix of
// the plan's, each with its event, after the deployment they name and
// its event; the history holds a prefix of the plan's events, in order.
func TestCommitDeposedBetweenChunks(t *testing.T) {
	t.Parallel()
	e := startEtcd(t)
	ra, hook := openHooked(t, e)
	rb := open(t, e)
	ctx := context.Background()
	l := campaign(t, ra, "a")
	l.mu.Lock()
	l.maxOps = 16 // several transactions for a plan of 40 allocs
	l.mu.Unlock()

	now := time.Unix(200, 0).UTC()
	dep := &spec.Deployment{ID: "d1", Job: "web", JobVersion: 1, Status: spec.DeploymentRunning, CreateTime: now, ModifyTime: now}
	p := &spec.Plan{Deployments: []*spec.Deployment{dep}, Events: []spec.Event{
		{Time: now, Topic: spec.TopicNode, Type: "Down", Node: "n9"},
		{Time: now, Topic: spec.TopicDeployment, Type: dep.Status.EventType(), Job: "web", DeploymentID: dep.ID},
	}}
	for i := range 40 {
		a := testAlloc(fmt.Sprintf("a%02d", i), "web", "g", i, "n1")
		a.DeploymentID = dep.ID
		p.Allocs = append(p.Allocs, a)
		p.Events = append(p.Events, spec.Event{Time: now, Topic: spec.TopicAlloc, Type: "Placed", Job: "web", AllocID: a.ID})
	}
	txns := 0
	hook.set(func() {
		if txns++; txns == 2 { // after the first transaction, a's lease is gone
			if _, err := rb.cli.Revoke(ctx, l.session.Lease()); err != nil {
				t.Error(err)
			}
		}
	})
	_, err := l.Commit(ctx, p)
	hook.set(nil)
	wantErr(t, err, ErrNotLeader)

	as, _, err := rb.ListAllocs(ctx, AllocFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(as) == 0 || len(as) == len(p.Allocs) {
		t.Fatalf("%d of %d allocs written; want the first transaction's", len(as), len(p.Allocs))
	}
	for i, a := range as {
		if a.ID != p.Allocs[i].ID {
			t.Fatalf("alloc %d written is %s, want %s: not a prefix of the plan", i, a.ID, p.Allocs[i].ID)
		}
	}
	if _, err := rb.GetDeployment(ctx, dep.ID); err != nil {
		t.Fatalf("allocs of deployment %s written without it: %v", dep.ID, err)
	}
	evs, _, err := rb.ListEvents(ctx, EventQuery{})
	if err != nil {
		t.Fatal(err)
	}
	type ev struct {
		Type                  spec.EventType
		AllocID, DeploymentID string
	}
	var got, want []ev
	for _, e := range evs {
		got = append(got, ev{e.Type, e.AllocID, e.DeploymentID})
	}
	for _, e := range p.Events[:2+len(as)] {
		want = append(want, ev{e.Type, e.AllocID, e.DeploymentID})
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("events stored for %d written allocs (-want +got):\n%s", len(as), diff)
	}
}

func TestExplicitSessionTTL(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]int{0: 1, time.Second: 1, 1500 * time.Millisecond: 2, 3 * time.Second: 3} {
		if got := ttlSeconds(d); got != want {
			t.Errorf("ttlSeconds(%s) = %d, want %d", d, got, want)
		}
	}
	r := open(t, startEtcd(t))
	ctx := context.Background()
	for _, ttl := range []time.Duration{2 * time.Second, 3 * time.Second} {
		l, err := r.Campaign(ctx, "s1", ttl)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := r.cli.TimeToLive(ctx, l.session.Lease())
		if err != nil {
			t.Fatal(err)
		}
		if resp.GrantedTTL != int64(ttl.Seconds()) || resp.GrantedTTL == 60 || resp.TTL > resp.GrantedTTL {
			t.Fatalf("asked %s: granted TTL %d s, remaining %d s", ttl, resp.GrantedTTL, resp.TTL)
		}
		if err := l.Resign(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// campaignAsync campaigns in the background.
func campaignAsync(ctx context.Context, r *Registry, id string) <-chan *Leader {
	ch := make(chan *Leader, 1)
	go func() {
		l, err := r.Campaign(ctx, id, 2*time.Second)
		if err != nil {
			close(ch)
			return
		}
		ch <- l
	}()
	return ch
}

func waitLeader(t *testing.T, ch <-chan *Leader, within time.Duration) *Leader {
	t.Helper()
	select {
	case l, ok := <-ch:
		if !ok {
			t.Fatal("campaign failed")
		}
		t.Cleanup(func() { l.Resign(context.Background()) })
		return l
	case <-time.After(within):
		t.Fatalf("not elected within %s", within)
	}
	return nil
}

// checkFenced checks that the deposed leader a cannot write and b can.
func checkFenced(t *testing.T, r *Registry, a, b *Leader) {
	t.Helper()
	ctx := context.Background()
	if a.Epoch() >= b.Epoch() {
		t.Fatalf("epochs: deposed %d, new %d", a.Epoch(), b.Epoch())
	}
	_, err := a.Commit(ctx, &spec.Plan{Allocs: []*spec.Alloc{testAlloc("stale", "web", "g", 0, "n1")}, Schedules: []*spec.JobSchedule{{Job: "web"}}})
	wantErr(t, err, ErrNotLeader)
	_, err = r.GetAlloc(ctx, "stale")
	wantErr(t, err, ErrNotFound)
	if s, _ := r.GetSchedule(ctx, "web"); s != nil {
		t.Fatal("deposed leader's schedule was written")
	}
	mustCommit(t, b, &spec.Plan{Allocs: []*spec.Alloc{testAlloc("fresh", "web", "g", 0, "n1")}})
	if _, err := r.GetAlloc(ctx, "fresh"); err != nil {
		t.Fatal(err)
	}
	if id, err := r.LeaderID(ctx); id != b.id || err != nil {
		t.Fatalf("LeaderID = %q, %v; want %q", id, err, b.id)
	}
}

func TestFencingRevokedLease(t *testing.T) {
	t.Parallel()
	e := startEtcd(t)
	ra, rb := open(t, e), open(t, e)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	la := campaign(t, ra, "a")
	chB := campaignAsync(ctx, rb, "b")
	select {
	case <-chB:
		t.Fatal("b elected while a leads")
	case <-time.After(300 * time.Millisecond):
	}
	if id, _ := rb.LeaderID(ctx); id != "a" {
		t.Fatalf("LeaderID = %q, want a", id)
	}
	// The lease is revoked out from under a (as if it expired).
	if _, err := rb.cli.Revoke(ctx, la.session.Lease()); err != nil {
		t.Fatal(err)
	}
	lb := waitLeader(t, chB, 5*time.Second)
	checkFenced(t, rb, la, lb)
	select {
	case <-la.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a's Done not closed after its lease was revoked")
	}
}

// pausableLease stops keeping leases alive on Pause, without telling the
// session: a leader whose keepalives stop (a hung process, a partition)
// and that has not noticed.
type pausableLease struct {
	clientv3.Lease
	mu      sync.Mutex
	cancels []context.CancelFunc
}

func (p *pausableLease) KeepAlive(ctx context.Context, id clientv3.LeaseID) (<-chan *clientv3.LeaseKeepAliveResponse, error) {
	kctx, cancel := context.WithCancel(ctx)
	p.mu.Lock()
	p.cancels = append(p.cancels, cancel)
	p.mu.Unlock()
	in, err := p.Lease.KeepAlive(kctx, id)
	if err != nil {
		cancel()
		return nil, err
	}
	out := make(chan *clientv3.LeaseKeepAliveResponse)
	go func() {
		for resp := range in {
			select {
			case out <- resp:
			case <-ctx.Done():
			}
		}
		<-ctx.Done() // paused: keep the session believing
		close(out)
	}()
	return out, nil
}

func (p *pausableLease) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.cancels {
		c()
	}
}

func TestFencingExpiredLease(t *testing.T) {
	t.Parallel()
	e := startEtcd(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: e.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	pl := &pausableLease{Lease: cli.Lease}
	cli.Lease = pl
	ra := newRegistry(cli, testLogger(t))
	t.Cleanup(func() { cli.Close() })
	rb := open(t, e)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	la := campaign(t, ra, "a")
	chB := campaignAsync(ctx, rb, "b")
	// a stays leader while its keepalives flow, longer than its TTL.
	select {
	case <-chB:
		t.Fatal("b elected while a keeps its lease alive")
	case <-time.After(2200 * time.Millisecond):
	}
	pl.Pause()
	start := time.Now()
	lb := waitLeader(t, chB, 8*time.Second)
	t.Logf("b elected %s after a's keepalives stopped", time.Since(start).Round(time.Millisecond))
	select {
	case <-la.Done():
		t.Fatal("a noticed; this test wants a leader that has not")
	default:
	}
	checkFenced(t, rb, la, lb) // refused by etcd's compare, not by a's own check
}

func TestResignHandsOver(t *testing.T) {
	t.Parallel()
	e := startEtcd(t)
	ra, rb := open(t, e), open(t, e)
	ctx := context.Background()
	if id, err := ra.LeaderID(ctx); id != "" || err != nil {
		t.Fatalf("LeaderID with no leader = %q, %v", id, err)
	}
	la := campaign(t, ra, "a")
	chB := campaignAsync(ctx, rb, "b")
	if err := la.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	lb := waitLeader(t, chB, time.Second) // at once, not after a TTL
	checkFenced(t, rb, la, lb)
	if err := la.Resign(ctx); err != nil {
		t.Fatalf("second resign: %v", err)
	}
}

func TestOpenUnavailable(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	u, err := listenURL("127.0.0.1:0") // a port nobody listens on
	if err != nil {
		t.Fatal(err)
	}
	r, err := Open(ctx, []string{u.String()}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil {
		r.Close()
	}
	wantErr(t, err, ErrUnavailable)
}

// hookKV calls before, when set, ahead of each transaction its client
// commits: for placing another writer's change, or a lost lease, at an
// exact point of a write.
type hookKV struct {
	clientv3.KV
	mu     sync.Mutex
	before func()
}

// set arms the hook (nil disarms it).
func (h *hookKV) set(before func()) {
	h.mu.Lock()
	h.before = before
	h.mu.Unlock()
}

type hookTxn struct {
	clientv3.Txn
	kv *hookKV
}

func (h *hookKV) Txn(ctx context.Context) clientv3.Txn {
	return &hookTxn{Txn: h.KV.Txn(ctx), kv: h}
}

func (t *hookTxn) If(cs ...clientv3.Cmp) clientv3.Txn   { t.Txn = t.Txn.If(cs...); return t }
func (t *hookTxn) Then(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Then(ops...); return t }
func (t *hookTxn) Else(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Else(ops...); return t }

func (t *hookTxn) Commit() (*clientv3.TxnResponse, error) {
	t.kv.mu.Lock()
	before := t.kv.before
	t.kv.mu.Unlock()
	if before != nil {
		before()
	}
	return t.Txn.Commit()
}

// openHooked opens a registry on e whose transactions go through a
// hookKV; arm it once the registry is ready to be tested.
func openHooked(t *testing.T, e *Embedded) (*Registry, *hookKV) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: e.Endpoints(), DialTimeout: 5 * time.Second,
		Logger: zapToSlog(testLogger(t), zapcore.ErrorLevel, nil)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	h := &hookKV{KV: cli.KV}
	cli.KV = h
	return newRegistry(cli, testLogger(t)), h
}

// Two first submissions of one name in two namespaces race: the loser
// read no job, and the winner's is written before the loser's
// transaction. The loser must not take the job into its namespace.
func TestPutJobNamespaceRace(t *testing.T) {
	t.Parallel()
	e := startEtcd(t)
	ra, hook := openHooked(t, e)
	rb := open(t, e)
	ctx := context.Background()
	ops := testJob("web", "/bin/ops")
	ops.Namespace = "ops"
	dev := testJob("web", "/bin/dev")
	dev.Namespace = "dev"
	hook.set(func() {
		hook.set(nil)
		// a has read no job; b's submission is written before a's.
		if _, _, err := rb.PutJob(ctx, ops, 0); err != nil {
			t.Error(err)
		}
	})
	_, _, err := ra.PutJob(ctx, dev, 0)
	var taken *JobNamespaceError
	if !errors.As(err, &taken) || !errors.Is(err, ErrConflict) || taken.Job != "web" || taken.Namespace != "ops" {
		t.Fatalf("put of web in dev after ops took it: %v; want a JobNamespaceError naming ops", err)
	}
	j, err := rb.GetJob(ctx, "web")
	if err != nil || j.Namespace != "ops" || j.Version != 1 {
		t.Fatalf("stored job: %+v, %v; want version 1 in ops", j, err)
	}
	if hist, _ := rb.JobVersions(ctx, "web"); len(hist) != 1 {
		t.Fatalf("%d versions stored, want 1", len(hist))
	}
}

func TestPutJobConcurrent(t *testing.T) {
	t.Parallel()
	r := open(t, startEtcd(t))
	ctx := context.Background()
	const writers = 4
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, err := r.PutJob(ctx, testJob("web", fmt.Sprintf("/bin/%d", i)), 0)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	ok := 0
	for err := range errs {
		if err == nil {
			ok++
		} else {
			wantErr(t, err, ErrConflict)
		}
	}
	// Every successful write made exactly one new version; none was lost
	// or numbered twice.
	j, err := r.GetJob(ctx, "web")
	if err != nil {
		t.Fatal(err)
	}
	hist, _ := r.JobVersions(ctx, "web")
	if ok == 0 || int(j.Version) != ok || len(hist) != ok {
		t.Fatalf("%d writes succeeded; version %d; %d history entries", ok, j.Version, len(hist))
	}
}

func TestCampaignCancelled(t *testing.T) {
	t.Parallel()
	e := startEtcd(t)
	ra, rb := open(t, e), open(t, e)
	campaign(t, ra, "a")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := rb.Campaign(ctx, "b", 2*time.Second)
	wantErr(t, err, context.DeadlineExceeded)
	// The losing candidate's key and lease are gone.
	if n := countPrefix(t, rb, Prefix+dirLeader+"/"); n != 1 {
		t.Fatalf("%d election keys, want 1", n)
	}
	leases, err := rb.cli.Leases(context.Background())
	if err != nil || len(leases.Leases) != 1 {
		t.Fatalf("leases = %v, %v; want only a's", leases, err)
	}
	if _, err := rb.Campaign(context.Background(), "", time.Second); !errors.Is(err, ErrInvalid) {
		t.Fatalf("empty id: %v", err)
	}
}

func TestUnavailableAfterEtcdStops(t *testing.T) {
	t.Parallel()
	e := startEtcd(t)
	r := open(t, e)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err := r.GetJob(ctx, "web")
	wantErr(t, err, ErrUnavailable)
	// What a user is shown says what happened and what to check, in
	// drover's words.
	msg := err.Error()
	for _, want := range []string{"read job", "etcd at " + e.Endpoints()[0], "did not answer within", "quorum", "etcdctl endpoint status"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
	_, after, _ := strings.Cut(msg, "within ")
	if waited, err := time.ParseDuration(strings.Split(after, ":")[0]); err != nil || waited < 400*time.Millisecond || waited > 5*time.Second {
		t.Errorf("error %q: the wait it states is not the 500ms deadline's", msg)
	}
	if strings.Contains(msg, "rpc error") || strings.Contains(msg, "context deadline exceeded") {
		t.Errorf("error %q shows gRPC's words", msg)
	}
}

// A node is up while its liveness lease is renewed, and down (with a watch
// event saying so) once the heartbeats stop for its TTL.
func TestNodeLiveness(t *testing.T) {
	t.Parallel()
	r := open(t, startEtcd(t))
	ctx := context.Background()
	if _, err := r.PutNode(ctx, &spec.Node{ID: "n1", Name: "n1"}); err != nil {
		t.Fatal(err)
	}
	wantErr(t, r.Heartbeat(ctx, "n1", 2*time.Second), ErrNotFound) // never registered alive
	wantErr(t, r.Heartbeat(ctx, "../x", 2*time.Second), ErrInvalid)
	rev, _ := r.Revision(ctx)
	changes := r.Watch(ctx, rev)
	if err := r.NodeAlive(ctx, "n1", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	status := func() spec.NodeStatus {
		n, err := r.GetNode(ctx, "n1")
		if err != nil {
			t.Fatal(err)
		}
		return n.Status
	}
	// Heartbeats every 500 ms over 3 s (longer than the TTL) keep it up.
	for range 6 {
		if err := r.Heartbeat(ctx, "n1", 2*time.Second); err != nil {
			t.Fatal(err)
		}
		if s := status(); s != spec.NodeReady {
			t.Fatalf("heartbeating node is %q", s)
		}
		time.Sleep(500 * time.Millisecond)
	}
	// Silence: down within TTL plus etcd's expiry check.
	deadline := time.Now().Add(6 * time.Second)
	for status() != spec.NodeDown {
		if time.Now().After(deadline) {
			t.Fatal("node still ready 6 s after its heartbeats stopped (TTL 2 s)")
		}
		time.Sleep(100 * time.Millisecond)
	}
	wantErr(t, r.Heartbeat(ctx, "n1", 2*time.Second), ErrNotFound)
	snap, err := r.Snapshot(ctx)
	if err != nil || len(snap.Nodes) != 1 || snap.Nodes[0].Status != spec.NodeDown {
		t.Fatalf("snapshot nodes %+v, %v", snap.Nodes, err)
	}
	// The watch said so: a node change for n1 that is a delete.
	timeout := time.After(5 * time.Second)
	for {
		select {
		case batch := <-changes:
			for _, c := range batch {
				if c.Kind == KindNode && c.NodeID == "n1" && c.Deleted {
					return
				}
			}
		case <-timeout:
			t.Fatal("no watch event for the node going down")
		}
	}
}

// TestSnapshotKeepsUnchangedNodes: a node that did not change between two
// snapshots of the server's state is the same value in both (the
// scheduler's cache relies on it), and one whose liveness or record
// changed is a new value with the new status.
func TestSnapshotKeepsUnchangedNodes(t *testing.T) {
	t.Parallel()
	r := open(t, startEtcd(t))
	ctx := context.Background()
	for _, id := range []string{"n1", "n2"} {
		if _, err := r.PutNode(ctx, &spec.Node{ID: id, Name: id}); err != nil {
			t.Fatal(err)
		}
		if err := r.NodeAlive(ctx, id, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	mctx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	m, err := r.NewMirror(mctx, "s1", state.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	snap := func() []*spec.Node {
		rev, err := r.Revision(ctx)
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		s, err := m.Snapshot(wctx, rev)
		if err != nil {
			t.Fatal(err)
		}
		return s.Nodes()
	}
	a, b := snap(), snap()
	if len(a) != 2 || a[0] != b[0] || a[1] != b[1] {
		t.Fatalf("unchanged nodes are new values: %p %p / %p %p", a[0], a[1], b[0], b[1])
	}
	if _, err := r.PutNode(ctx, &spec.Node{ID: "n2", Name: "n2", Meta: map[string]string{"k": "v"}}); err != nil {
		t.Fatal(err)
	}
	c := snap()
	if c[0] != a[0] || c[1] == a[1] || c[1].Meta["k"] != "v" || c[1].Status != spec.NodeReady {
		t.Fatalf("after changing n2: n1 same %v, n2 new %v, meta %v, status %s", c[0] == a[0], c[1] != a[1], c[1].Meta, c[1].Status)
	}
	if _, err := r.cli.Delete(ctx, r.prefix+dirNodeAlive+"n1"); err != nil { // as when its lease runs out
		t.Fatal(err)
	}
	d := snap()
	if d[0] == c[0] || d[0].Status != spec.NodeDown || c[0].Status != spec.NodeReady || d[1] != c[1] {
		t.Fatalf("after n1 went down: n1 %s (was %s, new value %v), n2 same %v", d[0].Status, c[0].Status, d[0] != c[0], d[1] == c[1])
	}
}

// TestLivenessMovesBetweenServers: a node registered through one server
// that heartbeats to another keeps its key when the first server's sweep
// runs and when the first server goes away (its lease runs out); once the
// node falls silent at the second server, its key goes.
func TestLivenessMovesBetweenServers(t *testing.T) {
	t.Parallel()
	e := startEtcd(t)
	r1, r2 := open(t, e), open(t, e)
	ctx := context.Background()
	ttl := 2 * time.Second
	if _, err := r1.PutNode(ctx, &spec.Node{ID: "n1", Name: "n1"}); err != nil {
		t.Fatal(err)
	}
	if err := r1.NodeAlive(ctx, "n1", ttl); err != nil {
		t.Fatal(err)
	}
	status := func() spec.NodeStatus {
		n, err := r2.GetNode(ctx, "n1")
		if err != nil {
			t.Fatal(err)
		}
		return n.Status
	}
	// The agent moves to r2: r1's sweep (the node is silent there past
	// the TTL) and then, once r1 is gone, its lease's expiry must leave
	// the key alone.
	for i := range 12 { // 6 s
		if i == 6 {
			r1.Close()
		}
		if err := r2.Heartbeat(ctx, "n1", ttl); err != nil {
			t.Fatal(err)
		}
		if s := status(); s != spec.NodeReady {
			t.Fatalf("node heartbeating to r2 is %q", s)
		}
		time.Sleep(500 * time.Millisecond)
	}
	deadline := time.Now().Add(6 * time.Second)
	for status() != spec.NodeDown {
		if time.Now().After(deadline) {
			t.Fatal("node still ready 6 s after its heartbeats to r2 stopped (TTL 2 s)")
		}
		time.Sleep(100 * time.Millisecond)
	}
	wantErr(t, r2.Heartbeat(ctx, "n1", ttl), ErrNotFound)
}

// TestMirrorMatchesSnapshot: the leader's mirror answers what a fresh
// Snapshot reads, after writes of every kind, and waits for a revision it
// has not seen yet.
func TestMirrorMatchesSnapshot(t *testing.T) {
	t.Parallel()
	r := open(t, startEtcd(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l := campaign(t, r, "s1")
	m, err := r.NewMirror(ctx, "s1", state.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	r.PutJob(ctx, testJob("web", "/bin/a"), 0)
	r.PutNode(ctx, &spec.Node{ID: "n1", Name: "one"})
	if err := r.NodeAlive(ctx, "n1", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	rev := mustCommit(t, l, &spec.Plan{
		Allocs:    []*spec.Alloc{testAlloc("a1", "web", "g", 0, "n1"), testAlloc("a2", "web", "g", 1, "n1")},
		Schedules: []*spec.JobSchedule{{Job: "web", JobVersion: 1}},
	})
	if err := r.PutAllocStatus(ctx, "a2", "n1", &spec.AllocStatus{ClientStatus: spec.ClientRunning}); err != nil {
		t.Fatal(err)
	}
	mustCommit(t, l, &spec.Plan{DeleteAllocs: []string{"a1"}})
	// Many allocs of several jobs, written out of order, some rewritten
	// and some deleted: the mirror keeps them in the snapshot's order.
	var many []*spec.Alloc
	for i := range 24 {
		job := []string{"web", "db", "api"}[i%3]
		many = append(many, testAlloc(fmt.Sprintf("m%02d", (i*7)%24), job, "g", (i*5)%4, "n1"))
	}
	mustCommit(t, l, &spec.Plan{Allocs: many})
	mustCommit(t, l, &spec.Plan{Allocs: many[3:6], DeleteAllocs: []string{"m01", "m17"}})
	rev2 := mustCommit(t, l, &spec.Plan{Allocs: many[10:12]})
	want, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	defer wcancel()
	got, err := legacySnapshot(m, wctx, max(rev, rev2))
	if err != nil {
		t.Fatal(err)
	}
	if got.Rev < max(rev, rev2) {
		t.Fatalf("mirror at %d, asked for at least %d", got.Rev, max(rev, rev2))
	}
	got.Rev, want.Rev = 0, 0
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("mirror differs from a fresh snapshot (-snapshot +mirror):\n%s", diff)
	}
	// A revision made by a key outside the mirrored prefix is seen too:
	// the mirror writes its barrier key and waits for its event.
	other, err := r.cli.Put(ctx, "/elsewhere/key", "v")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := legacySnapshot(m, wctx, other.Header.Revision); err != nil || got.Rev < other.Header.Revision {
		t.Fatalf("mirror did not reach a revision made outside its prefix: %v", err)
	}
	// A revision not reached yet: it waits, and gives up with ctx.
	short, scancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer scancel()
	if _, err := legacySnapshot(m, short, got.Rev+1000); err == nil {
		t.Fatal("a snapshot at a revision far ahead did not wait")
	}
}

// TestLivenessMovesBackAndForth: a node that heartbeats to r1, then r2,
// then r1 again within the TTL stays up while it heartbeats to r1: r1 must
// take its key back from r2's lease, or r2's sweep would delete it once
// the node is silent there.
func TestLivenessMovesBackAndForth(t *testing.T) {
	t.Parallel()
	e := startEtcd(t)
	r1, r2 := open(t, e), open(t, e)
	ctx := context.Background()
	ttl := 2 * time.Second
	if _, err := r1.PutNode(ctx, &spec.Node{ID: "n1", Name: "n1"}); err != nil {
		t.Fatal(err)
	}
	if err := r1.NodeAlive(ctx, "n1", ttl); err != nil {
		t.Fatal(err)
	}
	if err := r2.Heartbeat(ctx, "n1", ttl); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // r1's watch sees the move
	for range 10 {                     // 5 s at r1 only: past r2's silence limit
		if err := r1.Heartbeat(ctx, "n1", ttl); err != nil {
			t.Fatal(err)
		}
		n, err := r1.GetNode(ctx, "n1")
		if err != nil {
			t.Fatal(err)
		}
		if n.Status != spec.NodeReady {
			t.Fatalf("node heartbeating to r1 is %q", n.Status)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestNodeAliveOnALeaseEtcdLost: when etcd has let the server's liveness
// lease go (it ran out while the server was starved of CPU) before the
// server's keep-alive learned it, a node that registers gets a new lease
// instead of "requested lease not found"; the nodes that were on the lost
// one are told to register again.
func TestNodeAliveOnALeaseEtcdLost(t *testing.T) {
	t.Parallel()
	r := open(t, startEtcd(t))
	ctx := context.Background()
	putNodes(t, r, "n1", "n2")
	lost := aliveOn(t, r, "n1", 5*time.Second)
	if _, err := r.cli.Revoke(ctx, lost); err != nil {
		t.Fatal(err)
	}
	if err := r.NodeAlive(ctx, "n2", 5*time.Second); err != nil {
		t.Fatalf("registering on a lease etcd lost: %v", err)
	}
	n, err := r.GetNode(ctx, "n2")
	if err != nil || n.Status != spec.NodeReady {
		t.Fatalf("n2 after registering: %+v, %v", n, err)
	}
	wantErr(t, r.Heartbeat(ctx, "n1", 5*time.Second), ErrNotFound) // its key went with the lost lease
}

// TestLivenessLeaseGrowsWithTheTTLs: when the server gives a node a
// longer TTL than its liveness lease has, a lease at least that long
// replaces it and the nodes already on the old one move with their keys:
// they stay up past the old lease's TTL while they heartbeat, and a node
// that falls silent still goes down.
func TestLivenessLeaseGrowsWithTheTTLs(t *testing.T) {
	t.Parallel()
	r := open(t, startEtcd(t))
	ctx := context.Background()
	putNodes(t, r, "n1", "n2")
	first := aliveOn(t, r, "n1", 2*time.Second)
	second := aliveOn(t, r, "n2", 6*time.Second)
	if second == first {
		t.Fatal("a node given a 6 s TTL is on the 2 s lease")
	}
	ttl, err := r.cli.TimeToLive(ctx, second)
	if err != nil || ttl.GrantedTTL < 6 {
		t.Fatalf("the new lease: %+v, %v; want at least 6 s", ttl, err)
	}
	for _, id := range []string{"n1", "n2"} {
		resp, err := r.cli.Get(ctx, r.prefix+dirNodeAlive+id)
		if err != nil || len(resp.Kvs) != 1 || clientv3.LeaseID(resp.Kvs[0].Lease) != second {
			t.Fatalf("%s's liveness key: %+v, %v; want it on the new lease", id, resp, err)
		}
	}
	// n1 heartbeats past the old lease's TTL (2 s, no longer kept alive):
	// it stays up. n2 is silent: down within its 6 s TTL and the sweep.
	status := func(id string) spec.NodeStatus {
		n, err := r.GetNode(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return n.Status
	}
	start := time.Now()
	for time.Since(start) < 4*time.Second {
		if err := r.Heartbeat(ctx, "n1", 2*time.Second); err != nil {
			t.Fatalf("n1's heartbeat after the move: %v", err)
		}
		if s := status("n1"); s != spec.NodeReady {
			t.Fatalf("n1, heartbeating, is %q %s after the move", s, time.Since(start).Round(time.Millisecond))
		}
		time.Sleep(400 * time.Millisecond)
	}
	deadline := time.Now().Add(10 * time.Second)
	for status("n2") != spec.NodeDown {
		if err := r.Heartbeat(ctx, "n1", 2*time.Second); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("n2, silent, still ready 10 s after its last heartbeat (TTL 6 s)")
		}
		time.Sleep(400 * time.Millisecond)
	}
	if s := status("n1"); s != spec.NodeReady {
		t.Fatalf("n1, heartbeating, is %q", s)
	}
}

// putNodes registers records for nodes named as their IDs.
func putNodes(t *testing.T, r *Registry, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if _, err := r.PutNode(context.Background(), &spec.Node{ID: id, Name: id}); err != nil {
			t.Fatal(err)
		}
	}
}

// aliveOn marks node id alive for ttl and returns the liveness lease its
// key went on.
func aliveOn(t *testing.T, r *Registry, id string, ttl time.Duration) clientv3.LeaseID {
	t.Helper()
	if err := r.NodeAlive(context.Background(), id, ttl); err != nil {
		t.Fatal(err)
	}
	r.live.mu.Lock()
	defer r.live.mu.Unlock()
	return r.live.lease
}
