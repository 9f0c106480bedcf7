package state

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"pgregory.net/rapid"

	"github.com/drover-org/drover/internal/spec"
)

func alloc(id, job, group string, index int, node string) *spec.Alloc {
	return &spec.Alloc{ID: id, Job: job, Group: group, Index: index, NodeID: node, DesiredStatus: spec.DesiredRun}
}

func ids(as []*spec.Alloc) []string {
	out := []string{}
	for _, a := range as {
		out = append(out, a.ID)
	}
	return out
}

// TestAllocsMergeStatusAndListInOrder: an alloc and its agent's status,
// written in either order, read back as one, with ModifyIndex the later
// of the two keys'; a status alone is not an alloc; the job index lists a
// job's allocs by group, index, then age, and no other job's (web is a
// prefix of web2).
func TestAllocsMergeStatusAndListInOrder(t *testing.T) {
	s := New()
	tx := s.Write()
	tx.PutAllocStatus("b", "", "", &spec.AllocStatus{ClientStatus: spec.ClientRunning}, 5) // before its alloc
	tx.PutAlloc(alloc("b", "web", "g", 1, "n1"), 3, 3)
	tx.PutAlloc(alloc("a", "web", "g", 0, "n2"), 4, 4)
	tx.PutAlloc(alloc("c", "web", "g", 0, "n1"), 2, 6) // older instance 0
	tx.PutAlloc(alloc("d", "web2", "g", 0, "n1"), 7, 7)
	tx.PutAllocStatus("ghost", "", "", &spec.AllocStatus{ClientStatus: spec.ClientRunning}, 8)
	tx.Commit(8)

	snap := s.Snapshot()
	if diff := cmp.Diff([]string{"c", "a", "b"}, ids(snap.JobAllocs("web"))); diff != "" {
		t.Errorf("web's allocs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"c", "a", "b", "d"}, ids(snap.Allocs())); diff != "" {
		t.Errorf("every alloc (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"b", "c", "d"}, ids(snap.NodeAllocs("n1"))); diff != "" {
		t.Errorf("n1's allocs (-want +got):\n%s", diff)
	}
	b := snap.Alloc("b")
	if b.Status == nil || b.Status.ClientStatus != spec.ClientRunning || b.CreateIndex != 3 || b.ModifyIndex != 5 {
		t.Errorf("b merged = status %+v, indexes %d/%d; want running, 3/5", b.Status, b.CreateIndex, b.ModifyIndex)
	}
	if snap.Alloc("ghost") != nil {
		t.Errorf("a status without its alloc reads as an alloc")
	}

	// A new status makes a new value: the old snapshot keeps the old one.
	tx = s.Write()
	tx.PutAllocStatus("b", "", "", &spec.AllocStatus{ClientStatus: spec.ClientComplete}, 9)
	tx.DeleteAlloc("c")
	tx.Commit(9)
	if got := snap.Alloc("b").Status.ClientStatus; got != spec.ClientRunning {
		t.Errorf("the older snapshot's b changed to %s", got)
	}
	if snap.Alloc("c") == nil {
		t.Errorf("the older snapshot lost c")
	}
	now := s.Snapshot()
	if got := now.Alloc("b"); got.Status.ClientStatus != spec.ClientComplete || got.ModifyIndex != 9 || got.CreateIndex != 3 {
		t.Errorf("b after its report = %+v", got)
	}
	if now.Alloc("c") != nil || len(now.JobAllocs("web")) != 2 {
		t.Errorf("c deleted, but the store still lists it: %v", ids(now.JobAllocs("web")))
	}
	// The alloc goes and its status stays: nothing to read; the alloc
	// written again finds its status.
	tx = s.Write()
	tx.DeleteAlloc("b")
	tx.Commit(10)
	if s.Snapshot().Alloc("b") != nil {
		t.Fatal("a deleted alloc reads back")
	}
	tx = s.Write()
	tx.PutAlloc(alloc("b", "web", "g", 1, "n1"), 11, 11)
	tx.Commit(11)
	if got := s.Snapshot().Alloc("b"); got.Status == nil || got.Status.ClientStatus != spec.ClientComplete {
		t.Fatalf("b written again = %+v, want its kept status", got)
	}
}

// TestNodesMergeTheirFourKeys: a node is its record, liveness, control and
// usage; each change makes a new merged value, listed by name.
func TestNodesMergeTheirFourKeys(t *testing.T) {
	s := New()
	tx := s.Write()
	tx.PutNodeRecord("id2", &spec.Node{ID: "id2", Name: "alpha", ModifyIndex: 2})
	tx.PutNodeRecord("id1", &spec.Node{ID: "id1", Name: "beta", ModifyIndex: 1})
	tx.SetNodeAlive("id1", true)
	tx.PutNodeControl("id1", &spec.NodeControl{Ineligible: true}, 5)
	tx.PutNodeUsage("id9", &spec.NodeUsage{}, 6) // usage of a node with no record
	tx.Commit(6)
	snap := s.Snapshot()
	nodes := snap.Nodes()
	if len(nodes) != 2 || nodes[0].Name != "alpha" || nodes[1].Name != "beta" {
		t.Fatalf("nodes = %+v, want alpha and beta", nodes)
	}
	if a := nodes[0]; a.Status != spec.NodeDown {
		t.Errorf("alpha has no liveness key but is %s", a.Status)
	}
	if b := nodes[1]; b.Status != spec.NodeReady || !b.Ineligible || b.ModifyIndex != 5 {
		t.Errorf("beta = %+v, want ready, ineligible, modify index 5", b)
	}
	tx = s.Write()
	tx.SetNodeAlive("id1", false)
	tx.PutNodeControl("id1", nil, 0)
	tx.PutNodeRecord("id2", nil)
	tx.Commit(7)
	now := s.Snapshot()
	if b := now.Node("id1"); b.Status != spec.NodeDown || b.Ineligible || b.ModifyIndex != 1 {
		t.Errorf("beta after its liveness and control went = %+v", b)
	}
	if now.Node("id2") != nil || len(now.Nodes()) != 1 {
		t.Errorf("alpha's record is gone, but it is listed: %+v", now.Nodes())
	}
	if snap.Node("id1").Status != spec.NodeReady {
		t.Errorf("the older snapshot's beta changed")
	}
}

// TestDeploymentsMergeTheirRequests: a request is merged into its
// deployment; a request alone is not a deployment.
func TestDeploymentsMergeTheirRequests(t *testing.T) {
	s := New()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tx := s.Write()
	tx.PutDeployment("d2", &spec.Deployment{ID: "d2", Job: "web", CreateTime: t0.Add(time.Minute), ModifyIndex: 3})
	tx.PutDeployment("d1", &spec.Deployment{ID: "d1", Job: "web", CreateTime: t0, ModifyIndex: 2})
	tx.PutDeploymentRequest("d1", "web", &spec.DeploymentRequest{Fail: true}, 4)
	tx.PutDeploymentRequest("orphan", "web", &spec.DeploymentRequest{Promote: true}, 5)
	tx.Commit(5)
	snap := s.Snapshot()
	ds := snap.JobDeployments("web")
	if len(ds) != 2 || ds[0].ID != "d1" || ds[1].ID != "d2" {
		t.Fatalf("web's deployments = %+v, want d1 then d2", ds)
	}
	if ds[0].Request == nil || !ds[0].Request.Fail || ds[0].ModifyIndex != 4 {
		t.Errorf("d1 = %+v, want its request merged, modify index 4", ds[0])
	}
	if len(snap.Deployments()) != 2 {
		t.Errorf("a request without its deployment is listed")
	}
}

// TestAllocsChangedSince: readers that keep work across snapshots learn
// which allocs changed, or that they must read everything.
func TestAllocsChangedSince(t *testing.T) {
	s := New()
	tx := s.Write()
	tx.PutAlloc(alloc("a", "web", "g", 0, "n1"), 2, 2)
	tx.Commit(2)
	first := s.Snapshot()
	tx = s.Write()
	tx.PutAllocStatus("a", "", "", &spec.AllocStatus{}, 3)
	tx.PutAlloc(alloc("b", "web", "g", 1, "n1"), 3, 3)
	tx.Commit(3)
	tx = s.Write()
	tx.DeleteAlloc("a")
	tx.PutJob(&spec.Job{Name: "web"})
	tx.Commit(4)
	snap := s.Snapshot()
	got, ok := snap.AllocsChanged(first.Rev)
	if diff := cmp.Diff([]string{"a", "b", "a"}, got); !ok || diff != "" {
		t.Errorf("changed since %d: ok %v (-want +got):\n%s", first.Rev, ok, diff)
	}
	if got, ok := first.AllocsChanged(first.Rev); !ok || len(got) != 0 {
		t.Errorf("a snapshot sees changes after its own revision: %v", got)
	}
	// A full read starts over: what changed before it is unknown.
	tx = s.Write()
	tx.Reset()
	tx.PutAlloc(alloc("b", "web", "g", 1, "n1"), 3, 3)
	tx.Commit(10)
	if _, ok := s.Snapshot().AllocsChanged(snap.Rev); ok {
		t.Errorf("after a reset, changes since %d are claimed known", snap.Rev)
	}
	if got, ok := s.Snapshot().AllocsChanged(10); !ok || len(got) != 0 {
		t.Errorf("changes since the reset = %v, %v", got, ok)
	}
	if len(s.Snapshot().Jobs()) != 0 {
		t.Errorf("reset left jobs")
	}
	// Past the log's bound, the oldest revisions are forgotten.
	rev := int64(10)
	for range maxLog/16 + 1 {
		rev++
		tx = s.Write()
		for range 16 {
			tx.PutAllocStatus("b", "", "", &spec.AllocStatus{ClientStatus: spec.ClientRunning}, rev)
		}
		tx.Commit(rev)
	}
	if _, ok := s.Snapshot().AllocsChanged(11); ok {
		t.Errorf("changes since revision 11 are claimed known after %d more", maxLog)
	}
	if got, ok := s.Snapshot().AllocsChanged(rev - 1); !ok || len(got) != 16 {
		t.Errorf("the latest change = %v, %v", got, ok)
	}
}

// TestCommitWakesOnlyTheReadersItSatisfies: readers waiting for later
// revisions are not woken by a commit that does not reach theirs (with
// thousands of readers waiting, waking all of them at every commit kept
// the CPU busy with readers going back to sleep), a reader that gives up
// leaves no trace, and Stop wakes the rest.
func TestCommitWakesOnlyTheReadersItSatisfies(t *testing.T) {
	s := New()
	const readers = 100
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	returned := make(chan int64, readers)
	for i := range readers {
		rev := int64(i%10 + 1) // 10 readers at each of revisions 1..10
		go func() {
			if err := s.WaitRev(ctx, rev); err != nil {
				returned <- -rev
				return
			}
			returned <- rev
		}()
	}
	waitFor := func(n int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			s.mu.Lock()
			got := len(s.waiters)
			s.mu.Unlock()
			if got == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d readers waiting, want %d", got, n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitFor(readers)
	s.Write().Commit(4)
	for range 40 {
		if rev := <-returned; rev < 1 || rev > 4 {
			t.Fatalf("a reader of revision %d returned at revision 4", rev)
		}
	}
	waitFor(60) // the others still wait, each once
	shortCtx, shortCancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer shortCancel()
	if err := s.WaitRev(shortCtx, 7); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitRev(7) with a short context = %v", err)
	}
	waitFor(60) // the reader that gave up left the heap
	s.Stop(errors.New("stopped"))
	for range 60 {
		if rev := <-returned; rev > 0 {
			t.Fatalf("a reader of revision %d returned without error from a stopped store at revision 4", rev)
		}
	}
	waitFor(0)
}

// TestReadersTakeNoLock: a snapshot and a wait for a revision the store
// holds do not wait for the writer's lock (a heartbeat's read of its
// node's secret queued behind commits and woken readers when they did).
func TestReadersTakeNoLock(t *testing.T) {
	s := New()
	s.Write().Commit(7)
	s.mu.Lock()
	defer s.mu.Unlock()
	done := make(chan int64, 1)
	go func() {
		if err := s.WaitRev(context.Background(), 7); err != nil {
			t.Error(err)
		}
		done <- s.Snapshot().Rev
	}()
	select {
	case rev := <-done:
		if rev != 7 {
			t.Fatalf("snapshot at revision %d, want 7", rev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a reader waited for the writer's lock")
	}
}

// TestWaitRev: a reader waits for the revision it needs, gives up with its
// context, and learns when the store stopped.
func TestWaitRev(t *testing.T) {
	s := New()
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- s.WaitRev(ctx, 5)
	}()
	tx := s.Write()
	tx.Commit(3)
	select {
	case err := <-done:
		t.Fatalf("WaitRev(5) returned at revision 3: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	tx = s.Write()
	tx.Commit(5)
	if err := <-done; err != nil {
		t.Fatalf("WaitRev(5) at revision 5: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := s.WaitRev(ctx, 6); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitRev(6) with a short context = %v", err)
	}
	stopped := errors.New("stopped")
	s.Stop(stopped)
	if err := s.WaitRev(context.Background(), 6); !errors.Is(err, stopped) {
		t.Fatalf("WaitRev on a stopped store = %v", err)
	}
	// What it reached it still serves (a server's last answers while it
	// shuts down).
	if err := s.WaitRev(context.Background(), 5); err != nil {
		t.Fatalf("WaitRev(5) on a store stopped at revision 5 = %v", err)
	}
}

// TestAllocCountsMatchTheAllocs: whatever the writes, the counts the
// store keeps are the ones counted from every alloc and node, an alloc
// that has not ended on a node that is not ready (or not known) counted
// as lost.
func TestAllocCountsMatchTheAllocs(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := New()
		rev := int64(0)
		ids := []string{"a", "b", "c", "d", "e"}
		nodes := []string{"n1", "n2", "n3"}
		statuses := []spec.ClientStatus{"", spec.ClientPending, spec.ClientRunning, spec.ClientComplete, spec.ClientFailed, spec.ClientLost}
		for range rapid.IntRange(1, 8).Draw(t, "batches") {
			tx := s.Write()
			for range rapid.IntRange(1, 6).Draw(t, "writes") {
				id := rapid.SampledFrom(ids).Draw(t, "id")
				node := rapid.SampledFrom(nodes).Draw(t, "node")
				switch rapid.IntRange(0, 6).Draw(t, "op") {
				case 0:
					tx.PutAlloc(alloc(id, "web", "g", 0, node), rev+1, rev+1)
				case 1:
					st := &spec.AllocStatus{ClientStatus: rapid.SampledFrom(statuses).Draw(t, "status"),
						Tasks: map[string]*spec.TaskState{"t": {Restarts: rapid.IntRange(0, 3).Draw(t, "restarts")}}}
					tx.PutAllocStatus(id, "web", node, st, rev+1)
				case 2:
					tx.DeleteAlloc(id)
				case 3:
					tx.DeleteAllocStatus(id)
				case 4:
					tx.PutNodeRecord(node, &spec.Node{ID: node, Name: node})
				case 5:
					tx.SetNodeAlive(node, rapid.Bool().Draw(t, "alive"))
				case 6:
					tx.Reset()
				}
			}
			rev++
			tx.Commit(rev)
			snap := s.Snapshot()
			want, wantRestarts := map[spec.ClientStatus]int{}, 0
			for _, a := range snap.Allocs() {
				st := a.ClientStatusOr()
				if n := snap.Node(a.NodeID); !a.Terminal() && (n == nil || n.Status != spec.NodeReady) {
					st = spec.ClientLost
				}
				want[st]++
				if !a.Terminal() {
					wantRestarts += a.Restarts()
				}
			}
			got, restarts := snap.AllocCounts()
			if diff := cmp.Diff(want, got); diff != "" || restarts != wantRestarts {
				t.Fatalf("after batch at %d: counts (-from the allocs +kept):\n%s\nrestarts %d, want %d", rev, diff, restarts, wantRestarts)
			}
		}
	})
}

// TestNodeListMatchesTheTable: the node list kept across commits is the
// table's, walked afresh, after any batch of node writes (records with
// names that change the order, liveness, control, usage, deletions,
// resets); a batch that changes no node keeps the very same list.
func TestNodeListMatchesTheTable(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := New()
		ids := []string{"n1", "n2", "n3", "n4"}
		names := []string{"a", "b", "c"}
		for rev := range int64(rapid.IntRange(1, 10).Draw(t, "batches")) {
			before := s.Snapshot().Nodes()
			tx := s.Write()
			touched := false
			for range rapid.IntRange(0, 5).Draw(t, "writes") {
				id := rapid.SampledFrom(ids).Draw(t, "id")
				touched = true
				switch rapid.IntRange(0, 6).Draw(t, "op") {
				case 0:
					tx.PutNodeRecord(id, &spec.Node{ID: id, Name: rapid.SampledFrom(names).Draw(t, "name")})
				case 1:
					tx.PutNodeRecord(id, nil)
				case 2:
					tx.SetNodeAlive(id, rapid.Bool().Draw(t, "alive"))
				case 3:
					tx.PutNodeControl(id, &spec.NodeControl{Ineligible: rapid.Bool().Draw(t, "ineligible")}, rev+1)
				case 4:
					tx.PutNodeUsage(id, &spec.NodeUsage{}, rev+1)
				case 5:
					tx.PutNodeUsage(id, nil, rev+1)
				case 6:
					tx.Reset()
				}
			}
			if rapid.Bool().Draw(t, "alloc") {
				tx.PutAlloc(alloc("x", "web", "g", 0, "n1"), rev+1, rev+1)
			}
			tx.Commit(rev + 1)
			snap := s.Snapshot()
			got := snap.Nodes()
			want := list(snap.get(tableNodes, "name_prefix", ""), func(o any) *spec.Node { return o.(*nodeRow).Node })
			if len(got) != len(want) {
				t.Fatalf("after batch %d: %d nodes listed, the table holds %d", rev, len(got), len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("after batch %d: node %d is %+v, the table's is %+v", rev, i, got[i], want[i])
				}
			}
			for _, id := range ids {
				row, _ := snap.first(tableNodes, id).(*nodeRow)
				var want *spec.Node
				if row != nil {
					want = row.Node
				}
				if n := snap.Node(id); n != want {
					t.Fatalf("after batch %d: Node(%s) is %+v, the table's is %+v", rev, id, n, want)
				}
			}
			if !touched && (len(got) != len(before) || len(got) > 0 && &got[0] != &before[0]) {
				t.Fatalf("after batch %d, which wrote no node: the list was copied", rev)
			}
		}
	})
}

// AllocJobs names each job that has allocs once, in order, whether the job
// is stored or not, and no job without allocs; the names that are
// prefixes of others (web, web2, web-x) are told apart. Held to a walk of
// every alloc, on random stores.
func TestAllocJobsListsEachJobWithAllocsOnce(t *testing.T) {
	s := New()
	tx := s.Write()
	tx.PutJob(&spec.Job{Name: "web"})
	tx.PutJob(&spec.Job{Name: "idle"}) // no allocs
	tx.PutAlloc(alloc("a", "web", "g", 0, "n1"), 2, 2)
	tx.PutAlloc(alloc("b", "web", "h", 1, "n1"), 3, 3)
	tx.PutAlloc(alloc("c", "web2", "g", 0, "n1"), 4, 4)
	tx.PutAlloc(alloc("d", "web-x", "g", 0, "n1"), 5, 5)
	tx.PutAlloc(alloc("e", "purged", "g", 0, "n2"), 6, 6) // its job is gone
	tx.PutAllocStatus("ghost", "ghostjob", "n1", &spec.AllocStatus{ClientStatus: spec.ClientRunning}, 7)
	tx.Commit(7)
	if diff := cmp.Diff([]string{"purged", "web", "web-x", "web2"}, s.Snapshot().AllocJobs()); diff != "" {
		t.Errorf("AllocJobs (-want +got):\n%s", diff)
	}
	if got := New().Snapshot().AllocJobs(); len(got) != 0 {
		t.Errorf("an empty store's AllocJobs = %v, want none", got)
	}

	rapid.Check(t, func(rt *rapid.T) {
		s := New()
		tx := s.Write()
		name := rapid.StringMatching(`[a-c][a-c-]{0,3}`)
		n := rapid.IntRange(0, 40).Draw(rt, "allocs")
		for i := range n {
			tx.PutAlloc(alloc(fmt.Sprint("id", i), name.Draw(rt, "job"), name.Draw(rt, "group"), rapid.IntRange(0, 3).Draw(rt, "index"), "n"), int64(i+1), int64(i+1))
		}
		tx.Commit(int64(n + 1))
		ss := s.Snapshot()
		var want []string
		for _, a := range ss.Allocs() {
			if !slices.Contains(want, a.Job) {
				want = append(want, a.Job)
			}
		}
		slices.Sort(want)
		if diff := cmp.Diff(want, ss.AllocJobs(), cmpopts.EquateEmpty()); diff != "" {
			rt.Fatalf("AllocJobs (-walk +got):\n%s", diff)
		}
	})
}
