package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Making an alloc's directories (taskdir.go) was the biggest part of a
// start: nine mkdirs and two chmods, most of a millisecond of kernel time
// each on ext4 (block and inode allocation), 38% of an agent's CPU while
// it started hundreds of tasks. A dirPool makes those trees ahead of time,
// in a background thread of the lowest CPU priority, and a start takes one
// with a single rename(2) into place: one pool of alloc trees (the alloc's
// directory with its shared alloc/), one of task trees.
//
// An entry is one alloc's or one task's and no other's: it is handed out
// once, through a channel, and moved out of the pool by a rename that
// fails if anything is already at the destination. An entry is offered
// only once its tree is complete; the pool's directory, <data dir>/dirpool,
// is emptied when the agent starts, so that trees half made by an agent
// that died are never used. A file system that cannot rename without
// replacing (RENAME_NOREPLACE), or an allocs directory on another file
// system, turns the pool off: starts make their directories as before.
const (
	dirPoolDirName = "dirpool"
	// defaultDirPool is how many trees of each kind are kept ready: a
	// job's burst of starts on one node up to this size takes no mkdir.
	// Each tree is a few directories (16 to 20 KiB on ext4).
	defaultDirPool = 128
)

// dirPool is one kind of ready trees.
type dirPool struct {
	kind string // "alloc" or "task": entries' names, and messages
	// build makes the tree at dir, dir included.
	build func(dir string) error
	ready chan string
	off   *atomic.Bool // shared by the agent's pools
	kick  chan<- struct{}
	taken atomic.Int64 // trees handed out
}

// take moves a ready tree to dst, which must not exist, and reports
// whether it did; false means the caller makes dst itself (the pool is
// empty or off, or dst exists: an alloc started again after an agent
// restart).
func (p *dirPool) take(dst string) bool {
	if p == nil || p.off.Load() {
		return false
	}
	var src string
	select {
	case src = <-p.ready:
	default:
		p.refill()
		return false
	}
	p.refill()
	err := unix.Renameat2(unix.AT_FDCWD, src, unix.AT_FDCWD, dst, unix.RENAME_NOREPLACE)
	if err == nil {
		p.taken.Add(1)
		return true
	}
	if errors.Is(err, unix.EEXIST) || errors.Is(err, unix.ENOTEMPTY) {
		// The entry is still whole: offer it again.
		select {
		case p.ready <- src:
		default:
			os.RemoveAll(src)
		}
		return false
	}
	if errors.Is(err, unix.ENOENT) {
		// dst's parent is gone (the alloc's directory removed under a
		// start), or someone removed the entry: nothing to give back.
		return false
	}
	// EXDEV, EINVAL (no RENAME_NOREPLACE here) or worse: stop using the
	// pool rather than fail starts.
	p.off.Store(true)
	os.RemoveAll(src)
	return false
}

func (p *dirPool) refill() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// dirPools are the agent's pools and the goroutine that fills them.
type dirPools struct {
	dir         string
	alloc, task *dirPool
	off         atomic.Bool
	kick        chan struct{}
	seq         uint64
	done        sync.WaitGroup
}

// newDirPools prepares pools of size trees each under dataDir; nil when
// size is 0.
func newDirPools(dataDir string, size int, allocTree, taskTree func(string) error) *dirPools {
	if size <= 0 {
		return nil
	}
	ps := &dirPools{dir: filepath.Join(dataDir, dirPoolDirName), kick: make(chan struct{}, 1)}
	ps.alloc = &dirPool{kind: "alloc", build: allocTree, ready: make(chan string, size), off: &ps.off, kick: ps.kick}
	ps.task = &dirPool{kind: "task", build: taskTree, ready: make(chan string, size), off: &ps.off, kick: ps.kick}
	return ps
}

// run starts the goroutine that empties the pool's directory of what an
// earlier agent left, then keeps both pools full until ctx ends; wait
// waits for it to be gone.
func (ps *dirPools) run(ctx context.Context, log func(msg string, args ...any)) {
	if ps == nil {
		return
	}
	ps.done.Add(1)
	go func() {
		defer ps.done.Done()
		// A thread of its own at the lowest priority: the trees are made
		// with CPU the starts do not need. The thread ends with the
		// goroutine (it stays locked), so no other goroutine inherits the
		// priority.
		runtime.LockOSThread()
		if err := unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), 19); err != nil {
			log("cannot lower the directory pool's priority", "err", err)
		}
		if err := ps.reset(); err != nil {
			ps.off.Store(true)
			log("cannot prepare the directory pool; starts make their directories", "dir", ps.dir, "err", err)
			return
		}
		for ctx.Err() == nil && !ps.off.Load() {
			made, err := ps.fillOne()
			if err != nil {
				ps.off.Store(true)
				log("cannot make a directory tree ahead; starts make their directories", "dir", ps.dir, "err", err)
				return
			}
			if made {
				continue
			}
			select {
			case <-ps.kick:
			case <-ctx.Done():
			}
		}
	}()
}

func (ps *dirPools) wait() {
	if ps != nil {
		ps.done.Wait()
	}
}

// reset removes whatever is in the pool's directory (trees ready or half
// made when an earlier agent stopped) and makes it anew.
func (ps *dirPools) reset() error {
	if err := os.RemoveAll(ps.dir); err != nil {
		return err
	}
	return os.Mkdir(ps.dir, 0o700)
}

// fillOne adds one tree to the emptier pool, and reports whether both
// were full already.
func (ps *dirPools) fillOne() (bool, error) {
	p := ps.alloc
	if len(ps.task.ready) < len(p.ready) {
		p = ps.task
	}
	if len(p.ready) == cap(p.ready) {
		return false, nil
	}
	ps.seq++
	dir := filepath.Join(ps.dir, p.kind+"-"+strconv.FormatUint(ps.seq, 10))
	if err := p.build(dir); err != nil {
		os.RemoveAll(dir)
		return false, fmt.Errorf("%s tree %s: %w", p.kind, dir, err)
	}
	select {
	case p.ready <- dir:
	default:
		// A take gave an entry back meanwhile.
		os.RemoveAll(dir)
	}
	return true, nil
}

// allocPool and taskPool are nil (no pool) when ps is.
func (ps *dirPools) allocPool() *dirPool {
	if ps == nil {
		return nil
	}
	return ps.alloc
}

func (ps *dirPools) taskPool() *dirPool {
	if ps == nil {
		return nil
	}
	return ps.task
}
