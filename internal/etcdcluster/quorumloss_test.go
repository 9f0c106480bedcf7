package etcdcluster

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/drover-org/drover/internal/registry"
)

// With two of three etcd members gone, the one left takes requests but
// cannot serve them: it answers when the request's deadline passes, etcd
// 3.4 with gRPC code Unknown and "context deadline exceeded". drover
// reports that, like the client's own deadline passing, as etcd not
// answering in time, with what to check, not in gRPC's words.
func TestQuorumLossSaysSo(t *testing.T) {
	t.Parallel()
	ec := startEtcd(t, 3, nil)
	ctx := context.Background()
	reg, err := registry.OpenWithOptions(ctx, registry.Options{Endpoints: ec.endpoints()}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	for _, m := range ec.members[1:] {
		m.kill()
	}
	// Which deadline passes first, the member's or the client's, is a
	// race: ask often enough that etcd's answer comes in both.
	const asks = 20
	unknown := 0
	for range asks {
		actx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		_, err := reg.GetJob(actx, "web")
		cancel()
		var ue *registry.UnavailableError
		if !errors.As(err, &ue) || !errors.Is(err, registry.ErrUnavailable) {
			t.Fatalf("GetJob without a quorum: %v, want a registry.UnavailableError", err)
		}
		msg := err.Error()
		for _, want := range []string{"read job", "did not answer within", "quorum", ec.members[0].clientURL} {
			if !strings.Contains(msg, want) {
				t.Errorf("error %q does not say %q", msg, want)
			}
		}
		if strings.Contains(msg, "rpc error") || strings.Contains(msg, "context deadline exceeded") {
			t.Errorf("error %q shows gRPC's words", msg)
		}
		if status.Code(ue.Err) == codes.Unknown {
			unknown++
		}
	}
	t.Logf("%d of %d answers were etcd's own, with code Unknown", unknown, asks)
}
