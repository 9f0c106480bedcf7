package state

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/testkit"
)

// BenchmarkCommitWithWaitingReaders: what a commit costs the process while
// 10,000 readers wait for a revision it does not reach (each an API read
// waiting for the server's own last write, as 10,000 agents' reports and
// queries do while their instances are placed). Commits come 100 us apart,
// as the registry's watch delivers them under load; cpu-ns/commit is the
// process's CPU (every goroutine's, the readers' included) per commit.
func BenchmarkCommitWithWaitingReaders(b *testing.B) {
	s := New()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 10000 {
		wg.Go(func() { s.WaitRev(ctx, 1<<62) })
	}
	time.Sleep(100 * time.Millisecond) // all waiting
	rev := int64(0)
	cpu0 := testkit.ProcessCPU(b)
	b.ResetTimer()
	for b.Loop() {
		rev++
		s.Write().Commit(rev)
		time.Sleep(100 * time.Microsecond)
	}
	b.StopTimer()
	b.ReportMetric(float64(testkit.ProcessCPU(b)-cpu0)/float64(b.N), "cpu-ns/commit")
	cancel()
	wg.Wait()
}
