package dockerdriver_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/drover-org/drover/internal/dockertest"
	"github.com/drover-org/drover/internal/driver"
	"github.com/drover-org/drover/internal/driver/dockerdriver"
	"github.com/drover-org/drover/internal/spec"
	"github.com/drover-org/drover/internal/testkit"
)

// The tests run real containers of the testapp image on the local daemon.
// Each test is its own node (a fresh node ID), so that its cleanup removes
// exactly the containers it made.

type env struct {
	t     *testing.T
	c     *client.Client
	d     *dockerdriver.Driver
	image string
	node  string
}

func setup(t *testing.T) *env {
	t.Helper()
	t.Parallel()
	c := dockertest.Require(t)
	e := &env{t: t, c: c, d: newDriver(t), image: dockertest.Image(t), node: "test-" + uuid.NewString()}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		found, err := e.d.Find(ctx, e.node)
		if err != nil {
			t.Errorf("cleanup: %v", err)
		}
		for _, f := range found {
			e.d.Remove(ctx, f.Process)
		}
	})
	return e
}

func newDriver(t *testing.T) *dockerdriver.Driver {
	t.Helper()
	d, err := dockerdriver.New(dockerdriver.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// task is a testapp task of this test's node with args for testapp.
func (e *env) task(args ...string) driver.Task {
	id := uuid.NewString()
	cfg := &spec.TaskConfig{Image: e.image}
	if len(args) > 0 {
		cfg.Command, cfg.Args = args[0], args[1:]
	}
	return driver.Task{
		ID:        driver.TaskID{NodeID: e.node, AllocID: id, AllocName: "j.g[0]", Job: "j", Group: "g", Task: "app"},
		Config:    cfg,
		Resources: spec.Resources{CPU: 100, MemoryMB: 64},
		Stdout:    &syncBuffer{}, Stderr: &syncBuffer{},
	}
}

func (e *env) start(task driver.Task) driver.Handle {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := e.d.Start(ctx, task)
	if err != nil {
		e.t.Fatalf("start: %v", err)
	}
	return h
}

func (e *env) gone(id string) bool {
	_, err := e.c.ContainerInspect(context.Background(), id, client.ContainerInspectOptions{})
	return cerrdefs.IsNotFound(err)
}

type containerIDer interface{ ContainerID() string }

// syncBuffer is a bytes.Buffer safe for the log copier and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitLog(t *testing.T, w io.Writer, s string) {
	t.Helper()
	b := w.(*syncBuffer)
	waitFor(t, 10*time.Second, "output "+strconv.Quote(s)+" (have "+strconv.Quote(b.String())+")", func() bool {
		return strings.Contains(b.String(), s)
	})
}

func get(t *testing.T, port int) string {
	t.Helper()
	var body string
	waitFor(t, 10*time.Second, "GET / on port "+strconv.Itoa(port), func() bool {
		resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return resp.StatusCode == http.StatusOK
	})
	return body
}

func TestStartServesPortAndStops(t *testing.T) {
	e := setup(t)
	port := testkit.FreePort(t)
	task := e.task()
	task.Ports = []spec.AllocPort{{Label: "http", Value: port, HostIP: "127.0.0.1", To: 8080}}
	task.Config.Ports = []string{"http"}
	// As the agent sets it (spec.TaskRuntime.Env): the container's port.
	task.Env = []string{"DROVER_PORT_http=8080"}
	h := e.start(task)
	id := h.(containerIDer).ContainerID()
	if h.PID() <= 0 {
		t.Errorf("PID = %d, want the container's main process", h.PID())
	}
	waitLog(t, task.Stdout, "testapp listening on :8080\n")
	waitLog(t, task.Stderr, "testapp stderr line\n")
	if body := get(t, port); !strings.HasPrefix(body, "ok ") {
		t.Errorf("GET / = %q, want ok <hostname>", body)
	}

	start := time.Now()
	exit, err := h.Stop(context.Background(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// testapp stops on SIGTERM at once: the grace is not waited out.
	if took := time.Since(start); took > 4*time.Second {
		t.Errorf("Stop took %s; testapp exits on SIGTERM at once", took)
	}
	if exit.Code != 0 || exit.OOMKilled || exit.Err != nil {
		t.Errorf("exit = %+v, want code 0", exit)
	}
	if !strings.Contains(task.Stdout.(*syncBuffer).String(), "testapp got terminated, stopping\n") {
		t.Errorf("stdout lacks the SIGTERM line:\n%s", task.Stdout)
	}
	if !e.gone(id) {
		t.Error("container not removed after Stop")
	}
}

func TestEnvReachesContainer(t *testing.T) {
	e := setup(t)
	port := testkit.FreePort(t)
	task := e.task()
	// testapp listens on $DROVER_PORT_http: the task's own env decides
	// where it listens, and "web" maps the host port there.
	task.Env = []string{"DROVER_PORT_http=8099"}
	task.Ports = []spec.AllocPort{{Label: "web", Value: port, HostIP: "127.0.0.1", To: 8099}}
	task.Config.Ports = []string{"web"}
	h := e.start(task)
	waitLog(t, task.Stdout, "testapp listening on :8099\n")
	get(t, port)
	if _, err := h.Stop(context.Background(), 5*time.Second); err != nil {
		t.Fatal(err)
	}
}

// TestStopWithoutGrace: no grace is SIGTERM and SIGKILL together (the
// daemon's stop with timeout 0). testapp handles SIGTERM, so which one
// ends it varies; what matters is that Stop does not wait.
func TestStopWithoutGrace(t *testing.T) {
	e := setup(t)
	task := e.task()
	h := e.start(task)
	waitLog(t, task.Stdout, "listening")
	start := time.Now()
	exit, err := h.Stop(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("Stop with no grace took %s", took)
	}
	if exit.Err != nil || (exit.Code != 0 && exit.Code != 137) {
		t.Errorf("exit = %+v, want code 0 (SIGTERM handled) or 137 (SIGKILL)", exit)
	}
}

func TestExitOnItsOwn(t *testing.T) {
	e := setup(t)
	task := e.task("-exit", "2")
	h := e.start(task)
	select {
	case exit := <-h.Wait():
		if exit.Code != 2 || exit.Err != nil || exit.OOMKilled {
			t.Errorf("exit = %+v, want code 2", exit)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no exit")
	}
	// The output is drained before the exit is reported.
	if got, want := task.Stdout.(*syncBuffer).String(), "testapp started on "; !strings.HasPrefix(got, want) {
		t.Errorf("stdout = %q, want %q...", got, want)
	}
	if !e.gone(h.(containerIDer).ContainerID()) {
		t.Error("container not removed after its exit was read")
	}
}

func TestOOMKilled(t *testing.T) {
	e := setup(t)
	info, err := e.c.Info(context.Background(), client.InfoOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !info.Info.MemoryLimit {
		t.Skip("docker: the daemon cannot limit memory here (no cgroup memory controller)")
	}
	task := e.task("-alloc-mb", "200")
	task.Resources.MemoryMB = 64
	h := e.start(task)
	select {
	case exit := <-h.Wait():
		if !exit.OOMKilled || exit.Code != 137 {
			t.Errorf("exit = %+v, want OOMKilled with code 137\nstdout:\n%s", exit, task.Stdout)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no exit: the memory limit was not enforced")
	}
}

func TestMissingImageIsNotRetried(t *testing.T) {
	e := setup(t)
	task := e.task()
	task.Config.Image = "drover-test/missing:none"
	start := time.Now()
	_, err := e.d.Start(context.Background(), task)
	if !errors.Is(err, driver.ErrNoRetry) {
		t.Fatalf("err = %v, want one wrapping driver.ErrNoRetry", err)
	}
	if !strings.Contains(err.Error(), "image drover-test/missing:none is not on this node and could not be pulled") {
		t.Errorf("err = %v, want it to name the image and say why", err)
	}
	t.Logf("failed after %s: %v", time.Since(start).Round(time.Millisecond), err)
}

// TestRefusals needs no daemon: every refusal comes before the driver
// talks to it.
func TestRefusals(t *testing.T) {
	t.Parallel()
	d := newDriver(t)
	base := func(mod func(*driver.Task)) driver.Task {
		t := driver.Task{ID: driver.TaskID{NodeID: "n", AllocID: "a", Task: "t"}, Config: &spec.TaskConfig{Image: "img"}}
		mod(&t)
		return t
	}
	for _, tc := range []struct {
		name string
		task driver.Task
		want string
	}{
		{"hook", base(func(t *driver.Task) { t.Hook = true }),
			"docker: prestart, stop and poststop commands are not supported by the docker driver (they would run outside the container); remove them from the task or use the exec driver"},
		{"no image", base(func(t *driver.Task) { t.Config.Image = "" }),
			`docker: the task has no image (config { image = "..." })`},
		{"privileged", base(func(t *driver.Task) { t.Config.Privileged = true }),
			"docker: privileged = true is not allowed on this node; start the agent with --docker-allow-privileged to allow it"},
		{"host network", base(func(t *driver.Task) { t.Config.NetworkMode = "host" }),
			`docker: network_mode = "host" is not allowed on this node; start the agent with --docker-allow-host-network to allow it`},
		{"host pid", base(func(t *driver.Task) { t.Config.PidMode = "host" }),
			`docker: pid_mode = "host" is not allowed on this node; start the agent with --docker-allow-host-pid to allow it`},
		{"volumes", base(func(t *driver.Task) { t.Config.Volumes = []string{"/etc:/host-etc:ro"} }),
			"docker: volumes (bind mounts of host paths) is not allowed on this node; start the agent with --docker-allow-volumes to allow it"},
		{"reserved label", base(func(t *driver.Task) { t.Config.Labels = map[string]string{"team": "a", "drover.job": "x"} }),
			`docker: label "drover.job": labels starting with "drover." are drover's own; rename it`},
		{"unknown port", base(func(t *driver.Task) { t.Config.Ports = []string{"http"} }),
			`docker: config ports: "http" is not a port of the group's network; declare it as network { port "http" { to = ... } }`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := d.Start(context.Background(), tc.task)
			if err == nil {
				t.Fatal("started; want a refusal")
			}
			if diff := cmp.Diff(tc.want, err.Error()); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAdoptAfterRestart(t *testing.T) {
	e := setup(t)
	port := testkit.FreePort(t)
	task := e.task()
	task.Ports = []spec.AllocPort{{Label: "http", Value: port, HostIP: "127.0.0.1", To: 8080}}
	task.Config.Ports = []string{"http"}
	h := e.start(task)
	id := h.(containerIDer).ContainerID()
	waitLog(t, task.Stdout, "listening")
	h.(driver.Detacher).Detach()

	// A new agent: a fresh driver value.
	d2 := newDriver(t)
	ctx := context.Background()
	found, err := d2.Find(ctx, e.node)
	if err != nil {
		t.Fatal(err)
	}
	want := []driver.Found{{Process: driver.Process{ID: id, PID: h.PID()}, AllocID: task.ID.AllocID, Task: "app"}}
	if diff := cmp.Diff(want, found, cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".StartTicks" }, cmp.Ignore())); diff != "" {
		t.Fatalf("Find (-want +got):\n%s", diff)
	}
	if found[0].StartTicks == 0 {
		t.Error("Find: no start time for a running container")
	}
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	h2, err := d2.Adopt(ctx, found[0].Process, stdout, stderr)
	if err != nil {
		t.Fatal(err)
	}
	get(t, port)
	exit, err := h2.Stop(ctx, 5*time.Second)
	if err != nil || exit.Code != 0 {
		t.Fatalf("Stop = %+v, %v; want code 0", exit, err)
	}
	// Only what came after the adoption: nothing repeated.
	if got, want := stdout.String(), "testapp got terminated, stopping\n"; got != want {
		t.Errorf("adopted stdout = %q, want %q", got, want)
	}
	if !e.gone(id) {
		t.Error("container not removed after Stop")
	}
	if _, err := d2.Adopt(ctx, found[0].Process, nil, nil); err == nil {
		t.Error("adopted a removed container")
	}
}

func TestFindExitedAndRemove(t *testing.T) {
	e := setup(t)
	task := e.task("-exit", "0")
	h := e.start(task)
	// Let go at once, as an agent going away does: the container exits
	// with nobody watching and stays.
	h.(driver.Detacher).Detach()
	id := h.(containerIDer).ContainerID()
	ctx := context.Background()
	var found []driver.Found
	waitFor(t, 10*time.Second, "the container to have exited", func() bool {
		var err error
		found, err = e.d.Find(ctx, e.node)
		return err == nil && len(found) == 1 && found[0].PID == 0
	})
	want := []driver.Found{{Process: driver.Process{ID: id}, AllocID: task.ID.AllocID, Task: "app"}}
	if diff := cmp.Diff(want, found); diff != "" {
		t.Errorf("Find (-want +got):\n%s", diff)
	}
	if _, err := e.d.Adopt(ctx, found[0].Process, nil, nil); err == nil || !strings.Contains(err.Error(), "not running (exit code 0)") {
		t.Errorf("Adopt of an exited container: %v, want not running", err)
	}
	if err := e.d.Remove(ctx, found[0].Process); err != nil {
		t.Fatal(err)
	}
	if !e.gone(id) {
		t.Error("Remove left the container")
	}
}

// A dockerd that shuts down while it starts a container can leave that
// container's root file system mounted under the daemon's own mount of its
// data root, where no unmount reaches it: every removal then fails ("device
// or resource busy") and the container is dead, for good. The task must
// still start (beside the dead one, which never runs again), and any other
// leftover of it must still go. The test makes such a container on a
// private daemon the way dockerd does: a mount on the container's root,
// then a bind mount of the daemon's data root over itself, which hides it.
func TestDeadLeftoverTheDaemonCannotRemoveDoesNotBlockTheTask(t *testing.T) {
	t.Parallel()
	pd := dockertest.StartDaemon(t)
	drv, err := dockerdriver.New(dockerdriver.Config{Host: pd.Host})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	e := &env{t: t, c: pd.Client, d: drv, image: dockertest.ImageIn(t, pd.Client), node: "test-" + uuid.NewString()}
	task := e.task("-listen", "127.0.0.1:8080")
	ctx := context.Background()
	labels := map[string]string{dockerdriver.LabelNodeID: e.node, dockerdriver.LabelAllocID: task.ID.AllocID, dockerdriver.LabelTask: task.ID.Task}
	stuck, err := e.c.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: dockerdriver.ContainerName(task.ID), Config: &container.Config{Image: e.image, Labels: labels},
	})
	if err != nil {
		t.Fatal(err)
	}
	// Another leftover of the task, removable: it must go.
	other, err := e.c.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: dockerdriver.ContainerName(task.ID) + "-other", Config: &container.Config{Image: e.image, Labels: labels},
	})
	if err != nil {
		t.Fatal(err)
	}
	ins, err := e.c.ContainerInspect(ctx, stuck.ID, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	merged := ins.Container.GraphDriver.Data["MergedDir"]
	if merged == "" {
		t.Fatalf("docker: the private daemon's storage driver %q names no MergedDir", ins.Container.GraphDriver.Name)
	}
	if err := os.MkdirAll(merged, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", merged, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mounting a tmpfs on the container's root %s: %v", merged, err)
	}
	info, err := e.c.Info(ctx, client.InfoOptions{})
	if err != nil {
		t.Fatal(err)
	}
	root := info.Info.DockerRootDir
	if !strings.HasPrefix(merged, root+"/") {
		t.Fatalf("the container's root %s is not below the daemon's %s", merged, root)
	}
	if err := syscall.Mount(root, root, "", syscall.MS_BIND, ""); err != nil {
		syscall.Unmount(merged, syscall.MNT_DETACH)
		t.Fatalf("bind-mounting %s over itself: %v", root, err)
	}
	t.Cleanup(func() {
		syscall.Unmount(root, syscall.MNT_DETACH)
		syscall.Unmount(merged, syscall.MNT_DETACH)
	})
	if _, err := e.c.ContainerRemove(ctx, stuck.ID, client.ContainerRemoveOptions{Force: true}); err == nil {
		t.Fatal("the daemon removed the container whose root is mounted out of its reach: the test shows nothing")
	} else {
		t.Logf("the daemon alone: %v", err)
	}

	h := e.start(task)
	defer h.Stop(ctx, time.Second)
	waitLog(t, task.Stdout, "listening")
	if !e.gone(other.ID) {
		t.Error("the removable leftover is still there")
	}
	res, err := e.c.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", dockerdriver.LabelAllocID+"="+task.ID.AllocID)})
	if err != nil {
		t.Fatal(err)
	}
	var live []string
	for _, c := range res.Items {
		if c.ID == stuck.ID {
			// Dead, or "removing" while a removal of it is in progress.
			if c.State != container.StateDead && c.State != container.StateRemoving {
				t.Errorf("the leftover the daemon cannot remove is %s, want dead", c.State)
			}
			ins, _ := e.c.ContainerInspect(ctx, stuck.ID, client.ContainerInspectOptions{})
			t.Logf("the dead leftover: %s, %+v", c.Status, *ins.Container.State)
			continue
		}
		live = append(live, fmt.Sprintf("%.12s %s %v", c.ID, c.State, c.Names))
		if c.ID != h.(containerIDer).ContainerID() || c.State != container.StateRunning {
			t.Errorf("container %.12s (%s) besides the task's own", c.ID, c.State)
		}
	}
	if len(live) != 1 {
		t.Errorf("containers of the alloc other than the dead one: %v, want the task's own, running", live)
	}
	// The dead one cannot be started: it never runs beside the task.
	if _, err := e.c.ContainerStart(ctx, stuck.ID, client.ContainerStartOptions{}); err == nil {
		t.Error("the daemon started the dead leftover")
	}
}

func TestLeftoverOfSameNameIsReplaced(t *testing.T) {
	e := setup(t)
	task := e.task()
	ctx := context.Background()
	// A leftover: a created container of the task's name, with its labels.
	old, err := e.c.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name:   dockerdriver.ContainerName(task.ID),
		Config: &container.Config{Image: e.image, Labels: map[string]string{dockerdriver.LabelNodeID: e.node}},
	})
	if err != nil {
		t.Fatal(err)
	}
	h := e.start(task)
	if !e.gone(old.ID) {
		t.Error("the leftover container is still there")
	}
	found, err := e.d.Find(ctx, e.node)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || found[0].ID != h.(containerIDer).ContainerID() {
		t.Errorf("Find = %+v, want only the new container", found)
	}
}

func TestExecAndUsage(t *testing.T) {
	e := setup(t)
	task := e.task()
	h := e.start(task)
	waitLog(t, task.Stdout, "listening")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	code, out, err := h.(driver.Execer).Exec(ctx, []string{"/testapp", "-exit", "3"})
	if err != nil {
		t.Fatal(err)
	}
	if code != 3 || !strings.Contains(string(out), "testapp started on ") || !strings.Contains(string(out), "testapp stderr line\n") {
		t.Errorf("Exec = %d, %q; want 3 and both output lines", code, out)
	}
	// A missing program is an error or a failing code (126/127), by
	// daemon version; never a success.
	if c, _, err := h.(driver.Execer).Exec(ctx, []string{"/no/such/program"}); err == nil && c == 0 {
		t.Error("Exec of a missing program succeeded")
	}
	u, err := h.(driver.Measurer).Usage(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if u.MemoryBytes == 0 || u.MemoryBytes > 64<<20 || u.CPU <= 0 {
		t.Errorf("Usage = %+v, want some memory under the 64 MB limit and some CPU", u)
	}
}

// A container has its image's file system: the agent gives it none of the
// node's paths.
func TestInfoSaysOwnFilesystem(t *testing.T) {
	if !newDriver(t).Info().OwnFilesystem {
		t.Fatal("docker's Info().OwnFilesystem is false")
	}
}

// TestMemoryMaxAndSignal: memory_max is the container's memory limit and
// the reserved memory its reservation; Signal reaches the container's
// process (testapp stops on SIGINT, saying so).
func TestMemoryMaxAndSignal(t *testing.T) {
	e := setup(t)
	task := e.task()
	task.Resources.MemoryMB, task.Resources.MemoryMaxMB = 64, 128
	h := e.start(task)
	id := h.(containerIDer).ContainerID()
	in, err := e.c.ContainerInspect(context.Background(), id, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if hc := in.Container.HostConfig; hc.Memory != 128<<20 || hc.MemoryReservation != 64<<20 {
		t.Errorf("memory %d, reservation %d; want %d and %d", hc.Memory, hc.MemoryReservation, 128<<20, 64<<20)
	}
	waitLog(t, task.Stdout, "testapp listening")
	if err := h.(driver.Signaler).Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case exit := <-h.Wait():
		if !strings.Contains(task.Stdout.(*syncBuffer).String(), "testapp got interrupt") {
			t.Errorf("exit %+v without testapp saying it got SIGINT:\n%s", exit, task.Stdout)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no exit after SIGINT")
	}
}

// TestMemoryMaxUnlimited: memory_max = -1 gives the container no memory
// limit (docker's Memory 0) and the reserved memory as its reservation,
// read back through the docker API and from the kernel's cgroup files of
// the container's process.
func TestMemoryMaxUnlimited(t *testing.T) {
	e := setup(t)
	task := e.task()
	task.Resources.MemoryMB, task.Resources.MemoryMaxMB = 64, spec.MemoryMaxUnlimited
	h := e.start(task)
	id := h.(containerIDer).ContainerID()
	in, err := e.c.ContainerInspect(context.Background(), id, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hc := in.Container.HostConfig
	if hc.Memory != 0 || hc.MemoryReservation != 64<<20 || hc.MemorySwap > 0 {
		t.Errorf("memory %d, reservation %d, memory+swap %d; want 0 (no limit), %d and no swap limit", hc.Memory, hc.MemoryReservation, hc.MemorySwap, 64<<20)
	}
	// The kernel's view, where this process can see the container's
	// cgroup (cgroup v1, docker's cgroupfs driver).
	pid := in.Container.State.Pid
	cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(cg), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || !slices.Contains(strings.Split(parts[1], ","), "memory") {
			continue
		}
		dir := filepath.Join("/sys/fs/cgroup/memory", parts[2])
		limit, err := os.ReadFile(filepath.Join(dir, "memory.limit_in_bytes"))
		if err != nil {
			t.Logf("the container's cgroup is not visible here (%v): the docker API's word only", err)
			break
		}
		if n, _ := strconv.ParseInt(strings.TrimSpace(string(limit)), 10, 64); n < 1<<62 {
			t.Errorf("%s/memory.limit_in_bytes = %d, want no limit", dir, n)
		}
		soft, _ := os.ReadFile(filepath.Join(dir, "memory.soft_limit_in_bytes"))
		if got := strings.TrimSpace(string(soft)); got != strconv.Itoa(64<<20) {
			t.Errorf("%s/memory.soft_limit_in_bytes = %s, want %d", dir, got, 64<<20)
		}
	}
}
