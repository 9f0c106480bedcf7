package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
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

// wrap adds context to an error from etcd and marks the ones that mean etcd
// is unreachable with ErrUnavailable.
func wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	if isUnavailable(err) {
		return fmt.Errorf("registry: %s: %w: %w", what, ErrUnavailable, err)
	}
	return fmt.Errorf("registry: %s: %w", what, err)
}

func isUnavailable(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return ee.Code() == codes.Unavailable || ee.Code() == codes.DeadlineExceeded
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return false
}
