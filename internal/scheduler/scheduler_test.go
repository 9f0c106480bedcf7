package scheduler

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/drover-org/drover/internal/spec"
)

func node(id string, cpu, mem int, drivers ...string) *spec.Node {
	return &spec.Node{
		ID:        id,
		Name:      "host-" + id,
		Resources: spec.Resources{CPU: cpu, MemoryMB: mem},
		Drivers:   drivers,
		Status:    spec.NodeReady,
	}
}

func down(n *spec.Node) *spec.Node {
	n.Status = spec.NodeDown
	return n
}

// group returns a group with one task per driver; the first task reserves
// all of cpu and mem.
func group(name string, cpu, mem int, drivers ...string) *spec.Group {
	g := &spec.Group{Name: name, Count: 1}
	for i, d := range drivers {
		t := &spec.Task{Name: fmt.Sprintf("t%d", i), Driver: d}
		if i == 0 {
			t.Resources = spec.Resources{CPU: cpu, MemoryMB: mem}
		}
		g.Tasks = append(g.Tasks, t)
	}
	return g
}

// job returns a service job scored least_loaded: most tests here were
// written to show where instances go one by one, which least_loaded makes
// plain (each goes to the emptiest node). TestScoring covers the others.
func job(name string, priority int, groups ...*spec.Group) *spec.Job {
	return &spec.Job{Name: name, Type: spec.JobService, Priority: priority, Version: 1, Groups: groups, Scoring: spec.ScoreLeastLoaded}
}

func reqs(j *spec.Job, g *spec.Group, indexes ...int) []Request {
	var out []Request
	for _, i := range indexes {
		out = append(out, Request{Job: j, Group: g, Index: i, Reason: "new instance"})
	}
	return out
}

func alloc(id, nodeID string, cpu, mem int, status spec.ClientStatus) *spec.Alloc {
	a := &spec.Alloc{
		ID:            id,
		NodeID:        nodeID,
		Resources:     spec.Resources{CPU: cpu, MemoryMB: mem},
		DesiredStatus: spec.DesiredRun,
	}
	if status != "" {
		a.Status = &spec.AllocStatus{ClientStatus: status}
	}
	return a
}

func placed(r Request, n *spec.Node) Placement {
	return Placement{Request: r, NodeID: n.ID, NodeName: n.Name}
}

func concat(rs ...[]Request) []Request {
	var out []Request
	for _, r := range rs {
		out = append(out, r...)
	}
	return out
}

func TestPlace(t *testing.T) {
	exec := []string{"exec", "raw_exec"}

	// fits on least loaded
	least := []*spec.Node{node("a", 4000, 8192, exec...), node("b", 4000, 8192, exec...), node("c", 4000, 8192, exec...)}
	leastJob := job("web", 50, group("api", 100, 128, "exec"))
	leastReqs := reqs(leastJob, leastJob.Groups[0], 0)

	// tie by ID, and spreading as load grows
	tie := []*spec.Node{node("n2", 4000, 8192, exec...), node("n1", 4000, 8192, exec...)}
	tieJob := job("web", 50, group("api", 100, 128, "exec"))
	tieReqs := reqs(tieJob, tieJob.Groups[0], 0, 1, 2)

	// driver missing
	drv := []*spec.Node{node("n1", 4000, 8192, "exec"), node("n2", 4000, 8192, "exec", "docker")}
	drvJob := job("web", 50, group("api", 100, 128, "docker"))
	drvReqs := reqs(drvJob, drvJob.Groups[0], 0)
	noDrv := []*spec.Node{node("n1", 4000, 8192, "exec"), node("n2", 4000, 8192, "raw_exec")}
	noDrvJob := job("web", 50, group("api", 100, 128, "exec", "docker"))
	noDrvReqs := reqs(noDrvJob, noDrvJob.Groups[0], 0)

	// cpu exhausted
	cpuNodes := []*spec.Node{node("n1", 1000, 8192, exec...), node("n2", 2000, 8192, exec...)}
	cpuJob := job("web", 50, group("api", 500, 128, "exec"))
	cpuReqs := reqs(cpuJob, cpuJob.Groups[0], 0, 1)

	// memory exhausted, and missing driver
	memNodes := []*spec.Node{
		node("n1", 4000, 1024, "exec", "docker"),
		node("n2", 4000, 2048, "exec", "docker"),
		node("n3", 4000, 512, "exec", "docker"),
		node("n4", 4000, 65536, "exec"),
		node("n5", 4000, 65536, "raw_exec"),
	}
	memJob := job("web", 50, group("api", 100, 900, "docker"))
	memReqs := reqs(memJob, memJob.Groups[0], 0)

	// both
	bothNodes := []*spec.Node{node("n1", 500, 500, "exec"), node("n2", 800, 4096, "exec"), node("n3", 4000, 600, "exec")}
	bothJob := job("web", 50, group("api", 1000, 1000, "exec"))
	bothReqs := reqs(bothJob, bothJob.Groups[0], 0)

	// not ready
	nrNodes := []*spec.Node{down(node("n1", 4000, 8192, exec...)), node("n2", 4000, 8192, exec...)}
	nrJob := job("web", 50, group("api", 100, 128, "exec"))
	nrReqs := reqs(nrJob, nrJob.Groups[0], 0)
	allDown := []*spec.Node{down(node("n1", 4000, 8192, exec...)), down(node("n2", 4000, 8192, exec...)), node("n3", 4000, 100, exec...)}

	// freed
	freeNodes := []*spec.Node{node("n1", 1000, 1024, exec...)}
	freeJob := job("web", 50, group("api", 500, 512, "exec"))
	freeReqs := reqs(freeJob, freeJob.Groups[0], 0)

	// terminal
	termNodes := []*spec.Node{node("n1", 1000, 1024, exec...), node("n2", 1000, 1024, exec...)}
	termJob := job("web", 50, group("api", 900, 900, "exec"))
	termReqs := reqs(termJob, termJob.Groups[0], 0, 1)
	stopping := alloc("s1", "n2", 100, 128, spec.ClientRunning)
	stopping.DesiredStatus = spec.DesiredStop

	// priority
	prioNodes := []*spec.Node{node("n1", 1000, 1024, exec...)}
	low := job("a", 10, group("g", 600, 600, "exec"))
	high := job("b", 90, group("g", 600, 600, "exec"))
	lowReqs, highReqs := reqs(low, low.Groups[0], 0), reqs(high, high.Groups[0], 0)

	// multiple jobs and groups
	multiNodes := []*spec.Node{node("n1", 4000, 8192, exec...), node("n2", 4000, 8192, exec...), node("n3", 600, 8192, "raw_exec")}
	web := job("web", 50, group("api", 1000, 1024, "exec"), group("big", 8000, 100, "exec"), group("cache", 500, 4096, "raw_exec"))
	batch := job("batch", 50, group("work", 2000, 100, "exec"))
	work := reqs(batch, batch.Groups[0], 0, 1, 2)
	api := reqs(web, web.Groups[0], 0, 1)
	big := reqs(web, web.Groups[1], 0, 1)
	cache := reqs(web, web.Groups[2], 0)

	// avoid the previous node
	avNodes := []*spec.Node{node("n1", 4000, 8192, exec...), node("n2", 4000, 8192, exec...), node("n3", 1000, 1024, exec...)}
	avJob := job("web", 50, group("api", 500, 512, "exec"))
	avReqs := reqs(avJob, avJob.Groups[0], 0, 1, 2)
	avReqs[0].AvoidNode = "n1" // all idle, n1 first by ID: n2 instead
	avReqs[1].AvoidNode = "n3" // n1 and n3 idle: n1, first by ID anyway
	avReqs[2].AvoidNode = "n9" // no such node: n1, less loaded after the placement than the small n3
	onlyNodes := []*spec.Node{node("n1", 4000, 8192, exec...), node("n2", 4000, 8192, "raw_exec"), node("n3", 400, 8192, exec...)}
	onlyJob := job("web", 50, group("api", 500, 512, "exec"))
	onlyReqs := reqs(onlyJob, onlyJob.Groups[0], 0, 1)
	onlyReqs[0].AvoidNode, onlyReqs[1].AvoidNode = "n1", "n1"

	tests := []struct {
		name     string
		in       Input
		want     Result
		wantText []string // the failures' String()
	}{
		{
			name: "fits on least loaded",
			in: Input{
				Nodes: least,
				Allocs: []*spec.Alloc{
					alloc("x1", "a", 2000, 4096, spec.ClientRunning), // load 0.5
					alloc("x2", "b", 1000, 1024, spec.ClientRunning), // load 0.1875
					alloc("x3", "c", 1000, 2048, spec.ClientPending), // load 0.25
				},
				Requests: leastReqs,
			},
			want: Result{Placements: []Placement{placed(leastReqs[0], least[1])}},
		},
		{
			name: "tie by ID, then spread as load grows",
			in:   Input{Nodes: tie, Requests: tieReqs},
			want: Result{Placements: []Placement{
				placed(tieReqs[0], tie[1]),
				placed(tieReqs[1], tie[0]),
				placed(tieReqs[2], tie[1]),
			}},
		},
		{
			name: "driver missing on the idle node",
			in: Input{
				Nodes:    drv,
				Allocs:   []*spec.Alloc{alloc("x1", "n2", 3000, 4096, spec.ClientRunning)},
				Requests: drvReqs,
			},
			want: Result{Placements: []Placement{placed(drvReqs[0], drv[1])}},
		},
		{
			name: "driver missing everywhere",
			in:   Input{Nodes: noDrv, Requests: noDrvReqs},
			want: Result{Failures: []Failure{{
				Job: "web", Requests: noDrvReqs,
				PlacementFailure: spec.PlacementFailure{Group: "api", Missing: 1, NodesEvaluated: 2, Dimensions: []spec.DimensionFailure{
					{Dimension: "driver docker", Nodes: 2},
					{Dimension: "driver exec", Nodes: 1},
				}},
			}}},
			wantText: []string{"0/2 nodes fit: no node has driver docker; missing driver exec on 1"},
		},
		{
			name: "cpu exhausted",
			in: Input{
				Nodes: cpuNodes,
				Allocs: []*spec.Alloc{
					alloc("x1", "n1", 900, 100, spec.ClientRunning),
					alloc("x2", "n2", 1800, 100, spec.ClientRunning),
				},
				Requests: cpuReqs,
			},
			want: Result{Failures: []Failure{{
				Job: "web", Requests: cpuReqs,
				PlacementFailure: spec.PlacementFailure{Group: "api", Missing: 2, NodesEvaluated: 2, Dimensions: []spec.DimensionFailure{
					{Dimension: "cpu", Nodes: 2, Need: 500, MostFree: 200, Unit: "MHz"},
				}, Hints: []string{"fits on 1 node if cpu <= 200 MHz"}},
			}}},
			wantText: []string{"0/2 nodes fit: cpu exhausted on 2 (need 500 MHz, most free 200 MHz); hint: fits on 1 node if cpu <= 200 MHz"},
		},
		{
			name: "memory exhausted and driver missing",
			in: Input{
				Nodes: memNodes,
				Allocs: []*spec.Alloc{
					alloc("x1", "n1", 100, 512, spec.ClientRunning),
					alloc("x2", "n2", 100, 1800, spec.ClientRunning),
				},
				Requests: memReqs,
			},
			want: Result{Failures: []Failure{{
				Job: "web", Requests: memReqs,
				PlacementFailure: spec.PlacementFailure{Group: "api", Missing: 1, NodesEvaluated: 5, Dimensions: []spec.DimensionFailure{
					{Dimension: "driver docker", Nodes: 2},
					{Dimension: "memory", Nodes: 3, Need: 900, MostFree: 512, Unit: "MB"},
				}, Hints: []string{"fits on 2 nodes if memory <= 512 MB"}},
			}}},
			wantText: []string{"0/5 nodes fit: missing driver docker on 2; memory exhausted on 3 (need 900 MB, most free 512 MB); hint: fits on 2 nodes if memory <= 512 MB"},
		},
		{
			name: "cpu and memory both exhausted",
			in:   Input{Nodes: bothNodes, Requests: bothReqs},
			want: Result{Failures: []Failure{{
				Job: "web", Requests: bothReqs,
				PlacementFailure: spec.PlacementFailure{Group: "api", Missing: 1, NodesEvaluated: 3, Dimensions: []spec.DimensionFailure{
					{Dimension: "cpu", Nodes: 2, Need: 1000, MostFree: 800, Largest: 800, Unit: "MHz"},
					{Dimension: "memory", Nodes: 2, Need: 1000, MostFree: 600, Largest: 600, Unit: "MB"},
				}, Hints: []string{"fits on 1 node if cpu <= 800 MHz", "fits on 1 node if memory <= 600 MB"}},
			}}},
			wantText: []string{"0/3 nodes fit: cpu too small on 2 (need 1000 MHz, the largest has 800 MHz in all); memory too small on 2 (need 1000 MB, the largest has 600 MB in all); hint: fits on 1 node if cpu <= 800 MHz; hint: fits on 1 node if memory <= 600 MB"},
		},
		{
			name: "not-ready node is skipped even when idle",
			in: Input{
				Nodes:    nrNodes,
				Allocs:   []*spec.Alloc{alloc("x1", "n2", 3000, 4096, spec.ClientRunning)},
				Requests: nrReqs,
			},
			want: Result{Placements: []Placement{placed(nrReqs[0], nrNodes[1])}},
		},
		{
			name: "not-ready nodes in the explanation",
			in:   Input{Nodes: allDown, Requests: nrReqs},
			want: Result{Failures: []Failure{{
				Job: "web", Requests: nrReqs,
				PlacementFailure: spec.PlacementFailure{Group: "api", Missing: 1, NodesEvaluated: 3, Dimensions: []spec.DimensionFailure{
					{Dimension: "status", Nodes: 2},
					{Dimension: "memory", Nodes: 1, Need: 128, MostFree: 100, Largest: 100, Unit: "MB"},
				}, Hints: []string{"fits on 1 node if memory <= 100 MB"}},
			}}},
			wantText: []string{"0/3 nodes fit: not ready on 2; memory too small on 1 (need 128 MB, the largest has 100 MB in all); hint: fits on 1 node if memory <= 100 MB"},
		},
		{
			name: "zero nodes",
			in:   Input{Requests: tieReqs[:2]},
			want: Result{Failures: []Failure{{
				Job: "web", Requests: tieReqs[:2],
				PlacementFailure: spec.PlacementFailure{Group: "api", Missing: 2},
			}}},
			wantText: []string{"0/0 nodes fit: no ready nodes"},
		},
		{
			name: "freed allocs count as free",
			in: Input{
				Nodes:    freeNodes,
				Allocs:   []*spec.Alloc{alloc("x1", "n1", 1000, 1024, spec.ClientRunning)},
				Freed:    map[string]bool{"x1": true},
				Requests: freeReqs,
			},
			want: Result{Placements: []Placement{placed(freeReqs[0], freeNodes[0])}},
		},
		{
			name: "allocs not freed use their room",
			in: Input{
				Nodes:    freeNodes,
				Allocs:   []*spec.Alloc{alloc("x1", "n1", 1000, 1024, spec.ClientRunning)},
				Freed:    map[string]bool{"other": true},
				Requests: freeReqs,
			},
			want: Result{Failures: []Failure{{
				Job: "web", Requests: freeReqs,
				PlacementFailure: spec.PlacementFailure{Group: "api", Missing: 1, NodesEvaluated: 1, Dimensions: []spec.DimensionFailure{
					{Dimension: "cpu", Nodes: 1, Need: 500, Unit: "MHz"},
					{Dimension: "memory", Nodes: 1, Need: 512, Unit: "MB"},
				}},
			}}},
			wantText: []string{"0/1 nodes fit: cpu exhausted on 1 (need 500 MHz, most free 0 MHz); memory exhausted on 1 (need 512 MB, most free 0 MB)"},
		},
		{
			name: "terminal allocs use no capacity; pending and stopping ones do",
			in: Input{
				Nodes: termNodes,
				Allocs: []*spec.Alloc{
					alloc("t1", "n1", 1000, 1024, spec.ClientComplete),
					alloc("t2", "n1", 1000, 1024, spec.ClientFailed),
					alloc("t3", "n1", 1000, 1024, spec.ClientLost),
					alloc("p1", "n2", 100, 128, ""), // no report yet: pending
					stopping,
					alloc("g1", "gone", 1000, 1024, spec.ClientRunning), // on an unknown node
				},
				Requests: termReqs,
			},
			want: Result{
				Placements: []Placement{placed(termReqs[0], termNodes[0])},
				Failures: []Failure{{
					Job: "web", Requests: termReqs[1:],
					PlacementFailure: spec.PlacementFailure{Group: "api", Missing: 1, NodesEvaluated: 2, Dimensions: []spec.DimensionFailure{
						{Dimension: "cpu", Nodes: 2, Need: 900, MostFree: 800, Unit: "MHz"},
						{Dimension: "memory", Nodes: 2, Need: 900, MostFree: 768, Unit: "MB"},
					}},
				}},
			},
		},
		{
			name: "priority decides who gets the last room",
			in:   Input{Nodes: prioNodes, Requests: concat(lowReqs, highReqs)},
			want: Result{
				Placements: []Placement{placed(highReqs[0], prioNodes[0])},
				Failures: []Failure{{
					Job: "a", Requests: lowReqs,
					PlacementFailure: spec.PlacementFailure{Group: "g", Missing: 1, NodesEvaluated: 1, Dimensions: []spec.DimensionFailure{
						{Dimension: "cpu", Nodes: 1, Need: 600, MostFree: 400, Unit: "MHz"},
						{Dimension: "memory", Nodes: 1, Need: 600, MostFree: 424, Unit: "MB"},
					}},
				}},
			},
		},
		{
			name: "a replacement avoids its previous node when another fits",
			in:   Input{Nodes: avNodes, Requests: avReqs},
			want: Result{Placements: []Placement{
				placed(avReqs[0], avNodes[1]),
				placed(avReqs[1], avNodes[0]),
				placed(avReqs[2], avNodes[0]),
			}},
		},
		{
			name: "a replacement goes back to its previous node when no other fits",
			in:   Input{Nodes: onlyNodes, Requests: onlyReqs},
			want: Result{Placements: []Placement{
				placed(onlyReqs[0], onlyNodes[0]),
				placed(onlyReqs[1], onlyNodes[0]),
			}},
		},
		{
			name: "multiple jobs and groups",
			in:   Input{Nodes: multiNodes, Requests: concat(cache, big, api, work)},
			want: Result{
				Placements: []Placement{
					placed(work[0], multiNodes[0]),
					placed(work[1], multiNodes[1]),
					placed(work[2], multiNodes[0]),
					placed(api[0], multiNodes[1]),
					placed(api[1], multiNodes[1]),
					placed(cache[0], multiNodes[2]),
				},
				Failures: []Failure{{
					Job: "web", Requests: big,
					PlacementFailure: spec.PlacementFailure{Group: "big", Missing: 2, NodesEvaluated: 3, Dimensions: []spec.DimensionFailure{
						{Dimension: "driver exec", Nodes: 1},
						{Dimension: "cpu", Nodes: 2, Need: 8000, Largest: 4000, Unit: "MHz"},
					}},
				}},
			},
			wantText: []string{"0/3 nodes fit: missing driver exec on 1; cpu too small on 2 (need 8000 MHz, the largest has 4000 MHz in all)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Place(tt.in)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Place() mismatch (-want +got):\n%s", diff)
			}
			if tt.wantText != nil {
				var text []string
				for _, f := range got.Failures {
					text = append(text, f.String())
				}
				if diff := cmp.Diff(tt.wantText, text); diff != "" {
					t.Errorf("failure text mismatch (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestPlaceDoesNotMutateInput(t *testing.T) {
	n := node("n1", 4000, 8192, "exec")
	j := job("web", 50, group("api", 100, 128, "exec"))
	low := job("aaa", 10, group("api", 100, 128, "exec"))
	in := Input{Nodes: []*spec.Node{n}, Requests: concat(reqs(low, low.Groups[0], 1, 0), reqs(j, j.Groups[0], 0))}
	before := fmt.Sprint(in.Requests)
	Place(in)
	if after := fmt.Sprint(in.Requests); after != before {
		t.Errorf("Place reordered its input:\nbefore %s\nafter  %s", before, after)
	}
}
