package registry

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/drover-org/drover/internal/spec"
	"github.com/drover-org/drover/internal/state"
)

// PutNodeControl stores an operator's decision about node id (nil: none,
// the node is eligible and not draining); only the tests set a whole
// control at once. ErrNotFound: no such node.
func (r *Registry) PutNodeControl(ctx context.Context, id string, c *spec.NodeControl) error {
	return r.UpdateNodeControl(ctx, id, func(spec.NodeControl) (spec.NodeControl, error) {
		if c == nil {
			return spec.NodeControl{}, nil
		}
		return *c, nil
	})
}

// TestNodeControlAndUsage: an operator's control and the agent's usage
// report are merged into every read of the node, survive the agent
// registering again, and need the node to exist.
func TestNodeControlAndUsage(t *testing.T) {
	t.Parallel()
	r := open(t, startEtcd(t))
	ctx := context.Background()
	if _, err := r.PutNode(ctx, &spec.Node{ID: "n1", Name: "one"}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.PutNode(ctx, &spec.Node{ID: "n2", Name: "two"}); err != nil {
		t.Fatal(err)
	}
	wantErr(t, r.PutNodeControl(ctx, "n9", &spec.NodeControl{Ineligible: true}), ErrNotFound)
	wantErr(t, r.PutNodeUsage(ctx, "n9", &spec.NodeUsage{}), ErrNotFound)
	wantErr(t, r.PutNodeControl(ctx, "../x", &spec.NodeControl{}), ErrInvalid)
	wantErr(t, r.PutNodeUsage(ctx, "n1", nil), ErrInvalid)

	start := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	drain := &spec.DrainStrategy{StartedAt: start, Deadline: start.Add(time.Hour)}
	if err := r.PutNodeControl(ctx, "n1", &spec.NodeControl{Ineligible: true, Drain: drain}); err != nil {
		t.Fatal(err)
	}
	sampled := start.Add(time.Minute)
	if err := r.PutNodeUsage(ctx, "n1", &spec.NodeUsage{NodeID: "other", Time: sampled, Tasks: spec.Usage{CPU: 300, MemoryMB: 512},
		Allocs: map[string]map[string]spec.Usage{"a1": {"web": {CPU: 300, MemoryMB: 512}}}}); err != nil {
		t.Fatal(err)
	}
	wantUsage := &spec.NodeUsage{NodeID: "n1", Time: sampled, Tasks: spec.Usage{CPU: 300, MemoryMB: 512}}
	check := func(what string, n *spec.Node) {
		t.Helper()
		if !n.Ineligible || !cmp.Equal(n.Drain, drain) || !cmp.Equal(n.Usage, wantUsage) || n.Eligible() {
			t.Fatalf("%s: ineligible %v, drain %+v, usage %+v; want true, %+v, %+v", what, n.Ineligible, n.Drain, n.Usage, drain, wantUsage)
		}
	}
	n, err := r.GetNode(ctx, "n1")
	if err != nil {
		t.Fatal(err)
	}
	check("GetNode", n)
	nodes, _, err := r.ListNodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	check("ListNodes", nodes[0])
	if nodes[1].Ineligible || nodes[1].Drain != nil || nodes[1].Usage != nil {
		t.Fatalf("n2 has n1's control or usage: %+v", nodes[1])
	}
	snap, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	check("Snapshot", snap.Nodes[0])

	// The agent registers again, even claiming to be eligible: what the
	// operator decided and the usage stay.
	reg, err := r.PutNode(ctx, &spec.Node{ID: "n1", Name: "one", Meta: map[string]string{"k": "v"}, Drain: nil, Ineligible: false,
		Usage: &spec.NodeUsage{Tasks: spec.Usage{CPU: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	check("PutNode's answer", reg)
	n, _ = r.GetNode(ctx, "n1")
	check("GetNode after registering again", n)
	if n.Meta["k"] != "v" || n.ModifyIndex != reg.ModifyIndex {
		t.Fatalf("registration not stored: meta %v, modify index %d (registration's %d)", n.Meta, n.ModifyIndex, reg.ModifyIndex)
	}
	// A registration that carries the operator's fields cannot set them.
	if _, err := r.PutNode(ctx, &spec.Node{ID: "n2", Name: "two", Ineligible: true, Drain: drain}); err != nil {
		t.Fatal(err)
	}
	if n2, _ := r.GetNode(ctx, "n2"); n2.Ineligible || n2.Drain != nil {
		t.Fatalf("a registration set the operator's fields: %+v", n2)
	}

	// The node's ModifyIndex moves with each of its three keys.
	before := n.ModifyIndex
	if err := r.PutNodeUsage(ctx, "n1", &spec.NodeUsage{Time: sampled, Tasks: spec.Usage{CPU: 10}}); err != nil {
		t.Fatal(err)
	}
	n, _ = r.GetNode(ctx, "n1")
	if n.ModifyIndex <= before || n.Usage.Tasks.CPU != 10 {
		t.Fatalf("after a usage report: modify index %d (was %d), usage %+v", n.ModifyIndex, before, n.Usage)
	}

	// UpdateNodeControl: f's error is returned and nothing is written.
	refuse := errors.New("refused")
	err = r.UpdateNodeControl(ctx, "n1", func(c spec.NodeControl) (spec.NodeControl, error) {
		if !c.Ineligible || c.Drain == nil {
			t.Errorf("f got %+v, want the stored control", c)
		}
		return spec.NodeControl{}, refuse
	})
	if !errors.Is(err, refuse) {
		t.Fatalf("UpdateNodeControl = %v, want f's error", err)
	}
	if n, _ = r.GetNode(ctx, "n1"); !n.Ineligible {
		t.Fatal("a refused update wrote")
	}
	// Nil control: eligible and not draining again; the key goes.
	if err := r.PutNodeControl(ctx, "n1", nil); err != nil {
		t.Fatal(err)
	}
	if n, _ = r.GetNode(ctx, "n1"); n.Ineligible || n.Drain != nil || n.Usage == nil {
		t.Fatalf("after clearing the control: %+v", n)
	}
	resp, err := r.cli.Get(ctx, r.prefix+dirNodeCtl+"n1")
	if err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("node_ctl/n1 still stored after clearing (%v)", err)
	}
}

// TestNodeControlAndUsageChanges: a control change is a node change
// (it wakes the leader); a usage report is a KindNodeUsage change.
// Writing the same control again writes nothing.
func TestNodeControlAndUsageChanges(t *testing.T) {
	t.Parallel()
	r := open(t, startEtcd(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := r.PutNode(ctx, &spec.Node{ID: "n1", Name: "one"}); err != nil {
		t.Fatal(err)
	}
	rev0, err := r.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ch := r.Watch(ctx, rev0)
	if err := r.PutNodeControl(ctx, "n1", &spec.NodeControl{Ineligible: true}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Change{{Kind: KindNode, ID: "n1", NodeID: "n1"}}, clean(nextBatch(t, ch))); diff != "" {
		t.Fatalf("control put (-want +got):\n%s", diff)
	}
	if err := r.PutNodeControl(ctx, "n1", &spec.NodeControl{Ineligible: true}); err != nil {
		t.Fatal(err)
	}
	if err := r.PutNodeUsage(ctx, "n1", &spec.NodeUsage{Tasks: spec.Usage{CPU: 5}}); err != nil {
		t.Fatal(err)
	}
	// The same control again wrote nothing: the next change is the usage.
	if diff := cmp.Diff([]Change{{Kind: KindNodeUsage, ID: "n1", NodeID: "n1"}}, clean(nextBatch(t, ch))); diff != "" {
		t.Fatalf("usage put (-want +got):\n%s", diff)
	}
	if err := r.PutNodeControl(ctx, "n1", nil); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Change{{Kind: KindNode, ID: "n1", NodeID: "n1", Deleted: true}}, clean(nextBatch(t, ch))); diff != "" {
		t.Fatalf("control cleared (-want +got):\n%s", diff)
	}
}

// TestMirrorMergesNodeControlAndUsage: the leader's mirror answers what a
// fresh Snapshot reads as control and usage change, and a usage report
// makes a new value of that node only.
func TestMirrorMergesNodeControlAndUsage(t *testing.T) {
	t.Parallel()
	r := open(t, startEtcd(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, id := range []string{"n1", "n2", "n3"} {
		if _, err := r.PutNode(ctx, &spec.Node{ID: id, Name: id}); err != nil {
			t.Fatal(err)
		}
		if err := r.NodeAlive(ctx, id, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.PutNodeUsage(ctx, "n3", &spec.NodeUsage{Tasks: spec.Usage{MemoryMB: 1}}); err != nil {
		t.Fatal(err)
	}
	m, err := r.NewMirror(ctx, "s1", state.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	compare := func(what string) []*spec.Node {
		t.Helper()
		want, err := r.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
		defer wcancel()
		got, err := legacySnapshot(m, wctx, want.Rev)
		if err != nil {
			t.Fatal(err)
		}
		got.Rev, want.Rev = 0, 0
		if diff := cmp.Diff(want.Nodes, got.Nodes); diff != "" {
			t.Fatalf("%s: mirror's nodes differ from a fresh snapshot's (-snapshot +mirror):\n%s", what, diff)
		}
		return got.Nodes
	}
	a := compare("at first")
	start := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	if err := r.PutNodeControl(ctx, "n1", &spec.NodeControl{Drain: &spec.DrainStrategy{StartedAt: start}}); err != nil {
		t.Fatal(err)
	}
	b := compare("after a drain")
	if b[0].Drain == nil || b[0].Eligible() || b[1] != a[1] || b[2] != a[2] {
		t.Fatalf("after draining n1: drain %v, n2 same value %v, n3 same value %v", b[0].Drain, b[1] == a[1], b[2] == a[2])
	}
	if err := r.PutNodeUsage(ctx, "n2", &spec.NodeUsage{Tasks: spec.Usage{CPU: 7, MemoryMB: 70}}); err != nil {
		t.Fatal(err)
	}
	c := compare("after a usage report")
	if c[1] == b[1] || c[1].Usage == nil || c[1].Usage.Tasks.CPU != 7 || c[0] != b[0] || c[2] != b[2] {
		t.Fatalf("after n2's report: n2 new value %v, usage %+v; n1 same %v, n3 same %v", c[1] != b[1], c[1].Usage, c[0] == b[0], c[2] == b[2])
	}
	if b[1].Usage != nil {
		t.Fatal("an earlier snapshot's node changed under it")
	}
	if err := r.PutNodeControl(ctx, "n1", nil); err != nil {
		t.Fatal(err)
	}
	if d := compare("after the drain ended"); !d[0].Eligible() {
		t.Fatalf("n1 not eligible after its control was cleared: %+v", d[0])
	}
	// A node registering again (its place in the list may move) and a
	// report in the same stretch.
	if _, err := r.PutNode(ctx, &spec.Node{ID: "n3", Name: "a-first"}); err != nil {
		t.Fatal(err)
	}
	if err := r.PutNodeUsage(ctx, "n1", &spec.NodeUsage{Tasks: spec.Usage{CPU: 1}}); err != nil {
		t.Fatal(err)
	}
	if e := compare("after n3 renamed"); e[0].ID != "n3" || e[0].Usage == nil {
		t.Fatalf("after renaming n3: first %s usage %+v", e[0].ID, e[0].Usage)
	}
}
