package agent

import (
	"os"
	"sync"
)

// A forgotten alloc's directory trees go back to the directory pool
// (dirPools.recycle) and become a later alloc's: the same inodes. Whatever
// still holds one open would then reach that later alloc. Two things
// could:
//
//   - a log reader (`drover logs -f`) holds the alloc's alloc/logs open
//     through an os.Root for as long as it follows; after a recycle it
//     would stream the next alloc's logs, whichever job and namespace
//     that is. dirHolds counts those readers: a held alloc's trees are
//     removed, not recycled (the reader then goes quiet, as it did when
//     every tree was removed), and a reader asking for an alloc whose
//     trees are being recycled is told it has none.
//   - a task with a file system of its own (docker) has the alloc's and
//     its task's directories bind-mounted; a container that outlived its
//     alloc would write into the next one. Such an alloc's trees are
//     removed (goneDir.recycle false).
//
// A raw_exec task's process that left its process group and outlived its
// alloc runs as the agent's user and reaches any alloc's directories by
// their path already; exec's are killed with their cgroup.
type dirHolds struct {
	mu    sync.Mutex
	open  map[string]int  // alloc dir -> readers holding it open
	going map[string]bool // alloc dirs being recycled
}

func newDirHolds() *dirHolds {
	return &dirHolds{open: map[string]int{}, going: map[string]bool{}}
}

// hold notes a reader of dir, unless dir is being recycled (false).
func (h *dirHolds) hold(dir string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.going[dir] {
		return false
	}
	h.open[dir]++
	return true
}

// release ends a hold.
func (h *dirHolds) release(dir string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.open[dir]--; h.open[dir] <= 0 {
		delete(h.open, dir)
	}
}

// claim marks dir as being recycled and says so, unless a reader holds it.
func (h *dirHolds) claim(dir string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.open[dir] > 0 {
		return false
	}
	h.going[dir] = true
	return true
}

// done ends a claim.
func (h *dirHolds) done(dir string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.going, dir)
}

// goneDir is a forgotten alloc's directory, and whether its trees may go
// back to the pool (see dirHolds).
type goneDir struct {
	dir     string
	recycle bool
	tasks   int // the alloc's tasks: its task trees
}

// dispose recycles d's trees when nothing holds them, else removes them.
func (a *Agent) dispose(d goneDir) error {
	if d.recycle && a.holds.claim(d.dir) {
		defer a.holds.done(d.dir)
		return a.dirPools.recycle(d.dir)
	}
	return os.RemoveAll(d.dir)
}
