package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/leader"
	"github.com/drover-org/drover/internal/planner"
	"github.com/drover-org/drover/internal/planview"
	"github.com/drover-org/drover/internal/spec"
	"github.com/drover-org/drover/internal/state"
)

// addNode registers a node and keeps it alive until the test ends.
func addNode(t *testing.T, hs string, id string, memory int) {
	t.Helper()
	body := fmt.Sprintf(`{"id":%q,"name":%q,"resources":{"cpu":1000,"memory":%d},"drivers":["exec"]}`, id, id, memory)
	resp, err := http.Post(hs+"/v1/nodes", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var reg spec.NodeRegistration
	json.NewDecoder(resp.Body).Decode(&reg)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("register %s: status %d", id, resp.StatusCode)
	}
	ctx := t.Context()
	go func() {
		tick := time.NewTicker(reg.HeartbeatInterval.Std())
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			req, _ := http.NewRequestWithContext(ctx, "PUT", hs+"/v1/nodes/"+id+"/heartbeat", nil)
			req.Header.Set(client.NodeSecretHeader, reg.Secret)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}
	}()
}

// call sends a request and decodes a 200's body into out; it returns the
// status and, for any other, the error body.
func call(t *testing.T, method, url, body string, out any) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == 200 && out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, url, err, b)
		}
	}
	return resp.StatusCode, string(b)
}

// placed waits until job has n allocs that run, and returns them by name.
func placed(t *testing.T, base, job string, n int) map[string]*spec.Alloc {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var allocs []*spec.Alloc
		if status, body := call(t, "GET", base+"/v1/jobs/"+job+"/allocations", "", &allocs); status != 200 {
			t.Fatalf("allocations of %s: %d %s", job, status, body)
		}
		out := map[string]*spec.Alloc{}
		for _, a := range allocs {
			if a.DesiredStatus == spec.DesiredRun {
				out[a.Name] = a
			}
		}
		if len(out) == n {
			return out
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("job %s did not get %d allocs within 10s", job, n)
	return nil
}

func jobWith(count, memory int) string {
	return fmt.Sprintf(`{"name":"web","groups":[{"name":"g","count":%d,"tasks":[{"name":"t","driver":"exec","config":{"command":"/bin/true","args":["a"]},"resources":{"cpu":10,"memory":%d}}]}]}`, count, memory)
}

// ignorePorts: the jobs here reserve no ports, and the scheduler's choice
// of dynamic ports is not what these tests are about.
var ignorePorts = cmpopts.IgnoreFields(spec.PlannedAlloc{}, "Ports")

func TestPlanNewJobThenRunWithItsCheckIndex(t *testing.T) {
	hs, reg := testServer(t)
	addNode(t, hs.URL, "n1", 1000)
	ctx := context.Background()
	before, _ := reg.Revision(ctx)

	var p spec.JobPlan
	if status, body := call(t, "POST", hs.URL+"/v1/jobs/plan", jobWith(2, 10), &p); status != 200 {
		t.Fatalf("plan: %d %s", status, body)
	}
	want := spec.JobPlan{Job: "web", Version: 1, New: true, PlanChanges: spec.PlanChanges{Create: []spec.PlannedAlloc{
		{Name: "web.g[0]", Node: "n1", NodeID: "n1", Reason: "new instance"},
		{Name: "web.g[1]", Node: "n1", NodeID: "n1", Reason: "new instance"},
	}}}
	if d := cmp.Diff(want, p, ignorePorts); d != "" {
		t.Fatalf("plan of a new job (-want +got):\n%s", d)
	}
	if after, _ := reg.Revision(ctx); after != before {
		t.Fatalf("plan wrote to the registry: revision %d -> %d", before, after)
	}

	var sub spec.SubmitResponse
	call(t, "POST", hs.URL+"/v1/jobs", jobWith(2, 10), &sub)
	allocs := placed(t, hs.URL, "web", 2)

	// The same spec: nothing changes, and the index is the stored job's.
	p = spec.JobPlan{}
	call(t, "POST", hs.URL+"/v1/jobs/plan", jobWith(2, 10), &p)
	want = spec.JobPlan{Job: "web", Version: 1, CheckIndex: sub.Job.ModifyIndex, PlanChanges: spec.PlanChanges{Keep: []spec.PlannedAlloc{
		{Name: "web.g[0]", AllocID: allocs["web.g[0]"].ID, Node: "n1", NodeID: "n1"},
		{Name: "web.g[1]", AllocID: allocs["web.g[1]"].ID, Node: "n1", NodeID: "n1"},
	}}}
	if d := cmp.Diff(want, p, ignorePorts); d != "" {
		t.Fatalf("plan of the same spec (-want +got):\n%s", d)
	}

	// A change: one more instance, and new args. The two running ones
	// change their tasks, so they are replaced.
	changed := strings.Replace(jobWith(3, 10), `["a"]`, `["a","b"]`, 1)
	p = spec.JobPlan{}
	if status, body := call(t, "POST", hs.URL+"/v1/jobs/plan", changed, &p); status != 200 {
		t.Fatalf("plan: %d %s", status, body)
	}
	want = spec.JobPlan{Job: "web", Version: 2, CheckIndex: sub.Job.ModifyIndex,
		Diff: []string{`~ groups[g].count: 2 -> 3`, `~ groups[g].tasks[t].config.args: ["a"] -> ["a","b"]`},
		PlanChanges: spec.PlanChanges{
			Create: []spec.PlannedAlloc{
				{Name: "web.g[0]", Node: "n1", NodeID: "n1", FromNode: "n1", Reason: "job updated to version 2"},
				{Name: "web.g[1]", Node: "n1", NodeID: "n1", FromNode: "n1", Reason: "job updated to version 2"},
				{Name: "web.g[2]", Node: "n1", NodeID: "n1", Reason: "new instance"},
			},
			Stop: []spec.PlannedAlloc{
				{Name: "web.g[0]", AllocID: allocs["web.g[0]"].ID, Node: "n1", NodeID: "n1", Reason: "job updated to version 2"},
				{Name: "web.g[1]", AllocID: allocs["web.g[1]"].ID, Node: "n1", NodeID: "n1", Reason: "job updated to version 2"},
			},
		}}
	if d := cmp.Diff(want, p, ignorePorts); d != "" {
		t.Fatalf("plan of a change (-want +got):\n%s", d)
	}

	// ?text=1 adds the plan as drover plan prints it (planview), the
	// same text from the same plan; without it there is none.
	var withText spec.JobPlan
	if status, body := call(t, "POST", hs.URL+"/v1/jobs/plan?text=1", changed, &withText); status != 200 {
		t.Fatalf("plan?text=1: %d %s", status, body)
	}
	if p.Text != "" || withText.Text != planview.JobText(&p) || !strings.Contains(withText.Text, "~ Job \"web\" (would be version 2)\n    ~ groups[g].count: 2 -> 3\n") {
		t.Errorf("plan?text=1's text is not planview's of the plan:\n%s\nwithout text=1: %q", withText.Text, p.Text)
	}
	if status, body := call(t, "POST", hs.URL+"/v1/jobs/plan?text=yes", changed, nil); status != 400 || !strings.Contains(body, "text must be 1") {
		t.Errorf("plan?text=yes: %d %s", status, body)
	}

	// A count change only: the running instances stay, updated in place.
	p = spec.JobPlan{}
	call(t, "POST", hs.URL+"/v1/jobs/plan?diff=0", jobWith(3, 10), &p)
	update := "keeps running as version 1: its tasks are the same in version 2"
	want = spec.JobPlan{Job: "web", Version: 2, CheckIndex: sub.Job.ModifyIndex, PlanChanges: spec.PlanChanges{
		Create: []spec.PlannedAlloc{{Name: "web.g[2]", Node: "n1", NodeID: "n1", Reason: "new instance"}},
		Update: []spec.PlannedAlloc{
			{Name: "web.g[0]", AllocID: allocs["web.g[0]"].ID, Node: "n1", NodeID: "n1", Reason: update},
			{Name: "web.g[1]", AllocID: allocs["web.g[1]"].ID, Node: "n1", NodeID: "n1", Reason: update},
		},
	}}
	if d := cmp.Diff(want, p, ignorePorts); d != "" {
		t.Fatalf("plan of a count change, ?diff=0 (-want +got):\n%s", d)
	}

	// Submitting with the plan's index works; a stale one is refused.
	run := func(body string, check int64) int {
		status, _ := call(t, "POST", fmt.Sprintf("%s/v1/jobs?check_index=%d", hs.URL, check), body, nil)
		return status
	}
	if status := run(jobWith(3, 10), p.CheckIndex); status != 200 {
		t.Fatalf("run --check-index %d from the plan: status %d", p.CheckIndex, status)
	}
	p = spec.JobPlan{}
	call(t, "POST", hs.URL+"/v1/jobs/plan", jobWith(4, 10), &p)
	if status := run(jobWith(5, 10), 0); status != 200 {
		t.Fatalf("a change in between: status %d", status)
	}
	if status := run(jobWith(4, 10), p.CheckIndex); status != http.StatusConflict {
		t.Fatalf("run --check-index %d after a change in between: status %d, want 409", p.CheckIndex, status)
	}
}

func TestPlanSaysWhyAJobDoesNotFit(t *testing.T) {
	hs, reg := testServer(t)
	addNode(t, hs.URL, "n1", 1000)
	before, _ := reg.Revision(context.Background())
	var p spec.JobPlan
	if status, body := call(t, "POST", hs.URL+"/v1/jobs/plan", jobWith(2, 2000), &p); status != 200 {
		t.Fatalf("plan: %d %s", status, body)
	}
	if len(p.Failures) != 1 || len(p.Create) != 0 {
		t.Fatalf("want one failure and nothing created, got %+v", p)
	}
	f := p.Failures[0]
	if f.Group != "g" || f.Missing != 2 || f.String() != "0/1 nodes fit: memory too small on 1 (need 2000 MB, the largest has 1000 MB in all); hint: fits on 1 node if memory <= 1000 MB" {
		t.Fatalf("failure %+v: %s", f, f.String())
	}
	if after, _ := reg.Revision(context.Background()); after != before {
		t.Fatalf("plan wrote to the registry: revision %d -> %d", before, after)
	}
	// Same validation as submit.
	if status, body := call(t, "POST", hs.URL+"/v1/jobs/plan", strings.Replace(jobWith(2, 10), `"count":2`, `"count":-1`, 1), nil); status != 422 || !strings.Contains(body, "groups[0].count") {
		t.Fatalf("invalid job: %d %s", status, body)
	}
}

// Three nodes with room for one instance each; two instances run.
func TestPlanWithoutNodes(t *testing.T) {
	hs, reg := testServer(t)
	for _, n := range []string{"n1", "n2", "n3"} {
		addNode(t, hs.URL, n, 1000)
	}
	call(t, "POST", hs.URL+"/v1/jobs", jobWith(2, 600), nil)
	allocs := placed(t, hs.URL, "web", 2)
	a0, a1 := allocs["web.g[0]"], allocs["web.g[1]"]
	free := "n1"
	for _, n := range []string{"n2", "n3"} {
		if n != a0.NodeName && n != a1.NodeName {
			free = n
		}
	}
	before, _ := reg.Revision(context.Background())
	lost := func(a *spec.Alloc) spec.PlannedAlloc {
		return spec.PlannedAlloc{Name: a.Name, AllocID: a.ID, Node: a.NodeName, NodeID: a.NodeID, Reason: "node " + a.NodeName + " is down (no heartbeat)"}
	}
	moved := func(a *spec.Alloc, to string) spec.PlannedAlloc {
		return spec.PlannedAlloc{Name: a.Name, Node: to, NodeID: to, FromNode: a.NodeName,
			Reason: fmt.Sprintf("replaces alloc %s lost with node %s", a.ID[:8], a.NodeName)}
	}
	kept := func(a *spec.Alloc) spec.PlannedAlloc {
		return spec.PlannedAlloc{Name: a.Name, AllocID: a.ID, Node: a.NodeName, NodeID: a.NodeID}
	}

	// Without the node of web.g[0]: it moves to the free node.
	var p spec.NodeLossPlan
	if status, body := call(t, "GET", hs.URL+"/v1/plan/without?node="+a0.NodeName, "", &p); status != 200 {
		t.Fatalf("plan without: %d %s", status, body)
	}
	want := spec.NodeLossPlan{Without: []string{a0.NodeName}, Jobs: []spec.JobChanges{{Job: "web", PlanChanges: spec.PlanChanges{
		Create: []spec.PlannedAlloc{moved(a0, free)},
		Stop:   []spec.PlannedAlloc{lost(a0)},
		Keep:   []spec.PlannedAlloc{kept(a1)},
	}}}}
	if d := cmp.Diff(want, p, ignorePorts); d != "" {
		t.Fatalf("without %s (-want +got):\n%s", a0.NodeName, d)
	}
	// A plan changes nothing of the server's state: the node it left out
	// is still ready in the list every reader shares.
	var nodes []*spec.Node
	call(t, "GET", hs.URL+"/v1/nodes", "", &nodes)
	for _, n := range nodes {
		if n.Status != spec.NodeReady {
			t.Fatalf("after the plan without %s, the server lists node %s %q", a0.NodeName, n.Name, n.Status)
		}
	}

	// Without both nodes that run it: one moves, the other has no room.
	p = spec.NodeLossPlan{}
	call(t, "GET", hs.URL+"/v1/plan/without?node="+a0.NodeName+"&node="+a1.NodeID, "", &p)
	if len(p.Jobs) != 1 {
		t.Fatalf("without both: %+v", p)
	}
	got := p.Jobs[0]
	wantStop := []spec.PlannedAlloc{lost(a0), lost(a1)}
	wantCreate := []spec.PlannedAlloc{moved(a0, free)}
	if d := cmp.Diff(wantStop, got.Stop, ignorePorts); d != "" {
		t.Errorf("without both, stops (-want +got):\n%s", d)
	}
	if d := cmp.Diff(wantCreate, got.Create, ignorePorts); d != "" {
		t.Errorf("without both, creates (-want +got):\n%s", d)
	}
	if len(got.Failures) != 1 || got.Failures[0].Missing != 1 ||
		got.Failures[0].String() != "0/3 nodes fit: not ready on 2; memory exhausted on 1 (need 600 MB, most free 400 MB); hint: fits on 1 node if memory <= 400 MB" {
		t.Errorf("without both, failures: %+v", got.Failures)
	}

	// The web UI's words: each failure and dimension as drover status
	// says them, and the whole plan as drover plan --without prints it.
	f := got.Failures[0]
	if f.Text != "0/3 nodes fit: not ready on 2; memory exhausted on 1 (need 600 MB, most free 400 MB)" || f.NeverFits ||
		len(f.Dimensions) != 2 || f.Dimensions[1].Text != "memory exhausted on 1 (need 600 MB, most free 400 MB)" || f.Dimensions[1].TooSmall {
		t.Errorf("without both, the failure's words: %+v", f)
	}
	var tp spec.NodeLossPlan
	call(t, "GET", hs.URL+"/v1/plan/without?text=1&node="+a0.NodeName+"&node="+a1.NodeID, "", &tp)
	text := tp.Text
	tp.Text = ""
	if want := planview.NodeLossText(&tp); text != want || !strings.Contains(text, "✗ 1 instance(s) of group g would not be placed") {
		t.Errorf("without both, ?text=1 sent\n%s\nwant drover plan's\n%s", text, want)
	}
	if status, body := call(t, "GET", hs.URL+"/v1/plan/without?text=yes&node=n1", "", nil); status != 400 || !strings.Contains(body, "text must be 1") {
		t.Errorf("?text=yes: %d %s", status, body)
	}

	// The same through a job plan: the job's own view.
	var jp spec.JobPlan
	call(t, "POST", hs.URL+"/v1/jobs/plan?without="+a0.NodeName, jobWith(2, 600), &jp)
	if d := cmp.Diff([]spec.PlannedAlloc{moved(a0, free)}, jp.Create, ignorePorts); d != "" || len(jp.Without) != 1 {
		t.Errorf("job plan without %s (-want +got):\n%s%+v", a0.NodeName, d, jp)
	}

	// Unknown nodes: 400, listing the known ones.
	status, body := call(t, "GET", hs.URL+"/v1/plan/without?node=n9&node=n1", "", nil)
	if status != 400 || !strings.Contains(body, `no node named \"n9\"; known nodes: n1, n2, n3`) {
		t.Errorf("unknown node: %d %s", status, body)
	}
	if status, _ := call(t, "GET", hs.URL+"/v1/plan/without", "", nil); status != 400 {
		t.Errorf("no node: status %d, want 400", status)
	}
	if after, _ := reg.Revision(context.Background()); after != before {
		t.Fatalf("plans wrote to the registry: revision %d -> %d", before, after)
	}
}

// A higher-priority job that may preempt: its plan shows the eviction, and
// once submitted the leader stops the evicted alloc with the reason and
// gives the new one the port it reserved.
func TestPlanShowsEvictionsAndTheLeaderCarriesThemOut(t *testing.T) {
	hs, _ := testServer(t)
	addNode(t, hs.URL, "n1", 1000)
	low := `{"name":"low","priority":10,"groups":[{"name":"g","tasks":[{"name":"t","driver":"exec","config":{"command":"/bin/true"},"resources":{"cpu":10,"memory":800}}]}]}`
	call(t, "POST", hs.URL+"/v1/jobs", low, nil)
	victim := placed(t, hs.URL, "low", 1)["low.g[0]"]

	high := `{"name":"web","priority":80,"preempt":true,"groups":[{"name":"g","network":{"ports":[{"label":"http","static":8080}]},` +
		`"tasks":[{"name":"t","driver":"exec","config":{"command":"/bin/true"},"resources":{"cpu":10,"memory":600}}]}]}`
	var p spec.JobPlan
	if status, body := call(t, "POST", hs.URL+"/v1/jobs/plan", high, &p); status != 200 {
		t.Fatalf("plan: %d %s", status, body)
	}
	reason := "preempted by web.g[0] (priority 80 > 10)"
	port := []spec.AllocPort{{Label: "http", Value: 8080, HostIP: "127.0.0.1"}}
	want := spec.JobPlan{Job: "web", Version: 1, New: true, PlanChanges: spec.PlanChanges{
		Create: []spec.PlannedAlloc{{Name: "web.g[0]", Node: "n1", NodeID: "n1", Reason: "new instance", Ports: port}},
		Evict:  []spec.PlannedAlloc{{Name: "low.g[0]", AllocID: victim.ID, Node: "n1", NodeID: "n1", Reason: reason}},
	}}
	if d := cmp.Diff(want, p); d != "" {
		t.Fatalf("plan that preempts (-want +got):\n%s", d)
	}

	call(t, "POST", hs.URL+"/v1/jobs", high, nil)
	web := placed(t, hs.URL, "web", 1)["web.g[0]"]
	if d := cmp.Diff(port, web.Ports); d != "" {
		t.Errorf("the new alloc's ports (-want +got):\n%s", d)
	}
	var got spec.Alloc
	if status, body := call(t, "GET", hs.URL+"/v1/allocations/"+victim.ID, "", &got); status != 200 {
		t.Fatalf("evicted alloc: %d %s", status, body)
	}
	if got.DesiredStatus != spec.DesiredStop || got.DesiredCause != spec.CausePreempted || got.DesiredReason != reason {
		t.Errorf("evicted alloc: desired %s (%s: %s), want stop (%s: %s)", got.DesiredStatus, got.DesiredCause, got.DesiredReason, spec.CausePreempted, reason)
	}
	if web.DesiredCause != spec.CauseNew {
		t.Errorf("the new alloc's cause is %q, want %q", web.DesiredCause, spec.CauseNew)
	}
}

// drover plan shows the moves the leader would make on its own: here a
// rebalance onto an empty node, with its reason.
func TestPlanShowsRebalanceMoves(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	job := &spec.Job{Name: "web", Type: spec.JobService, Priority: 50, Version: 1, Groups: []*spec.Group{{
		Name: "api", Count: 4, Rebalance: true,
		Tasks: []*spec.Task{{Name: "t", Driver: "exec", Config: spec.TaskConfig{Command: "sleep"}, Resources: spec.Resources{CPU: 100, MemoryMB: 100}}},
	}}}
	job.Canonicalize()
	nodes := []*spec.Node{
		{ID: "a", Name: "a", Status: spec.NodeReady, Drivers: []string{"exec"}, Resources: spec.Resources{CPU: 4000, MemoryMB: 4000}},
		{ID: "b", Name: "b", Status: spec.NodeReady, Drivers: []string{"exec"}, Resources: spec.Resources{CPU: 4000, MemoryMB: 4000}},
	}
	var allocs []*spec.Alloc
	for i := range 4 {
		allocs = append(allocs, &spec.Alloc{ID: fmt.Sprintf("alloc-%d", i), Name: spec.AllocName("web", "api", i), Job: "web", JobVersion: 1,
			JobType: spec.JobService, Group: "api", Index: i, NodeID: "a", NodeName: "a", Tasks: job.Groups[0].Tasks,
			Resources: job.Groups[0].Resources(), DesiredStatus: spec.DesiredRun, CreateIndex: int64(i + 1),
			Status: &spec.AllocStatus{ClientStatus: spec.ClientRunning, UpdateTime: now}})
	}
	p := jobPlan(leader.ReadPass(snapshotOf([]*spec.Job{job}, nodes, allocs), nil), job, nil, false, now, planner.Policy{})
	if len(p.Stop) != 1 || !strings.HasPrefix(p.Stop[0].Reason, "rebalance: node a runs 4 instances") ||
		len(p.Create) != 1 || p.Create[0].Node != "b" || p.Create[0].FromNode != "a" {
		t.Fatalf("plan: stop %+v, create %+v", p.Stop, p.Create)
	}
}

// snapshotOf is a state store holding jobs, nodes (ready ones with a
// liveness key) and allocs with their status, as the registry's feed
// writes them.
func snapshotOf(jobs []*spec.Job, nodes []*spec.Node, allocs []*spec.Alloc) *state.Snapshot {
	s := state.New()
	tx := s.Write()
	for _, j := range jobs {
		tx.PutJob(j)
	}
	for _, n := range nodes {
		tx.PutNodeRecord(n.ID, n)
		tx.SetNodeAlive(n.ID, n.Status == spec.NodeReady)
	}
	for _, a := range allocs {
		c := *a
		tx.PutAlloc(&c, a.CreateIndex, a.CreateIndex)
		if a.Status != nil {
			tx.PutAllocStatus(a.ID, "", "", a.Status, a.CreateIndex)
		}
	}
	tx.Commit(1)
	return s.Snapshot()
}
