package scheduler

import (
	"fmt"
	"testing"
)

// benchInput is n nodes of 4000 MHz / 8192 MB with exec and raw_exec, and
// 1000 requests of 100 MHz / 128 MB.
func benchInput(n int) Input {
	var in Input
	for i := range n {
		in.Nodes = append(in.Nodes, node(fmt.Sprintf("node-%05d", i), 4000, 8192, "exec", "raw_exec"))
	}
	j := job("bench", 50, group("g", 100, 128, "exec"))
	for i := range 1000 {
		in.Requests = append(in.Requests, Request{Job: j, Group: j.Groups[0], Index: i})
	}
	return in
}

func benchPlace(b *testing.B, nodes int) {
	in := benchInput(nodes)
	if res := Place(in); len(res.Placements) != len(in.Requests) {
		b.Fatalf("placed %d of %d", len(res.Placements), len(in.Requests))
	}
	b.ReportAllocs()
	for b.Loop() {
		Place(in)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e3/float64(b.N*len(in.Requests)), "us/placement")
}

func BenchmarkPlace1000On5000Nodes(b *testing.B) { benchPlace(b, 5000) }

func BenchmarkPlace(b *testing.B) {
	for _, n := range []int{500, 5000, 10000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) { benchPlace(b, n) })
	}
}
