package agent_test

import (
	"bytes"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/spec"
)

// goroutinesIn counts this process's goroutines with fn on their stack.
func goroutinesIn(fn string) int {
	var b bytes.Buffer
	pprof.Lookup("goroutine").WriteTo(&b, 2)
	n := 0
	for g := range strings.SplitSeq(b.String(), "\n\n") {
		if strings.Contains(g, fn) {
			n++
		}
	}
	return n
}

// A running alloc costs the agent one goroutine per task, its first task
// running in the goroutine that waits for the alloc's end: a node of a
// thousand one-task allocs would otherwise carry a thousand goroutines
// (and their stacks) that only wait.
func TestAllocRunnerGoroutinePerTask(t *testing.T) {
	c := newCluster(t)
	c.startAgent(t.TempDir(), true)
	j := job("goroutines", spec.JobService, shTask("a", "exec sleep 30"), shTask("b", "exec sleep 30"))
	j.Groups[0].Count = 3
	c.submit(j)
	c.allocsOf("goroutines", 3, 20*time.Second, "3 instances running", func(a *spec.Alloc) bool {
		return running("a")(a) && running("b")(a)
	})
	if n := goroutinesIn("internal/agent.(*allocRunner).start"); n != 3*2 {
		t.Fatalf("%d goroutines of the alloc runners for 3 allocs of 2 tasks, want 6", n)
	}
}
