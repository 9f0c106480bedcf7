// Package dockerdriver runs tasks as Docker containers through the Docker
// Engine API. Containers outlive the agent: each is labelled with the node,
// alloc and task it belongs to (drover.*), so that a restarted agent finds
// them (Find), takes them over (Adopt) or removes them (Remove). Docker's
// own restart policy is off: drover restarts tasks itself.
package dockerdriver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/google/uuid"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/drover-org/drover/internal/driver"
	"github.com/drover-org/drover/internal/spec"
)

// Config is what an agent allows containers, and where the daemon is.
type Config struct {
	// Host is the daemon's address ("unix:///var/run/docker.sock"); ""
	// takes DOCKER_HOST, else the default socket.
	Host string
	// Each of these reaches past the container; a task asking for one is
	// refused unless the agent allows it (--docker-allow-*).
	AllowPrivileged, AllowHostNetwork, AllowHostPID, AllowVolumes bool
}

// Driver starts tasks as containers.
type Driver struct {
	cfg Config
	c   *client.Client
}

var (
	_ driver.Driver  = (*Driver)(nil)
	_ driver.Adopter = (*Driver)(nil)
	_ driver.Finder  = (*Driver)(nil)
)

// Label names on every container the driver creates.
const (
	labelPrefix    = "drover."
	LabelNodeID    = "drover.node_id"
	LabelAllocID   = "drover.alloc_id"
	LabelAllocName = "drover.alloc_name"
	LabelJob       = "drover.job"
	LabelGroup     = "drover.group"
	LabelTask      = "drover.task"
)

// New returns a driver talking to the daemon at cfg.Host. It does not
// contact the daemon; Ping does.
func New(cfg Config) (*Driver, error) {
	opts := []client.Opt{client.FromEnv}
	if cfg.Host != "" {
		opts = append(opts, client.WithHost(cfg.Host))
	}
	c, err := client.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("docker: %w", err)
	}
	return &Driver{cfg: cfg, c: c}, nil
}

// Ping reports whether the daemon answers, and settles the API version.
func (d *Driver) Ping(ctx context.Context) error {
	if _, err := d.c.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		return fmt.Errorf("docker daemon: %w", err)
	}
	return nil
}

// Close releases the client's connections.
func (d *Driver) Close() error { return d.c.Close() }

// Name returns "docker".
func (d *Driver) Name() string { return "docker" }

// Info: a container has the file system of its image.
func (d *Driver) Info() driver.Info { return driver.Info{OwnFilesystem: true, OwnNetwork: true} }

// ContainerName is the name of task t's container: one per task of an
// alloc, so that a leftover can never run beside a new start (a dead one
// the daemon cannot remove excepted: see clearLeftovers).
func ContainerName(id driver.TaskID) string {
	return "drover-" + id.Task + "-" + id.AllocID
}

// Start creates and starts t's container and follows its output.
func (d *Driver) Start(ctx context.Context, t driver.Task) (driver.Handle, error) {
	if t.Hook {
		return nil, errors.New("docker: prestart, stop and poststop commands are not supported by the docker driver (they would run outside the container); remove them from the task or use the exec driver")
	}
	cfg := t.Config
	if cfg == nil || cfg.Image == "" {
		return nil, errors.New("docker: the task has no image (config { image = \"...\" })")
	}
	if err := d.checkPolicy(cfg); err != nil {
		return nil, err
	}
	labels, err := containerLabels(t.ID, cfg.Labels)
	if err != nil {
		return nil, err
	}
	ports, bindings, err := portMap(cfg.Ports, cfg.PortMap, t.Ports)
	if err != nil {
		return nil, err
	}
	mounts, err := dockerMounts(cfg.Mounts, t.Mounts)
	if err != nil {
		return nil, err
	}
	ulimits, err := ulimitsOf(cfg.Ulimit)
	if err != nil {
		return nil, err
	}
	if err := d.ensureImage(ctx, cfg.Image, cfg.ForcePull, time.Duration(cmp.Or(cfg.ImagePullTimeout, spec.DefaultImagePullTimeout))); err != nil {
		return nil, err
	}

	dns, err := dnsServers(cfg.DNSServers)
	if err != nil {
		return nil, err
	}

	ccfg := &container.Config{
		Hostname:     cfg.Hostname,
		Image:        cfg.Image,
		Env:          t.Env,
		Entrypoint:   cfg.Entrypoint,
		User:         cfg.User,
		Labels:       labels,
		ExposedPorts: ports,
	}
	// As Nomad: command and args replace the image's CMD; args alone are
	// the arguments of the image's entrypoint.
	if cfg.Command != "" {
		ccfg.Cmd = append([]string{cfg.Command}, cfg.Args...)
	} else if len(cfg.Args) > 0 {
		ccfg.Cmd = cfg.Args
	}
	// A relative work_dir means "in the task's directory" for the other
	// drivers, a host path the container does not have: the image's
	// working directory applies instead.
	if path.IsAbs(cfg.WorkDir) {
		ccfg.WorkingDir = cfg.WorkDir
	}
	hcfg := &container.HostConfig{
		PortBindings:   bindings,
		RestartPolicy:  container.RestartPolicy{Name: container.RestartPolicyDisabled},
		Privileged:     cfg.Privileged,
		NetworkMode:    container.NetworkMode(cfg.NetworkMode),
		PidMode:        container.PidMode(cfg.PidMode),
		Binds:          binds(t.Mounts, cfg.Volumes),
		Mounts:         mounts,
		CapAdd:         cfg.CapAdd,
		CapDrop:        cfg.CapDrop,
		Sysctls:        cfg.Sysctl,
		DNS:            dns,
		DNSSearch:      cfg.DNSSearchDomains,
		DNSOptions:     cfg.DNSOptions,
		ExtraHosts:     cfg.ExtraHosts,
		ReadonlyRootfs: cfg.ReadonlyRootfs,
		ShmSize:        cfg.ShmSize,
	}
	if cfg.Init {
		hcfg.Init = &cfg.Init
	}
	hcfg.Ulimits = ulimits
	// memory_max is the hard limit (none when -1: docker's Memory 0); the
	// reserved memory a soft one (--memory-reservation).
	hcfg.Memory = int64(t.Resources.MemoryLimitMB()) << 20
	hcfg.MemoryReservation = int64(t.Resources.MemorySoftLimitMB()) << 20
	if hcfg.Memory > 0 {
		// Without a swap limit the memory limit would only push the task
		// into swap: memory+swap equal to memory means no swap.
		hcfg.MemorySwap = hcfg.Memory
	}
	hcfg.CPUShares = int64(t.Resources.CPU)
	if hcfg.CPUShares == 1 {
		hcfg.CPUShares = 2 // the kernel's minimum; docker refuses 1
	}

	name, err := d.clearLeftovers(ctx, t.ID)
	if err != nil {
		return nil, err
	}
	created, err := d.create(ctx, client.ContainerCreateOptions{Name: name, Config: ccfg, HostConfig: hcfg})
	if err != nil {
		return nil, fmt.Errorf("docker: create container %s: %w", name, err)
	}
	if _, err := d.c.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		d.remove(created.ID)
		return nil, fmt.Errorf("docker: start container %s (image %s): %w", name, cfg.Image, err)
	}
	ins, err := d.c.ContainerInspect(ctx, created.ID, client.ContainerInspectOptions{})
	if err != nil {
		d.remove(created.ID)
		return nil, fmt.Errorf("docker: inspect container %s: %w", name, err)
	}
	return d.follow(created.ID, ins.Container.State.Pid, "", t.Stdout, t.Stderr), nil
}

// clearLeftovers removes every container of task id left from before (a
// start that crashed half way, or one the agent lost track of): none may
// run beside the new one. It returns the name the new container takes:
// ContainerName, or, when a dead leftover the daemon cannot remove holds
// that name, the name with a suffix.
//
// A dead container never runs again (the daemon refuses to start one), so
// it is left beside the new one. dockerd makes such containers: one whose
// start it abandoned as it shut down can keep its root file system
// mounted under the daemon's own mount of its data root, where no
// unmount reaches it, and every removal then fails with "device or
// resource busy" until the machine restarts. Any other leftover that
// cannot be removed fails the start, as it might run.
func (d *Driver) clearLeftovers(ctx context.Context, id driver.TaskID) (string, error) {
	name := ContainerName(id)
	list, err := d.c.ContainerList(ctx, client.ContainerListOptions{
		All: true, Filters: make(client.Filters).Add("label", LabelAllocID+"="+id.AllocID).Add("label", LabelTask+"="+id.Task),
	})
	if err != nil {
		return "", fmt.Errorf("docker: looking for leftover containers of task %s: %w", id.Task, err)
	}
	taken := false
	for _, c := range list.Items {
		err := d.removeCtx(ctx, c.ID)
		if err == nil {
			continue
		}
		ins, ierr := d.c.ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{})
		if ierr != nil || ins.Container.State == nil || !ins.Container.State.Dead || ins.Container.State.Running || ins.Container.State.Pid != 0 {
			return "", fmt.Errorf("docker: removing leftover container %.12s of task %s: %w", c.ID, id.Task, err)
		}
		if strings.TrimPrefix(ins.Container.Name, "/") == name {
			taken = true
		}
	}
	if taken {
		name += "-" + uuid.NewString()[:8]
	}
	return name, nil
}

// create creates the container; a container of its name that lacks the
// labels (made by hand) is a leftover too, removed and the create tried
// once more.
func (d *Driver) create(ctx context.Context, opts client.ContainerCreateOptions) (client.ContainerCreateResult, error) {
	created, err := d.c.ContainerCreate(ctx, opts)
	if !cerrdefs.IsConflict(err) {
		return created, err
	}
	if rerr := d.removeCtx(ctx, opts.Name); rerr != nil {
		return created, fmt.Errorf("%w (removing the container of that name: %v)", err, rerr)
	}
	return d.c.ContainerCreate(ctx, opts)
}

// checkPolicy refuses what reaches past the container unless the agent
// allows it, naming the flag that would.
func (d *Driver) checkPolicy(cfg *spec.TaskConfig) error {
	refuse := func(what, flag string) error {
		return fmt.Errorf("docker: %s is not allowed on this node; start the agent with %s to allow it", what, flag)
	}
	switch {
	case cfg.Privileged && !d.cfg.AllowPrivileged:
		return refuse("privileged = true", "--docker-allow-privileged")
	case cfg.NetworkMode == "host" && !d.cfg.AllowHostNetwork:
		return refuse(`network_mode = "host"`, "--docker-allow-host-network")
	case cfg.PidMode == "host" && !d.cfg.AllowHostPID:
		return refuse(`pid_mode = "host"`, "--docker-allow-host-pid")
	case len(cfg.Volumes) > 0 && !d.cfg.AllowVolumes:
		return refuse("volumes (bind mounts of host paths)", "--docker-allow-volumes")
	case len(spec.BeyondDefaultCaps(cfg.CapAdd)) > 0 && !d.cfg.AllowPrivileged:
		return refuse(fmt.Sprintf("cap_add of %s (beyond docker's default capabilities)", strings.Join(spec.BeyondDefaultCaps(cfg.CapAdd), ", ")), "--docker-allow-privileged")
	}
	for _, m := range cfg.Mounts {
		if m.TypeOf() != spec.MountTmpfs && !d.cfg.AllowVolumes {
			return refuse(fmt.Sprintf("a %s mount (of %s)", m.TypeOf(), m.Source), "--docker-allow-volumes")
		}
	}
	return nil
}

// dockerMounts are the task's mount blocks as docker's; a relative bind
// source is in the task's directory (the parent of its local/, which
// taskDirs mounts at /local).
func dockerMounts(ms []*spec.DockerMount, taskDirs []driver.Mount) ([]mount.Mount, error) {
	var out []mount.Mount
	for _, m := range ms {
		if m == nil {
			continue
		}
		dm := mount.Mount{Type: mount.Type(m.TypeOf()), Source: m.Source, Target: m.Target, ReadOnly: m.ReadOnly}
		if m.TypeOf() == spec.MountBind && !filepath.IsAbs(m.Source) {
			i := slices.IndexFunc(taskDirs, func(d driver.Mount) bool { return d.Task == "/local" })
			if i < 0 {
				return nil, fmt.Errorf("docker: mount of %q: a relative source is in the task's directory, which this start has none of; use an absolute path", m.Source)
			}
			dm.Source = filepath.Join(filepath.Dir(taskDirs[i].Host), m.Source)
		}
		out = append(out, dm)
	}
	return out, nil
}

// dnsServers reads the task's dns_servers as addresses.
func dnsServers(servers []string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, v := range servers {
		a, err := netip.ParseAddr(v)
		if err != nil {
			return nil, fmt.Errorf("docker: dns server %q is not an IP address", v)
		}
		out = append(out, a)
	}
	return out, nil
}

// ulimitsOf reads the task's ulimit map, by name.
func ulimitsOf(limits map[string]string) ([]*container.Ulimit, error) {
	var out []*container.Ulimit
	for _, name := range slices.Sorted(maps.Keys(limits)) {
		soft, hard, err := spec.ParseUlimit(limits[name])
		if err != nil {
			return nil, fmt.Errorf("docker: ulimit %s = %q %v", name, limits[name], err)
		}
		out = append(out, &container.Ulimit{Name: name, Soft: soft, Hard: hard})
	}
	return out, nil
}

// containerLabels are drover's labels plus the job's own.
func containerLabels(id driver.TaskID, user map[string]string) (map[string]string, error) {
	labels := map[string]string{
		LabelNodeID: id.NodeID, LabelAllocID: id.AllocID, LabelAllocName: id.AllocName,
		LabelJob: id.Job, LabelGroup: id.Group, LabelTask: id.Task,
	}
	keys := make([]string, 0, len(user))
	for k := range user {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if strings.HasPrefix(k, labelPrefix) {
			return nil, fmt.Errorf("docker: label %q: labels starting with %q are drover's own; rename it", k, labelPrefix)
		}
		labels[k] = user[k]
	}
	return labels, nil
}

// binds are the task's directories and host volumes mounted where it
// expects them (read-only ones with :ro), then the job's volumes.
func binds(mounts []driver.Mount, volumes []string) []string {
	out := make([]string, 0, len(mounts)+len(volumes))
	for _, m := range mounts {
		b := m.Host + ":" + m.Task
		if m.ReadOnly {
			b += ":ro"
		}
		out = append(out, b)
	}
	return append(out, volumes...)
}

// portMap maps each port label the task names to its alloc port: host
// HostIP:Value to container port To (Value when To is 0), TCP and UDP.
// The task's environment says the same (spec.TaskRuntime.Env).
//
// portMapped, Nomad's port_map, maps its labels too, each to the
// container port it gives.
func portMap(labels []string, portMapped map[string]string, ports []spec.AllocPort) (network.PortSet, network.PortMap, error) {
	for _, l := range slices.Sorted(maps.Keys(portMapped)) {
		if !slices.Contains(labels, l) {
			labels = append(slices.Clip(labels), l)
		}
	}
	if len(labels) == 0 {
		return nil, nil, nil
	}
	set := network.PortSet{}
	m := network.PortMap{}
	for _, label := range labels {
		var ap *spec.AllocPort
		for i := range ports {
			if ports[i].Label == label {
				ap = &ports[i]
			}
		}
		if ap == nil {
			return nil, nil, fmt.Errorf("docker: config ports: %q is not a port of the group's network; declare it as network { port %q { to = ... } }", label, label)
		}
		to := ap.To
		if to == 0 {
			to = ap.Value
		}
		if v, ok := portMapped[label]; ok {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 65535 {
				return nil, nil, fmt.Errorf("docker: port_map %s = %q is not a port number", label, v)
			}
			to = n
		}
		b := network.PortBinding{HostPort: strconv.Itoa(ap.Value)}
		if ap.HostIP != "" {
			ip, err := netip.ParseAddr(ap.HostIP)
			if err != nil {
				return nil, nil, fmt.Errorf("docker: port %q: host IP %q: %w", label, ap.HostIP, err)
			}
			b.HostIP = ip
		}
		for _, proto := range []network.IPProtocol{network.TCP, network.UDP} {
			p, _ := network.PortFrom(uint16(to), proto)
			set[p] = struct{}{}
			m[p] = append(m[p], b)
		}
	}
	return set, m, nil
}

// ensureImage makes sure image is on the node, pulling it if not. A pull
// that fails is not retried by the task's restart policy (ErrNoRetry): an
// image that is not there now will not be there in a few seconds either,
// and each retry would hit the registry again.
//
// force pulls it even when the node has it (force_pull); timeout bounds
// the pull (image_pull_timeout).
func (d *Driver) ensureImage(ctx context.Context, image string, force bool, timeout time.Duration) error {
	if !force {
		_, err := d.c.ImageInspect(ctx, image)
		if err == nil {
			return nil
		}
		if !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("docker: image %s: %w", image, err)
		}
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := d.c.ImagePull(pctx, image, client.ImagePullOptions{})
	if err == nil {
		err = resp.Wait(pctx)
		resp.Close()
	}
	switch {
	case err != nil && pctx.Err() == context.DeadlineExceeded && ctx.Err() == nil:
		return fmt.Errorf("docker: pulling image %s took longer than image_pull_timeout %s: %w", image, timeout, driver.ErrNoRetry)
	case err != nil && force:
		return fmt.Errorf("docker: image %s could not be pulled, and force_pull asks for a pull at every start (%v): %w", image, err, driver.ErrNoRetry)
	case err != nil:
		return fmt.Errorf("docker: image %s is not on this node and could not be pulled (%v): %w", image, err, driver.ErrNoRetry)
	}
	return nil
}

// remove force-removes a container, with a bound of its own: it runs
// after the caller's context may have ended.
func (d *Driver) remove(id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return d.removeCtx(ctx, id)
}

func (d *Driver) removeCtx(ctx context.Context, id string) error {
	_, err := d.c.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	return err
}

// follow returns the handle of running container id, copying its output
// (from since, "" for all of it) to stdout and stderr.
func (d *Driver) follow(id string, pid int, since string, stdout, stderr io.Writer) *handle {
	ctx, cancel := context.WithCancel(context.Background())
	h := &handle{
		d: d, id: id, pid: pid, ctx: ctx, detach: cancel,
		logsDone: make(chan struct{}), exited: make(chan struct{}), wait: make(chan driver.Exit, 1),
	}
	go h.copyLogs(since, orDiscard(stdout), orDiscard(stderr))
	go h.waitLoop()
	return h
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// copyLogs follows the container's output until it exits or the handle is
// detached.
func (h *handle) copyLogs(since string, stdout, stderr io.Writer) {
	defer close(h.logsDone)
	rc, err := h.d.c.ContainerLogs(h.ctx, h.id, client.ContainerLogsOptions{
		ShowStdout: true, ShowStderr: true, Follow: true, Since: since,
	})
	if err != nil {
		return
	}
	defer rc.Close()
	stdcopy.StdCopy(stdout, stderr, rc)
}
