package agent

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// treeListing is every path under root (root itself as "."), with its
// type and mode bits as lstat(2) shows them.
func treeListing(t *testing.T, root string) map[string]os.FileMode {
	t.Helper()
	out := map[string]os.FileMode{}
	err := filepath.Walk(root, func(path string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		out[rel] = fi.Mode()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// takeInode takes every ready tree of p to dir/taken-N and returns the
// one whose directory is inode ino ("" if none).
func takeInode(t *testing.T, p *dirPool, dir string, ino uint64) string {
	t.Helper()
	found := ""
	for i := 0; len(p.ready) > 0; i++ {
		dst := filepath.Join(dir, "taken-"+p.kind+"-"+string(rune('a'+i)))
		if !p.take(dst) {
			t.Fatalf("take of a ready %s tree failed", p.kind)
		}
		if inode(t, dst) == ino {
			found = dst
		}
	}
	return found
}

// TestDirPoolRecyclesForgottenAlloc: a forgotten alloc's directory and
// its task's go back to the pools as the same directories (no inode freed
// or made), holding nothing of the alloc that used them (its logs, data,
// secrets, a link, a stage directory, a mode its task changed), exactly as
// a tree made new: a start cannot tell them apart.
func TestDirPoolRecyclesForgottenAlloc(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	allocs := filepath.Join(dataDir, "allocs")
	if err := os.Mkdir(allocs, 0o755); err != nil {
		t.Fatal(err)
	}
	// Room for more than it keeps ready: a full pool takes no tree back.
	ps, _ := startPools(t, dataDir, minDirPool+2, makeAllocTree, makeTaskTree)

	fresh := filepath.Join(dataDir, "fresh")
	if err := makeAllocTree(fresh); err != nil {
		t.Fatal(err)
	}
	if err := makeTaskTree(filepath.Join(fresh, "t")); err != nil {
		t.Fatal(err)
	}
	wantAlloc := treeListing(t, fresh)
	delete(wantAlloc, "t")
	for k := range wantAlloc {
		if filepath.Dir(k) == "t" || filepath.Base(filepath.Dir(k)) == "t" {
			delete(wantAlloc, k)
		}
	}
	wantTask := treeListing(t, filepath.Join(fresh, "t"))

	dir := filepath.Join(allocs, "a1")
	if err := makeAllocTree(dir); err != nil {
		t.Fatal(err)
	}
	task := filepath.Join(dir, "t")
	if err := makeTaskTree(task); err != nil {
		t.Fatal(err)
	}
	allocIno, taskIno := inode(t, dir), inode(t, task)
	for _, f := range []string{"alloc/logs/t.stdout.log", "alloc/data/db/file", "alloc/tmp/x", "t/local/conf", "t/secrets/token", "t/tmp/deep/er/file", ".artifact-1/part", "top"} {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("the last alloc's"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("/etc", filepath.Join(task, "local", "etc")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(task, "local"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "alloc", "tmp"), 0o755); err != nil {
		t.Fatal(err)
	}

	if err := ps.recycle(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Fatalf("the forgotten alloc's directory is still there: %v", err)
	}
	if ps.alloc.recycled.Load() != 1 || ps.task.recycled.Load() != 1 {
		t.Fatalf("recycled %d alloc and %d task trees, want 1 each", ps.alloc.recycled.Load(), ps.task.recycled.Load())
	}
	gotAlloc := takeInode(t, ps.alloc, allocs, allocIno)
	gotTask := takeInode(t, ps.task, allocs, taskIno)
	if gotAlloc == "" || gotTask == "" {
		t.Fatalf("the recycled trees were not handed out (alloc %q, task %q)", gotAlloc, gotTask)
	}
	for _, c := range []struct {
		dir  string
		want map[string]os.FileMode
	}{{gotAlloc, wantAlloc}, {gotTask, wantTask}} {
		got := treeListing(t, c.dir)
		if len(got) != len(c.want) {
			var names []string
			for k := range got {
				names = append(names, k)
			}
			sort.Strings(names)
			t.Errorf("%s holds %v, want only a new tree's %d directories", c.dir, names, len(c.want))
		}
		for k, m := range c.want {
			if got[k] != m {
				t.Errorf("%s/%s: mode %v, want %v as made new", c.dir, k, got[k], m)
			}
		}
	}
}

// TestDirPoolRecycleRemovesWhatItCannotTrust: a task directory its task's
// user owns (a task run as another user), or one whose local/ became a
// link, is removed, not recycled; the alloc's own tree still is.
func TestDirPoolRecycleRemovesWhatItCannotTrust(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	dataDir := t.TempDir()
	// Room for more than it keeps ready: a full pool takes no tree back.
	ps, _ := startPools(t, dataDir, minDirPool+2, makeAllocTree, makeTaskTree)
	dir := filepath.Join(dataDir, "a1")
	if err := makeAllocTree(dir); err != nil {
		t.Fatal(err)
	}
	owned, linked := filepath.Join(dir, "owned"), filepath.Join(dir, "linked")
	grouped, acl, tagged := filepath.Join(dir, "grouped"), filepath.Join(dir, "acl"), filepath.Join(dir, "tagged")
	for _, d := range []string{owned, linked, grouped, acl, tagged} {
		if err := makeTaskTree(d); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Lchown(owned, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(filepath.Join(grouped, "local"), os.Geteuid(), 65534); err != nil {
		t.Fatal(err)
	}
	// A default ACL on local/ (user::rwx, group::r-x, other::r-x, in the
	// kernel's form), which a new file there would inherit, and a user
	// attribute. A file system without them cannot be given them either.
	le := binary.LittleEndian
	blob := le.AppendUint32(nil, 2)
	for _, e := range []struct{ tag, perm uint16 }{{0x01, 7}, {0x04, 5}, {0x20, 5}} {
		blob = le.AppendUint32(le.AppendUint16(le.AppendUint16(blob, e.tag), e.perm), 0xffffffff)
	}
	if err := unix.Setxattr(filepath.Join(acl, "local"), "system.posix_acl_default", blob, 0); err != nil && !errors.Is(err, unix.ENOTSUP) {
		t.Fatalf("setting a default ACL: %v", err)
	}
	if err := unix.Setxattr(filepath.Join(tagged, "secrets"), "user.left-by-task", []byte("x"), 0); err != nil && !errors.Is(err, unix.ENOTSUP) {
		t.Fatalf("setting a user attribute: %v", err)
	}
	if err := os.Remove(filepath.Join(linked, "local")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(linked, "local")); err != nil {
		t.Fatal(err)
	}
	readyTasks := len(ps.task.ready)
	if err := ps.recycle(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Fatalf("the forgotten alloc's directory is still there: %v", err)
	}
	if n := ps.task.recycled.Load(); n != 0 {
		t.Errorf("%d task trees recycled, want none (one its task's user owned, one with a link, one another group's, one with an ACL, one with an attribute)", n)
	}
	if len(ps.task.ready) != readyTasks {
		t.Errorf("%d task trees ready, want the %d made", len(ps.task.ready), readyTasks)
	}
	if n := ps.alloc.recycled.Load(); n != 1 {
		t.Errorf("%d alloc trees recycled, want 1", n)
	}
}

// A log reader holding a forgotten alloc's logs open keeps its trees from
// the pool: they are removed, so that the reader cannot reach the alloc
// that would take them next (it read that alloc's logs when they were
// recycled under it). A reader asking for an alloc being recycled is told
// it has no directory; once no reader holds an alloc, its trees go back;
// an alloc whose task had a file system of its own (a docker container's
// bind mounts) never does.
func TestHeldOrMountedAllocTreesAreRemovedNotRecycled(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	a := &Agent{allocsDir: filepath.Join(dataDir, "allocs"), holds: newDirHolds()}
	if err := os.Mkdir(a.allocsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	a.dirPools, _ = startPools(t, dataDir, minDirPool+4, makeAllocTree, makeTaskTree)
	newAlloc := func(id string) string {
		dir := filepath.Join(a.allocsDir, id)
		if err := makeAllocTree(dir); err != nil {
			t.Fatal(err)
		}
		if err := makeTaskTree(filepath.Join(dir, "web")); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "alloc", "logs", "web.stdout.log"), []byte(id+"'s log\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}

	held := newAlloc("held")
	root, release, err := a.allocRoot("held")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.dispose(goneDir{dir: held, recycle: true}); err != nil {
		t.Fatal(err)
	}
	if n := a.dirPools.alloc.recycled.Load(); n != 0 {
		t.Fatalf("%d alloc trees recycled while a log reader held one open, want 0", n)
	}
	// The next alloc takes what the pool holds; the reader must not see it.
	next := filepath.Join(a.allocsDir, "next")
	if !a.dirPools.alloc.take(next) {
		t.Fatal("the pool handed out no alloc tree")
	}
	if err := os.WriteFile(filepath.Join(next, "alloc", "logs", "web.stdout.log"), []byte("the next alloc's secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := root.ReadFile("web.stdout.log"); err == nil {
		t.Fatalf("the held alloc's log reader reads %q after its alloc was disposed of", b)
	}
	release()

	mounted := newAlloc("mounted")
	if err := a.dispose(goneDir{dir: mounted, recycle: false}); err != nil {
		t.Fatal(err)
	}
	if n := a.dirPools.alloc.recycled.Load(); n != 0 {
		t.Fatalf("%d alloc trees recycled of an alloc whose tasks had their own file system, want 0", n)
	}

	free := newAlloc("free")
	if !a.holds.claim(free) {
		t.Fatal("an alloc no reader holds cannot be claimed")
	}
	if _, _, err := a.allocRoot("free"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a reader asking for an alloc being recycled: err %v, want not found", err)
	}
	a.holds.done(free)
	if err := a.dispose(goneDir{dir: free, recycle: true}); err != nil {
		t.Fatal(err)
	}
	if n := a.dirPools.alloc.recycled.Load(); n != 1 {
		t.Fatalf("%d alloc trees recycled once nothing held them, want 1", n)
	}
	for _, dir := range []string{held, mounted, free} {
		if _, err := os.Lstat(dir); !os.IsNotExist(err) {
			t.Errorf("%s still there after its disposal: %v", dir, err)
		}
	}
}

// The pools make no tree in place of those a forgotten alloc is about to
// give back (recycling waits for starts to be quiet): a tree made then is
// a mkdir of each directory, and the recycled one finding no room an
// unlink of each. Once they are back, or removed, the pools fill as
// before.
func TestDirPoolWaitsForTreesOnTheirWayBack(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	allocs := filepath.Join(dataDir, "allocs")
	if err := os.Mkdir(allocs, 0o755); err != nil {
		t.Fatal(err)
	}
	ps := newDirPools(dataDir, minDirPool+4, makeAllocTree, makeTaskTree)
	if err := ps.adopt(); err != nil {
		t.Fatal(err)
	}
	ps.started.Store(true)
	fill := func() (made int) {
		for {
			ok, err := ps.fillOne()
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				return made
			}
			made++
		}
	}
	fill()
	full := len(ps.alloc.ready)
	dir := filepath.Join(allocs, "a1")
	if !ps.alloc.take(dir) || !ps.task.take(filepath.Join(dir, "web")) {
		t.Fatal("the pools handed out no tree")
	}
	// The alloc ran and was forgotten: its trees are on their way back.
	ps.expect(1)
	if made := fill(); made != 0 {
		t.Fatalf("made %d trees while the forgotten alloc's were on their way back, want 0", made)
	}
	if err := ps.recycle(dir); err != nil {
		t.Fatal(err)
	}
	ps.arrived(1)
	if len(ps.alloc.ready) != full || len(ps.task.ready) != full {
		t.Fatalf("%d alloc and %d task trees ready after the recycling, want %d each", len(ps.alloc.ready), len(ps.task.ready), full)
	}
	// Without trees on their way, a tree taken is made again.
	if !ps.alloc.take(filepath.Join(allocs, "a2")) {
		t.Fatal("the pool handed out no tree")
	}
	if made := fill(); made != 1 {
		t.Fatalf("made %d trees for the one taken, want 1", made)
	}
}
