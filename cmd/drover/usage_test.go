package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/drover-org/drover/internal/spec"
)

func TestPrintAllocUsage(t *testing.T) {
	run := &spec.AllocStatus{ClientStatus: spec.ClientRunning}
	allocs := []*spec.Alloc{
		{ID: "aaaaaaaa-1111", Name: "web.g[0]", NodeName: "n1", Resources: spec.Resources{CPU: 500, MemoryMB: 256}, Status: run},
		{ID: "bbbbbbbb-2222", Name: "web.g[1]", NodeName: "n2", Resources: spec.Resources{CPU: 500, MemoryMB: 256}, Status: run},
		{ID: "cccccccc-3333", Name: "web.g[2]", NodeName: "n1", Resources: spec.Resources{CPU: 500, MemoryMB: 256},
			Status: &spec.AllocStatus{ClientStatus: spec.ClientComplete}},
	}
	usage := map[string]map[string]spec.Usage{
		"aaaaaaaa-1111": {"web": {CPU: 120, MemoryMB: 40}, "side": {CPU: 3, MemoryMB: 2}},
	}
	var b bytes.Buffer
	printAllocUsage(&b, allocs, usage)
	want := `
Usage (used/reserved)
ID        INSTANCE  NODE  CPU (MHz)  MEMORY (MB)
aaaaaaaa  web.g[0]  n1    123/500    42/256
bbbbbbbb  web.g[1]  n2    -/500      -/256
`
	if d := cmp.Diff(want, b.String()); d != "" {
		t.Fatalf("usage table (-want +got):\n%s", d)
	}
}

// TestMemoryMaxShown: an instance whose task sets memory_max shows its hard
// limit beside what it reserves, and "unlimited" for memory_max = -1, in
// drover status's usage table and in drover alloc status.
func TestMemoryMaxShown(t *testing.T) {
	run := &spec.AllocStatus{ClientStatus: spec.ClientRunning}
	task := func(name string, mem, max int) *spec.Task {
		return &spec.Task{Name: name, Driver: "exec", Resources: spec.Resources{CPU: 100, MemoryMB: mem, MemoryMaxMB: max}}
	}
	allocs := []*spec.Alloc{
		{ID: "aaaaaaaa-1111", Name: "a.g[0]", NodeName: "n1", Resources: spec.Resources{CPU: 100, MemoryMB: 64}, Status: run,
			Tasks: []*spec.Task{task("cat", 64, spec.MemoryMaxUnlimited)}},
		{ID: "bbbbbbbb-2222", Name: "b.g[0]", NodeName: "n1", Resources: spec.Resources{CPU: 200, MemoryMB: 96}, Status: run,
			Tasks: []*spec.Task{task("web", 64, 128), task("side", 32, 0)}},
		{ID: "cccccccc-3333", Name: "c.g[0]", NodeName: "n1", Resources: spec.Resources{CPU: 100, MemoryMB: 64}, Status: run,
			Tasks: []*spec.Task{task("plain", 64, 0)}},
	}
	var b bytes.Buffer
	printAllocUsage(&b, allocs, nil)
	want := `
Usage (used/reserved)
ID        INSTANCE  NODE  CPU (MHz)  MEMORY (MB)
aaaaaaaa  a.g[0]    n1    -/100      -/64 (max unlimited)
bbbbbbbb  b.g[0]    n1    -/200      -/96 (max 160 MB)
cccccccc  c.g[0]    n1    -/100      -/64
`
	if d := cmp.Diff(want, b.String()); d != "" {
		t.Errorf("usage table (-want +got):\n%s", d)
	}
	b.Reset()
	printAlloc(&b, allocs[0], time.Now())
	if line := "Resources    cpu 100 MHz, memory 64 MB (max unlimited)\n"; !strings.Contains(b.String(), line) {
		t.Errorf("alloc status lacks %q:\n%s", line, b.String())
	}
}
