package registry

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/drover-org/drover/internal/spec"
	"github.com/drover-org/drover/internal/state"
)

// startSystemEtcd runs Debian's etcd-server (/usr/bin/etcd, 3.4) as a
// single member, stopped when the test ends. It skips the test when etcd
// is not installed, and fails it then when CI=true.
func startSystemEtcd(t *testing.T) []string {
	t.Helper()
	bin := "/usr/bin/etcd"
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("etcd is not installed (CI=true): apt-get install -y etcd-server")
		}
		t.Skip("needs Debian's etcd-server (/usr/bin/etcd); apt-get install etcd-server")
	}
	var ports []int
	var ls []net.Listener
	for range 2 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls { // held together so that they differ; freed for etcd
		l.Close()
	}
	client := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	dir := t.TempDir()
	cmd := exec.Command(bin, "--name", "m1", "--data-dir", filepath.Join(dir, "m1"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "m1="+peer, "--logger", "zap", "--log-level", "error")
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	out, err := os.Create(filepath.Join(dir, "etcd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		out.Close()
	})
	return []string{client}
}

// TestMirrorIgnoresEarlyProgress: a mirror whose watch starts behind
// etcd's head (writes landed between its full read and its watch) must not
// answer a snapshot before it has applied every event up to the revision
// asked. etcd 3.4 answers a progress request at once with its current
// revision, ahead of the events the watch still has to send
// (etcd-io/etcd#15220); a mirror that took that as progress answered with
// allocs missing, and the leader placed them again. Run on Debian's etcd
// 3.4, and on the embedded one.
func TestMirrorIgnoresEarlyProgress(t *testing.T) {
	kinds := map[string]func(t *testing.T) []string{
		"etcd-3.4": startSystemEtcd,
		"embedded": func(t *testing.T) []string { return startEtcd(t).Endpoints() },
	}
	for name, start := range kinds {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			r, err := Open(ctx, start(t), testLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			l := campaign(t, r, "s1")
			const n = 600
			var last int64
			// Between the mirror's read and its watch: many writes
			// outside the prefix (a shared etcd's other users), then the
			// leader's placements, in many small commits.
			mirrorLoaded = func() {
				for i := range 500 {
					if _, err := r.cli.Put(ctx, fmt.Sprintf("/other/%d", i%50), "x"); err != nil {
						t.Error(err)
						return
					}
				}
				for i := 0; i < n; i += 20 {
					var p spec.Plan
					for j := i; j < i+20; j++ {
						p.Allocs = append(p.Allocs, testAlloc(fmt.Sprintf("a%04d", j), "web", "g", j, "n1"))
					}
					rev, err := l.Commit(ctx, &p)
					if err != nil {
						t.Error(err)
						return
					}
					last = rev
				}
			}
			defer func() { mirrorLoaded = nil }()
			mctx, mcancel := context.WithCancel(ctx)
			defer mcancel()
			m, err := r.NewMirror(mctx, "s1", state.New(), nil)
			if err != nil {
				t.Fatal(err)
			}
			mirrorLoaded = nil
			if t.Failed() {
				return
			}
			// Ask for progress as often as a busy leader would: none of
			// the answers may let a snapshot through early.
			for range 5 {
				r.cli.RequestProgress(clientv3.WithRequireLeader(ctx))
			}
			sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
			defer scancel()
			snap, err := legacySnapshot(m, sctx, last)
			if err != nil {
				t.Fatal(err)
			}
			if len(snap.Allocs) != n {
				t.Fatalf("snapshot at revision %d (asked %d) holds %d of the %d allocs committed", snap.Rev, last, len(snap.Allocs), n)
			}
			// A revision made only outside the prefix is reached by the
			// mirror's barrier write, with everything before it applied.
			other, err := r.cli.Put(ctx, "/other/last", "x")
			if err != nil {
				t.Fatal(err)
			}
			snap, err = legacySnapshot(m, sctx, other.Header.Revision)
			if err != nil {
				t.Fatal(err)
			}
			if snap.Rev < other.Header.Revision || len(snap.Allocs) != n {
				t.Fatalf("snapshot at %d (asked %d) with %d allocs", snap.Rev, other.Header.Revision, len(snap.Allocs))
			}
		})
	}
}

func TestOlderVersion(t *testing.T) {
	for _, c := range []struct {
		v     string
		older bool
	}{{"3.3.27", true}, {"3.4.0", false}, {"3.4.23", false}, {"3.5.17", false}, {"3.6.0-rc.1", false}, {"2.3.8", true}, {"3", false}, {"x.y", false}} {
		if got := olderVersion(c.v, MinEtcdVersion); got != c.older {
			t.Errorf("olderVersion(%q, %q) = %v, want %v", c.v, MinEtcdVersion, got, c.older)
		}
	}
}

// legacySnapshot is m's snapshot in the form of Registry.Snapshot, so
// that the two can be compared.
func legacySnapshot(m *Mirror, ctx context.Context, atLeast int64) (*Snapshot, error) {
	ss, err := m.Snapshot(ctx, atLeast)
	if err != nil {
		return nil, err
	}
	s := &Snapshot{Rev: ss.Rev, Jobs: ss.Jobs(), Allocs: ss.Allocs(), Nodes: ss.Nodes(), Deployments: ss.Deployments(),
		Schedules: map[string]*spec.JobSchedule{}}
	for _, js := range ss.Schedules() {
		s.Schedules[js.Job] = js
	}
	return s, nil
}

// TestMirrorPublishesWhatTheWatchSees: the server's one change feed (the
// mirror's, derived from the values it decodes and the store's previous
// ones) says what Registry.Watch, which reads etcd's previous values,
// says: the same kinds, IDs, jobs, nodes, deletions, terminal reports and
// health verdicts, at the same revisions.
func TestMirrorPublishesWhatTheWatchSees(t *testing.T) {
	t.Parallel()
	r := open(t, startEtcd(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rev0, err := r.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	watched := r.Watch(ctx, rev0)
	published := make(chan []Change, 100)
	if _, err := r.NewMirror(ctx, "s1", state.New(), func(b []Change) { published <- b }); err != nil {
		t.Fatal(err)
	}
	l := campaign(t, r, "s1")
	mustCommit(t, l, &spec.Plan{Allocs: []*spec.Alloc{testAlloc("a1", "web", "g", 0, "n1"), testAlloc("a2", "web", "g", 1, "n2")}})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(r.PutAllocStatus(ctx, "a2", "n2", &spec.AllocStatus{ClientStatus: spec.ClientRunning}))
	must(r.PutAllocStatus(ctx, "a2", "n2", &spec.AllocStatus{ClientStatus: spec.ClientRunning, DeploymentHealth: &spec.DeploymentHealth{Healthy: true}}))
	must(r.PutAllocStatus(ctx, "a2", "n2", &spec.AllocStatus{ClientStatus: spec.ClientRunning, DeploymentHealth: &spec.DeploymentHealth{Healthy: true}}))
	must(r.PutAllocStatus(ctx, "a1", "n1", &spec.AllocStatus{ClientStatus: spec.ClientFailed}))
	mustCommit(t, l, &spec.Plan{DeleteAllocs: []string{"a2"}, Schedules: []*spec.JobSchedule{{Job: "web"}},
		Deployments: []*spec.Deployment{{ID: "d1", Job: "web", JobVersion: 1, Status: spec.DeploymentRunning}}})
	must(r.PutDeploymentRequest(ctx, "d1", &spec.DeploymentRequest{Promote: true}))
	_, _, err = r.PutJob(ctx, testJob("web", "/bin/a"), 0)
	must(err)
	_, err = r.PutNode(ctx, &spec.Node{ID: "n1", Name: "n1"})
	must(err)
	must(r.NodeAlive(ctx, "n1", 10*time.Second))
	must(r.UpdateNodeControl(ctx, "n1", func(c spec.NodeControl) (spec.NodeControl, error) { c.Ineligible = true; return c, nil }))
	must(r.PutNodeUsage(ctx, "n1", &spec.NodeUsage{}))
	mustCommit(t, l, &spec.Plan{DeleteDeployments: []string{"d1"}, DeleteAllocs: []string{"a1"}})
	must(r.PurgeJob(ctx, "web"))
	last, err := r.Revision(ctx)
	must(err)

	collect := func(ch <-chan []Change) []Change {
		t.Helper()
		var out []Change
		timeout := time.After(10 * time.Second)
		for len(out) == 0 || out[len(out)-1].Rev < last {
			select {
			case b := <-ch:
				for _, c := range b {
					// Event records are the mirror's alone (the server's
					// streams); Watch leaves them out.
					if c.Kind != KindResync && c.Kind != KindEvents {
						out = append(out, c)
					}
				}
			case <-timeout:
				t.Fatalf("changes up to revision %d did not come; got %+v", last, out)
			}
		}
		return out
	}
	want, got := collect(watched), collect(published)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("the mirror's changes differ from the watch's (-watch +mirror):\n%s", diff)
	}
	kinds := map[Kind]bool{}
	for _, c := range got {
		kinds[c.Kind] = true
	}
	if len(kinds) != 7 {
		t.Fatalf("the sequence covers %d kinds of change, want all 7: %v", len(kinds), kinds)
	}
}

// TestMirrorSharesTheTasksOfAJobVersion: the allocs whose tasks were
// stored the same hold one decoded copy of them; an alloc of other tasks
// holds its own, and every alloc reads back as written.
func TestMirrorSharesTheTasksOfAJobVersion(t *testing.T) {
	t.Parallel()
	r := open(t, startEtcd(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l := campaign(t, r, "s1")
	other := testAlloc("c", "web", "g", 2, "n1")
	other.Tasks[0].Config.Command = "/bin/false"
	rev := mustCommit(t, l, &spec.Plan{Allocs: []*spec.Alloc{testAlloc("a", "web", "g", 0, "n1"), testAlloc("b", "web", "g", 1, "n2"), other}})
	m, err := r.NewMirror(ctx, "s1", state.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	// One alloc more through the watch, the same tasks again.
	rev = max(rev, mustCommit(t, l, &spec.Plan{Allocs: []*spec.Alloc{testAlloc("d", "web", "g", 3, "n2")}}))
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	defer wcancel()
	snap, err := m.Snapshot(wctx, rev)
	if err != nil {
		t.Fatal(err)
	}
	a, b, c, d := snap.Alloc("a"), snap.Alloc("b"), snap.Alloc("c"), snap.Alloc("d")
	if a == nil || b == nil || c == nil || d == nil {
		t.Fatalf("allocs missing: %v %v %v %v", a, b, c, d)
	}
	if &a.Tasks[0] != &b.Tasks[0] || &a.Tasks[0] != &d.Tasks[0] {
		t.Errorf("allocs with the same tasks hold separate copies")
	}
	if &c.Tasks[0] == &a.Tasks[0] || c.Tasks[0].Config.Command != "/bin/false" || a.Tasks[0].Config.Command != "/bin/true" {
		t.Errorf("allocs with other tasks share them: %q and %q", c.Tasks[0].Config.Command, a.Tasks[0].Config.Command)
	}
	if a.ID != "a" || a.Index != 0 || a.NodeID != "n1" || a.Job != "web" || a.DesiredStatus != spec.DesiredRun {
		t.Errorf("alloc a read back as %+v", a)
	}
}

// TestReadersWaitingTogetherShareOneBarrier: readers that wait at once for
// a revision the watch brings no event for (a key written outside the
// prefix) are all answered by one barrier write, not one each (under load
// every waiting read wrote its own, more work for a watch already behind).
func TestReadersWaitingTogetherShareOneBarrier(t *testing.T) {
	r := open(t, startEtcd(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := r.NewMirror(ctx, "s1", state.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := r.cli.Put(ctx, "/elsewhere/key", "v")
	if err != nil {
		t.Fatal(err)
	}
	puts := etcdRequests(t, "Put")
	var wg sync.WaitGroup
	for range 40 {
		wg.Go(func() {
			if ss, err := m.Snapshot(ctx, other.Header.Revision); err != nil || ss.Rev < other.Header.Revision {
				t.Errorf("a reader waiting for revision %d: %v", other.Header.Revision, err)
			}
		})
	}
	wg.Wait()
	// Other goroutines of the process may put meanwhile (none here should).
	if n := etcdRequests(t, "Put") - puts; n > 3 {
		t.Errorf("40 readers waiting together wrote %d barriers, want 1", n)
	}
}
