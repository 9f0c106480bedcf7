package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/drover-org/drover/internal/planview"
	"github.com/drover-org/drover/internal/spec"
)

func TestPlanArgs(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "web.hcl")
	if err := os.WriteFile(file, []byte("job"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		args    []string
		without bool
		file    string
		nodes   []string
		err     string
	}{
		{"file", []string{file}, false, file, nil, ""},
		{"stdin", []string{"-"}, false, "-", nil, ""},
		{"file and more nodes", []string{file, "n2"}, true, file, []string{"n2"}, ""},
		{"nodes only", []string{"n2", "n3"}, true, "", []string{"n2", "n3"}, ""},
		{"without alone", nil, true, "", nil, ""},
		{"nothing", nil, false, "", nil, "give a job file to plan, or --without NODE... to check losing nodes"},
		{"missing file", []string{"nope.hcl"}, false, "", nil, "cannot read job file nope.hcl: no such file (to plan without nodes: drover plan --without NODE...)"},
		{"two files", []string{file, "-"}, false, "", nil, "plan takes one job file, got " + file + " and -"},
		{"a directory is not a file", []string{dir}, false, "", nil, "cannot read job file " + dir + ": no such file (to plan without nodes: drover plan --without NODE...)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			file, nodes, err := planArgs(c.args, c.without)
			msg := ""
			if err != nil {
				msg = err.Error()
			}
			if file != c.file || !cmp.Equal(nodes, c.nodes) || msg != c.err {
				t.Errorf("planArgs(%q, %v) = %q, %q, %q; want %q, %q, %q", c.args, c.without, file, nodes, msg, c.file, c.nodes, c.err)
			}
		})
	}
}

func TestPrintJobPlan(t *testing.T) {
	p := &spec.JobPlan{Job: "web", CheckIndex: 42, Version: 3, Diff: []string{"~ groups[g].count: 2 -> 3"}, Without: []string{"n1"},
		PlanChanges: spec.PlanChanges{
			Create: []spec.PlannedAlloc{{Name: "web.g[2]", Node: "n2", NodeID: "n2", FromNode: "n1", Reason: "replaces alloc 1234abcd lost with node n1"}},
			Stop:   []spec.PlannedAlloc{{Name: "web.g[2]", AllocID: "1234abcd-x", Node: "n1", NodeID: "n1", Reason: "node n1 is down (no heartbeat)"}},
			Update: []spec.PlannedAlloc{{Name: "web.g[0]", AllocID: "a", Node: "n2", NodeID: "n2", Reason: "keeps running as version 2: its tasks are the same in version 3"}},
			Keep:   []spec.PlannedAlloc{{Name: "web.g[1]", AllocID: "b", Node: "n2", NodeID: "n2"}},
			Evict:  []spec.PlannedAlloc{{Name: "low.g[0]", AllocID: "c", Node: "n2", NodeID: "n2", Reason: "preempted by web.g[2] (priority 80, this job 10)"}},
			Failures: []spec.PlacementFailure{{Group: "g", Missing: 1, NodesEvaluated: 2,
				Dimensions: []spec.DimensionFailure{{Dimension: "memory", Nodes: 2, Need: 900, MostFree: 512, Unit: "MB"}},
				Hints:      []string{"fits on 2 nodes if memory <= 512 MB"}}},
		}}
	var b strings.Builder
	printJobPlan(&b, p, "web.hcl")
	want := `~ Job "web" (would be version 3)
    ~ groups[g].count: 2 -> 3
  as if these nodes were down: n1

   INSTANCE  NODE      REASON
+  web.g[2]  n1 -> n2  replaces alloc 1234abcd lost with node n1
-  web.g[2]  n1        node n1 is down (no heartbeat)
~  web.g[0]  n2        keeps running as version 2: its tasks are the same in version 3
!  low.g[0]  n2        preempted by web.g[2] (priority 80, this job 10)
  and 1 instance(s) unchanged
✗ 1 instance(s) of group g would not be placed: 0/2 nodes fit: memory exhausted on 2 (need 900 MB, most free 512 MB)
    hint: fits on 2 nodes if memory <= 512 MB

To submit exactly this plan: drover run --check-index 42 web.hcl
Some instances would not be placed: they would wait until room appears. Lower what they need, or add room.
`
	if d := cmp.Diff(want, b.String()); d != "" {
		t.Errorf("printJobPlan (-want +got):\n%s", d)
	}

	var ee *exitError
	if err := planVerdict(nil, p.Fits()); !errors.As(err, &ee) || ee.code != exitUnplaceable {
		t.Errorf("verdict when something does not fit: %v, want exit %d", err, exitUnplaceable)
	}
	if err := planVerdict(nil, true); err != nil {
		t.Errorf("verdict when everything fits: %v", err)
	}

	b.Reset()
	printJobPlan(&b, &spec.JobPlan{Job: "new", Version: 1, New: true, PlanChanges: spec.PlanChanges{
		Create: []spec.PlannedAlloc{{Name: "new.g[0]", Node: "n1", NodeID: "n1", Reason: "new instance"}}}}, "-")
	want = `+ Job "new" (new: version 1)

   INSTANCE  NODE  REASON
+  new.g[0]  n1    new instance

To submit this plan: drover run - (the job is new: there is no index to check)
`
	if d := cmp.Diff(want, b.String()); d != "" {
		t.Errorf("printJobPlan of a new job (-want +got):\n%s", d)
	}
}

func TestPrintNodeLossPlan(t *testing.T) {
	p := &spec.NodeLossPlan{Without: []string{"n1"}, Jobs: []spec.JobChanges{{Job: "web", PlanChanges: spec.PlanChanges{
		Create: []spec.PlannedAlloc{{Name: "web.g[0]", Node: "n3", NodeID: "n3", FromNode: "n1", Reason: "replaces alloc 1234abcd lost with node n1"}},
		Stop:   []spec.PlannedAlloc{{Name: "web.g[0]", AllocID: "1234abcd-x", Node: "n1", NodeID: "n1", Reason: "node n1 is down (no heartbeat)"}},
	}}}}
	var b strings.Builder
	planview.NodeLoss(&b, p)
	want := `Without n1:

Job "web"
   INSTANCE  NODE      REASON
+  web.g[0]  n1 -> n3  replaces alloc 1234abcd lost with node n1
-  web.g[0]  n1        node n1 is down (no heartbeat)

Everything on n1 would be placed elsewhere.
`
	if d := cmp.Diff(want, b.String()); d != "" {
		t.Errorf("planview.NodeLoss (-want +got):\n%s", d)
	}
	b.Reset()
	planview.NodeLoss(&b, &spec.NodeLossPlan{Without: []string{"n4"}})
	if got, want := b.String(), "Nothing runs on n4: losing it moves nothing.\n"; got != want {
		t.Errorf("nothing displaced: %q, want %q", got, want)
	}
}
