package reconcile

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/spec"
)

func sized(id string, cpu, mem int) *spec.Node {
	return &spec.Node{ID: id, Name: id, Status: spec.NodeReady, Drivers: []string{"exec"}, Resources: spec.Resources{CPU: cpu, MemoryMB: mem}}
}

// onNodes spreads n running allocs of j's group over nodes, round robin.
func onNodes(j *spec.Job, group string, n int, nodes ...string) []*spec.Alloc {
	var out []*spec.Alloc
	for i := range n {
		out = append(out, mk(fmt.Sprintf("%s-%d", group, i), j, group, i, int64(i+1), spec.ClientRunning, on(nodes[i%len(nodes)])))
	}
	return out
}

func placesAndStops(res Result) (int, int) { return len(res.Place), len(res.Stop) }

func TestDrainMovesOneAtATimeGatedOnHealth(t *testing.T) {
	j := svc("web", 1, grp("api", 4, "serve"))
	a, b := sized("a", 4000, 4000), sized("b", 4000, 4000)
	a.Drain = &spec.DrainStrategy{StartedAt: now}
	allocs := onNodes(j, "api", 4, "a", "b")
	res := Reconcile(Input{Jobs: []*spec.Job{j}, Allocs: allocs, Nodes: []*spec.Node{a, b}, Now: now})
	if p, s := placesAndStops(res); p != 1 || s != 1 {
		t.Fatalf("first pass: %d places, %d stops; want one move (max_parallel 1 without an update block)", p, s)
	}
	if res.Stop[0].Alloc.NodeID != "a" || res.Stop[0].Reason != "node a is draining" || res.Place[0].AvoidNode != "a" {
		t.Fatalf("move %+v / %+v", res.Stop[0], res.Place[0])
	}
	if u := res.Place[0].Update; u == nil || u.Parallel() != 1 || u.MinHealthyTime != spec.DefaultUpdate().MinHealthyTime {
		t.Fatalf("the replacement carries no strategy to judge it by: %+v", u)
	}
	// While the replacement waits for its verdict, nothing else moves.
	moved := res.Stop[0].Alloc
	moved.DesiredStatus = spec.DesiredStop
	repl := mk("r1", j, "api", moved.Index, 10, spec.ClientRunning, on("b"))
	repl.Update = res.Place[0].Update
	allocs = append(allocs, repl)
	res = Reconcile(Input{Jobs: []*spec.Job{j}, Allocs: allocs, Nodes: []*spec.Node{a, b}, Now: now})
	if p, s := placesAndStops(res); p+s != 0 {
		t.Fatalf("with the replacement undecided: %d places, %d stops", p, s)
	}
	repl.Status.DeploymentHealth = &spec.DeploymentHealth{Healthy: true, Time: now}
	res = Reconcile(Input{Jobs: []*spec.Job{j}, Allocs: allocs, Nodes: []*spec.Node{a, b}, Now: now})
	if p, s := placesAndStops(res); p != 1 || s != 1 || res.Stop[0].Alloc.NodeID != "a" {
		t.Fatalf("after the verdict: %d places, %d stops", p, s)
	}
}

// TestDrainGoesByTheMigrateBlock: with a migrate block, a drain moves
// migrate.max_parallel at a time, each replacement judged by migrate's
// health settings, however wide the update block is; a drain
// replacement in flight does not hold back the update block's moves.
func TestDrainGoesByTheMigrateBlock(t *testing.T) {
	j := svc("web", 1, grp("api", 6, "serve"))
	j.Groups[0].Update = &spec.UpdateStrategy{MaxParallel: new(3)}
	j.Migrate = &spec.MigrateStrategy{MaxParallel: new(2), MinHealthyTime: spec.Duration(time.Second)}
	j.Canonicalize()
	a, b := sized("a", 8000, 8000), sized("b", 8000, 8000)
	a.Drain = &spec.DrainStrategy{StartedAt: now}
	allocs := onNodes(j, "api", 6, "a", "b")
	// The job's version has rolled out: no deployment runs.
	done := []*spec.Deployment{{ID: "d1", Job: "web", JobVersion: j.Version, Status: spec.DeploymentSuccessful}}
	res := Reconcile(Input{Jobs: []*spec.Job{j}, Allocs: allocs, Nodes: []*spec.Node{a, b}, Deployments: done, Now: now})
	if p, s := placesAndStops(res); p != 2 || s != 2 {
		t.Fatalf("first pass: %d places, %d stops; want 2 moves (migrate's max_parallel, not update's 3)", p, s)
	}
	u := res.Place[0].Update
	if u == nil || u.Parallel() != 2 || u.MinHealthyTime != spec.Duration(time.Second) || u.HealthyDeadline != spec.DefaultMigrate().HealthyDeadline || u.HealthCheck != spec.HealthChecks {
		t.Fatalf("the replacement's strategy %+v, want migrate's (2, 1s, checks, 5m)", u)
	}
	// Both replacements undecided: nothing more moves off a.
	for i, st := range res.Stop {
		st.Alloc.DesiredStatus = spec.DesiredStop
		r := mk(fmt.Sprintf("r%d", i), j, "api", st.Alloc.Index, int64(20+i), spec.ClientRunning, on("b"))
		r.Update, r.DesiredCause = u, spec.CauseDrain
		allocs = append(allocs, r)
	}
	res = Reconcile(Input{Jobs: []*spec.Job{j}, Allocs: allocs, Nodes: []*spec.Node{a, b}, Deployments: done, Now: now})
	if p, s := placesAndStops(res); p+s != 0 {
		t.Fatalf("with two drain replacements undecided: %d places, %d stops", p, s)
	}
	// Without the migrate block the drain goes by update's 3.
	j.Migrate, j.Groups[0].Migrate = nil, nil
	allocs = onNodes(j, "api", 6, "a", "b")
	res = Reconcile(Input{Jobs: []*spec.Job{j}, Allocs: allocs, Nodes: []*spec.Node{a, b}, Deployments: done, Now: now})
	if p, s := placesAndStops(res); p != 3 || s != 3 {
		t.Fatalf("without migrate: %d places, %d stops; want update's 3", p, s)
	}
}

func TestDrainDeadlineStopsWhatIsLeft(t *testing.T) {
	j := svc("web", 1, grp("api", 4, "serve"))
	bj := batch("jobs", 1, grp("work", 1, "run"))
	a, b := sized("a", 4000, 4000), sized("b", 4000, 4000)
	a.Drain = &spec.DrainStrategy{StartedAt: now.Add(-time.Hour), Deadline: now.Add(time.Minute)}
	allocs := append(onNodes(j, "api", 4, "a"), mk("batch0", bj, "work", 0, 9, spec.ClientRunning, on("a")))
	res := Reconcile(Input{Jobs: []*spec.Job{j, bj}, Allocs: allocs, Nodes: []*spec.Node{a, b}, Now: now})
	if p, s := placesAndStops(res); p != 1 || s != 1 || !res.NextRun.Equal(a.Drain.Deadline) {
		t.Fatalf("before the deadline: %d places, %d stops (the batch instance stays), next run %v", p, s, res.NextRun)
	}
	res = Reconcile(Input{Jobs: []*spec.Job{j, bj}, Allocs: allocs, Nodes: []*spec.Node{a, b}, Now: a.Drain.Deadline})
	if p, s := placesAndStops(res); p != 5 || s != 5 {
		t.Fatalf("at the deadline: %d places, %d stops; want all 5 moved at once", p, s)
	}
	for _, st := range res.Stop {
		if st.Reason != "node a drain deadline reached" {
			t.Fatalf("reason %q", st.Reason)
		}
	}
}

func TestDrainStopsSystemJobsLast(t *testing.T) {
	sys := svc("agentd", 1, grp("d", 1, "run"))
	sys.Type = spec.JobSystem
	j := svc("web", 1, grp("api", 1, "serve"))
	a, b := sized("a", 4000, 4000), sized("b", 4000, 4000)
	a.Drain = &spec.DrainStrategy{StartedAt: now}
	sa := mk("sys-a", sys, "d", 0, 1, spec.ClientRunning, on("a"))
	sb := mk("sys-b", sys, "d", 1, 2, spec.ClientRunning, on("b"))
	web := mk("web-a", j, "api", 0, 3, spec.ClientRunning, on("a"))
	in := Input{Jobs: []*spec.Job{sys, j}, Allocs: []*spec.Alloc{sa, sb, web}, Nodes: []*spec.Node{a, b}, Now: now}
	res := Reconcile(in)
	for _, st := range res.Stop {
		if st.Alloc == sa {
			t.Fatalf("the system instance stopped while the node still has work: %q", st.Reason)
		}
	}
	web.DesiredStatus = spec.DesiredStop
	web.Status.ClientStatus = spec.ClientComplete
	res = Reconcile(in)
	if len(res.Stop) != 1 || res.Stop[0].Alloc != sa || res.Stop[0].Reason != "node a is drained" {
		t.Fatalf("drained node: stops %+v", res.Stop)
	}
	for _, p := range res.Place {
		if p.Job == sys {
			t.Fatalf("a system instance placed: %+v", p)
		}
	}
}

func TestRestartReplacesOldInstancesUnderTheUpdateBlock(t *testing.T) {
	j := svc("web", 1, withUpdate(grp("api", 4, "serve"), upd(2, 0, false, false)))
	j.RestartRequested = now.Add(-time.Second)
	allocs := onNodes(j, "api", 4, "a")
	allocs[3].CreateTime = now // after the request: not restarted
	res := Reconcile(Input{Jobs: []*spec.Job{j}, Allocs: allocs, Nodes: []*spec.Node{sized("a", 4000, 4000)}, Now: now,
		Deployments: []*spec.Deployment{{ID: "d1", Job: "web", JobVersion: 1, Status: spec.DeploymentSuccessful}}})
	if p, s := placesAndStops(res); p != 2 || s != 2 {
		t.Fatalf("%d places, %d stops; want 2 (max_parallel)", p, s)
	}
	if !strings.HasPrefix(res.Stop[0].Reason, "restart requested at ") || res.Place[0].Update.Parallel() != 2 {
		t.Fatalf("stop %q, update %+v", res.Stop[0].Reason, res.Place[0].Update)
	}
}

func TestMemoryPressureMovesLowestPriorityOncePerInterval(t *testing.T) {
	low := svc("low", 1, grp("api", 1, "serve"))
	low.Priority = 20
	high := svc("high", 1, grp("api", 1, "serve"))
	high.Priority = 80
	a, b := sized("a", 4000, 1000), sized("b", 4000, 1000)
	a.Usage = &spec.NodeUsage{Tasks: spec.Usage{MemoryMB: 950}, Time: now.Add(-5 * time.Second)}
	la := mk("low-a", low, "api", 0, 1, spec.ClientRunning, on("a"))
	ha := mk("high-a", high, "api", 0, 2, spec.ClientRunning, on("a"))
	in := Input{Jobs: []*spec.Job{low, high}, Allocs: []*spec.Alloc{la, ha}, Nodes: []*spec.Node{a, b}, Now: now,
		MemoryHighPercent: 90, MemoryMoveInterval: time.Minute}
	res := Reconcile(in)
	if len(res.Stop) != 1 || res.Stop[0].Alloc != la || len(res.Place) != 1 || res.Place[0].AvoidNode != "a" {
		t.Fatalf("stops %+v, places %+v", res.Stop, res.Place)
	}
	if want := "node a uses 95.0% of its memory (950 of 1000 MB), over 90%: moving its lowest-priority instance"; res.Stop[0].Reason != want {
		t.Fatalf("reason %q, want %q", res.Stop[0].Reason, want)
	}
	// The budget: one move per interval per node.
	la.DesiredStatus, la.DesiredCause, la.DesiredReason, la.ModifyTime = spec.DesiredStop, res.Stop[0].Cause, res.Stop[0].Reason, now
	in.Allocs = append(in.Allocs, mk("low-b", low, "api", 0, 3, spec.ClientRunning, on("b")))
	res = Reconcile(in)
	if p, s := placesAndStops(res); p+s != 0 || !res.NextRun.Equal(now.Add(time.Minute)) {
		t.Fatalf("within the interval: %d places, %d stops, next run %v", p, s, res.NextRun)
	}
	// After the interval, a report from before the move says nothing new.
	in.Now = now.Add(time.Minute)
	if res := Reconcile(in); len(res.Stop) != 0 {
		t.Fatalf("after the interval, on the report from before the move: stops %+v", res.Stop)
	}
	a.Usage.Time = in.Now
	res = Reconcile(in)
	if len(res.Stop) != 1 || res.Stop[0].Alloc != ha {
		t.Fatalf("after the interval, on a new report: stops %+v", res.Stop)
	}
	// A pass that sees only some jobs' allocs (not low's, which runs on
	// a) cannot tell the lowest priority: it waits for a full pass.
	la2 := mk("low-a2", low, "api", 0, 4, spec.ClientRunning, on("a"))
	if res := Reconcile(Input{Jobs: []*spec.Job{high}, Allocs: []*spec.Alloc{ha}, NodeAllocs: byNode(la2, ha), Nodes: in.Nodes,
		Now: in.Now, MemoryHighPercent: 90, MemoryMoveInterval: time.Minute}); len(res.Stop) != 0 {
		t.Fatalf("partial pass: stops %+v", res.Stop)
	}
	// Off, or a stale report: nothing moves.
	in.MemoryHighPercent = 0
	if res := Reconcile(in); len(res.Stop) != 0 {
		t.Fatalf("threshold off: %+v", res.Stop)
	}
	in.MemoryHighPercent, a.Usage.Time = 90, in.Now.Add(-time.Hour)
	if res := Reconcile(in); len(res.Stop) != 0 {
		t.Fatalf("stale usage: %+v", res.Stop)
	}
}

func TestRebalanceMovesTowardTheEmptyNode(t *testing.T) {
	g := grp("api", 4, "serve")
	g.Rebalance = true
	g.Tasks[0].Resources = spec.Resources{CPU: 500, MemoryMB: 500}
	j := svc("web", 1, g)
	a, b := sized("a", 4000, 2000), sized("b", 4000, 2000)
	allocs := onNodes(j, "api", 4, "a") // a: 2000 of 2000 MB; b: empty
	res := Reconcile(Input{Jobs: []*spec.Job{j}, Allocs: allocs, Nodes: []*spec.Node{a, b}, Now: now})
	if len(res.Place) != 1 || res.Place[0].Node != "b" || len(res.Stop) != 1 || res.Stop[0].Alloc.Index != 3 ||
		res.Stop[0].Reason != "rebalance: node a runs 4 instances of the group, node b 0" {
		t.Fatalf("places %+v, stops %+v", res.Place, res.Stop)
	}
	// Counts even (2 and 2) but loads not: another job fills a.
	other := svc("other", 1, grp("big", 1, "x"))
	other.Groups[0].Tasks[0].Resources = spec.Resources{CPU: 100, MemoryMB: 900}
	skewed := append(onNodes(j, "api", 4, "a", "b"), mk("big", other, "big", 0, 9, spec.ClientRunning, on("a")))
	for _, x := range skewed[:4] {
		x.Resources = spec.Resources{CPU: 100, MemoryMB: 100}
	}
	res = Reconcile(Input{Jobs: []*spec.Job{j, other}, Allocs: skewed, Nodes: []*spec.Node{a, b}, Now: now})
	if len(res.Place) != 1 || res.Place[0].Node != "b" || res.Stop[0].Reason != "rebalance: node a is 55% allocated, node b 10%" {
		t.Fatalf("load skew: places %+v, stops %+v", res.Place, res.Stop)
	}
	// Balanced (2 and 2): nothing moves.
	balanced := onNodes(j, "api", 4, "a", "b")
	if res := Reconcile(Input{Jobs: []*spec.Job{j}, Allocs: balanced, Nodes: []*spec.Node{a, b}, Now: now}); len(res.Stop) != 0 {
		t.Fatalf("balanced: %+v", res.Stop)
	}
	// Without rebalance = true: nothing moves.
	g.Rebalance = false
	if res := Reconcile(Input{Jobs: []*spec.Job{j}, Allocs: allocs, Nodes: []*spec.Node{a, b}, Now: now}); len(res.Stop) != 0 {
		t.Fatalf("not opted in: %+v", res.Stop)
	}
}

func TestMovesWaitForARunningDeployment(t *testing.T) {
	w := deployedV1(t, upd(1, 0, false, false))
	w.update(svc("web", 2, withUpdate(grp("api", 5, "serve v2"), upd(1, 0, false, false))))
	w.pass() // one replacement, undecided
	j := w.jobs[0]
	j.RestartRequested = w.now.Add(time.Second)
	res := Reconcile(Input{Jobs: w.jobs, Allocs: w.allocs, Deployments: w.deps, Now: w.now})
	if p, s := placesAndStops(res); p+s != 0 {
		t.Fatalf("a restart during a deployment: %d places, %d stops", p, s)
	}
}

// byNode is Input.NodeAllocs over allocs.
func byNode(allocs ...*spec.Alloc) func(string) []*spec.Alloc {
	return func(id string) []*spec.Alloc {
		var out []*spec.Alloc
		for _, a := range allocs {
			if a.NodeID == id {
				out = append(out, a)
			}
		}
		return out
	}
}

// TestAllocStopReplacesThatInstanceAtOnce: drover alloc stop's request
// stops the one instance it names, without waiting for the update block's
// budget, and places its replacement; the others stay.
func TestAllocStopReplacesThatInstanceAtOnce(t *testing.T) {
	j := svc("web", 1, withUpdate(grp("api", 3, "serve"), upd(1, 0, false, false)))
	allocs := onNodes(j, "api", 3, "a")
	// Another instance is moving already: the budget of 1 is spent, and
	// the stop does not wait for it.
	allocs[0].Update = j.UpdateOf(j.Groups[0])
	j.StopAllocs = []spec.AllocStopRequest{{Alloc: allocs[1].ID, Time: now.Add(-time.Second)}, {Alloc: "gone", Time: now}}
	res := Reconcile(Input{Jobs: []*spec.Job{j}, Allocs: allocs, Nodes: []*spec.Node{sized("a", 4000, 4000)}, Now: now,
		Deployments: []*spec.Deployment{{ID: "d1", Job: "web", JobVersion: 1, Status: spec.DeploymentSuccessful}}})
	if len(res.Stop) != 1 || res.Stop[0].Alloc != allocs[1] || res.Stop[0].Cause != spec.CauseAllocStop ||
		!strings.HasPrefix(res.Stop[0].Reason, "stop requested at ") {
		t.Fatalf("stops %+v; want %s stopped for alloc-stop", res.Stop, allocs[1].ID)
	}
	if len(res.Place) != 1 || res.Place[0].Previous != allocs[1].ID {
		t.Fatalf("places %+v; want one replacement of %s", res.Place, allocs[1].Name)
	}
}

// A drain with IgnoreSystemJobs leaves the system instance running once
// the rest has left, and at the deadline too.
func TestDrainIgnoringSystemJobsKeepsThem(t *testing.T) {
	sys := svc("agentd", 1, grp("d", 1, "run"))
	sys.Type = spec.JobSystem
	a, b := sized("a", 4000, 4000), sized("b", 4000, 4000)
	a.Drain = &spec.DrainStrategy{StartedAt: now.Add(-time.Hour), Deadline: now.Add(time.Minute), IgnoreSystemJobs: true}
	sa := mk("sys-a", sys, "d", 0, 1, spec.ClientRunning, on("a"))
	sb := mk("sys-b", sys, "d", 1, 2, spec.ClientRunning, on("b"))
	for _, at := range []time.Time{now, a.Drain.Deadline.Add(time.Second)} {
		res := Reconcile(Input{Jobs: []*spec.Job{sys}, Allocs: []*spec.Alloc{sa, sb}, Nodes: []*spec.Node{a, b}, Now: at})
		if p, s := placesAndStops(res); p != 0 || s != 0 {
			t.Fatalf("at %v: %d places, %d stops (%+v); want the system instances left alone", at, p, s, res.Stop)
		}
	}
	a.Drain.IgnoreSystemJobs = false
	res := Reconcile(Input{Jobs: []*spec.Job{sys}, Allocs: []*spec.Alloc{sa, sb}, Nodes: []*spec.Node{a, b}, Now: now})
	if len(res.Stop) != 1 || res.Stop[0].Alloc != sa {
		t.Fatalf("without IgnoreSystemJobs the drained node's system instance stops: %+v", res.Stop)
	}
}
