package agent

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"

	"github.com/drover-org/drover/internal/spec"
)

// An alloc's directory is laid out as Nomad lays it out, so that job files
// written for Nomad find their files:
//
//	<data dir>/allocs/<alloc ID>/    DROVER_ALLOC_DIR
//	  alloc/                         NOMAD_ALLOC_DIR: shared by the alloc's tasks
//	    logs/                        the tasks' <task>.stdout.log and .stderr.log
//	    data/ tmp/
//	  <task>/                        DROVER_TASK_DIR, HOME: the task's working directory
//	    local/                       NOMAD_TASK_DIR
//	    secrets/                     NOMAD_SECRETS_DIR (only the agent's user may read it)
//	    tmp/
//
// A docker task sees alloc/, local/ and secrets/ mounted at /alloc, /local
// and /secrets. tmp/ directories are writable by all, sticky, as /tmp.
const (
	sharedDirName  = spec.SharedAllocDir
	localDirName   = "local"
	secretsDirName = "secrets"
	tmpDirName     = "tmp"
	logsDirName    = "logs"
)

// Where a docker task sees its directories.
const (
	containerAllocDir   = "/alloc"
	containerLocalDir   = "/local"
	containerSecretsDir = "/secrets"
)

// sharedDir is the alloc's directory its tasks share.
func (ar *allocRunner) sharedDir() string { return filepath.Join(ar.dir, sharedDirName) }

// logDir holds the alloc's tasks' logs.
// ownFilesystem says whether a task of the alloc ran with a file system
// of its own (docker), into which the alloc's directories were mounted.
func (ar *allocRunner) ownFilesystem() bool {
	for _, tr := range ar.tasks {
		if tr.drv != nil && tr.drv.Info().OwnFilesystem {
			return true
		}
	}
	return false
}

func (ar *allocRunner) logDir() string { return filepath.Join(ar.dir, sharedDirName, logsDirName) }

// makeAllocDirs makes the alloc's directory and its shared alloc/, or
// takes them made from the agent's pool (dirpool.go); a directory already
// there (an alloc started again after an agent restart) is fine.
func (ar *allocRunner) makeAllocDirs() error {
	if ar.agent.dirPools.allocPool().take(ar.dir) {
		return nil
	}
	return makeAllocTree(ar.dir)
}

// makeTaskDirs makes the task's own directories, or takes them made.
func (tr *taskRunner) makeTaskDirs() error {
	if tr.ar.agent.dirPools.taskPool().take(tr.dir) {
		return nil
	}
	return makeTaskTree(tr.dir)
}

// ownTaskDirs gives the task's directory, local/ and secrets/ to the
// task's user when it runs as another user on the node's file system, as
// Nomad does, so the task may write where it is told to. A user the node
// does not have is left to the driver, which fails the task naming it.
func (tr *taskRunner) ownTaskDirs() error {
	u, uid, gid, ok := tr.taskOwner()
	if !ok {
		return nil
	}
	for _, d := range []string{tr.dir, filepath.Join(tr.dir, localDirName), filepath.Join(tr.dir, secretsDirName)} {
		if err := os.Lchown(d, uid, gid); err != nil {
			return err
		}
	}
	return canPass(filepath.Dir(tr.dir), u, uid)
}

// canPass checks that user u (uid) may pass through dir and every
// directory above it, by their modes: a data directory inside one only
// its owner may enter keeps the task out of its own directory, and the
// task would fail with a bare "permission denied".
func canPass(dir string, u *user.User, uid int) error {
	gids, _ := u.GroupIds()
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		perm := fi.Mode().Perm()
		var pass bool
		switch {
		case int(st.Uid) == uid:
			pass = perm&0o100 != 0
		case slices.Contains(gids, strconv.Itoa(int(st.Gid))):
			pass = perm&0o010 != 0
		default:
			pass = perm&0o001 != 0
		}
		if !pass {
			return fmt.Errorf("user %q cannot enter %s (%s, owner uid %d): a task run as another user needs every directory above its task directory to let it pass; chmod o+x %s, or give the agent a data directory it can reach", u.Username, d, fi.Mode(), st.Uid, d)
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// taskOwner is the uid and gid of the task's user, when the task runs as
// another user on the node's file system and the agent may give files to
// it (it runs as root); ok false otherwise.
func (tr *taskRunner) taskOwner() (u *user.User, uid, gid int, ok bool) {
	name := tr.task.UserOf()
	if name == "" || tr.drv.Info().OwnFilesystem || os.Geteuid() != 0 {
		return nil, 0, 0, false
	}
	u, err := user.Lookup(name)
	if err != nil {
		if u, err = user.LookupId(name); err != nil {
			return nil, 0, 0, false
		}
	}
	uid, err = strconv.Atoi(u.Uid)
	if err != nil {
		return nil, 0, 0, false
	}
	gid, err = strconv.Atoi(u.Gid)
	if err != nil {
		return nil, 0, 0, false
	}
	return u, uid, gid, true
}

// treeDir is one directory of a tree an alloc or a task is given, by its
// path in the tree ("" is the tree's own directory) and its mode.
type treeDir struct {
	path string
	mode os.FileMode
}

// allocTreeDirs are an alloc's directory and its shared alloc/, parents
// first; taskTreeDirs a task's directory and the ones in it. The tmp
// directories are writable by all and sticky, secrets/ the agent's
// alone. Both the makers below and the directory pool's recycling of a
// forgotten alloc's trees (dirpool.go) go by these.
var (
	allocTreeDirs = []treeDir{
		{"", 0o755}, {sharedDirName, 0o755},
		{filepath.Join(sharedDirName, logsDirName), 0o755},
		{filepath.Join(sharedDirName, "data"), 0o755},
		{filepath.Join(sharedDirName, tmpDirName), 0o777 | os.ModeSticky},
	}
	taskTreeDirs = []treeDir{
		{"", 0o755}, {localDirName, 0o755}, {tmpDirName, 0o777 | os.ModeSticky}, {secretsDirName, 0o700},
	}
)

// makeAllocTree makes an alloc's directory dir and its shared alloc/.
func makeAllocTree(dir string) error { return makeTree(dir, allocTreeDirs) }

// makeTaskTree makes a task's directory dir and the ones in it.
func makeTaskTree(dir string) error { return makeTree(dir, taskTreeDirs) }

// makeTree makes the directories dirs under dir, dir included, with their
// modes whatever the agent's umask (a task run as another user must reach
// its directory); those already there (an alloc started again after an
// agent restart) get their modes. A mode of the owner's bits alone needs no
// chmod after a mkdir: the umask only takes bits away, and not the
// owner's.
func makeTree(dir string, dirs []treeDir) error {
	for _, d := range dirs {
		path := filepath.Join(dir, d.path)
		err := os.Mkdir(path, d.mode.Perm())
		if err != nil && !os.IsExist(err) {
			return err
		}
		if err == nil && d.mode&^0o700 == 0 {
			continue
		}
		if err := os.Chmod(path, d.mode); err != nil {
			return err
		}
	}
	return nil
}

// dirs are the task's directories as the task sees them.
func (tr *taskRunner) dirs() spec.TaskDirs {
	if tr.drv.Info().OwnFilesystem {
		// A container has its own file system: it sees the mounts, and
		// the image's working directory.
		return spec.TaskDirs{Alloc: containerAllocDir, Local: containerLocalDir, Secrets: containerSecretsDir}
	}
	return spec.TaskDirs{
		DroverAlloc: tr.ar.dir, Alloc: tr.ar.sharedDir(), Task: tr.dir,
		Local: filepath.Join(tr.dir, localDirName), Secrets: filepath.Join(tr.dir, secretsDirName),
	}
}
