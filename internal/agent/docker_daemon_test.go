package agent_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/drover-org/drover/internal/agent"
	"github.com/drover-org/drover/internal/dockertest"
	"github.com/drover-org/drover/internal/driver"
	"github.com/drover-org/drover/internal/driver/dockerdriver"
	"github.com/drover-org/drover/internal/spec"
)

// A restart of the docker daemon under a running task leaves exactly one
// container for it, running, and the alloc running: whether the daemon
// stopped its containers (SIGTERM) or died and left them to its containerd
// (SIGKILL). The daemon is the test's own, so that restarting it does not
// disturb the docker tests of other packages.
func TestDockerDaemonRestartLeavesNoDuplicate(t *testing.T) {
	t.Parallel()
	d := dockertest.StartDaemon(t)
	image := dockertest.ImageIn(t, d.Client)

	c := newCluster(t)
	dd, err := dockerdriver.New(dockerdriver.Config{Host: d.Host})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dd.Close() })
	// Its container must be gone before the private daemon stops.
	c.startAgentWith(agent.Config{DataDir: t.TempDir(), Drivers: []driver.Driver{dd}, StopTasksOnExit: true})

	// No ports: the private daemon has no bridge network. testapp serves
	// on the container's loopback, which is enough to keep it running.
	task := &spec.Task{
		Name: "web", Driver: "docker",
		Config:      spec.TaskConfig{Image: image, Command: "-listen", Args: []string{"127.0.0.1:8080"}},
		Resources:   spec.Resources{CPU: 100, MemoryMB: 64},
		KillTimeout: spec.Duration(2 * time.Second),
	}
	j := job("dockerdaemon", spec.JobService, task)
	// Starts refused while the daemon is down must not use up the policy.
	j.Groups[0].Restart = restart(50, time.Minute, 200*time.Millisecond, spec.RestartDelay)
	c.submit(j)
	al := c.alloc("dockerdaemon", 30*time.Second, "the container running", running("web"))
	id := onlyRunningContainer(t, d.Client, al)

	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		start := time.Now()
		d.Restart(sig)
		var last string
		deadline := time.Now().Add(45 * time.Second)
		for {
			al = c.alloc("dockerdaemon", time.Second, "", nil)
			all, err := listContainers(d.Client, al.ID)
			cts := notDead(all)
			ts := taskState(al, "web")
			last = fmt.Sprintf("alloc %s, containers %s, list error %v", al.ClientStatusOr(), describeContainers(all), err)
			if err == nil && al.ClientStatusOr() == spec.ClientRunning && ts != nil && ts.State == spec.TaskRunning &&
				len(cts) == 1 && cts[0].State == container.StateRunning && cts[0].ID == ts.ContainerID {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after a %s of dockerd: no single running container within 45s; last: %s\n%s", sig, last, describe(al))
			}
			time.Sleep(100 * time.Millisecond)
		}
		// A duplicate would show up once the agent has caught up: look
		// again a little later.
		time.Sleep(2 * time.Second)
		al = c.alloc("dockerdaemon", time.Second, "", nil)
		newID := onlyRunningContainer(t, d.Client, al)
		t.Logf("%s of dockerd: back in %s, container %.12s (was %.12s), %d restarts",
			sig, time.Since(start).Round(100*time.Millisecond), newID, id, taskState(al, "web").Restarts)
		id = newID
	}
}

// onlyRunningContainer checks that al runs and has exactly one container,
// running and the one its status names, and returns its ID.
func onlyRunningContainer(t *testing.T, dc *client.Client, al *spec.Alloc) string {
	t.Helper()
	all, err := listContainers(dc, al.ID)
	if err != nil {
		t.Fatal(err)
	}
	cts := notDead(all)
	ts := taskState(al, "web")
	if al.ClientStatusOr() != spec.ClientRunning || ts == nil || ts.State != spec.TaskRunning ||
		len(cts) != 1 || cts[0].State != container.StateRunning || cts[0].ID != ts.ContainerID {
		t.Fatalf("want the alloc running with one running container, the one it names; containers %s\n%s", describeContainers(all), describe(al))
	}
	return cts[0].ID
}

// notDead leaves out the dead containers: dockerd can leave one it cannot
// remove when it shuts down in the middle of a start (its root stays
// mounted out of reach); it never runs again, and the task starts beside it
// (dockerdriver's TestDeadLeftoverTheDaemonCannotRemoveDoesNotBlockTheTask).
func notDead(cts []container.Summary) []container.Summary {
	var out []container.Summary
	for _, ct := range cts {
		if ct.State != container.StateDead && ct.State != container.StateRemoving {
			out = append(out, ct)
		}
	}
	return out
}

// listContainers is containersOf returning its error: while the daemon
// restarts, listing fails and the caller tries again.
func listContainers(dc *client.Client, allocID string) ([]container.Summary, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := dc.ContainerList(ctx, client.ContainerListOptions{
		All: true, Filters: make(client.Filters).Add("label", dockerdriver.LabelAllocID+"="+allocID),
	})
	if err != nil {
		return nil, err
	}
	return res.Items, nil
}

func describeContainers(cts []container.Summary) string {
	s := "["
	for i, ct := range cts {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%.12s %s (%s)", ct.ID, ct.State, ct.Status)
	}
	return s + "]"
}
