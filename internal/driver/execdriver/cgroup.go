package execdriver

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

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
	// v1: each hierarchy's drover directory and the agent's own tasks
	// file, held open, in v1Controllers' order (see startInV1), once per
	// hierarchy: controllers mounted together (cpu,cpuacct) share one.
	v1 []v1Hierarchy
	// pool: v1, task cgroups made ahead (cgpool.go).
	pool *cgroupPool
}

// v1Hierarchy is where a start makes a task's cgroup in one v1 hierarchy
// (mkdirat and openat relative to dir: no path walk from the root), and
// where its forking thread goes back to.
type v1Hierarchy struct {
	// controller is the first of v1Controllers in this hierarchy, the key
	// of its drover directory in parents; controllers all of them
	// ("cpu,cpuacct" where those are mounted together), for messages.
	controller, controllers string
	dir                     int // the drover directory, O_PATH
	home                    int // the agent's own cgroup's tasks file, write-only
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
	if !s.v2 {
		if err := s.openV1(); err != nil {
			return nil, err
		}
		s.removeStalePools()
		s.pool = newCgroupPool(s)
	}
	return s, nil
}

// openV1 opens each v1 hierarchy's drover directory and the agent's own
// tasks file in it, once for all starts. The descriptors live as long as
// the driver, which lives as long as the agent. Controllers mounted
// together (cpu and cpuacct on most distributions: /sys/fs/cgroup/cpu and
// cpuacct are links to cpu,cpuacct) are one hierarchy, one directory:
// it is listed once, so that each start makes, renames and joins a cgroup
// once in it (a second mkdir there fails with EEXIST).
func (s *cgroupSetup) openV1() error {
	type fileID struct{ dev, ino uint64 }
	seen := map[fileID]int{} // a directory -> its index in s.v1
	for _, c := range v1Controllers {
		dir, err := unix.Open(s.parents[c], unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("cgroup v1 controller %s: open %s: %w", c, s.parents[c], err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(dir, &st); err != nil {
			unix.Close(dir)
			return fmt.Errorf("cgroup v1 controller %s: stat %s: %w", c, s.parents[c], err)
		}
		id := fileID{uint64(st.Dev), st.Ino}
		if i, ok := seen[id]; ok {
			unix.Close(dir)
			s.v1[i].controllers += "," + c
			continue
		}
		seen[id] = len(s.v1)
		tasks := filepath.Join(filepath.Dir(s.parents[c]), "tasks")
		home, err := unix.Open(tasks, unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			unix.Close(dir)
			return fmt.Errorf("cgroup v1 controller %s: open %s: %w", c, tasks, err)
		}
		s.v1 = append(s.v1, v1Hierarchy{controller: c, controllers: c, dir: dir, home: home})
	}
	return nil
}

// v1Dir is the drover directory of the v1 hierarchy that holds controller c.
func (s *cgroupSetup) v1Dir(c string) int {
	for _, h := range s.v1 {
		if slices.Contains(strings.Split(h.controllers, ","), c) {
			return h.dir
		}
	}
	return -1 // not reached: openV1 lists every one of v1Controllers
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
	paths := map[string]string{}
	for c, p := range s.parents {
		paths[c] = filepath.Join(p, name)
	}
	return manager.NewWithPaths(&cgroups.Cgroup{Resources: s.resources(r)}, paths)
}

// resources are the cgroup limits of a task reserving r.
func (s *cgroupSetup) resources(r spec.Resources) *cgroups.Resources {
	res := &cgroups.Resources{}
	if r.MemoryMB > 0 {
		res.Memory = int64(r.MemoryLimitMB()) << 20
		if r.MemoryUnlimited() {
			// memory_max = -1: no hard limit, written as the kernel's
			// "unlimited" so that a reused cgroup loses the one it had.
			res.Memory = -1
		}
		if s.swap || s.v2 {
			res.MemorySwap = res.Memory
		}
		// memory_max (a limit above memory, or none): what is reserved
		// is what the kernel reclaims down to under pressure.
		res.MemoryReservation = int64(r.MemorySoftLimitMB()) << 20
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
	return res
}

// newTaskCgroup makes the cgroup of a task about to start, with its limits.
func (s *cgroupSetup) newTaskCgroup(id driver.TaskID, hook bool, r spec.Resources) (cgroups.Manager, error) {
	if id.AllocID == "" || id.Task == "" {
		return nil, errors.New("task has no alloc ID or name for its cgroup")
	}
	name := taskCgroupName(id, hook)
	m, err := s.manager(name, r)
	if err != nil {
		return nil, err
	}
	if !s.v2 {
		if err := s.makeV1(name, r); err != nil {
			m.Destroy()
			return nil, fmt.Errorf("cgroup %s: %w", m.Path(firstKey(s)), err)
		}
		return m, nil
	}
	// A cgroup left by a task that ran before (an agent killed before it
	// removed it) is reused; its limits are set anew below.
	if err := m.Apply(-1); err != nil {
		return nil, fmt.Errorf("create cgroup %s: %w", m.Path(firstKey(s)), err)
	}
	c, err := m.GetCgroups()
	if err == nil {
		err = m.Set(c.Resources)
	}
	if err != nil {
		m.Destroy()
		return nil, fmt.Errorf("set limits of cgroup %s: %w", m.Path(firstKey(s)), err)
	}
	return m, nil
}

// makeV1 makes cgroup name in each v1 hierarchy and writes its limits:
// a cgroup from the pool renamed (cgpool.go), or three mkdirs, then a
// write per limit, relative to the open drover directories. (The
// library's Apply and Set cost some forty system calls here: a stat walk
// before each mkdir, and each limit written, then read back.) Only the
// limits the cgroup does not hold yet are written: a pooled cgroup was
// made with the limits the last start asked for (none when a burst of
// one job's tasks asks the same), a fresh one holds the kernel's
// defaults. A cgroup left by a task that ran before (an agent killed
// before it removed it) is reused, every limit written anew.
func (s *cgroupSetup) makeV1(name string, r spec.Resources) error {
	want := s.v1Limits(r)
	have, ok := s.pool.take(name, want)
	if !ok {
		have = v1Limits{}
		for _, h := range s.v1 {
			err := unix.Mkdirat(h.dir, name, 0o755)
			if err == unix.EEXIST {
				have = unknownV1Limits
			} else if err != nil {
				return fmt.Errorf("mkdir in the %s hierarchy: %w", h.controllers, err)
			}
		}
	}
	return s.writeV1Limits(name, have, want)
}

// v1Limits are the values of a v1 task cgroup's limit files, as written
// to them; "" is the kernel's default, which a new cgroup holds.
type v1Limits struct {
	memory, memsw, soft, shares string
}

// unknownV1Limits stands for the limits of a cgroup whose files nobody
// knows (one an earlier agent left): none equals a value a task wants,
// so each is written.
var unknownV1Limits = v1Limits{memory: "?", memsw: "?", soft: "?", shares: "?"}

// The v1 kernel's defaults, written where a task wants none but the
// cgroup holds one: no memory limit (-1 reads back as the largest
// number), 1024 CPU shares.
const (
	v1NoMemoryLimit  = "-1"
	v1DefaultShares  = "1024"
	v1MemoryLimit    = "memory.limit_in_bytes"
	v1MemswLimit     = "memory.memsw.limit_in_bytes"
	v1SoftLimit      = "memory.soft_limit_in_bytes"
	v1CPUSharesLimit = "cpu.shares"
)

// v1Limits are the limit files' values for a task reserving r.
func (s *cgroupSetup) v1Limits(r spec.Resources) v1Limits {
	res := s.resources(r)
	var l v1Limits
	if res.Memory > 0 {
		// -1, no hard limit, is the default: nothing to write.
		l.memory = strconv.FormatInt(res.Memory, 10)
		if res.MemorySwap != 0 {
			l.memsw = l.memory
		}
	}
	if res.MemoryReservation > 0 {
		l.soft = strconv.FormatInt(res.MemoryReservation, 10)
	}
	if res.CpuShares > 0 {
		l.shares = strconv.FormatUint(res.CpuShares, 10)
	}
	return l
}

// writeV1Limits writes to cgroup name each limit of want that differs
// from what it holds (have), the kernel's default where want has none.
func (s *cgroupSetup) writeV1Limits(name string, have, want v1Limits) error {
	or := func(v, def string) string {
		if v == "" {
			return def
		}
		return v
	}
	mem, cpu := s.v1Dir("memory"), s.v1Dir("cpu")
	var files, values []string
	if have.memory != want.memory {
		files, values = append(files, v1MemoryLimit), append(values, or(want.memory, v1NoMemoryLimit))
	}
	if s.swap && have.memsw != want.memsw {
		files, values = append(files, v1MemswLimit), append(values, or(want.memsw, v1NoMemoryLimit))
	}
	err := writeCgroupValues(mem, name, files, values)
	if errors.Is(err, unix.EINVAL) && len(files) == 2 {
		// The kernel keeps memory+swap >= memory: a memory limit raised
		// above the memory+swap one the cgroup holds needs that raised
		// first.
		err = writeCgroupValues(mem, name, []string{files[1], files[0]}, []string{values[1], values[0]})
	}
	if err != nil {
		return err
	}
	if have.soft != want.soft {
		if err := writeAt(mem, name+"/"+v1SoftLimit, or(want.soft, v1NoMemoryLimit)); err != nil {
			return err
		}
	}
	if have.shares != want.shares {
		return writeAt(cpu, name+"/"+v1CPUSharesLimit, or(want.shares, v1DefaultShares))
	}
	return nil
}

// writeCgroupValues writes values[i] to files[i] of cgroup name under
// dir, in order.
func writeCgroupValues(dir int, name string, files, values []string) error {
	for i, f := range files {
		if err := writeAt(dir, name+"/"+f, values[i]); err != nil {
			return err
		}
	}
	return nil
}

// writeAt writes value to the file at path relative to dir.
func writeAt(dir int, path, value string) error {
	fd, err := unix.Openat(dir, path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	_, err = unix.Write(fd, []byte(value))
	unix.Close(fd)
	if err != nil {
		return &os.PathError{Op: "write", Path: path, Err: err}
	}
	return nil
}

// The cgroup system calls of a v1 start (the renames that take a pooled
// cgroup, the forking thread's moves) are made raw, without telling the Go
// scheduler: each takes 10 to 30 µs on cgroup v1, long enough for sysmon
// to take the P of a thread in a system call and wake another thread to
// run it, and to keep sysmon itself waking every 20 µs all through a
// burst of starts (in the window of a 500-task exec job sysmon was about
// 5% of drover dev's CPU, 2.5% with these calls raw; docs/performance.md).
// They hold no lock a Go thread could wait for; at worst one waits in the
// kernel for the cgroup mutex, holding its P meanwhile.

// rawWriteAt writes value to the file at path relative to dir, as writeAt,
// in raw system calls.
func rawWriteAt(dir int, path string, value []byte) error {
	p, err := unix.BytePtrFromString(path)
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	fd, _, e := unix.RawSyscall6(unix.SYS_OPENAT, uintptr(dir), uintptr(unsafe.Pointer(p)), unix.O_WRONLY|unix.O_CLOEXEC, 0, 0, 0)
	if e != 0 {
		return &os.PathError{Op: "open", Path: path, Err: e}
	}
	err = rawPwrite(int(fd), value)
	unix.RawSyscall(unix.SYS_CLOSE, fd, 0, 0)
	if err != nil {
		return &os.PathError{Op: "write", Path: path, Err: err}
	}
	return nil
}

// rawPwrite writes value at offset 0 of fd (a cgroup file, which takes a
// value in one write or fails) in a raw system call.
func rawPwrite(fd int, value []byte) error {
	if len(value) == 0 {
		return nil
	}
	_, _, e := unix.RawSyscall6(unix.SYS_PWRITE64, uintptr(fd), uintptr(unsafe.Pointer(&value[0])), uintptr(len(value)), 0, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// rawRenameat renames from to to, both relative to dir, in a raw system
// call (renameat, or renameat2 with no flags where there is no renameat:
// sysRenameat).
func rawRenameat(dir int, from, to string) error {
	f, err := unix.BytePtrFromString(from)
	if err != nil {
		return err
	}
	t, err := unix.BytePtrFromString(to)
	if err != nil {
		return err
	}
	_, _, e := unix.RawSyscall6(sysRenameat, uintptr(dir), uintptr(unsafe.Pointer(f)), uintptr(dir), uintptr(unsafe.Pointer(t)), 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// errJoin marks a start that failed because its thread could not join the
// task's cgroup; nothing was started.
var errJoin = errors.New("join cgroup")

// thisThread is what a thread writes to a v1 tasks file to move itself.
// The kernel moves the writer then without taking the lock that holds
// every fork and exit on the machine still for a thread named by its ID
// (cgroup_threadgroup_rwsem, taken for writing, which first waits out an
// RCU grace period when it was idle).
var thisThread = []byte("0")

// startInV1 runs start, which forks the task, with the task born in its
// cgroup name: v1 has no clone3 CLONE_INTO_CGROUP, but a child is born in
// the cgroups of the thread that forks it, and v1 moves single threads
// (the tasks file). So start runs on an OS thread of its own, never the
// main thread (thread.go), moved into the task's cgroup in each hierarchy
// and back into the agent's after the fork, each move written by the
// thread itself (thisThread). Nothing the task runs, from its first
// instruction, escapes its limits (joining after the fork left the task
// outside for the microseconds of its exec and loader, and what it
// allocated then charged to the agent). A thread that cannot go back is
// ended rather than left to run the agent's work in this task's cgroup,
// or to fork other tasks into it. The moves are raw system calls (see
// rawWriteAt).
func (s *cgroupSetup) startInV1(name string, start func() error) error {
	return offMainThread(func() (astray bool, err error) {
		joined := 0
		for _, h := range s.v1 {
			if err = rawWriteAt(h.dir, name+"/tasks", thisThread); err != nil {
				err = fmt.Errorf("%w in the %s hierarchy: %w", errJoin, h.controllers, err)
				break
			}
			joined++
		}
		if err == nil {
			err = start()
		}
		if errors.Is(err, errThreadAstray) {
			return true, err
		}
		for _, h := range s.v1[:joined] {
			if herr := rawPwrite(h.home, thisThread); herr != nil {
				return true, err // the task started, or not, as start says
			}
		}
		return false, err
	})
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
				if pid == os.Getpid() {
					continue // never the agent: a thread of its in there is leaving
				}
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
