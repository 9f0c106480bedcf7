package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/drover-org/drover/internal/spec"
)

// Sentinel errors. Functions wrap them with context; test with errors.Is.
var (
	// ErrNotFound: the job, alloc or node does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict: a check index did not match, a concurrent writer won, or
	// the write would break a rule of ownership or of forward-only states.
	ErrConflict = errors.New("conflict")
	// ErrNotLeader: the caller is not (or no longer) the leader; the
	// transaction was refused by etcd and wrote nothing.
	ErrNotLeader = errors.New("not the leader")
	// ErrInvalid: an id or name is not a valid key segment, or an argument
	// is missing. Nothing was written.
	ErrInvalid = errors.New("invalid")
	// ErrUnavailable: etcd could not be reached or has no leader.
	ErrUnavailable = errors.New("registry unavailable")
	// ErrTooLarge: the record would not fit in one etcd request. Nothing
	// was written.
	ErrTooLarge = errors.New("too large")
)

// CheckIndexError is a job write refused because the job's modify index
// was not the check index the caller gave. It is an ErrConflict.
type CheckIndexError struct {
	Job        string
	CheckIndex int64
	// ModifyIndex is the stored job's; 0: the job does not exist.
	ModifyIndex int64
}

func (e *CheckIndexError) Error() string {
	if e.ModifyIndex == 0 {
		return fmt.Sprintf("registry: job %q does not exist, so check index %d does not match it", e.Job, e.CheckIndex)
	}
	return fmt.Sprintf("registry: job %q: check index %d does not match modify index %d", e.Job, e.CheckIndex, e.ModifyIndex)
}

func (e *CheckIndexError) Is(target error) bool { return target == ErrConflict }

// JobNamespaceError: a job of that name exists in another namespace. Job
// names are unique across namespaces and a job never moves between them
// (it would move past whoever guards the old one). It is an ErrConflict.
type JobNamespaceError struct {
	Job, Namespace string // the stored job's name and namespace
}

func (e *JobNamespaceError) Error() string {
	return fmt.Sprintf("registry: job %q exists in namespace %q: %v", e.Job, e.Namespace, ErrConflict)
}

func (e *JobNamespaceError) Unwrap() error { return ErrConflict }

// MaxRecordBytes bounds one stored record (a job, a node), as JSON: a job
// is written twice in one transaction (the job and its version), and etcd
// refuses requests over 1.5 MiB by default.
const MaxRecordBytes = 640 << 10

// checkSize refuses a record of what (for the error) over MaxRecordBytes.
func checkSize(what string, val []byte) error {
	if len(val) > MaxRecordBytes {
		return fmt.Errorf("registry: %s encodes to %d KiB; a record holds at most %d KiB: make it smaller (fewer groups, shorter meta or env): %w",
			what, len(val)>>10, MaxRecordBytes>>10, ErrTooLarge)
	}
	return nil
}

// CheckEncodedSize reports ErrTooLarge when v, encoded as the registry
// stores it, would be over MaxRecordBytes: for a caller that must know
// before it writes anything else (a node's registration, before its
// secret).
func CheckEncodedSize(what string, v any) error {
	val, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("registry: encode %s: %w", what, err)
	}
	return checkSize(what, val)
}

// checkName returns ErrInvalid, with the reason, when s cannot be a key
// segment.
func checkName(what, s string) error {
	if msg := spec.CheckName(s); msg != "" {
		return fmt.Errorf("registry: %s %s: %w", what, msg, ErrInvalid)
	}
	return nil
}

// UnavailableError is a request etcd did not answer or could not serve:
// etcd is down, unreachable, or without a quorum. It is an ErrUnavailable,
// and its message says what to look at instead of gRPC's words.
type UnavailableError struct {
	// What drover was doing ("write job web"), as wrap names it.
	What string
	// Endpoints are the etcd client URLs the request went to, when known.
	Endpoints []string
	// TimedOut: the request's deadline passed, or etcd gave up waiting
	// for its members; else etcd refused it (no leader, connection
	// refused).
	TimedOut bool
	// Waited is how long the request waited, when known.
	Waited time.Duration
	// Err is etcd's (or gRPC's) own error.
	Err error
}

func (e *UnavailableError) Error() string {
	var b strings.Builder
	b.WriteString("registry: ")
	if e.What != "" {
		b.WriteString(e.What + ": ")
	}
	b.WriteString("etcd")
	if len(e.Endpoints) > 0 {
		b.WriteString(" at " + strings.Join(e.Endpoints, ","))
	}
	switch {
	case e.TimedOut && e.Waited > 0:
		fmt.Fprintf(&b, " did not answer within %s", e.Waited.Round(100*time.Millisecond))
	case e.TimedOut:
		b.WriteString(" did not answer in time")
	default:
		fmt.Fprintf(&b, " could not serve the request (%s)", status.Convert(e.Err).Message())
	}
	b.WriteString(": is it running, and does it have its quorum (a majority of its members up and connected)? " +
		"etcdctl endpoint status --cluster shows which members answer")
	return b.String()
}

func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

func (e *UnavailableError) Unwrap() error { return e.Err }

// wrap adds context to an error from etcd; the ones that mean etcd did not
// answer become an UnavailableError.
func wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	var ue *UnavailableError
	if errors.As(err, &ue) {
		named := *ue
		named.What = what
		return &named
	}
	if isUnavailable(err) {
		return &UnavailableError{What: what, TimedOut: timedOut(err), Err: err}
	}
	return fmt.Errorf("registry: %s: %w", what, err)
}

func isUnavailable(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false
	}
	if timedOut(err) {
		return true
	}
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return ee.Code() == codes.Unavailable
	}
	return status.Code(err) == codes.Unavailable
}

// timedOut reports whether err is a request that ran out of time: its
// deadline passed, here or on etcd's side, or etcd gave up waiting for its
// members to agree.
func timedOut(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	for _, t := range []error{rpctypes.ErrTimeout, rpctypes.ErrTimeoutDueToLeaderFail, rpctypes.ErrTimeoutDueToConnectionLost, rpctypes.ErrTimeoutWaitAppliedIndex} {
		if errors.Is(err, t) {
			return true
		}
	}
	st := status.Convert(err)
	// etcd 3.4 answers a request whose deadline passed on its side (while
	// it waits for a quorum it has lost) with code Unknown and the
	// context's own words, as gRPC of its day encoded a context error; a
	// newer etcd sends DeadlineExceeded.
	return st.Code() == codes.DeadlineExceeded ||
		st.Code() == codes.Unknown && st.Message() == context.DeadlineExceeded.Error()
}

// timedKV makes an etcd request that is not answered an UnavailableError
// that says how long it waited and whom it asked (wrap names what it was).
type timedKV struct {
	clientv3.KV
	endpoints []string
	// written is the latest revision a write (or transaction) of this
	// registry's was answered at: Registry.Written.
	written *atomic.Int64
}

// wrote notes the revision a write under ctx was answered at, for the
// registry and for ctx's session.
func (kv timedKV) wrote(ctx context.Context, h *etcdserverpb.ResponseHeader) {
	if h == nil {
		return
	}
	if kv.written != nil {
		raise(kv.written, h.Revision)
	}
	if s := sessionOf(ctx); s != nil {
		raise(&s.written, h.Revision)
	}
}

func (kv timedKV) unavailable(start time.Time, err error) error {
	if err == nil || !isUnavailable(err) {
		return err
	}
	return &UnavailableError{Endpoints: kv.endpoints, TimedOut: timedOut(err), Waited: time.Since(start), Err: err}
}

func (kv timedKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	start := time.Now()
	resp, err := kv.KV.Get(ctx, key, opts...)
	return resp, kv.unavailable(start, err)
}

func (kv timedKV) Put(ctx context.Context, key, val string, opts ...clientv3.OpOption) (*clientv3.PutResponse, error) {
	start := time.Now()
	resp, err := kv.KV.Put(ctx, key, val, opts...)
	if err == nil {
		kv.wrote(ctx, resp.Header)
	}
	return resp, kv.unavailable(start, err)
}

func (kv timedKV) Delete(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.DeleteResponse, error) {
	start := time.Now()
	resp, err := kv.KV.Delete(ctx, key, opts...)
	if err == nil {
		kv.wrote(ctx, resp.Header)
	}
	return resp, kv.unavailable(start, err)
}

func (kv timedKV) Do(ctx context.Context, op clientv3.Op) (clientv3.OpResponse, error) {
	start := time.Now()
	resp, err := kv.KV.Do(ctx, op)
	return resp, kv.unavailable(start, err)
}

func (kv timedKV) Txn(ctx context.Context) clientv3.Txn {
	return &timedTxn{Txn: kv.KV.Txn(ctx), kv: kv, ctx: ctx}
}

type timedTxn struct {
	clientv3.Txn
	kv  timedKV
	ctx context.Context
}

func (t *timedTxn) If(cs ...clientv3.Cmp) clientv3.Txn {
	t.Txn = t.Txn.If(cs...)
	return t
}

func (t *timedTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	t.Txn = t.Txn.Then(ops...)
	return t
}

func (t *timedTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	t.Txn = t.Txn.Else(ops...)
	return t
}

func (t *timedTxn) Commit() (*clientv3.TxnResponse, error) {
	start := time.Now()
	resp, err := t.Txn.Commit()
	if err == nil {
		t.kv.wrote(t.ctx, resp.Header)
	}
	return resp, t.kv.unavailable(start, err)
}
