package agent_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/drover-org/drover/internal/agent"
	"github.com/drover-org/drover/internal/dockertest"
	"github.com/drover-org/drover/internal/driver"
	"github.com/drover-org/drover/internal/driver/dockerdriver"
	"github.com/drover-org/drover/internal/driver/execdriver"
	"github.com/drover-org/drover/internal/spec"
)

// startDockerAgent is startAgent with the docker driver besides exec; the
// agent leaves its tasks running when it stops.
func (c *cluster) startDockerAgent(dataDir string) *runningAgent {
	c.t.Helper()
	dd, err := dockerdriver.New(dockerdriver.Config{})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { dd.Close() })
	return c.startAgentWith(agent.Config{DataDir: dataDir, Drivers: []driver.Driver{execdriver.New("raw_exec"), dd}})
}

// containersOf lists the containers (running or not) with label key=value.
func containersOf(t *testing.T, dc *client.Client, key, value string) []container.Summary {
	t.Helper()
	res, err := dc.ContainerList(context.Background(), client.ContainerListOptions{
		All: true, Filters: make(client.Filters).Add("label", key+"="+value),
	})
	if err != nil {
		t.Fatal(err)
	}
	return res.Items
}

// A restarted agent adopts its running container (same container, an
// Adopted event, no restart) and removes a container of its node that
// matches no alloc.
func TestRestartedAgentAdoptsContainer(t *testing.T) {
	t.Parallel()
	dc := dockertest.Require(t)
	image := dockertest.Image(t)
	dataDir := t.TempDir()
	var nodeID string
	// Registered first, so it runs last: whatever the agents left.
	t.Cleanup(func() {
		for _, ct := range containersOf(t, dc, dockerdriver.LabelNodeID, nodeID) {
			dc.ContainerRemove(context.Background(), ct.ID, client.ContainerRemoveOptions{Force: true})
		}
	})
	c := newCluster(t)
	first := c.startDockerAgent(dataDir)
	nodeID = first.NodeID()

	task := &spec.Task{
		Name: "web", Driver: "docker",
		Config:      spec.TaskConfig{Image: image},
		Resources:   spec.Resources{CPU: 100, MemoryMB: 64},
		KillTimeout: spec.Duration(2 * time.Second),
	}
	c.submit(job("dockeradopt", spec.JobService, task))
	al := c.alloc("dockeradopt", 30*time.Second, "the container running", running("web"))
	cts := containersOf(t, dc, dockerdriver.LabelAllocID, al.ID)
	if len(cts) != 1 || cts[0].State != container.StateRunning {
		t.Fatalf("containers of the alloc: %+v, want one running", cts)
	}
	id := cts[0].ID

	first.stop(t)
	// A container of this node that no alloc has: a leftover to remove.
	stray, err := dc.ContainerCreate(context.Background(), client.ContainerCreateOptions{
		Config: &container.Config{Image: image, Labels: map[string]string{
			dockerdriver.LabelNodeID: nodeID, dockerdriver.LabelAllocID: "no-such-alloc", dockerdriver.LabelTask: "web",
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dc.ContainerStart(context.Background(), stray.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatal(err)
	}

	c.startDockerAgent(dataDir)
	al = c.alloc("dockeradopt", 30*time.Second, "the container adopted", func(a *spec.Alloc) bool {
		ts := taskState(a, "web")
		return ts != nil && len(events(ts, spec.EventAdopted)) == 1 && ts.State == spec.TaskRunning
	})
	if ts := taskState(al, "web"); ts.Restarts != 0 {
		t.Errorf("restarts = %d, want 0:\n%s", ts.Restarts, describe(al))
	}
	cts = containersOf(t, dc, dockerdriver.LabelAllocID, al.ID)
	if len(cts) != 1 || cts[0].ID != id || cts[0].State != container.StateRunning {
		t.Errorf("containers of the alloc after the restart: %+v, want only %s, running", cts, id)
	}
	waitFor(t, 20*time.Second, "the stray container removed", func() bool {
		return len(containersOf(t, dc, dockerdriver.LabelAllocID, "no-such-alloc")) == 0
	})
}

// A container gets the DROVER_ names of where it runs, but none of the
// node's paths: its image's file system is another.
func TestContainerGetsNoNodePaths(t *testing.T) {
	t.Parallel()
	dc := dockertest.Require(t)
	image := dockertest.Image(t)
	c := newCluster(t)
	ag := c.startDockerAgent(t.TempDir())
	t.Cleanup(func() {
		for _, ct := range containersOf(t, dc, dockerdriver.LabelNodeID, ag.NodeID()) {
			dc.ContainerRemove(context.Background(), ct.ID, client.ContainerRemoveOptions{Force: true})
		}
	})
	c.submit(job("dockerenv", spec.JobService, &spec.Task{
		Name: "web", Driver: "docker",
		Config:    spec.TaskConfig{Image: image},
		Resources: spec.Resources{CPU: 100, MemoryMB: 64},
	}))
	al := c.alloc("dockerenv", 30*time.Second, "the container running", running("web"))
	ins, err := dc.ContainerInspect(context.Background(), taskState(al, "web").ContainerID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]bool{}
	for _, kv := range ins.Container.Config.Env {
		k, _, _ := strings.Cut(kv, "=")
		env[k] = true
	}
	if !env["DROVER_JOB_NAME"] {
		t.Errorf("container env %v has no DROVER_JOB_NAME", ins.Container.Config.Env)
	}
	for _, k := range []string{"HOME", "DROVER_ALLOC_DIR", "DROVER_TASK_DIR"} {
		if env[k] {
			t.Errorf("container env %v has the node's %s", ins.Container.Config.Env, k)
		}
	}
}
