package agent

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// startPools runs pools of size trees of each kind in dataDir, building
// with alloc and task, and waits until both are full; stop ends them.
func startPools(t *testing.T, dataDir string, size int, alloc, task func(string) error) (ps *dirPools, stop func()) {
	t.Helper()
	ps = newDirPools(dataDir, size, alloc, task)
	ctx, cancel := context.WithCancel(context.Background())
	ps.run(ctx, func(msg string, args ...any) { t.Errorf("dir pool: %s %v", msg, args) })
	stop = func() { cancel(); ps.wait() }
	t.Cleanup(stop)
	waitFull(t, ps)
	return ps, stop
}

func waitFull(t *testing.T, ps *dirPools) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for ps.alloc.short() > 0 || ps.task.short() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("pools not full after 30s: %d alloc and %d task trees of %d", len(ps.alloc.ready), len(ps.task.ready), ps.alloc.want.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// markedTree builds a tree with make, then writes a file "mark" holding a
// number no other tree of the test has; built counts them.
func markedTree(make func(string) error, built *atomic.Int64) func(string) error {
	return func(dir string) error {
		if err := make(dir); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, "mark"), []byte(strconv.FormatInt(built.Add(1), 10)), 0o644)
	}
}

// TestDirPoolGivesEachTreeOnce: takers racing each other and the filler
// get trees no one else got, whole, and no tree is lost: every tree built
// is either at one taker's destination or still in the pool.
func TestDirPoolGivesEachTreeOnce(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	allocs := filepath.Join(dataDir, "allocs")
	if err := os.Mkdir(allocs, 0o755); err != nil {
		t.Fatal(err)
	}
	var built atomic.Int64
	ps, stop := startPools(t, dataDir, 8, markedTree(makeAllocTree, &built), markedTree(makeTaskTree, &built))

	const takers, perTaker = 4, 40
	var mu sync.Mutex
	var got []string // the destinations a take filled
	var wg sync.WaitGroup
	for i := range takers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range perTaker {
				dst := filepath.Join(allocs, fmt.Sprintf("a%d-%d", i, j))
				if ps.alloc.take(dst) {
					mu.Lock()
					got = append(got, dst)
					mu.Unlock()
					// And the alloc's task's tree, inside it.
					if ps.task.take(filepath.Join(dst, "t")) {
						mu.Lock()
						got = append(got, filepath.Join(dst, "t"))
						mu.Unlock()
					}
				}
				if j%10 == 9 {
					// Quiet for longer than dirPoolQuiet: the filler
					// makes more trees while others take.
					time.Sleep(2 * dirPoolQuiet)
				}
			}
		}()
	}
	wg.Wait()
	stop()
	if len(got) < 16 {
		t.Fatalf("only %d takes filled a destination; the 16 trees ready at the start should have gone first", len(got))
	}
	seen := map[string]string{}
	for _, dst := range got {
		m, err := os.ReadFile(filepath.Join(dst, "mark"))
		if err != nil {
			t.Fatalf("taken tree at %s has no mark: %v", dst, err)
		}
		if prev, ok := seen[string(m)]; ok {
			t.Fatalf("tree %s given twice: to %s and %s", m, prev, dst)
		}
		seen[string(m)] = dst
		tmpDir := filepath.Join(dst, sharedDirName, tmpDirName) // an alloc's tree
		if filepath.Base(dst) == "t" {
			tmpDir = filepath.Join(dst, tmpDirName) // a task's
		}
		tmp, err := os.Stat(tmpDir)
		if err != nil || tmp.Mode() != os.ModeDir|os.ModeSticky|0o777 {
			t.Fatalf("taken tree at %s is not whole: tmp/ %v, %v", dst, tmp, err)
		}
	}
	slots, err := os.ReadDir(ps.dir)
	if err != nil {
		t.Fatal(err)
	}
	left := 0 // slots holding a tree
	for _, s := range slots {
		if _, err := os.Stat(filepath.Join(ps.dir, s.Name(), slotTreeName)); err == nil {
			left++
		}
	}
	if int64(len(got)+left) != built.Load() {
		t.Errorf("%d trees built, %d taken and %d left in the pool", built.Load(), len(got), left)
	}
}

// TestDirPoolKeepsTreeWhenDestinationExists: an alloc started again after
// an agent restart has its directory; a take must neither replace nor
// fill it, and the tree it had goes back to the pool.
func TestDirPoolKeepsTreeWhenDestinationExists(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	ps, _ := startPools(t, dataDir, 1, makeAllocTree, makeTaskTree)
	for _, dst := range []string{"empty", "full"} {
		dst = filepath.Join(dataDir, dst)
		if err := os.Mkdir(dst, 0o755); err != nil {
			t.Fatal(err)
		}
		if filepath.Base(dst) == "full" {
			if err := os.WriteFile(filepath.Join(dst, "keep"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if ps.alloc.take(dst) {
			t.Fatalf("take onto the existing %s succeeded", dst)
		}
		entries, err := os.ReadDir(dst)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]int{"empty": 0, "full": 1}[filepath.Base(dst)]; len(entries) != want {
			t.Errorf("%s holds %d entries after the take, want %d", dst, len(entries), want)
		}
		if n := len(ps.alloc.ready); n != 1 {
			t.Errorf("%d alloc trees ready after a refused take, want the one given back", n)
		}
	}
	if ps.off.Load() {
		t.Error("a refused take turned the pool off")
	}
}

// TestDirPoolStartsOverAfterCrash: what an agent that died left in the
// pool's directory (half-made trees, a tree with a wrong mode, a stray
// file) is removed before the pool offers anything, so a start never
// takes a tree it did not finish.
func TestDirPoolStartsOverAfterCrash(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	pool := filepath.Join(dataDir, dirPoolDirName)
	for _, d := range []string{"alloc-1/alloc", "alloc-2/alloc/logs", "task-1/tmp", "task-2/local"} {
		if err := os.MkdirAll(filepath.Join(pool, d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(pool, d, "stale"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(pool, "junk"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ps, _ := startPools(t, dataDir, 2, makeAllocTree, makeTaskTree)
	var ready []string
	for _, p := range []*dirPool{ps.alloc, ps.task} {
		for range len(p.ready) {
			d := <-p.ready
			ready = append(ready, filepath.Base(d))
			p.ready <- d
		}
	}
	entries, err := os.ReadDir(pool)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	slices.Sort(ready)
	if !slices.Equal(names, ready) {
		t.Errorf("pool directory holds %v, want only the trees ready %v", names, ready)
	}
	allocDst, taskDst := filepath.Join(dataDir, "a"), filepath.Join(dataDir, "a", "t")
	if !ps.alloc.take(allocDst) || !ps.task.take(taskDst) {
		t.Fatal("a full pool gave no tree")
	}
	err = filepath.Walk(allocDst, func(path string, fi os.FileInfo, err error) error {
		if err == nil && fi.Name() == "stale" {
			t.Errorf("a tree left by the dead agent was handed out: %s", path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"alloc/logs", "alloc/data", "alloc/tmp", "t/local", "t/tmp", "t/secrets"} {
		if _, err := os.Stat(filepath.Join(allocDst, d)); err != nil {
			t.Errorf("taken trees lack %s: %v", d, err)
		}
	}
}

// TestDirPoolGrowsWithMisses: a pool keeps minDirPool trees ready at
// first, and one more for each start that found it empty, up to its size.
func TestDirPoolGrowsWithMisses(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	ps := newDirPools(dataDir, minDirPool+5, makeAllocTree, makeTaskTree) // not run: no tree is made
	if got := ps.alloc.want.Load(); got != minDirPool {
		t.Fatalf("a new pool wants %d trees, want %d", got, minDirPool)
	}
	for i := range 10 {
		if ps.alloc.take(filepath.Join(dataDir, strconv.Itoa(i))) {
			t.Fatal("an empty pool gave a tree")
		}
	}
	if got := ps.alloc.want.Load(); got != minDirPool+5 {
		t.Errorf("after 10 misses the pool wants %d trees, want its size %d", got, minDirPool+5)
	}
	if got := ps.task.want.Load(); got != minDirPool {
		t.Errorf("the task pool, never asked, wants %d trees, want %d", got, minDirPool)
	}
	if newDirPools(dataDir, -1, makeAllocTree, makeTaskTree) != nil {
		t.Error("a pool of negative size exists")
	}
}

// TestDirPoolOffAcrossFileSystems: a destination on another file system
// (the data dir's allocs/ a mount of its own) cannot take a tree by
// rename: the take says so, the pool turns itself off, and the filler
// stops.
func TestDirPoolOffAcrossFileSystems(t *testing.T) {
	t.Parallel()
	other, err := os.MkdirTemp("/dev/shm", "dirpool-test-")
	if err != nil {
		t.Skip("no /dev/shm for a second file system:", err)
	}
	t.Cleanup(func() { os.RemoveAll(other) })
	dataDir := t.TempDir()
	if sameFS(t, dataDir, other) {
		t.Skip("the test's temporary directory is on /dev/shm's file system")
	}
	ps, stop := startPools(t, dataDir, 1, makeAllocTree, makeTaskTree)
	if ps.alloc.take(filepath.Join(other, "a")) {
		t.Fatal("a take across file systems succeeded")
	}
	if !ps.off.Load() {
		t.Fatal("the pool is still on after a rename across file systems")
	}
	stop() // returns: the filler has stopped
	if ps.task.take(filepath.Join(dataDir, "t")) {
		t.Error("a pool turned off still gave a tree")
	}
}

func sameFS(t *testing.T, a, b string) bool {
	t.Helper()
	fa, err := os.Stat(a)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := os.Stat(b)
	if err != nil {
		t.Fatal(err)
	}
	return devOf(fa) == devOf(fb)
}

func devOf(fi os.FileInfo) uint64 { return fi.Sys().(*syscall.Stat_t).Dev }

// BenchmarkStartDirs is what a one-task alloc's start spends on its
// directories: made (nine mkdirs and two chmods, as without a pool), or
// taken from full pools (two renames; the trees are made outside the
// timer, as the pool's thread makes them between bursts).
func BenchmarkStartDirs(b *testing.B) {
	b.Run("made", func(b *testing.B) {
		allocs := b.TempDir()
		for i := range b.N {
			dir := filepath.Join(allocs, strconv.Itoa(i))
			if err := makeAllocTree(dir); err != nil {
				b.Fatal(err)
			}
			if err := makeTaskTree(filepath.Join(dir, "t")); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("taken", func(b *testing.B) {
		dataDir := b.TempDir()
		allocs := filepath.Join(dataDir, "allocs")
		if err := os.Mkdir(allocs, 0o755); err != nil {
			b.Fatal(err)
		}
		const batch = 256
		ps := newDirPools(dataDir, batch, makeAllocTree, makeTaskTree)
		ps.alloc.want.Store(batch)
		ps.task.want.Store(batch)
		if err := ps.adopt(); err != nil {
			b.Fatal(err)
		}
		for i := 0; i < b.N; i += batch {
			b.StopTimer()
			for {
				made, err := ps.fillOne()
				if err != nil {
					b.Fatal(err)
				}
				if !made {
					break
				}
			}
			b.StartTimer()
			for j := i; j < min(i+batch, b.N); j++ {
				dir := filepath.Join(allocs, strconv.Itoa(j))
				if !ps.alloc.take(dir) || !ps.task.take(filepath.Join(dir, "t")) {
					b.Fatal("a full pool gave no tree")
				}
			}
		}
	})
}

// awaitQuiet returns once starts have been quiet for dirPoolQuiet, and
// after most however busy they stay.
func TestDirPoolAwaitQuiet(t *testing.T) {
	ps := newDirPools(t.TempDir(), 8, makeAllocTree, makeTaskTree) // not run: no tree is made
	t0 := time.Now()
	ps.awaitQuiet(time.Second)
	if took := time.Since(t0); took > dirPoolQuiet {
		t.Errorf("with no start ever, awaitQuiet took %s", took)
	}
	ps.touch()
	t0 = time.Now()
	ps.awaitQuiet(time.Second)
	if took := time.Since(t0); took < dirPoolQuiet*9/10 || took > time.Second/2 {
		t.Errorf("after one start, awaitQuiet took %s, want about %s", took, dirPoolQuiet)
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(dirPoolQuiet / 5):
				ps.touch()
			}
		}
	}()
	ps.touch()
	t0 = time.Now()
	ps.awaitQuiet(300 * time.Millisecond)
	if took := time.Since(t0); took < 300*time.Millisecond || took > 2*time.Second {
		t.Errorf("with starts every %s, awaitQuiet(300ms) took %s", dirPoolQuiet/5, took)
	}
	var nilPools *dirPools
	nilPools.awaitQuiet(time.Hour) // no pool: at once
}

// readyInodes is the inode of each tree p holds ready, by slot.
func readyInodes(t *testing.T, p *dirPool) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	for range len(p.ready) {
		slot := <-p.ready
		out[slot] = inode(t, filepath.Join(slot, slotTreeName))
		p.ready <- slot
	}
	return out
}

// TestDirPoolKeepsWholeTreesAcrossRestart: an agent started again on the
// same data directory offers the trees the last one left whole (the same
// directories, by their inode numbers from stat(2): none removed and made
// again), emptied of what was put in them and with their modes, removes a
// tree half made and an empty slot, and keeps ready as many trees as the
// last agent's pool had slots for.
func TestDirPoolKeepsWholeTreesAcrossRestart(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	const size = minDirPool + 8
	ps, stop := startPools(t, dataDir, size, makeAllocTree, makeTaskTree)
	// A burst bigger than minDirPool grew the alloc pool.
	ps.alloc.want.Store(size)
	ps.alloc.refill()
	waitFull(t, ps)
	stop()
	allocs, tasks := readyInodes(t, ps.alloc), readyInodes(t, ps.task)
	if len(allocs) != size || len(tasks) != minDirPool {
		t.Fatalf("%d alloc and %d task trees ready before the restart, want %d and %d", len(allocs), len(tasks), size, minDirPool)
	}
	// What the next agent must not hand out: a stray file and a mode
	// changed in one tree, a tree missing a directory (half made), a slot
	// holding no tree.
	var changed, half string
	for slot := range allocs {
		switch {
		case changed == "":
			changed = slot
			tree := filepath.Join(slot, slotTreeName)
			if err := os.WriteFile(filepath.Join(tree, sharedDirName, logsDirName, "t.stdout.log"), []byte("old"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(filepath.Join(tree, sharedDirName, tmpDirName), 0o700); err != nil {
				t.Fatal(err)
			}
		case half == "":
			half = slot
			if err := os.Remove(filepath.Join(slot, slotTreeName, sharedDirName, "data")); err != nil {
				t.Fatal(err)
			}
		}
	}
	empty := filepath.Join(dataDir, dirPoolDirName, "task-999")
	if err := os.Mkdir(empty, 0o700); err != nil {
		t.Fatal(err)
	}

	ps2, _ := startPools(t, dataDir, size, makeAllocTree, makeTaskTree)
	if got := ps2.alloc.want.Load(); got != size {
		t.Errorf("the restarted alloc pool wants %d trees, want the %d the last one had grown to", got, size)
	}
	allocs2, tasks2 := readyInodes(t, ps2.alloc), readyInodes(t, ps2.task)
	for slot, ino := range allocs {
		if slot == half {
			if _, ok := allocs2[slot]; ok {
				t.Errorf("the half-made tree in %s is offered", slot)
			}
			continue
		}
		if allocs2[slot] != ino {
			t.Errorf("alloc tree %s: inode %d after the restart, %d before: not kept", slot, allocs2[slot], ino)
		}
	}
	for slot, ino := range tasks {
		if tasks2[slot] != ino {
			t.Errorf("task tree %s: inode %d after the restart, %d before: not kept", slot, tasks2[slot], ino)
		}
	}
	// The half-made tree's slot is made anew, and the empty slot counts
	// in the task pool's want.
	if len(allocs2) != size || len(tasks2) != minDirPool+1 {
		t.Errorf("%d alloc and %d task trees ready after the restart, want %d and %d", len(allocs2), len(tasks2), size, minDirPool+1)
	}
	if _, err := os.Lstat(empty); !os.IsNotExist(err) {
		t.Errorf("the empty slot %s is still there: %v", empty, err)
	}
	// The changed tree is as a new one.
	dst := filepath.Join(dataDir, "fresh")
	if err := makeAllocTree(dst); err != nil {
		t.Fatal(err)
	}
	if got, want := treeListing(t, filepath.Join(changed, slotTreeName)), treeListing(t, dst); !maps.Equal(got, want) {
		t.Errorf("a kept tree holds %v, a new one %v", got, want)
	}
	// New slots are not named as kept ones: the pool fills and hands out.
	for i := range 2 * size {
		ps2.alloc.take(filepath.Join(dataDir, "a"+strconv.Itoa(i)))
	}
	ps2.alloc.refill()
	waitFull(t, ps2)
	if ps2.off.Load() {
		t.Error("the pool turned itself off after the restart")
	}
}
