package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

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
// Each tree is made in a slot, a directory of its own under
// <data dir>/dirpool, so that a start's rename and the thread making the
// next tree lock no directory in common (a thread of low priority holding
// a lock a start waits for would make the start wait on the priority).
// An emptied slot is filled again.
//
// A tree is one alloc's or one task's and no other's: it is handed out
// once, through a channel, and moved out of its slot by a rename that
// fails if anything is already at the destination. A tree is offered only
// once it is complete. When the agent starts, the trees an earlier agent
// left in the pool's directory are kept only if whole, and emptied down to
// their directories (adopt): a tree half made by an agent that died is
// never used. A file system that cannot rename without replacing (RENAME_NOREPLACE), or
// an allocs directory on another file system, turns the pool off: starts
// make their directories as before.
//
// A pool keeps minDirPool trees ready at first; each start that finds it
// empty raises that by one, up to its size: a node keeps ready as many
// trees as its largest burst of starts needed, and an agent started again
// on the same data directory wants at least the trees it kept. The trees
// are made once the starts are quiet (dirPoolQuiet).
const (
	dirPoolDirName = "dirpool"
	slotTreeName   = "tree"
	// defaultDirPool is a pool's size: a burst of this many starts on one
	// node takes no mkdir. A tree is a few directories, 16 to 20 KiB on
	// ext4.
	defaultDirPool = 512
	minDirPool     = 32
	// dirPoolQuiet is how long after a start asked for a tree, or ended,
	// the pools are filled again: a burst of starts is done with the
	// mkdirs it could not avoid, and with its forks, before the trees for
	// the next one are made. (A burst asks for all its trees at once: its
	// alloc runners make their directories before they queue for a start
	// slot.)
	dirPoolQuiet = 50 * time.Millisecond
)

// dirPool is one kind of ready trees.
type dirPool struct {
	kind string // "alloc" or "task": slots' names, and messages
	// build makes the tree at dir, dir included.
	build func(dir string) error
	ready chan string // slots holding a whole tree
	free  chan string // slots emptied by a take
	want  atomic.Int64
	off   *atomic.Bool // shared by the agent's pools
	kick  chan<- struct{}
	taken atomic.Int64 // trees handed out
	// dirs are the directories of a tree of this kind (taskdir.go), which
	// a recycled tree must have, and nothing else.
	dirs     []treeDir
	recycled atomic.Int64 // trees given back by recycle
	// incoming counts the trees of forgotten allocs waiting to be
	// recycled (dirPools.expect).
	incoming atomic.Int64
	kept     atomic.Int64 // trees an earlier agent left, kept by adopt
	// lastUse is when a start last asked this pool or the other for a
	// tree, or ended, in Unix nanoseconds (dirPoolQuiet).
	lastUse *atomic.Int64
}

// take moves a ready tree to dst, which must not exist, and reports
// whether it did; false means the caller makes dst itself (the pool is
// empty or off, or dst exists: an alloc started again after an agent
// restart).
func (p *dirPool) take(dst string) bool {
	if p == nil || p.off.Load() {
		return false
	}
	p.lastUse.Store(time.Now().UnixNano())
	var slot string
	select {
	case slot = <-p.ready:
	default:
		if p.want.Load() < int64(cap(p.ready)) {
			p.want.Add(1)
		}
		p.refill()
		return false
	}
	err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(slot, slotTreeName), unix.AT_FDCWD, dst, unix.RENAME_NOREPLACE)
	if err == nil {
		p.taken.Add(1)
		p.release(slot)
		p.refill()
		return true
	}
	if errors.Is(err, unix.EEXIST) || errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.ENOENT) {
		// dst exists, or its parent is gone (the alloc's directory removed
		// under a start): the tree, still whole, is offered again. Or the
		// tree itself is gone (removed by hand): the slot is filled anew.
		if _, serr := os.Lstat(filepath.Join(slot, slotTreeName)); serr != nil {
			p.release(slot)
			p.refill()
			return false
		}
		select {
		case p.ready <- slot:
		default:
			os.RemoveAll(slot)
		}
		return false
	}
	// EXDEV, EINVAL (no RENAME_NOREPLACE here) or worse: stop using the
	// pool rather than fail starts.
	p.off.Store(true)
	os.RemoveAll(slot)
	return false
}

// release gives an empty slot back to be filled.
func (p *dirPool) release(slot string) {
	select {
	case p.free <- slot:
	default:
		os.Remove(slot)
	}
}

func (p *dirPool) refill() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// short is how many trees the pool lacks, counting those on their way
// back from forgotten allocs (incoming) as there: making a tree that a
// recycled one would then find no room for costs a mkdir of each of its
// directories, and the recycled one's removal an unlink of each.
func (p *dirPool) short() int64 {
	return p.want.Load() - int64(len(p.ready)) - p.incoming.Load()
}

// dirPools are the agent's pools and the goroutine that fills them.
type dirPools struct {
	dir         string
	alloc, task *dirPool
	off         atomic.Bool
	lastUse     atomic.Int64
	kick        chan struct{}
	seq         atomic.Uint64
	// started is set once the pool's directory holds only the trees an
	// earlier agent left whole (adopt): recycled trees go there only then.
	started atomic.Bool
	done    sync.WaitGroup
}

// newDirPools prepares pools of size trees each under dataDir; nil when
// size is 0 or less.
func newDirPools(dataDir string, size int, allocTree, taskTree func(string) error) *dirPools {
	if size <= 0 {
		return nil
	}
	ps := &dirPools{dir: filepath.Join(dataDir, dirPoolDirName), kick: make(chan struct{}, 1)}
	mk := func(kind string, build func(string) error, dirs []treeDir) *dirPool {
		p := &dirPool{kind: kind, build: build, dirs: dirs, ready: make(chan string, size), free: make(chan string, size), off: &ps.off, kick: ps.kick, lastUse: &ps.lastUse}
		p.want.Store(int64(min(size, minDirPool)))
		return p
	}
	ps.alloc, ps.task = mk("alloc", allocTree, allocTreeDirs), mk("task", taskTree, taskTreeDirs)
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
		if err := ps.adopt(); err != nil {
			ps.off.Store(true)
			log("cannot prepare the directory pool; starts make their directories", "dir", ps.dir, "err", err)
			return
		}
		ps.started.Store(true)
		for ctx.Err() == nil && !ps.off.Load() {
			// Not while starts are asking: a tree made then competes with
			// them for the CPU and the file system's journal.
			if wait := dirPoolQuiet - time.Since(time.Unix(0, ps.lastUse.Load())); wait > 0 {
				sleep(ctx, wait)
				continue
			}
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

// adopt offers the whole trees an earlier agent left in the pool's
// directory and removes everything else there: slots of no pool, a slot
// holding no tree or something beside it, a tree half made (a directory
// missing) or not the agent's own (a link, another owner: scrub). A kept
// tree is emptied down to its kind's directories and given their modes, so
// it is what a tree made new is. Removing the trees at each start and
// making them again freed and made thousands of inodes (nine a tree, 512
// trees of each kind in a pool that a burst had grown), which on ext4
// without a journal made every mkdir of the next minutes dearer (see
// recycle). Each pool then wants at least the trees it kept: a restarted
// agent keeps ready what its node's largest burst needed.
func (ps *dirPools) adopt() error {
	var st unix.Stat_t
	err := unix.Lstat(ps.dir, &st)
	if errors.Is(err, unix.ENOENT) {
		return os.Mkdir(ps.dir, 0o700)
	}
	if err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Uid != uint32(os.Geteuid()) {
		// Not a directory of the agent's own: start over.
		if err := os.RemoveAll(ps.dir); err != nil {
			return err
		}
		return os.Mkdir(ps.dir, 0o700)
	}
	entries, err := os.ReadDir(ps.dir)
	if err != nil {
		return err
	}
	// New slots are numbered past every slot found. Each pool wants at
	// least as many trees as it had slots: trees ready, or being made.
	var seq uint64
	slots := map[*dirPool]int64{}
	for _, e := range entries {
		if p, n, ok := ps.slotOf(e.Name()); ok {
			seq = max(seq, n)
			slots[p]++
		}
	}
	ps.seq.Store(seq)
	for p, n := range slots {
		p.want.Store(max(p.want.Load(), min(n, int64(cap(p.ready)))))
	}
	for _, e := range entries {
		slot := filepath.Join(ps.dir, e.Name())
		p, _, ok := ps.slotOf(e.Name())
		if !ok || !e.IsDir() || len(p.ready) >= cap(p.ready) || !keepSlot(slot, p.dirs) {
			if err := os.RemoveAll(slot); err != nil {
				return err
			}
			continue
		}
		p.ready <- slot
		p.kept.Add(1)
	}
	return nil
}

// slotOf is the pool a slot's name ("alloc-7", "task-12") says it is of,
// and its number; ok false for a name no slot has.
func (ps *dirPools) slotOf(name string) (*dirPool, uint64, bool) {
	for _, p := range []*dirPool{ps.alloc, ps.task} {
		if rest, ok := strings.CutPrefix(name, p.kind+"-"); ok {
			n, err := strconv.ParseUint(rest, 10, 64)
			return p, n, err == nil && n > 0
		}
	}
	return nil, 0, false
}

// keepSlot says whether slot, found in the pool's directory at the agent's
// start, holds a whole tree of dirs and nothing else; it empties the tree
// (scrub).
func keepSlot(slot string, dirs []treeDir) bool {
	var st unix.Stat_t
	if err := unix.Lstat(slot, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Uid != uint32(os.Geteuid()) {
		return false
	}
	entries, err := os.ReadDir(slot)
	if err != nil || len(entries) != 1 || entries[0].Name() != slotTreeName {
		return false
	}
	return scrub(filepath.Join(slot, slotTreeName), dirs)
}

// fillOne adds one tree to the pool that lacks more, and reports whether
// either lacked any.
func (ps *dirPools) fillOne() (bool, error) {
	p := ps.alloc
	if ps.task.short() > p.short() {
		p = ps.task
	}
	if p.short() <= 0 {
		return false, nil
	}
	var slot string
	select {
	case slot = <-p.free:
	default:
		var err error
		if slot, err = ps.newSlot(p); err != nil {
			return false, err
		}
	}
	if err := p.build(filepath.Join(slot, slotTreeName)); err != nil {
		os.RemoveAll(slot)
		return false, fmt.Errorf("%s tree in %s: %w", p.kind, slot, err)
	}
	select {
	case p.ready <- slot:
	default:
		// A take gave a tree back meanwhile.
		os.RemoveAll(slot)
	}
	return true, nil
}

// newSlot makes an empty slot for a tree of p.
func (ps *dirPools) newSlot(p *dirPool) (string, error) {
	slot := filepath.Join(ps.dir, p.kind+"-"+strconv.FormatUint(ps.seq.Add(1), 10))
	return slot, os.Mkdir(slot, 0o700)
}

// expect notes that the trees of a forgotten alloc with tasks tasks are
// on their way back (removeDirs waits for starts to be quiet before it
// recycles them): the pools make no tree in their place meanwhile.
// arrived ends that, once they are recycled or removed.
func (ps *dirPools) expect(tasks int) {
	if ps != nil {
		ps.alloc.incoming.Add(1)
		ps.task.incoming.Add(int64(tasks))
	}
}

func (ps *dirPools) arrived(tasks int) {
	if ps != nil {
		ps.alloc.incoming.Add(-1)
		ps.task.incoming.Add(-int64(tasks))
		ps.alloc.refill() // those removed leave the pool short
	}
}

// touch notes that a start ended: no tree is made for dirPoolQuiet.
func (ps *dirPools) touch() {
	if ps != nil {
		ps.lastUse.Store(time.Now().UnixNano())
	}
}

// awaitQuiet waits until no start has asked for a tree, or ended, for
// dirPoolQuiet, or for most, whichever comes first; at once without a pool.
func (ps *dirPools) awaitQuiet(most time.Duration) {
	if ps == nil {
		return
	}
	deadline := time.Now().Add(most)
	for {
		wait := dirPoolQuiet - time.Since(time.Unix(0, ps.lastUse.Load()))
		left := time.Until(deadline)
		if wait <= 0 || left <= 0 {
			return
		}
		time.Sleep(min(wait, left))
	}
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

// A forgotten alloc's directory was removed, and the pool's thread made a
// new tree in its place: on ext4 without a journal each mkdir then also
// searched past the inodes freed in the last minutes (such an ext4 does
// not reuse an inode freed less than a minute ago, six if its inode table
// block is not yet written back, and looks at each free one from the start
// of the block group at every new inode: 65% of drover dev's CPU in
// drover-bench starts on such a machine), so that a job started right after another was purged
// paid for each directory the purge freed, at each of its mkdirs. The
// removal is now a recycling: the alloc's tree and its tasks' trees are
// emptied down to the directories a new tree has, given their modes, and
// put in the pools, where a start takes them as it takes a made one. No
// inode is freed or made.
//
// A tree is recycled only if its directories are the agent's own, user
// and group (a task run as another user owns its task directory, local/
// and secrets/: those are removed), real directories (no link), without
// an ACL or a user attribute a task may have set (hasOwnAttrs), and the
// pool has room;
// anything else in them is removed. A process of the task that outlived
// it (a raw_exec task's child that left its process group; exec kills
// what remains in the task's cgroup) could still hold one open and write
// into the next alloc's tree: with the agent's user or another's, it can
// reach the next alloc's directories by their path already.

// recycle gives the trees of dir, a forgotten alloc's directory, to the
// pools, or removes what it cannot give; without pools it removes dir.
func (ps *dirPools) recycle(dir string) error {
	if ps == nil || ps.off.Load() || !ps.started.Load() {
		return os.RemoveAll(dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return os.RemoveAll(dir)
	}
	var errs []error
	for _, e := range entries {
		if e.Name() == sharedDirName {
			continue
		}
		// A task's tree, or what is not one (an artifact's stage).
		path := filepath.Join(dir, e.Name())
		if !e.IsDir() || !ps.give(ps.task, path) {
			errs = append(errs, os.RemoveAll(path))
		}
	}
	if !ps.give(ps.alloc, dir) {
		errs = append(errs, os.RemoveAll(dir))
	}
	return errors.Join(errs...)
}

// give moves the tree at path into a slot of p and offers it, once it is
// emptied down to p's directories (scrub); false means the caller removes
// it.
func (ps *dirPools) give(p *dirPool, path string) bool {
	if len(p.ready) >= cap(p.ready) || !scrub(path, p.dirs) {
		return false
	}
	var slot string
	select {
	case slot = <-p.free:
	default:
		var err error
		if slot, err = ps.newSlot(p); err != nil {
			return false
		}
	}
	if err := unix.Renameat2(unix.AT_FDCWD, path, unix.AT_FDCWD, filepath.Join(slot, slotTreeName), unix.RENAME_NOREPLACE); err != nil {
		p.release(slot)
		return false
	}
	select {
	case p.ready <- slot:
		p.recycled.Add(1)
	default:
		os.RemoveAll(slot) // filled meanwhile
	}
	return true
}

// scrub empties the tree at root down to the directories dirs and gives
// them their modes, and says whether it could: each must be a directory
// of the agent's own user, not a link.
func scrub(root string, dirs []treeDir) bool {
	keep := make(map[string]bool, len(dirs))
	for _, d := range dirs {
		keep[d.path] = true
	}
	uid, gid := uint32(os.Geteuid()), uint32(os.Getegid())
	for _, d := range dirs {
		path := filepath.Join(root, d.path)
		var st unix.Stat_t
		if err := unix.Lstat(path, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Uid != uid || st.Gid != gid || hasOwnAttrs(path) {
			return false
		}
		entries, err := os.ReadDir(path)
		if err != nil {
			return false
		}
		for _, e := range entries {
			if keep[filepath.Join(d.path, e.Name())] {
				continue
			}
			if os.RemoveAll(filepath.Join(path, e.Name())) != nil {
				return false
			}
		}
		if os.FileMode(st.Mode&0o7777) != unixMode(d.mode) {
			if err := os.Chmod(path, d.mode); err != nil {
				return false
			}
		}
	}
	return true
}

// hasOwnAttrs says whether the directory at path carries extended
// attributes a task may have set (user.*, or an access or default ACL,
// which a new tree's files would inherit), or cannot be read for them: such
// a tree is removed, not given to the next alloc. Security labels
// (security.*) are the system's, not the task's.
func hasOwnAttrs(path string) bool {
	buf := make([]byte, 1024)
	n, err := unix.Llistxattr(path, buf)
	if errors.Is(err, unix.ENOTSUP) {
		return false // the file system keeps none
	}
	if err != nil {
		return true // ERANGE: more than a task tree's own, or unreadable
	}
	for name := range strings.SplitSeq(string(buf[:n]), "\x00") {
		if strings.HasPrefix(name, "user.") || strings.HasPrefix(name, "system.posix_acl_") {
			return true
		}
	}
	return false
}

// unixMode is mode's permission bits as stat(2) shows them.
func unixMode(mode os.FileMode) os.FileMode {
	m := mode.Perm()
	if mode&os.ModeSticky != 0 {
		m |= unix.S_ISVTX
	}
	return m
}
