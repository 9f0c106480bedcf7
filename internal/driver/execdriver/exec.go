// Package execdriver runs tasks as child processes of the agent, each in its
// own process group so that stopping a task stops everything it started.
//
// It serves two driver names. raw_exec runs the command with no isolation.
// exec puts each task in a cgroup of its own (cgroup.go): its memory limit
// is the task's reserved memory, so that a task that outgrows it is
// OOM-killed and reported so, and its CPU shares are its reserved MHz.
// Where the agent cannot make cgroups (not root, no cgroup file system),
// exec runs tasks as raw_exec does and says so (Isolation, and a note on
// the task). Both measure what their tasks use (usage.go).
package execdriver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/opencontainers/cgroups"
	"golang.org/x/sys/unix"

	"github.com/drover-org/drover/internal/driver"
	"github.com/drover-org/drover/internal/spec"
)

// Driver starts processes.
type Driver struct {
	name string
	// cg is where exec makes task cgroups; nil for raw_exec, and for exec
	// where cgErr says why it cannot.
	cg    *cgroupSetup
	cgErr error
	// noted is set once a task was told that exec does not isolate here.
	noted atomic.Bool
	// stdin is every task's standard input: /dev/null, opened once
	// (exec.Cmd opens and closes it at every start); nil if it cannot be
	// opened, when exec.Cmd tries at each start.
	stdin *os.File
}

// New returns a process driver registered under name ("exec" or
// "raw_exec"). exec finds where to make task cgroups now: under the
// agent's own cgroup, in a directory "drover" (v1), or in /sys/fs/cgroup/drover
// (v2).
func New(name string) *Driver {
	d := &Driver{name: name, stdin: openDevNull()}
	if name == "exec" {
		d.cg, d.cgErr = probeCgroups()
	}
	return d
}

// Close removes what the driver made ahead and holds unused (exec's
// pooled cgroups on v1), so that an agent that stops leaves none behind.
// Running tasks are not touched; the driver makes its cgroups itself
// after it.
func (d *Driver) Close() error {
	if d.cg != nil && d.cg.pool != nil {
		d.cg.pool.close()
	}
	return nil
}

// Isolation is what isolates this driver's tasks, for the node attribute
// driver.exec.isolation: IsolationV1, IsolationV2 or IsolationNone.
func (d *Driver) Isolation() string {
	if d.cg == nil {
		return IsolationNone
	}
	return d.cg.isolation()
}

// IsolationError says why exec does not isolate tasks here (nil when it
// does, or for raw_exec, which never does).
func (d *Driver) IsolationError() error { return d.cgErr }

var _ driver.Driver = (*Driver)(nil)

// Name returns the driver's name.
func (d *Driver) Name() string { return d.name }

// Info: exec says what isolates its tasks here (node attribute
// driver.exec.isolation, for constraints and for people wondering why a
// limit did not hold); raw_exec has nothing to say.
func (d *Driver) Info() driver.Info {
	if d.name != "exec" {
		return driver.Info{}
	}
	return driver.Info{Attributes: map[string]string{spec.AttrExecIsolation: d.Isolation()}}
}

// Start runs t.Command in t.Dir with t.Env, in a new process group. Output is
// copied through pipes so that the task's exit is seen even if a grandchild
// keeps the pipe open. The task's end of each pipe is opened read-write
// (see pipeTo), so the task outlives the agent without a broken pipe, and a
// later agent re-attaches to its output (Adopt).
func (d *Driver) Start(ctx context.Context, t driver.Task) (driver.Handle, error) {
	path, err := lookPath(t.Command, t.Env)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, t.Args...)
	cmd.Args[0] = t.Command
	cmd.Env = t.Env
	cmd.Dir = t.Dir
	// Setpgid puts the task in its own process group, so a stop reaches its
	// children too. No Pdeathsig: the task must outlive an agent restart.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if t.User != "" {
		cred, err := credential(t.User)
		if err != nil {
			return nil, err
		}
		cmd.SysProcAttr.Credential = cred
	}
	cg, note := d.taskCgroup(t)
	if cg != nil && d.cg.v2 {
		// v2 starts the process in its cgroup (clone3 CLONE_INTO_CGROUP):
		// nothing it does escapes the limits.
		dir, err := os.Open(cg.Path(""))
		if err != nil {
			removeCgroup(cg)
			return nil, fmt.Errorf("open cgroup: %w", err)
		}
		defer dir.Close()
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, int(dir.Fd())
	}

	// From here on, a start that fails removes the cgroup it took.
	stdout, err := pipeTo(t.Stdout)
	if err != nil {
		removeCgroup(cg)
		return nil, err
	}
	stderr, err := pipeTo(t.Stderr)
	if err != nil {
		stdout.close()
		removeCgroup(cg)
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = stdout.w, stderr.w
	if d.stdin != nil {
		cmd.Stdin = d.stdin
	}
	err = d.fork(cmd, t, cg)
	if errors.Is(err, errJoin) && t.NetNS != "" {
		// Start it outside its cgroup, but never outside its namespace.
		note = noIsolationNote(fmt.Errorf("cgroup %s: %w", cg.Path("memory"), err))
		removeCgroup(cg)
		cg = nil
		err = startInNetns(t.NetNS, cmd.Start)
	} else if errors.Is(err, errJoin) {
		// The cgroup was made but cannot be joined: the task runs
		// without it, and says so.
		note = noIsolationNote(fmt.Errorf("cgroup %s: %w", cg.Path("memory"), err))
		removeCgroup(cg)
		cg = nil
		err = cmd.Start()
	}
	if err != nil {
		stdout.close()
		stderr.close()
		removeCgroup(cg)
		if derr := checkDir(t.Dir); derr != nil {
			return nil, fmt.Errorf("start %s: %w", t.Command, derr)
		}
		if errors.Is(err, syscall.ENOEXEC) || errors.Is(err, syscall.EACCES) {
			// Not a program this node can run (a text file without #!, a
			// binary of another architecture) or not allowed: the same
			// again next time.
			return nil, fmt.Errorf("start %s: %w: %w", t.Command, err, driver.ErrNoRetry)
		}
		return nil, fmt.Errorf("start %s: %w", t.Command, err)
	}
	// The child has its copies; close ours so that EOF arrives when it exits.
	stdout.w.Close()
	stderr.w.Close()

	h := &handle{cmd: cmd, cg: cg, note: note, stdout: stdout, stderr: stderr, exited: make(chan struct{}), wait: make(chan driver.Exit, 1)}
	// The exit is learnt through a pidfd on the runtime's poller:
	// cmd.Wait alone blocks a thread in waitid for the task's whole life.
	// The task is our child and not yet reaped, so its PID is still its
	// own. Without a pidfd (an old kernel, no descriptor left) cmd.Wait
	// blocks as before.
	h.pidfd, _ = openPidfd(cmd.Process.Pid)
	go h.waitLoop(stdout, stderr)
	return h, nil
}

// openDevNull opens /dev/null for tasks' standard input. Read-only, and
// shared by all: what one task could change of it (its offset, O_NONBLOCK)
// changes nothing a read of /dev/null returns.
func openDevNull() *os.File {
	fd, err := unix.Open(os.DevNull, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	return os.NewFile(uintptr(fd), os.DevNull)
}

// fork starts cmd: on cgroup v1 with the task born in its cgroup cg
// (startInV1); v2 has set cmd up to be (CLONE_INTO_CGROUP).
func (d *Driver) fork(cmd *exec.Cmd, t driver.Task, cg cgroups.Manager) error {
	if cg == nil || d.cg.v2 {
		if t.NetNS != "" {
			return startInNetns(t.NetNS, cmd.Start)
		}
		return cmd.Start()
	}
	start := cmd.Start
	if t.NetNS != "" {
		// On startInV1's thread, already locked.
		start = func() error { return joinNetns(t.NetNS, cmd.Start) }
	}
	return d.cg.startInV1(taskCgroupName(t.ID, t.Hook), start)
}

// taskCgroup makes the cgroup of a task that exec starts, or returns a note
// saying why the task runs without one: once per driver when this node
// cannot isolate at all (the node's attribute says so from then on), at
// every start when making this task's cgroup failed.
func (d *Driver) taskCgroup(t driver.Task) (cgroups.Manager, string) {
	if d.name != "exec" {
		return nil, ""
	}
	if d.cg == nil {
		if d.noted.CompareAndSwap(false, true) {
			return nil, noIsolationNote(d.cgErr)
		}
		return nil, ""
	}
	cg, err := d.cg.newTaskCgroup(t.ID, t.Hook, t.Resources)
	if err != nil {
		return nil, noIsolationNote(err)
	}
	return cg, ""
}

// lookPath resolves a bare command name against the task's own PATH.
func lookPath(command string, env []string) (string, error) {
	if command == "" {
		return "", errors.New("no command")
	}
	if strings.Contains(command, "/") {
		fi, err := os.Stat(command)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return "", fmt.Errorf("command %s does not exist on this node (%w; %w)", command, err, driver.ErrNoRetry)
		case err != nil:
			return "", fmt.Errorf("command %s: %w", command, err)
		case fi.IsDir():
			return "", fmt.Errorf("command %s is a directory: %w", command, driver.ErrNoRetry)
		case fi.Mode()&0o111 == 0:
			return "", fmt.Errorf("command %s is not executable (mode %v): %w", command, fi.Mode().Perm(), driver.ErrNoRetry)
		}
		return command, nil
	}
	pathEnv := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathEnv = v
		}
	}
	for _, dir := range filepath.SplitList(pathEnv) {
		p := filepath.Join(dir, command)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("command %q not found in PATH %s: %w", command, pathEnv, driver.ErrNoRetry)
}

// checkDir says what is wrong with a working directory, after a failed
// start: the child's failed chdir comes back as "fork/exec <command>: no
// such file or directory", which reads as if the command were missing.
// Checked only then, so that a start costs no extra stat.
func checkDir(dir string) error {
	if dir == "" {
		return nil
	}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("working directory %s does not exist", dir)
	case err != nil:
		return fmt.Errorf("working directory: %w", err)
	case !fi.IsDir():
		return fmt.Errorf("working directory %s is not a directory", dir)
	}
	return nil
}

// credential resolves a task's user (a name, or a numeric uid) to what its
// process runs as: the user's uid, primary group and supplementary groups,
// so that nothing of the agent's own groups leaks into the task. The
// agent's own user needs no change (nil). Any other user needs an agent
// running as root; without that the start fails here with the reason,
// rather than later as a bare EPERM from the fork.
func credential(name string) (*syscall.Credential, error) {
	u, err := user.Lookup(name)
	if err != nil {
		// A user that is not there will not appear by starting again:
		// the task fails at once (ErrNoRetry).
		if _, numErr := strconv.ParseUint(name, 10, 32); numErr != nil {
			return nil, fmt.Errorf("user %q does not exist on this node (%v); create it, or change the task's user: %w", name, err, driver.ErrNoRetry)
		}
		if u, err = user.LookupId(name); err != nil {
			return nil, fmt.Errorf("user %q: no user has that uid on this node (%v); create it, or change the task's user: %w", name, err, driver.ErrNoRetry)
		}
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user %q: uid %q is not numeric", name, u.Uid)
	}
	euid := os.Geteuid()
	if int(uid) == euid {
		return nil, nil
	}
	if euid != 0 {
		return nil, fmt.Errorf("user %q (uid %d): the agent runs as uid %d, not as root, so it cannot run a task as another user; run the agent as root or leave the task's user unset", name, uid, euid)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user %q: gid %q is not numeric", name, u.Gid)
	}
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	ids, err := u.GroupIds()
	if err != nil {
		return nil, fmt.Errorf("user %q: groups: %w", name, err)
	}
	for _, id := range ids {
		g, err := strconv.ParseUint(id, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("user %q: group id %q is not numeric", name, id)
		}
		cred.Groups = append(cred.Groups, uint32(g))
	}
	return cred, nil
}

type pipe struct {
	r, w *os.File
	done chan struct{}
}

// pipeTo makes the pipe a task writes to and copies what arrives to dst.
//
// The task's end (w) is opened read-write through /proc/self/fd: an open of
// the pipe's inode on procfs, a microsecond or two, where a named pipe in
// the alloc directory would cost a mkfifo and opens on ext4 (~70-150 us
// each) on every start. Because the task itself then holds a reader, its
// writes never fail with EPIPE or SIGPIPE when no agent runs: they are
// buffered in the pipe (1 MB when the agent runs as root, else the
// kernel's 64 KB default), and only once that is full does the task block
// until an agent reads again. A later agent reopens the same pipe through
// /proc/<task>/fd/1 and 2 and loses nothing that was buffered. The agent's
// own end (r) is read-only, so EOF still comes once every writer is gone.
//
// The pipe is made nonblocking from the start and its write-only end is
// never wrapped in an os.File: so the reader joins the runtime's poller
// with no flag changes, and the write-only end, closed at once, never
// joins it (os.Pipe cost twice the system calls).
func pipeTo(dst io.Writer) (*pipe, error) {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		return nil, fmt.Errorf("task output pipe: %w", err)
	}
	rw, err := reopenReadWrite(fds[1])
	unix.Close(fds[1])
	if err != nil {
		unix.Close(fds[0])
		return nil, err
	}
	p := &pipe{r: os.NewFile(uintptr(fds[0]), "|0"), w: rw, done: make(chan struct{})}
	go p.copy(dst)
	return p, nil
}

// copyBufs are the buffers pipes are read into, each held for one read.
var copyBufs = sync.Pool{New: func() any { return new([32 << 10]byte) }}

// copy copies the pipe to dst until EOF, until r is closed (Detach), or
// until dst fails. It waits for output in the runtime's poller holding no
// buffer, and takes one from copyBufs for each read only: a thousand
// quiet tasks hold none, where io.Copy would hold 32 KB per pipe.
func (p *pipe) copy(dst io.Writer) {
	defer close(p.done)
	defer p.r.Close()
	if dst == nil {
		dst = io.Discard
	}
	rc, err := p.r.SyscallConn()
	if err != nil {
		return
	}
	for copyOnce(rc, dst) {
	}
}

// copyOnce waits until rc has output, and copies what one read gets to
// dst; false at EOF, once rc is closed, or when dst failed.
func copyOnce(rc syscall.RawConn, dst io.Writer) bool {
	var buf *[32 << 10]byte
	var n int
	var rerr error
	err := rc.Read(func(fd uintptr) bool {
		buf = copyBufs.Get().(*[32 << 10]byte)
		for {
			n, rerr = syscall.Read(int(fd), buf[:])
			if rerr != syscall.EINTR {
				break
			}
		}
		if rerr == syscall.EAGAIN {
			copyBufs.Put(buf)
			buf = nil
			return false // the poller waits for output: no buffer held
		}
		return true
	})
	if buf == nil {
		return false // closed while waiting
	}
	defer copyBufs.Put(buf)
	if err != nil || rerr != nil || n <= 0 {
		return false
	}
	_, err = dst.Write(buf[:n])
	return err == nil
}

func (p *pipe) close() { p.w.Close(); <-p.done }

// detach stops copying: the task keeps writing into the pipe's buffer.
func (p *pipe) detach() {
	if p == nil {
		return
	}
	p.r.Close() // unblocks the read in copy
	<-p.done
}

type handle struct {
	cmd            *exec.Cmd
	cg             cgroups.Manager // nil: not isolated
	pidfd          *os.File        // nil: cmd.Wait blocks until the exit
	note           string
	stdout, stderr *pipe
	exited         chan struct{}
	wait           chan driver.Exit
	exit           driver.Exit
	detached       atomic.Bool
}

// Detach stops reading the task's output and leaves the task running, for
// a later agent to adopt. The exit is still reaped (the task is our child)
// but nobody needs to receive it, and the cgroup is left to the adopter: it
// holds the OOM count that tells the adopter how the task ended.
func (h *handle) Detach() {
	h.detached.Store(true)
	h.stdout.detach()
	h.stderr.detach()
}

func (h *handle) PID() int { return h.cmd.Process.Pid }

// Note says why the task runs without the isolation exec gives, or "".
func (h *handle) Note() string { return h.note }

// Usage is the task's CPU time and memory (see measure).
func (h *handle) Usage(_ context.Context, r *driver.Round) (driver.Usage, error) {
	return measure(r, h.cg, h.cmd.Process.Pid)
}

func (h *handle) Wait() <-chan driver.Exit { return h.wait }

func (h *handle) waitLoop(stdout, stderr *pipe) {
	if h.pidfd != nil {
		// Once the pidfd says the task exited, cmd.Wait reaps it at once.
		// Should the poller fail, cmd.Wait still blocks until the exit.
		awaitPidfd(h.pidfd)
		h.pidfd.Close()
	}
	err := h.cmd.Wait()
	// The task is over when its main process is: take down whatever it
	// left in its process group, so a restart does not pile up strays.
	syscall.Kill(-h.cmd.Process.Pid, syscall.SIGKILL)
	e := driver.Exit{Time: time.Now()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		e = exitFromStatus(ee.Sys().(syscall.WaitStatus), e.Time)
	default:
		e.Err = err
	}
	e.OOMKilled = oomKilled(h.cg, e)
	if !h.detached.Load() {
		removeCgroup(h.cg)
	}
	drainOutput(stdout, stderr)
	h.exit = e
	close(h.exited)
	h.wait <- e
}

// Stop sends SIGTERM to the process group, then SIGKILL after grace. The
// group is signalled even after the leader exits, so no child is left behind.
func (h *handle) Stop(ctx context.Context, grace time.Duration) (driver.Exit, error) {
	return stopGroup(ctx, h.cmd.Process.Pid, grace, h.exited, &h.exit)
}

// Signal sends sig to the task's process group.
func (h *handle) Signal(sig syscall.Signal) error {
	select {
	case <-h.exited:
		return errors.New("the task has exited")
	default:
	}
	return syscall.Kill(-h.cmd.Process.Pid, sig)
}

func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGSEGV:
		return "SIGSEGV"
	case syscall.SIGABRT:
		return "SIGABRT"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGPIPE:
		return "SIGPIPE"
	}
	return ""
}
