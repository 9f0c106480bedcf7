package main

import (
	"bytes"
	"testing"

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
