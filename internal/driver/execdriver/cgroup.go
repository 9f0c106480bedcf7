package execdriver

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/manager"
	"golang.org/x/sys/unix"

	"github.com/drover-org/drover/internal/driver"
	"github.com/drover-org/drover/internal/spec"
)

// Isolation values, as the node attribute driver.exec.isolation shows them.
const (
	IsolationV1   = "cgroup-v1"
	IsolationV2   = "cgroup-v2"
	IsolationNone = "none"
)

// cgroupDirName is the directory under which the exec driver makes its
// tasks' cgroups: one per task, named by alloc and task (taskCgroupName), so
// that a later agent finds an adopted task's cgroup again from the path
// /proc/PID/cgroup shows.
const cgroupDirName = "drover"

// v1Controllers are the cgroup v1 hierarchies a task joins: memory for its
// limit and OOM count, cpu for its shares, cpuacct for its CPU time. The
// others (devices, freezer, pids...) are left alone: joining them would
// only add failure modes.
var v1Controllers = []string{"memory", "cpu", "cpuacct"}

// cgroupSetup is where this agent makes task cgroups, found once when the
// driver is made.
type cgroupSetup struct {
	v2 bool
	// parents: v1, each controller's drover directory under the agent's
	// own cgroup; v2, "" -> the drover directory under the unified root.
	parents map[string]string
	// swap: v1 with swap accounting, where the memory+swap limit is set
	// to the memory limit so that a task cannot grow into swap instead of
	// being OOM-killed (v2 sets memory.swap.max, ignored without swap).
	swap bool
}

// probeCgroups finds where task cgroups go and checks that it can make
// them there, or says why not.
func probeCgroups() (*cgroupSetup, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the agent does not run as root")
	}
	s := &cgroupSetup{parents: map[string]string{}}
	if cgroups.IsCgroup2UnifiedMode() {
		// Under the unified root, not under the agent's own cgroup: v2's
		// "no internal processes" rule forbids enabling the memory and
		// cpu controllers below a cgroup that holds a process (the agent).
		s.v2 = true
		s.parents[""] = filepath.Join("/sys/fs/cgroup", cgroupDirName)
	} else {
		for _, c := range v1Controllers {
			own, err := cgroups.GetOwnCgroupPath(c)
			if err != nil {
				return nil, fmt.Errorf("cgroup v1 controller %s: %w", c, err)
			}
			s.parents[c] = filepath.Join(own, cgroupDirName)
		}
		_, err := os.Stat(filepath.Join(filepath.Dir(s.parents["memory"]), "memory.memsw.limit_in_bytes"))
		s.swap = err == nil
	}
	// Make the parents now, so that a node that cannot isolate says so at
	// start (its fingerprint) rather than at its first task.
	m, err := s.manager("", spec.Resources{})
	if err != nil {
		return nil, err
	}
	if err := m.Apply(-1); err != nil {
		return nil, fmt.Errorf("cannot create cgroup %s: %w", s.parents[firstKey(s)], err)
	}
	return s, nil
}

func firstKey(s *cgroupSetup) string {
	if s.v2 {
		return ""
	}
	return v1Controllers[0]
}

func (s *cgroupSetup) isolation() string {
	if s.v2 {
		return IsolationV2
	}
	return IsolationV1
}

// taskCgroupName is a task's cgroup name. A hook (prestart or stop
// command) gets a cgroup of its own with the task's limits: it may run
// beside the task (a stop command), and the task's cgroup is removed when
// its process exits.
func taskCgroupName(id driver.TaskID, hook bool) string {
	name := id.AllocID + "-" + id.Task
	if hook {
		name += "-hook"
	}
	return name
}

// manager returns the cgroup manager of cgroup name ("" is the drover
// directory itself) with the limits of r: memory = MemoryMB, cpu shares =
// CPU MHz (v2: the equivalent cpu.weight). Zero means no limit.
func (s *cgroupSetup) manager(name string, r spec.Resources) (cgroups.Manager, error) {
	res := &cgroups.Resources{}
	if r.MemoryMB > 0 {
		res.Memory = int64(r.MemoryMB) << 20
		if s.swap || s.v2 {
			res.MemorySwap = res.Memory
		}
	}
	if r.CPU > 0 {
		// Shares are relative weights, so MHz serve as is, within the
		// kernel's range 2..262144.
		shares := uint64(min(max(r.CPU, 2), 262144))
		if s.v2 {
			res.CpuWeight = cgroups.ConvertCPUSharesToCgroupV2Value(shares)
		} else {
			res.CpuShares = shares
		}
	}
	paths := map[string]string{}
	for c, p := range s.parents {
		paths[c] = filepath.Join(p, name)
	}
	return manager.NewWithPaths(&cgroups.Cgroup{Resources: res}, paths)
}

// setMu serializes Manager.Set (see newTaskCgroup).
var setMu sync.Mutex

// newTaskCgroup makes the cgroup of a task about to start, with its limits.
func (s *cgroupSetup) newTaskCgroup(id driver.TaskID, hook bool, r spec.Resources) (cgroups.Manager, error) {
	if id.AllocID == "" || id.Task == "" {
		return nil, errors.New("task has no alloc ID or name for its cgroup")
	}
	m, err := s.manager(taskCgroupName(id, hook), r)
	if err != nil {
		return nil, err
	}
	// A cgroup left by a task that ran before (an agent killed before it
	// removed it) is reused; its limits are set anew below.
	if err := m.Apply(-1); err != nil {
		return nil, fmt.Errorf("create cgroup %s: %w", m.Path(firstKey(s)), err)
	}
	c, err := m.GetCgroups()
	if err == nil {
		// The library's v1 blkio setup fills a package variable on first
		// use without a lock: two tasks starting at once race on it.
		setMu.Lock()
		err = m.Set(c.Resources)
		setMu.Unlock()
	}
	if err != nil {
		m.Destroy()
		return nil, fmt.Errorf("set limits of cgroup %s: %w", m.Path(firstKey(s)), err)
	}
	return m, nil
}

// adoptedCgroup finds the cgroup of a task that an earlier agent started,
// from where /proc/PID/cgroup places it: a directory named by alloc and
// task under a drover directory. A process outside one (raw_exec, or a
// task started without isolation) has none: nil, nil.
func adoptedCgroup(pid int) (cgroups.Manager, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	in, err := cgroups.ParseCgroupFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return nil, err
	}
	paths := map[string]string{}
	if cgroups.IsCgroup2UnifiedMode() {
		p := in[""]
		if filepath.Base(filepath.Dir(p)) != cgroupDirName {
			return nil, nil
		}
		paths[""] = filepath.Join("/sys/fs/cgroup", p)
	} else {
		for _, c := range v1Controllers {
			p, ok := in[c]
			if !ok || filepath.Base(filepath.Dir(p)) != cgroupDirName {
				return nil, nil
			}
			mnt, err := cgroups.FindCgroupMountpoint("", c)
			if err != nil {
				return nil, err
			}
			paths[c] = filepath.Join(mnt, p)
		}
	}
	return manager.NewWithPaths(&cgroups.Cgroup{Resources: &cgroups.Resources{}}, paths)
}

// oomKilled says whether the task that ended with e was killed by the
// kernel's OOM killer in its cgroup m: it died of SIGKILL, and the cgroup
// counted an OOM kill.
func oomKilled(m cgroups.Manager, e driver.Exit) bool {
	if m == nil || e.Signal != "SIGKILL" {
		return false
	}
	n, err := m.OOMKillCount()
	return err == nil && n > 0
}

// removeCgroup removes a task's cgroup once its processes are gone. The
// process group was just killed; its members may take a moment to exit,
// and the library's removal retries meanwhile. A stray that moved to
// another process group keeps the cgroup, with its limits, until it exits.
func removeCgroup(m cgroups.Manager) {
	if m == nil {
		return
	}
	for range 10 {
		if err := m.Destroy(); err == nil {
			return
		}
		if pids, err := m.GetAllPids(); err == nil {
			for _, pid := range pids {
				unix.Kill(pid, unix.SIGKILL)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cgroupUsage reads a task's CPU time and memory from its cgroup: memory
// is what the cgroup is charged less the page cache, which the kernel
// reclaims before it OOM-kills anything. It reads the three files it needs
// (the library's GetStats reads every figure of every controller, some
// hundred allocations a task, a thousand tasks at every sample).
func cgroupUsage(m cgroups.Manager) (driver.Usage, error) {
	b := statBufs.Get().(*[16 << 10]byte)
	defer statBufs.Put(b)
	var cpu, mem, cache uint64
	var errs [3]error
	if cgroups.IsCgroup2UnifiedMode() {
		dir := m.Path("")
		cpu, errs[0] = cgroupValue(b, dir, "cpu.stat", "usage_usec")
		cpu *= 1000
		mem, errs[1] = cgroupValue(b, dir, "memory.current", "")
		cache, errs[2] = cgroupValue(b, dir, "memory.stat", "file")
	} else {
		cpu, errs[0] = cgroupValue(b, m.Path("cpuacct"), "cpuacct.usage", "")
		mem, errs[1] = cgroupValue(b, m.Path("memory"), "memory.usage_in_bytes", "")
		cache, errs[2] = cgroupValue(b, m.Path("memory"), "memory.stat", "cache")
	}
	if err := errors.Join(errs[:]...); err != nil {
		return driver.Usage{}, fmt.Errorf("cgroup stats: %w", err)
	}
	if cache < mem {
		mem -= cache
	}
	return driver.Usage{CPU: time.Duration(cpu), MemoryBytes: mem}, nil
}

// statBufs are the buffers cgroup files are read into.
var statBufs = sync.Pool{New: func() any { return new([16 << 10]byte) }}

// cgroupValue reads the number file in dir holds, or with key, the number
// on its line "key N" (cpu.stat, memory.stat), into b.
func cgroupValue(b *[16 << 10]byte, dir, file, key string) (uint64, error) {
	path := filepath.Join(dir, file)
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, &os.PathError{Op: "open", Path: path, Err: err}
	}
	n, err := unix.Read(fd, b[:])
	unix.Close(fd)
	if err != nil {
		return 0, &os.PathError{Op: "read", Path: path, Err: err}
	}
	text := b[:n]
	if key != "" {
		var ok bool
		for line := range bytes.Lines(text) {
			if text, ok = bytes.CutPrefix(line, []byte(key+" ")); ok {
				break
			}
		}
		if !ok {
			return 0, fmt.Errorf("%s: no %s line", path, key)
		}
	}
	v, err := strconv.ParseUint(string(bytes.TrimSpace(text)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// noIsolationNote is what a task's start note says on a node without it.
func noIsolationNote(reason error) string {
	return "exec: no cgroup isolation here: " + strings.TrimSpace(reason.Error())
}
