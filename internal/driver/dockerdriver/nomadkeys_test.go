package dockerdriver_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/moby/moby/client"

	"github.com/drover-org/drover/internal/driver"
	"github.com/drover-org/drover/internal/driver/dockerdriver"
	"github.com/drover-org/drover/internal/spec"
	"github.com/drover-org/drover/internal/testkit"
)

// allowing returns a driver whose agent allows volumes and, with
// privileged, privileged containers.
func allowing(t *testing.T, privileged bool) *dockerdriver.Driver {
	t.Helper()
	d, err := dockerdriver.New(dockerdriver.Config{AllowVolumes: true, AllowPrivileged: privileged})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// report runs task (testapp -report -exit 0 with args) on d and returns
// its output once it exited 0.
func (e *env) report(d *dockerdriver.Driver, task driver.Task) string {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := d.Start(ctx, task)
	if err != nil {
		e.t.Fatalf("start: %v", err)
	}
	select {
	case exit := <-h.Wait():
		if exit.Code != 0 || exit.Err != nil {
			e.t.Fatalf("exit %+v\n%s", exit, task.Stdout)
		}
	case <-ctx.Done():
		e.t.Fatal("no exit")
	}
	return task.Stdout.(*syncBuffer).String()
}

func wantLines(t *testing.T, out string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if !strings.Contains(out, l) {
			t.Errorf("output lacks %q:\n%s", l, out)
		}
	}
}

// TestNomadDockerKeysReachContainer: Nomad's mount (tmpfs, bind with an
// absolute and a task-relative source, read-only), ulimit and sysctl
// blocks are what the container sees.
func TestNomadDockerKeysReachContainer(t *testing.T) {
	e := setup(t)
	d := allowing(t, false)
	dir := t.TempDir()
	for _, sub := range []string{"local", "data", "ro"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	task := e.task("-report", "-exit", "0", "-dirs", "/scratch,/rel,/ro",
		"-files", "/proc/self/limits,/proc/sys/net/core/somaxconn")
	task.Mounts = []driver.Mount{{Host: filepath.Join(dir, "local"), Task: "/local"}}
	task.Config.Mounts = []*spec.DockerMount{
		{Type: "tmpfs", Target: "/scratch"},
		{Source: "data", Target: "/rel"}, // bind, in the task's directory
		{Type: "bind", Source: filepath.Join(dir, "ro"), Target: "/ro", ReadOnly: true},
	}
	task.Config.Ulimit = map[string]string{"nproc": "1234:2345", "nofile": "3000"}
	task.Config.Sysctl = map[string]string{"net.core.somaxconn": "1234"}
	out := e.report(d, task)
	wantLines(t, out, "dir /scratch: ok", "dir /rel: ok", "file /proc/sys/net/core/somaxconn: 1234")
	if !strings.Contains(out, "dir /ro: ") || strings.Contains(out, "dir /ro: ok") {
		t.Errorf("a read-only bind mount was writable:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "probe")); err != nil {
		t.Errorf("the relative bind source is not the task directory's data/: %v", err)
	}
	// Go's runtime raises its own soft nofile limit, so only nofile's
	// hard limit shows as written.
	flat := strings.Join(strings.Fields(out), " ")
	if !strings.Contains(flat, "Max processes 1234 2345 processes") || !strings.Contains(flat, " 3000 files") {
		t.Errorf("ulimit nproc and nofile not applied:\n%s", out)
	}
}

// TestNomadDockerCapabilities: cap_drop takes capabilities away, cap_add
// of one beyond docker's defaults gives it where the agent allows
// privileged containers, and is refused where it does not.
func TestNomadDockerCapabilities(t *testing.T) {
	e := setup(t)
	capEff := func(d *dockerdriver.Driver, task driver.Task) uint64 {
		t.Helper()
		task.Config.Command, task.Config.Args = "-report", []string{"-exit", "0", "-files", "/proc/self/status"}
		out := e.report(d, task)
		for line := range strings.Lines(out) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "file /proc/self/status: CapEff:"); ok {
				n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
		}
		t.Fatalf("no CapEff line:\n%s", out)
		return 0
	}
	const netAdmin = 1 << 12 // CAP_NET_ADMIN
	plain := capEff(e.d, e.task())
	if plain == 0 || plain&netAdmin != 0 {
		t.Fatalf("a default container's capabilities are %#x", plain)
	}
	dropped := e.task()
	dropped.Config.CapDrop = []string{"ALL"}
	if c := capEff(e.d, dropped); c != 0 {
		t.Errorf("cap_drop = [\"ALL\"] left %#x", c)
	}
	added := e.task()
	added.Config.CapAdd = []string{"NET_ADMIN"}
	if _, err := e.d.Start(context.Background(), added); err == nil ||
		err.Error() != "docker: cap_add of NET_ADMIN (beyond docker's default capabilities) is not allowed on this node; start the agent with --docker-allow-privileged to allow it" {
		t.Errorf("cap_add NET_ADMIN on an agent that does not allow it: %v", err)
	}
	if c := capEff(allowing(t, true), added); c != plain|netAdmin {
		t.Errorf("cap_add NET_ADMIN gave %#x, want %#x", c, plain|netAdmin)
	}
}

// TestNomadDockerPortMap: port_map maps a group port into the container
// at the port it gives, without ports naming it.
func TestNomadDockerPortMap(t *testing.T) {
	e := setup(t)
	port := testkit.FreePort(t)
	task := e.task()
	task.Env = []string{"DROVER_PORT_http=8099"}
	task.Ports = []spec.AllocPort{{Label: "web", Value: port, HostIP: "127.0.0.1"}}
	task.Config.PortMap = map[string]string{"web": "8099"}
	h := e.start(task)
	waitLog(t, task.Stdout, "testapp listening on :8099\n")
	get(t, port)
	if _, err := h.Stop(context.Background(), 5*time.Second); err != nil {
		t.Fatal(err)
	}
}

// TestNomadDockerPulls: force_pull pulls an image the node has (here
// from a registry on loopback that is not there, so the start fails and
// says why); image_pull_timeout bounds a pull from a registry that never
// answers. Nothing leaves the machine.
func TestNomadDockerPulls(t *testing.T) {
	e := setup(t)
	closed := testkit.FreePort(t)
	local := "127.0.0.1:" + strconv.Itoa(closed) + "/drover-forcepull:" + uuid.NewString()[:8]
	ctx := context.Background()
	if _, err := e.c.ImageTag(ctx, client.ImageTagOptions{Source: e.image, Target: local}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.c.ImageRemove(context.Background(), local, client.ImageRemoveOptions{}) })

	task := e.task("-exit", "0")
	task.Config.Image = local
	e.report(e.d, task) // on the node: no pull
	task = e.task("-exit", "0")
	task.Config.Image, task.Config.ForcePull = local, true
	_, err := e.d.Start(ctx, task)
	if !errors.Is(err, driver.ErrNoRetry) || !strings.Contains(err.Error(), "could not be pulled, and force_pull asks for a pull at every start") {
		t.Errorf("force_pull from a registry that is not there: %v", err)
	}

	// A registry that takes the connection and never answers.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	task = e.task("-exit", "0")
	task.Config.Image = l.Addr().String() + "/drover-silent:x"
	task.Config.ImagePullTimeout = spec.Duration(time.Second)
	start := time.Now()
	_, err = e.d.Start(ctx, task)
	if err == nil || !strings.Contains(err.Error(), "took longer than image_pull_timeout 1s") {
		t.Errorf("pull from a silent registry: %v", err)
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("the pull took %s despite image_pull_timeout 1s", took)
	}
}

// TestNomadDockerNamesAndResolver: hostname, dns_servers,
// dns_search_domains, dns_options, extra_hosts, readonly_rootfs,
// shm_size and init are what the container's own files say.
func TestNomadDockerNamesAndResolver(t *testing.T) {
	e := setup(t)
	task := e.task("-report", "-exit", "0", "-dirs", "/",
		"-files", "/etc/hostname,/etc/resolv.conf,/etc/hosts,/proc/mounts")
	c := task.Config
	c.Hostname = "web-7"
	c.DNSServers = []string{"10.9.8.7", "10.9.8.6"}
	c.DNSSearchDomains = []string{"svc.internal"}
	c.DNSOptions = []string{"ndots:3"}
	c.ExtraHosts = []string{"db.internal:10.0.0.5"}
	c.ReadonlyRootfs = true
	c.ShmSize = 32 << 20
	out := e.report(e.d, task)
	wantLines(t, out, "file /etc/hostname: web-7", "nameserver 10.9.8.7", "nameserver 10.9.8.6",
		"search svc.internal", "options ndots:3", "db.internal", "size=32768k")
	if !strings.Contains(out, "10.0.0.5\tdb.internal") {
		t.Errorf("/etc/hosts lacks the extra host:\n%s", out)
	}
	if !strings.Contains(out, "dir /: ") || strings.Contains(out, "dir /: ok") {
		t.Errorf("readonly_rootfs: the image's file system was writable:\n%s", out)
	}
	// And without them, the container's own defaults.
	plain := e.report(e.d, e.task("-report", "-exit", "0", "-dirs", "/", "-files", "/etc/hostname,/proc/mounts,/proc/1/cmdline"))
	if strings.Contains(plain, "web-7") || strings.Contains(plain, "size=32768k") || !strings.Contains(plain, "dir /: ok") || strings.Contains(plain, "docker-init") {
		t.Errorf("a container without the keys:\n%s", plain)
	}
	// init: docker's init is the container's first process, the task
	// its child.
	withInit := e.task("-report", "-exit", "0", "-files", "/proc/1/cmdline")
	withInit.Config.Init = true
	if out := e.report(e.d, withInit); !strings.Contains(out, "docker-init") {
		t.Errorf("init = true: the first process is not docker's init:\n%s", out)
	}
}
