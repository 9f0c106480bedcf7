package registry

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/drover-org/drover/internal/spec"
)

// TestDecodedAllocsKeepLittle: the allocs the mirror decodes hold what
// they repeat once (the job's and node's strings, the tasks of a job
// version) and keep nothing of their encoding: 2,000 allocs whose tasks
// take 4 KB encoded grow the heap by far less than those 8 MB.
func TestDecodedAllocsKeepLittle(t *testing.T) {
	var m Mirror
	proto := testAlloc("", "web", "g", 0, "node-0123456789abcdef")
	proto.Tasks[0].Config.Args = []string{strings.Repeat("x", 4<<10)}
	const n = 2000
	encoded := make([][]byte, n)
	for i := range encoded {
		a := *proto
		a.ID, a.Index, a.Name = fmt.Sprintf("alloc-%d", i), i, spec.AllocName("web", "g", i)
		b, err := json.Marshal(&a)
		if err != nil {
			t.Fatal(err)
		}
		encoded[i] = b
	}
	before := liveHeap()
	allocs := make([]*spec.Alloc, n)
	for i, b := range encoded {
		if i == n/2 {
			runtime.GC() // what is kept once stays kept across collections
		}
		a, err := m.decodeAlloc(b)
		if err != nil {
			t.Fatal(err)
		}
		allocs[i] = a
	}
	grew := liveHeap() - before
	runtime.KeepAlive(encoded)
	t.Logf("%d allocs decoded: the heap grew %d KB", n, grew>>10)
	if per := grew / n; per > 1<<10 {
		t.Errorf("each decoded alloc holds %d B: it keeps part of its encoding (4 KB of tasks)", per)
	}
	x, y := allocs[0], allocs[n-1]
	if unsafe.StringData(x.Job) != unsafe.StringData(y.Job) || unsafe.StringData(x.NodeID) != unsafe.StringData(y.NodeID) ||
		unsafe.StringData(string(x.DesiredStatus)) != unsafe.StringData(string(y.DesiredStatus)) {
		t.Errorf("two allocs of one job on one node hold their job's and node's strings twice")
	}
	if &x.Tasks[0] != &y.Tasks[0] {
		t.Errorf("two allocs of one job version hold their tasks twice")
	}
}
