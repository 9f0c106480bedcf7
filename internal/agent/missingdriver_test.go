package agent_test

import (
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/spec"
	"github.com/drover-org/drover/internal/testbin"
)

// An agent told to run a task with a driver it does not have (a node that
// lost its docker daemon since it registered, or a wrong placement) fails
// the task at once, saying so, and starts nothing: it does not run it
// with another driver, and does not retry (reliability case 31).
func TestAgentRefusesADriverItLacks(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startAgent(t.TempDir(), true)
	j := job("nodocker", spec.JobService, shTask("web", "echo started; exec sleep 1000"))
	j.Groups[0].Tasks[0].Restart = restart(3, time.Minute, 50*time.Millisecond, spec.RestartFail)
	c.tellAgent(j.Name, func(a *spec.Alloc) {
		for _, tk := range a.Tasks {
			tk.Driver = "docker"
		}
	})
	c.submit(j)
	a := c.alloc(j.Name, 10*time.Second, "the task failed", func(a *spec.Alloc) bool {
		return a.ClientStatusOr() == spec.ClientFailed
	})
	ts := a.Status.Tasks["web"]
	if ts == nil || ts.PID != 0 || ts.Restarts != 0 || !ts.Failed {
		t.Fatalf("task state %+v: want failed, never started, no restarts", ts)
	}
	found := false
	for _, e := range ts.Events {
		found = found || (e.Type == spec.EventDriverFail && strings.Contains(e.Message, `driver "docker" is not available on this node`))
	}
	if !found {
		t.Fatalf("events %+v lack the driver failure", ts.Events)
	}
	if pids := testbin.TaskProcs(j.Name, ""); len(pids) != 0 {
		t.Fatalf("processes %v run for the refused task", pids)
	}
}
