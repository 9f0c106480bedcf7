package registry

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/drover-org/drover/internal/spec"
)

// TestStatusBatchJudgedByWhatTheServerKnows: reports that bring their
// allocs as the server's state holds them cost one etcd transaction each,
// not a read and a write; what the state knew wrongly (it was behind) is
// found by the write's guard, read again from etcd, and judged by that.
func TestStatusBatchJudgedByWhatTheServerKnows(t *testing.T) {
	r := open(t, startEtcd(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l := campaign(t, r, "s1")
	const n = 20
	var allocs []*spec.Alloc
	for i := range n {
		allocs = append(allocs, testAlloc(fmt.Sprintf("a%d", i), "web", "g", i, "n1"))
	}
	mustCommit(t, l, &spec.Plan{Allocs: allocs})
	running := &spec.AllocStatus{ClientStatus: spec.ClientRunning, UpdateTime: time.Unix(200, 0).UTC()}

	for _, a := range allocs {
		errs, err := r.PutAllocStatuses(ctx, "n1", []StatusUpdate{{ID: a.ID, Status: running, Known: knownAlloc(t, r, a.ID)}})
		if err != nil || errs[0] != nil {
			t.Fatalf("report on %s: %v %v", a.ID, err, errs)
		}
	}
	var reportTxns uint64
	for _, a := range allocs[5:10] {
		k := knownAlloc(t, r, a.ID)
		txns := etcdTxns(t)
		if errs, err := r.PutAllocStatuses(ctx, "n1", []StatusUpdate{{ID: a.ID, Status: running, Known: k}}); err != nil || errs[0] != nil {
			t.Fatalf("second report on %s: %v %v", a.ID, err, errs)
		}
		reportTxns += etcdTxns(t) - txns
	}
	// Other goroutines of the process may send a transaction meanwhile;
	// a read and a write per report would be 10.
	if reportTxns > 7 {
		t.Errorf("5 reports judged by what the server knew sent %d etcd transactions, want about 5", reportTxns)
	}

	// The state was behind: it saw a0 running, etcd has it failed since.
	stale := knownAlloc(t, r, "a0")
	failed := &spec.AllocStatus{ClientStatus: spec.ClientFailed, Description: "exit 1"}
	if err := r.PutAllocStatus(ctx, "a0", "n1", failed); err != nil {
		t.Fatal(err)
	}
	errs, err := r.PutAllocStatuses(ctx, "n1", []StatusUpdate{{ID: "a0", Status: running, Known: stale}})
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, errs[0], ErrConflict)
	// The state was behind on the alloc's record: the report is still
	// written, judged by etcd.
	stale = knownAlloc(t, r, "a1")
	stale.AllocRev--
	if errs, err := r.PutAllocStatuses(ctx, "n1", []StatusUpdate{{ID: "a1", Status: failed, Known: stale}}); err != nil || errs[0] != nil {
		t.Fatalf("report with a stale alloc revision: %v %v", err, errs)
	}
	if a, err := r.GetAlloc(ctx, "a1"); err != nil || a.ClientStatusOr() != spec.ClientFailed {
		t.Fatalf("a1 after the report: %+v %v", a, err)
	}
	// The alloc is gone from etcd, the state still has it: not found.
	stale = knownAlloc(t, r, "a2")
	mustCommit(t, l, &spec.Plan{DeleteAllocs: []string{"a2"}})
	errs, err = r.PutAllocStatuses(ctx, "n1", []StatusUpdate{{ID: "a2", Status: running, Known: stale}})
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, errs[0], ErrNotFound)
	if n := countPrefix(t, r, Prefix+dirAllocStatus+"a2"); n != 0 {
		t.Fatalf("a report on a deleted alloc left %d status keys", n)
	}
}

// knownAlloc is alloc id as a server's state would know it: its record
// and the mod revisions of its two keys, read from etcd.
func knownAlloc(t *testing.T, r *Registry, id string) *KnownAlloc {
	t.Helper()
	a, err := r.GetAlloc(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return &KnownAlloc{Alloc: a, AllocRev: modRev(t, r, Prefix+dirAllocs+id), StatusRev: modRev(t, r, Prefix+dirAllocStatus+id)}
}

func modRev(t *testing.T, r *Registry, key string) int64 {
	t.Helper()
	resp, err := r.cli.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return 0
	}
	return resp.Kvs[0].ModRevision
}

// etcdTxns is how many Txn requests this process has sent etcd.
func etcdTxns(t *testing.T) uint64 { return etcdRequests(t, "Txn") }

// etcdRequests is how many requests of the method this process has sent
// etcd.
func etcdRequests(t *testing.T, method string) uint64 {
	t.Helper()
	g := prometheus.NewRegistry()
	g.MustRegister(RequestSeconds)
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "method" && l.GetValue() == method {
					n += m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return n
}

// TestSessionsWaitForTheirOwnWrites: a write under a session raises that
// session's revision and the registry's, not another session's; a read
// without a session waits for every write.
func TestSessionsWaitForTheirOwnWrites(t *testing.T) {
	r := open(t, startEtcd(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l := campaign(t, r, "s1")
	mustCommit(t, l, &spec.Plan{Allocs: []*spec.Alloc{testAlloc("a1", "web", "g", 0, "n1"), testAlloc("a2", "web", "g", 1, "n2")}})
	start := r.Written()
	one, two := WithSession(ctx, NewSession(start)), WithSession(ctx, NewSession(start))
	running := &spec.AllocStatus{ClientStatus: spec.ClientRunning}
	if err := r.PutAllocStatus(one, "a1", "n1", running); err != nil {
		t.Fatal(err)
	}
	rev := r.Written()
	if rev <= start {
		t.Fatalf("the registry's Written stayed at %d after a write", rev)
	}
	if got := r.WrittenBy(one); got != rev {
		t.Errorf("the writing session's revision is %d, want %d", got, rev)
	}
	if got := r.WrittenBy(two); got != start {
		t.Errorf("another session's revision moved to %d with a write not its own, want %d", got, start)
	}
	if got := r.WrittenBy(ctx); got != rev {
		t.Errorf("without a session the revision is %d, want every write's, %d", got, rev)
	}
	if err := r.PutAllocStatus(two, "a2", "n2", running); err != nil {
		t.Fatal(err)
	}
	if got, all := r.WrittenBy(two), r.Written(); got != all || got <= rev {
		t.Errorf("after its own write the second session is at %d, the registry at %d (first write %d)", got, all, rev)
	}
}

// TestReportsOfAMomentShareATransaction: nodes reporting at once are
// written in fewer transactions than reports, each report written whole
// with its history; a report whose alloc changed since the server saw it
// is written again alone, the rest of its group together, and no report
// of the group is lost.
func TestReportsOfAMomentShareATransaction(t *testing.T) {
	r := open(t, startEtcd(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l := campaign(t, r, "s1")
	const nodes = 60
	var allocs []*spec.Alloc
	for i := range nodes {
		allocs = append(allocs, testAlloc(fmt.Sprintf("a%02d", i), "web", "g", i, fmt.Sprintf("n%02d", i)))
	}
	mustCommit(t, l, &spec.Plan{Allocs: allocs})
	report := func(round int, status spec.ClientStatus, stale string) uint64 {
		t.Helper()
		known := make([]*KnownAlloc, nodes)
		for i, a := range allocs {
			known[i] = knownAlloc(t, r, a.ID)
			if a.ID == stale {
				known[i].StatusRev-- // the server's state is behind on this one
			}
		}
		txns := etcdTxns(t)
		var wg sync.WaitGroup
		for i, a := range allocs {
			wg.Go(func() {
				st := &spec.AllocStatus{ClientStatus: status, Tasks: map[string]*spec.TaskState{"t": {State: spec.TaskRunning,
					Events: []spec.TaskEvent{{Time: time.Unix(int64(1000+round), 0).UTC(), Type: spec.EventStarted}}}}}
				errs, err := r.PutAllocStatuses(ctx, a.NodeID, []StatusUpdate{{ID: a.ID, Status: st, Known: known[i]}})
				if err != nil || errs[0] != nil {
					t.Errorf("report on %s: %v %v", a.ID, err, errs)
				}
			})
		}
		wg.Wait()
		n := etcdTxns(t) - txns
		for _, a := range allocs {
			if got, err := r.GetAlloc(ctx, a.ID); err != nil || got.ClientStatusOr() != status {
				t.Fatalf("round %d: %s is %v after its report (%v)", round, a.ID, got.ClientStatusOr(), err)
			}
		}
		return n
	}
	if n := report(1, spec.ClientPending, ""); n >= nodes/2 {
		t.Errorf("%d reports made at once took %d etcd transactions, want them grouped (fewer than %d)", nodes, n, nodes/2)
	} else {
		t.Logf("%d reports made at once: %d etcd transactions", nodes, n)
	}
	// One report judged by a stale state: its group's guards fail; the
	// others of the group are committed again together and only it is
	// written alone (it took one transaction per report before). None is
	// lost.
	if n := report(2, spec.ClientRunning, "a07"); n >= nodes/2 {
		t.Errorf("with one stale report, %d reports made at once took %d etcd transactions, want the others still grouped (fewer than %d)", nodes, n, nodes/2)
	} else {
		t.Logf("with one stale report, %d reports made at once: %d etcd transactions", nodes, n)
	}
	evs, _, err := r.ListEvents(ctx, EventQuery{})
	if err != nil {
		t.Fatal(err)
	}
	started := 0
	for _, e := range evs {
		if e.Type == spec.EventStarted && e.Job == "web" {
			started++
		}
	}
	if started != 2*nodes {
		t.Errorf("%d task-started events in the history, want %d (one per report)", started, 2*nodes)
	}
}

// A report whose caller gave up is either written and said so, or not
// written at all: it was written after its caller had been told it failed
// (and told that etcd did not answer).
func TestAReportGivenUpIsWrittenOnlyIfSaidSo(t *testing.T) {
	r := open(t, startEtcd(t))
	l := campaign(t, r, "s1")
	const n = 30
	var allocs []*spec.Alloc
	for i := range n {
		allocs = append(allocs, testAlloc(fmt.Sprintf("g%02d", i), "web", "g", i, fmt.Sprintf("n%02d", i)))
	}
	mustCommit(t, l, &spec.Plan{Allocs: allocs})
	bg, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ks := make([]*KnownAlloc, n)
	for i, a := range allocs {
		ks[i] = knownAlloc(t, r, a.ID)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, a := range allocs {
		wg.Go(func() {
			// Every other caller gives up at once, some while queued
			// behind the others, some with their group on its way.
			ctx, cancel := context.WithCancel(bg)
			if i%2 == 1 {
				go cancel()
			} else {
				defer cancel()
			}
			_, errs[i] = r.PutAllocStatuses(ctx, a.NodeID, []StatusUpdate{{ID: a.ID, Status: &spec.AllocStatus{ClientStatus: spec.ClientRunning}, Known: ks[i]}})
		})
	}
	wg.Wait()
	time.Sleep(200 * time.Millisecond) // a report written late would show by now
	for i, a := range allocs {
		got, err := r.GetAlloc(bg, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		written := got.ClientStatusOr() == spec.ClientRunning
		switch {
		case errs[i] == nil && !written:
			t.Errorf("%s: its caller was told it was written, and it is not", a.ID)
		case errs[i] != nil && written:
			t.Errorf("%s: its caller was told %v, and it was written all the same", a.ID, errs[i])
		case errs[i] != nil && !errors.Is(errs[i], context.Canceled):
			t.Errorf("%s: its caller gave up and was told %v, want its own cancellation", a.ID, errs[i])
		}
	}
}

// A batch naming an alloc twice is answered for each: the first written,
// the second refused as invalid, and the other nodes' reports of the
// moment still share their transactions (etcd refuses a transaction that
// puts one key twice, and with it every report grouped with it).
func TestABatchNamingAnAllocTwice(t *testing.T) {
	r := open(t, startEtcd(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l := campaign(t, r, "s1")
	const nodes = 40
	var allocs []*spec.Alloc
	for i := range nodes {
		allocs = append(allocs, testAlloc(fmt.Sprintf("d%02d", i), "web", "g", i, fmt.Sprintf("n%02d", i)))
	}
	mustCommit(t, l, &spec.Plan{Allocs: allocs})
	ks := make([]*KnownAlloc, nodes)
	for i, a := range allocs {
		ks[i] = knownAlloc(t, r, a.ID)
	}
	txns := etcdTxns(t)
	var wg sync.WaitGroup
	var dupErrs []error
	for i, a := range allocs {
		wg.Go(func() {
			up := StatusUpdate{ID: a.ID, Status: &spec.AllocStatus{ClientStatus: spec.ClientRunning}, Known: ks[i]}
			ups := []StatusUpdate{up}
			if i == 0 {
				ups = append(ups, up)
			}
			errs, err := r.PutAllocStatuses(ctx, a.NodeID, ups)
			if err != nil {
				t.Errorf("report of %s: %v", a.ID, err)
				return
			}
			if i == 0 {
				dupErrs = errs
			} else if errs[0] != nil {
				t.Errorf("report of %s: %v", a.ID, errs[0])
			}
		})
	}
	wg.Wait()
	if n := etcdTxns(t) - txns; n >= nodes/2 {
		t.Errorf("%d reports at once, one naming its alloc twice, took %d etcd transactions: the group failed", nodes, n)
	}
	if len(dupErrs) != 2 || dupErrs[0] != nil || !errors.Is(dupErrs[1], ErrInvalid) {
		t.Errorf("the batch naming its alloc twice got %v, want the first written and the second ErrInvalid", dupErrs)
	}
}
