package registry

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zapcore"

	"github.com/drover-org/drover/internal/spec"
)

// getCounter counts the reads a registry makes of etcd.
type getCounter struct {
	clientv3.KV
	gets atomic.Int64
}

func (g *getCounter) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	g.gets.Add(1)
	return g.KV.Get(ctx, key, opts...)
}

// A submission written over the server's copy of the job reads etcd only
// when that copy cannot decide: a current copy costs one transaction and
// no read; a copy that is behind (another server wrote since, the job was
// purged and submitted again elsewhere, the same spec was changed away
// and back) is read again, and the answer is the one a read of etcd gives.
func TestPutJobOver(t *testing.T) {
	t.Parallel()
	e := startEtcd(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: e.Endpoints(), DialTimeout: 5 * time.Second,
		Logger: zapToSlog(testLogger(t), zapcore.ErrorLevel, nil)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	count := &getCounter{KV: cli.KV}
	cli.KV = count
	r := newRegistry(cli, testLogger(t))
	other := open(t, e) // another server
	ctx := context.Background()
	reads := func(f func()) int64 {
		before := count.gets.Load()
		f()
		return count.gets.Load() - before
	}

	// New job, the copy holds none: written with no read.
	var v1 *spec.Job
	if n := reads(func() {
		var changed bool
		v1, changed, err = r.PutJobOver(ctx, testJob("web", "/bin/a"), 0, nil)
		if err != nil || !changed || v1.Version != 1 {
			t.Fatalf("first put: %+v changed=%v err=%v", v1, changed, err)
		}
	}); n != 0 {
		t.Errorf("a new job over an empty copy read etcd %d times, want 0", n)
	}
	// A change over a current copy: no read.
	var v2 *spec.Job
	if n := reads(func() {
		v2, _, err = r.PutJobOver(ctx, testJob("web", "/bin/b"), 0, v1)
		if err != nil || v2.Version != 2 {
			t.Fatalf("second put: %+v err=%v", v2, err)
		}
	}); n != 0 {
		t.Errorf("a change over a current copy read etcd %d times, want 0", n)
	}

	// Another server writes version 3; this server's copy still says 2.
	v3, _, err := other.PutJob(ctx, testJob("web", "/bin/c"), 0)
	if err != nil || v3.Version != 3 {
		t.Fatalf("other server's put: %+v, %v", v3, err)
	}
	// A change over the stale copy: the comparison fails, etcd is read,
	// and the version follows etcd's (4), not the copy's (3).
	v4, changed, err := r.PutJobOver(ctx, testJob("web", "/bin/d"), 0, v2)
	if err != nil || !changed || v4.Version != 4 {
		t.Fatalf("put over a stale copy: %+v changed=%v err=%v; want version 4", v4, changed, err)
	}
	// The stale copy's spec resubmitted: the copy says "same", etcd says
	// it changed since: written as version 5, not answered "unchanged".
	v5, changed, err := r.PutJobOver(ctx, testJob("web", "/bin/b"), 0, v2)
	if err != nil || !changed || v5.Version != 5 {
		t.Fatalf("the stale copy's spec again: %+v changed=%v err=%v; want written as version 5", v5, changed, err)
	}
	// The current spec again over a current copy: unchanged (etcd says so).
	same, changed, err := r.PutJobOver(ctx, testJob("web", "/bin/b"), 0, v5)
	if err != nil || changed || same.Version != 5 {
		t.Fatalf("same spec: %+v changed=%v err=%v", same, changed, err)
	}
	// A check index the stale copy matches but etcd does not: refused.
	_, _, err = r.PutJobOver(ctx, testJob("web", "/bin/e"), v2.ModifyIndex, v2)
	var ce *CheckIndexError
	if !errors.As(err, &ce) || ce.ModifyIndex != v5.ModifyIndex {
		t.Fatalf("check index of a stale copy: %v; want a CheckIndexError at %d", err, v5.ModifyIndex)
	}
	// A check index etcd matches but the stale copy does not: written.
	v6, _, err := r.PutJobOver(ctx, testJob("web", "/bin/e"), v5.ModifyIndex, v2)
	if err != nil || v6.Version != 6 {
		t.Fatalf("check index right in etcd, wrong in the copy: %+v, %v", v6, err)
	}

	// Purged and submitted again in another namespace by another server;
	// the copy still holds the old one in the default namespace.
	if _, err := other.StopJob(ctx, "web"); err != nil {
		t.Fatal(err)
	}
	if err := other.PurgeJob(ctx, "web"); err != nil {
		t.Fatal(err)
	}
	ops := testJob("web", "/bin/ops")
	ops.Namespace = "ops"
	if _, _, err := other.PutJob(ctx, ops, 0); err != nil {
		t.Fatal(err)
	}
	_, _, err = r.PutJobOver(ctx, testJob("web", "/bin/f"), 0, v6)
	var taken *JobNamespaceError
	if !errors.As(err, &taken) || taken.Namespace != "ops" {
		t.Fatalf("put over a copy from before the job moved namespace: %v; want a JobNamespaceError naming ops", err)
	}
	// And the copy says none while etcd has one: the comparison fails,
	// and the namespace etcd holds decides.
	_, _, err = r.PutJobOver(ctx, testJob("web", "/bin/g"), 0, nil)
	if !errors.As(err, &taken) || taken.Namespace != "ops" {
		t.Fatalf("put over a copy without the job: %v; want a JobNamespaceError naming ops", err)
	}
	hist, err := r.JobVersions(ctx, "web")
	if err != nil || len(hist) != 1 || hist[0].Namespace != "ops" {
		t.Fatalf("history after the refusals: %d versions, %v; want the one in ops", len(hist), err)
	}
}
