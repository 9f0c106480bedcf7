package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/registry"
)

// TestHubWakesLeaderOnlyForDecisions: reports of instances running, the
// leader's own schedule records and the event history wake the agents'
// and clients' blocking queries and streams but not the leader's loop;
// everything else wakes it.
func TestHubWakesLeaderOnlyForDecisions(t *testing.T) {
	for _, tt := range []struct {
		c    registry.Change
		kick bool
	}{
		{registry.Change{Kind: registry.KindAllocStatus, Job: "web", NodeID: "n1"}, false},
		{registry.Change{Kind: registry.KindAllocStatus, Job: "web", NodeID: "n1", Terminal: true}, true},
		{registry.Change{Kind: registry.KindAllocStatus, Job: "web", NodeID: "n1", Deleted: true}, true},
		{registry.Change{Kind: registry.KindSchedule, ID: "web"}, false},
		{registry.Change{Kind: registry.KindJob, ID: "web"}, true},
		{registry.Change{Kind: registry.KindAlloc, Job: "web", NodeID: "n1"}, true},
		{registry.Change{Kind: registry.KindNode, NodeID: "n1"}, true},
		{registry.Change{Kind: registry.KindNodeUsage, ID: "n1", NodeID: "n1"}, false},
		{registry.Change{Kind: registry.KindResync}, true},
		{registry.Change{Kind: registry.KindDeployment, ID: "d1", Job: "web"}, true},
		{registry.Change{Kind: registry.KindEvents, ID: "00000000000000000001-0a1b2c3d"}, false},
	} {
		tt.c.Rev = 5
		h := newHub(1)
		h.publish([]registry.Change{tt.c})
		select {
		case <-h.kick:
			if !tt.kick {
				t.Errorf("%s change %+v woke the leader", tt.c.Kind, tt.c)
			}
		default:
			if tt.kick {
				t.Errorf("%s change %+v did not wake the leader", tt.c.Kind, tt.c)
			}
		}
		if tt.c.Kind == registry.KindAllocStatus && h.topicRev("job/web") != 5 {
			t.Errorf("%+v did not touch job/web", tt.c)
		}
		// A usage report wakes node listings, not the catalog ("nodes")
		// nor the node's assignment query.
		if tt.c.Kind == registry.KindNodeUsage && (h.topicRev("node_usage") != 5 || h.topicRev("nodes") == 5 || h.topicRev("node/n1") == 5) {
			t.Errorf("%+v touched node_usage %d, nodes %d, node/n1 %d; want only node_usage", tt.c, h.topicRev("node_usage"), h.topicRev("nodes"), h.topicRev("node/n1"))
		}
		// An event record wakes the event streams and marks no job.
		if jobs, all := h.takeDirty(); tt.c.Kind == registry.KindEvents && (h.topicRev("events") != 5 || all || len(jobs) > 0) {
			t.Errorf("%+v touched events %d and marked %v (all: %t); want events only", tt.c, h.topicRev("events"), jobs, all)
		}
	}
}

// TestHubTracksDirtyJobs: a pass after job and alloc changes looks at
// those jobs only; a node change or a resync makes it look at all.
func TestHubTracksDirtyJobs(t *testing.T) {
	h := newHub(1)
	h.publish([]registry.Change{
		{Rev: 2, Kind: registry.KindJob, ID: "web"},
		{Rev: 3, Kind: registry.KindAlloc, ID: "a1", Job: "db", NodeID: "n1"},
		{Rev: 4, Kind: registry.KindAllocStatus, ID: "a2", Job: "cache", NodeID: "n1"}, // running: no
		{Rev: 5, Kind: registry.KindAllocStatus, ID: "a3", Job: "batch", NodeID: "n1", Terminal: true},
	})
	jobs, all := h.takeDirty()
	if all || len(jobs) != 3 || !jobs["web"] || !jobs["db"] || !jobs["batch"] {
		t.Fatalf("dirty = %v, all %v; want web, db, batch", jobs, all)
	}
	if jobs, all := h.takeDirty(); all || len(jobs) != 0 {
		t.Fatalf("taken twice: %v, all %v", jobs, all)
	}
	h.publish([]registry.Change{{Rev: 6, Kind: registry.KindNode, NodeID: "n1"}})
	if _, all := h.takeDirty(); !all {
		t.Fatal("a node change did not make every job dirty")
	}
}

// TestHubDirtySetIsBounded: on a server that never leads, the dirty set
// does not grow with every job name; past the bound it says "all".
func TestHubDirtySetIsBounded(t *testing.T) {
	h := newHub(1)
	for i := range maxDirty + 10 {
		h.publish([]registry.Change{{Rev: int64(i + 2), Kind: registry.KindJob, ID: fmt.Sprint("job-", i)}})
	}
	if len(h.dirty) > maxDirty {
		t.Fatalf("dirty set holds %d jobs, bound %d", len(h.dirty), maxDirty)
	}
	if _, all := h.takeDirty(); !all {
		t.Fatal("past the bound, the next pass is not a full one")
	}
}

// TestHubDeploymentChanges: a deployment's change (the leader's record or
// an operator's request) wakes its followers and makes its job's pass run;
// one whose job is unknown (a deletion without its old value) makes the
// pass look at every job.
func TestHubDeploymentChanges(t *testing.T) {
	h := newHub(1)
	h.publish([]registry.Change{{Rev: 7, Kind: registry.KindDeployment, ID: "d1", Job: "web"}})
	for _, topic := range []string{"deployments", "deployments/web", "deployment/d1", "job/web", "jobs"} {
		if h.topicRev(topic) != 7 {
			t.Errorf("topic %s at %d, want 7", topic, h.topicRev(topic))
		}
	}
	if h.topicRev("deployments/db") != 1 || h.topicRev("job/db") != 1 {
		t.Error("another job's topics moved")
	}
	if jobs, all := h.takeDirty(); all || len(jobs) != 1 || !jobs["web"] {
		t.Fatalf("dirty = %v, all %v; want web", jobs, all)
	}
	h.publish([]registry.Change{{Rev: 8, Kind: registry.KindDeployment, ID: "d2", Deleted: true}})
	if _, all := h.takeDirty(); !all {
		t.Fatal("a deployment change without its job did not make every job dirty")
	}
}

// TestHubWakesAWaiterOnSeveralTopicsOnce: a blocking query on several
// topics ("nodes" and "node_usage") wakes once when one batch touches
// both, or two batches touch one each before it took itself out: its
// channel is closed once, not a panic.
func TestHubWakesAWaiterOnSeveralTopicsOnce(t *testing.T) {
	h := newHub(1)
	done := make(chan struct{})
	go func() {
		h.wait(context.Background(), 1, time.Minute, "nodes", "node_usage")
		close(done)
	}()
	for {
		h.mu.Lock()
		n := len(h.waiters["nodes"]) + len(h.waiters["node_usage"])
		h.mu.Unlock()
		if n == 2 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	h.publish([]registry.Change{
		{Rev: 2, Kind: registry.KindNode, ID: "n1", NodeID: "n1"},
		{Rev: 3, Kind: registry.KindNodeUsage, ID: "n1", NodeID: "n1"},
	})
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter was not woken")
	}
	// Two batches before the waiter runs again: registered by hand, as a
	// waiter that has not taken itself out yet.
	w := &waiter{ch: make(chan struct{})}
	h.waiters["nodes"] = map[*waiter]struct{}{w: {}}
	h.waiters["node_usage"] = map[*waiter]struct{}{w: {}}
	h.publish([]registry.Change{{Rev: 4, Kind: registry.KindNode, ID: "n1", NodeID: "n1"}})
	h.publish([]registry.Change{{Rev: 5, Kind: registry.KindNodeUsage, ID: "n1", NodeID: "n1"}})
	<-w.ch
}
