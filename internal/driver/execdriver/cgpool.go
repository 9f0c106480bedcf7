package execdriver

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/drover-org/drover/internal/proc"
)

// Making a task's cgroup on v1 was a large part of what an exec start cost
// beyond a raw_exec one (moving the forking thread was the other): a mkdir in each of three hierarchies, 38 to 67 µs each on
// the VM of docs/performance.md, the kernel setting up a cgroup. A
// cgroupPool makes those cgroups ahead of time, in a goroutine of its own,
// under names of its own (pool-<pid>-<start>-<pool>-<n>: the agent's pid
// and start time in clock ticks after boot), and a start takes one by
// renaming it to the task's name in each hierarchy: some 12 µs each, and
// the task's cgroup keeps the name a
// later agent finds it by (adoptedCgroup, taskCgroupName).
//
// v1 only: cgroup v2 cannot rename a cgroup (its directories take no
// rename(2)), and v2 starts the task in its cgroup by clone3 anyway.
//
// A pooled cgroup is fresh: no process, no OOM count, and the limits the
// last start asked for (the next burst's tasks, a job's instances, likely
// ask the same: their start then writes none), or none before any start
// asked. It is handed out once, and never given back: a
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
	prefix string // pool-<pid>-<start>-<pool>-
	ready  chan pooledCgroup
	// limits are what the last start asked for, which the cgroups made
	// from then on get.
	limits atomic.Pointer[v1Limits]
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

// pooledCgroup is a cgroup the pool made, under its pool name, and the
// limits written to it.
type pooledCgroup struct {
	name   string
	limits v1Limits
}

// newCgroupPool returns the pool of v1 setup s and starts filling it.
func newCgroupPool(s *cgroupSetup) *cgroupPool {
	p := &cgroupPool{s: s, ready: make(chan pooledCgroup, maxCgroupPool),
		prefix: fmt.Sprintf("%s%d-%d-%d-", cgroupPoolPrefix, os.Getpid(), ownStartTicks(), cgroupPools.Add(1))}
	p.want.Store(minCgroupPool)
	p.kick()
	return p
}

// take renames a ready cgroup to name in every hierarchy and returns the
// limits it holds; false means the caller makes the cgroup itself (the
// pool is empty or off, or name exists: a cgroup an earlier agent left).
// The cgroups made from then on get the limits want.
func (p *cgroupPool) take(name string, want v1Limits) (v1Limits, bool) {
	if p == nil || p.off.Load() {
		return v1Limits{}, false
	}
	if l := p.limits.Load(); l == nil || *l != want {
		p.limits.Store(&want)
	}
	p.lastTake.Store(time.Now().UnixNano())
	var slot pooledCgroup
	select {
	case slot = <-p.ready:
	default:
		if p.want.Load() < maxCgroupPool {
			p.want.Add(1)
		}
		p.kick()
		return v1Limits{}, false
	}
	defer p.kick()
	for i, h := range p.s.v1 {
		if err := rawRenameat(h.dir, slot.name, name); err != nil {
			// Put back what was renamed, and drop the slot rather than
			// judge which hierarchy holds what.
			for _, g := range p.s.v1[:i] {
				unix.Renameat(g.dir, name, g.dir, slot.name)
			}
			p.remove(slot.name)
			return v1Limits{}, false
		}
	}
	p.taken.Add(1)
	return slot.limits, true
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
				p.remove(slot.name)
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

// make makes one pooled cgroup in every hierarchy, with the limits the
// last start asked for; where writing them fails, its limits are unknown
// and the start that takes it writes each. A name that exists
// is passed over for the next number: a cgroup of an earlier agent that
// had the same pid and start time (as far as the clock ticks tell) and
// was not removed. At most maxCgroupPool+1 names are tried, more than
// such an agent could have left ready.
func (p *cgroupPool) make() (pooledCgroup, error) {
	var err error
	for range maxCgroupPool + 1 {
		slot := pooledCgroup{name: p.prefix + strconv.FormatUint(p.seq.Add(1), 10)}
		if err = p.mkdir(slot.name); err == nil {
			if l := p.limits.Load(); l != nil {
				slot.limits = *l
				if p.s.writeV1Limits(slot.name, v1Limits{}, slot.limits) != nil {
					slot.limits = unknownV1Limits
				}
			}
			return slot, nil
		} else if !errors.Is(err, unix.EEXIST) {
			return pooledCgroup{}, err
		}
	}
	return pooledCgroup{}, err
}

// mkdir makes cgroup slot in every hierarchy, or in none, and looks up its
// tasks file in each.
func (p *cgroupPool) mkdir(slot string) error {
	for i, h := range p.s.v1 {
		if err := unix.Mkdirat(h.dir, slot, 0o755); err != nil {
			for _, g := range p.s.v1[:i] {
				unix.Unlinkat(g.dir, slot, unix.AT_REMOVEDIR)
			}
			return fmt.Errorf("mkdir %s in the %s hierarchy: %w", slot, h.controllers, err)
		}
		// Look its tasks file up now, while starts are quiet: the
		// kernel makes its dentry and inode at the first lookup, which
		// would otherwise be the start's open of it to join the cgroup
		// (they follow the cgroup's rename). Best effort.
		var st unix.Stat_t
		unix.Fstatat(h.dir, slot+"/tasks", &st, 0)
	}
	return nil
}

// close turns the pool off and removes the cgroups it holds ready, once
// a fill under way has ended (within a second); the ones handed out are
// tasks' cgroups and stay.
func (p *cgroupPool) close() {
	p.off.Store(true)
	for deadline := time.Now().Add(time.Second); p.filling.Load() && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	for {
		select {
		case slot := <-p.ready:
			p.remove(slot.name)
		default:
			return
		}
	}
}

// remove removes a pooled cgroup from every hierarchy it is in.
func (p *cgroupPool) remove(slot string) {
	for _, h := range p.s.v1 {
		unix.Unlinkat(h.dir, slot, unix.AT_REMOVEDIR)
	}
}

// ownStartTicks is when this process started, in clock ticks after boot
// (0 if /proc cannot tell).
func ownStartTicks() uint64 {
	st, err := proc.ReadStat(os.Getpid())
	if err != nil {
		return 0
	}
	return st.StartTicks
}

// removeStalePools removes the pooled cgroups of agents no longer running
// (pool-<pid>-<start>-...: no process pid, or one that started at
// another time, the pid reused: an agent that is PID 1 of a restarted
// container) from each v1 hierarchy's drover directory. A pooled cgroup
// never held a process, so rmdir takes it.
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
			pidText, rest, _ := strings.Cut(rest, "-")
			startText, _, _ := strings.Cut(rest, "-")
			pid, err := strconv.Atoi(pidText)
			if err != nil || pid <= 0 {
				continue
			}
			start, err := strconv.ParseUint(startText, 10, 64)
			if err != nil {
				continue // not a name this agent makes
			}
			if st, err := proc.ReadStat(pid); err == nil && st.StartTicks == start {
				continue // its agent runs
			} else if err != nil && unix.Kill(pid, 0) != unix.ESRCH {
				continue // cannot tell
			}
			unix.Unlinkat(h.dir, e.Name(), unix.AT_REMOVEDIR)
		}
	}
}
