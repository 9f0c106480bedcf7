package agent_test

import (
	"context"
	"slices"
	"strconv"
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
	"github.com/drover-org/drover/internal/testkit"
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

// A docker task sees the runtime variables as a container should (its
// mapped port as NOMAD_PORT_<label>, the host's as NOMAD_HOST_PORT_<label>)
// and its directories mounted at /alloc, /local and /secrets, writable; its
// args are interpolated. The evidence is what the task printed.
func TestDockerTaskEnvironmentAndDirs(t *testing.T) {
	t.Parallel()
	dockertest.Require(t)
	image := dockertest.Image(t)
	c := newCluster(t)
	c.startDockerAgent(t.TempDir())
	task := &spec.Task{
		Name: "report", Driver: "docker",
		Config: spec.TaskConfig{Image: image, Ports: []string{"http"},
			Args: []string{"-report", "-dirs", "/alloc/data,${NOMAD_TASK_DIR},${NOMAD_SECRETS_DIR},${NOMAD_ALLOC_DIR}/logs", "-exit", "0"}},
		Resources:   spec.Resources{CPU: 100, MemoryMB: 64},
		KillTimeout: spec.Duration(2 * time.Second),
		Restart:     restart(0, time.Minute, 100*time.Millisecond, spec.RestartFail),
	}
	j := job("dockerenv", spec.JobBatch, task)
	host := testkit.FreePort(t)
	j.Groups[0].Network = &spec.Network{Ports: []spec.Port{{Label: "http", Static: host, To: 8080}}}
	c.submit(j)
	a := c.alloc("dockerenv", 60*time.Second, "the report task complete", func(a *spec.Alloc) bool {
		if a.ClientStatusOr() == spec.ClientFailed {
			t.Fatalf("report task failed:\n%s", describe(a))
		}
		return a.ClientStatusOr() == spec.ClientComplete
	})
	out := logs(t, c.client, a.ID, "report", false)
	got := map[string]string{}
	var dirs []string
	for _, l := range strings.Split(out, "\n") {
		if kv, ok := strings.CutPrefix(l, "env "); ok {
			k, v, _ := strings.Cut(kv, "=")
			got[k] = v
		}
		if d, ok := strings.CutPrefix(l, "dir "); ok {
			dirs = append(dirs, d)
		}
	}
	want := map[string]string{
		"NOMAD_PORT_http": "8080", "NOMAD_HOST_PORT_http": strconv.Itoa(host), "DROVER_PORT_http": "8080",
		"NOMAD_ADDR_http": "127.0.0.1:" + strconv.Itoa(host), "NOMAD_IP_http": "127.0.0.1",
		"NOMAD_ALLOC_DIR": "/alloc", "NOMAD_TASK_DIR": "/local", "NOMAD_SECRETS_DIR": "/secrets",
		"NOMAD_ALLOC_ID": a.ID, "NOMAD_TASK_NAME": "report",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	for _, k := range []string{"DROVER_TASK_DIR", "DROVER_ALLOC_DIR"} {
		if v, ok := got[k]; ok {
			t.Errorf("%s = %q in a container, where no host path means anything", k, v)
		}
	}
	wantDirs := []string{"/alloc/data: ok", "/local: ok", "/secrets: ok", "/alloc/logs: ok"}
	if !slices.Equal(dirs, wantDirs) {
		t.Errorf("the task's directories:\n%s\nwant:\n%s\n(output:\n%s)", strings.Join(dirs, "\n"), strings.Join(wantDirs, "\n"), out)
	}
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
	c.submit(job("dockerpaths", spec.JobService, &spec.Task{
		Name: "web", Driver: "docker",
		Config:    spec.TaskConfig{Image: image},
		Resources: spec.Resources{CPU: 100, MemoryMB: 64},
	}))
	al := c.alloc("dockerpaths", 30*time.Second, "the container running", running("web"))
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

// TestDockerGroupNetworkNames: a group network's hostname (interpolated)
// and dns block are what its docker task's /etc/hostname and
// /etc/resolv.conf say; a second task's own dns_servers win over the
// group's.
func TestDockerGroupNetworkNames(t *testing.T) {
	t.Parallel()
	dockertest.Require(t)
	image := dockertest.Image(t)
	c := newCluster(t)
	c.startDockerAgent(t.TempDir())
	report := func(name string) *spec.Task {
		return &spec.Task{
			Name: name, Driver: "docker",
			Config: spec.TaskConfig{Image: image,
				Args: []string{"-report", "-files", "/etc/hostname,/etc/resolv.conf", "-exit", "0"}},
			Resources:   spec.Resources{CPU: 100, MemoryMB: 64},
			KillTimeout: spec.Duration(2 * time.Second),
			Restart:     restart(0, time.Minute, 100*time.Millisecond, spec.RestartFail),
		}
	}
	own := report("own")
	own.Config.DNSServers = []string{"10.1.1.1"}
	j := job("names", spec.JobBatch, report("group"), own)
	j.Groups[0].Network = &spec.Network{Hostname: "names-${NOMAD_ALLOC_INDEX}",
		DNS: &spec.DNSConfig{Servers: []string{"10.9.8.7"}, Searches: []string{"svc.internal"}, Options: []string{"ndots:3"}}}
	c.submit(j)
	a := c.alloc("names", 60*time.Second, "the report tasks complete", func(a *spec.Alloc) bool {
		if a.ClientStatusOr() == spec.ClientFailed {
			t.Fatalf("a report task failed:\n%s", describe(a))
		}
		return a.ClientStatusOr() == spec.ClientComplete
	})
	group := logs(t, c.client, a.ID, "group", false)
	for _, want := range []string{"file /etc/hostname: names-0", "nameserver 10.9.8.7", "search svc.internal", "options ndots:3"} {
		if !strings.Contains(group, want) {
			t.Errorf("the group's task: output lacks %q:\n%s", want, group)
		}
	}
	ownOut := logs(t, c.client, a.ID, "own", false)
	if !strings.Contains(ownOut, "nameserver 10.1.1.1") || strings.Contains(ownOut, "10.9.8.7") || !strings.Contains(ownOut, "search svc.internal") {
		t.Errorf("the task with its own dns_servers: want its server and the group's search domain:\n%s", ownOut)
	}
}
