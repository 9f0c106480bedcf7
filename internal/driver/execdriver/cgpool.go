package execdriver

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Making a task's cgroup on v1 was a large part of what an exec start cost
// beyond a raw_exec one (moving the forking thread was the other, see
// forker.go): a mkdir in each of three hierarchies, 38 to 67 µs each on
// the VM of docs/performance.md, the kernel setting up a cgroup. A
// cgroupPool makes those cgroups ahead of time, in a goroutine of its own,
// under names of its own (pool-<pid>-<n>), and a start takes one by
// renaming it to the task's name in each hierarchy: some 12 µs each, and
// the task's cgroup keeps the name a
// later agent finds it by (adoptedCgroup, taskCgroupName).
//
// v1 only: cgroup v2 cannot rename a cgroup (its directories take no
// rename(2)), and v2 starts the task in its cgroup by clone3 anyway.
//
// A pooled cgroup is fresh: no limit, the kernel's default shares, no
// process, no OOM count. It is handed out once, and never given back: a
// task's cgroup is removed when the task ends, since its counts (an OOM
// kill) must not pass to the next task. The pool keeps minCgroupPool
// cgroups ready at first; each start that finds it empty raises that by
// one, up to maxCgroupPool, so a node keeps ready what its largest burst
// of starts needed. They are made once the starts have been quiet for
// cgroupPoolQuiet. Pooled cgroups a dead agent left are removed when the
// next one probes its cgroups (removeStalePools).
const (
	cgroupPoolPrefix = "pool-"
	minCgroupPool    = 16
	maxCgroupPool    = 512
	// cgroupPoolQuiet: after a start took a cgroup or found none, no
	// cgroup is made for this long, so that the pool's mkdirs wait out a
	// burst of starts instead of contending with it for the CPU and for
	// the kernel's cgroup lock.
	cgroupPoolQuiet = 50 * time.Millisecond
)

// cgroupPools counts the pools made in this process, for their names:
// several drivers (tests) in one process share the drover directories.
var cgroupPools atomic.Uint64

type cgroupPool struct {
	s      *cgroupSetup
	prefix string // pool-<pid>-<pool>-
	ready  chan string
	want   atomic.Int64
	seq    atomic.Uint64
	// off: making a cgroup failed; starts make their own from then on.
	off     atomic.Bool
	filling atomic.Bool
	// lastTake is when a start last asked for a cgroup, in Unix nanoseconds.
	lastTake atomic.Int64
	// taken counts the cgroups handed out.
	taken atomic.Int64
}

// newCgroupPool returns the pool of v1 setup s and starts filling it.
func newCgroupPool(s *cgroupSetup) *cgroupPool {
	p := &cgroupPool{s: s, ready: make(chan string, maxCgroupPool),
		prefix: fmt.Sprintf("%s%d-%d-", cgroupPoolPrefix, os.Getpid(), cgroupPools.Add(1))}
	p.want.Store(minCgroupPool)
	p.kick()
	return p
}

// take renames a ready cgroup to name in every hierarchy and reports
// whether it did; false means the caller makes the cgroup itself (the
// pool is empty or off, or name exists: a cgroup an earlier agent left).
func (p *cgroupPool) take(name string) bool {
	if p == nil || p.off.Load() {
		return false
	}
	p.lastTake.Store(time.Now().UnixNano())
	var slot string
	select {
	case slot = <-p.ready:
	default:
		if p.want.Load() < maxCgroupPool {
			p.want.Add(1)
		}
		p.kick()
		return false
	}
	defer p.kick()
	for i, h := range p.s.v1 {
		if err := unix.Renameat(h.dir, slot, h.dir, name); err != nil {
			// Put back what was renamed, and drop the slot rather than
			// judge which hierarchy holds what.
			for _, g := range p.s.v1[:i] {
				unix.Renameat(g.dir, name, g.dir, slot)
			}
			p.remove(slot)
			return false
		}
	}
	p.taken.Add(1)
	return true
}

// kick starts the goroutine that fills the pool, unless it runs or the
// pool is full.
func (p *cgroupPool) kick() {
	if p.off.Load() || p.short() <= 0 || !p.filling.CompareAndSwap(false, true) {
		return
	}
	go p.fill()
}

func (p *cgroupPool) short() int64 { return p.want.Load() - int64(len(p.ready)) }

// fill makes cgroups until the pool holds what it wants. Not at a low
// priority, unlike the directory pool's thread: a mkdir holds the
// kernel's one cgroup mutex, which every start's move into its cgroup
// needs too, and a thread of the lowest priority on a busy machine can
// be kept off the CPU holding it. It waits for the starts to be quiet
// instead, and a cgroup costs some 50 µs a hierarchy.
func (p *cgroupPool) fill() {
	for {
		for !p.off.Load() && p.short() > 0 {
			if wait := cgroupPoolQuiet - time.Since(time.Unix(0, p.lastTake.Load())); wait > 0 {
				time.Sleep(wait)
				continue
			}
			slot, err := p.make()
			if err != nil {
				p.off.Store(true)
				break
			}
			select {
			case p.ready <- slot:
			default:
				p.remove(slot)
			}
		}
		p.filling.Store(false)
		// A take that found the pool short while this loop was ending
		// saw it filling and started none.
		if p.off.Load() || p.short() <= 0 || !p.filling.CompareAndSwap(false, true) {
			return
		}
	}
}

// make makes one pooled cgroup in every hierarchy.
func (p *cgroupPool) make() (string, error) {
	slot := p.prefix + strconv.FormatUint(p.seq.Add(1), 10)
	for i, h := range p.s.v1 {
		if err := unix.Mkdirat(h.dir, slot, 0o755); err != nil {
			for _, g := range p.s.v1[:i] {
				unix.Unlinkat(g.dir, slot, unix.AT_REMOVEDIR)
			}
			return "", fmt.Errorf("mkdir %s in the %s hierarchy: %w", slot, h.controller, err)
		}
	}
	return slot, nil
}

// remove removes a pooled cgroup from every hierarchy it is in.
func (p *cgroupPool) remove(slot string) {
	for _, h := range p.s.v1 {
		unix.Unlinkat(h.dir, slot, unix.AT_REMOVEDIR)
	}
}

// removeStalePools removes the pooled cgroups of agents no longer running
// (pool-<pid>-...: no process pid) from each v1 hierarchy's drover
// directory. A pooled cgroup never held a process, so rmdir takes it.
func (s *cgroupSetup) removeStalePools() {
	for _, h := range s.v1 {
		entries, err := os.ReadDir(s.parents[h.controller])
		if err != nil {
			continue
		}
		for _, e := range entries {
			rest, ok := strings.CutPrefix(e.Name(), cgroupPoolPrefix)
			if !ok || !e.IsDir() {
				continue
			}
			pidText, _, _ := strings.Cut(rest, "-")
			pid, err := strconv.Atoi(pidText)
			if err != nil || pid <= 0 || unix.Kill(pid, 0) != unix.ESRCH {
				continue
			}
			unix.Unlinkat(h.dir, e.Name(), unix.AT_REMOVEDIR)
		}
	}
}
