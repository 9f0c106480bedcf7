package server

import (
	"testing"

	"github.com/drover-org/drover/internal/registry"
)

// TestHubWakesLeaderOnlyForDecisions: reports of instances running, and
// the leader's own schedule records, wake the agents' and clients'
// blocking queries but not the leader's loop; everything else wakes it.
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
		{registry.Change{Kind: registry.KindResync}, true},
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
	}
}
