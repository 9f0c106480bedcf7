package registry

import (
	"context"
	"errors"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// readTxnRetryKV retries read-only transactions that etcd refused as
// unavailable (codes.Unavailable: "etcdserver: leader changed" while the
// members elect a new raft leader, or a member that just went away). The
// etcd client retries a plain Get on such errors by itself but never a
// Txn, even one that only reads, so without this every snapshot or node
// list that meets an etcd leader election fails. Reads are idempotent, so a
// retry is always safe; transactions that write are passed through
// untouched (whether a refused write was applied is not knowable here).
type readTxnRetryKV struct {
	clientv3.KV
}

const (
	readTxnRetryFirst = 50 * time.Millisecond
	readTxnRetryMax   = 500 * time.Millisecond
	// readTxnRetryFor bounds the retries when ctx has no deadline: an etcd
	// election takes about a second (election timeout 1 s by default).
	readTxnRetryFor = 5 * time.Second
)

func (kv readTxnRetryKV) Txn(ctx context.Context) clientv3.Txn {
	return &readTxnRetry{kv: kv.KV, ctx: ctx, readOnly: true}
}

type readTxnRetry struct {
	kv             clientv3.KV
	ctx            context.Context
	cmps           []clientv3.Cmp
	then, els      []clientv3.Op
	cif, cth, cels bool
	readOnly       bool
}

func (t *readTxnRetry) If(cs ...clientv3.Cmp) clientv3.Txn {
	t.cif = true
	t.cmps = append(t.cmps, cs...)
	return t
}

func (t *readTxnRetry) Then(ops ...clientv3.Op) clientv3.Txn {
	t.cth = true
	t.then = append(t.then, ops...)
	t.note(ops)
	return t
}

func (t *readTxnRetry) Else(ops ...clientv3.Op) clientv3.Txn {
	t.cels = true
	t.els = append(t.els, ops...)
	t.note(ops)
	return t
}

func (t *readTxnRetry) note(ops []clientv3.Op) {
	for _, op := range ops {
		if !op.IsGet() {
			t.readOnly = false
		}
	}
}

func (t *readTxnRetry) commitOnce() (*clientv3.TxnResponse, error) {
	txn := t.kv.Txn(t.ctx)
	if t.cif {
		txn = txn.If(t.cmps...)
	}
	if t.cth {
		txn = txn.Then(t.then...)
	}
	if t.cels {
		txn = txn.Else(t.els...)
	}
	return txn.Commit()
}

func (t *readTxnRetry) Commit() (*clientv3.TxnResponse, error) {
	resp, err := t.commitOnce()
	if err == nil || !t.readOnly {
		return resp, err
	}
	deadline := time.Now().Add(readTxnRetryFor)
	if d, ok := t.ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	wait := readTxnRetryFirst
	for unavailable(err) && time.Now().Add(wait).Before(deadline) {
		timer := time.NewTimer(wait)
		select {
		case <-t.ctx.Done():
			timer.Stop()
			return resp, err
		case <-timer.C:
		}
		if resp, err = t.commitOnce(); err == nil {
			return resp, nil
		}
		wait = min(2*wait, readTxnRetryMax)
	}
	return resp, err
}

// unavailable reports whether etcd (or gRPC) refused the call as
// temporarily unavailable.
func unavailable(err error) bool {
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return ee.Code() == codes.Unavailable
	}
	return status.Code(err) == codes.Unavailable
}
