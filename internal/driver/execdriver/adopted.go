package execdriver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/opencontainers/cgroups"
	"golang.org/x/sys/unix"

	"github.com/drover-org/drover/internal/driver"
	"github.com/drover-org/drover/internal/proc"
)

var _ driver.Adopter = (*Driver)(nil)

// Adopt takes over a task process that an earlier run of the agent started
// and left running. The process is not our child, so its exit is watched
// through a pidfd (readable once the process exits, waited on by the Go
// runtime's poller, so no thread blocks per task) and its exit status is
// read from /proc if it is still a zombie when seen; otherwise the exit is
// reported as unknown. Its output is re-attached by opening the pipes it
// writes to again, through /proc/PID/fd/1 and 2 (see pipeTo): what it wrote
// while no agent ran is still in them. Stop works as for a started task.
func (d *Driver) Adopt(ctx context.Context, p driver.Process, stdout, stderr io.Writer) (driver.Handle, error) {
	h := &adoptedHandle{pid: p.PID, start: p.StartTicks, exited: make(chan struct{}), wait: make(chan driver.Exit, 1)}
	pidfd, err := openPidfd(p.PID)
	if err != nil {
		return nil, fmt.Errorf("adopt pid %d: %w", p.PID, err)
	}
	// nil where the kernel has no pidfds: the exit is then seen by polling
	// /proc.
	h.pidfd = pidfd
	// The pidfd names whatever process has this PID now; it is the task
	// only if the start time is still the one that was found.
	st, err := proc.ReadStat(p.PID)
	if err != nil || st.StartTicks != p.StartTicks {
		if h.pidfd != nil {
			h.pidfd.Close()
		}
		return nil, fmt.Errorf("adopt pid %d: no longer the task's process", p.PID)
	}
	var notes []string
	var out *pipe
	var outIno uint64
	out, outIno, err = reattach(p.PID, 1, 0, stdout)
	if err != nil {
		notes = append(notes, "stdout: "+err.Error())
	}
	h.stdout = out
	h.stderr, _, err = reattach(p.PID, 2, outIno, stderr)
	if err != nil {
		notes = append(notes, "stderr: "+err.Error())
	}
	// Its cgroup, if exec made one, is where /proc says it is: OOM kills
	// and usage are read from it as for a task this agent started.
	if h.cg, err = adoptedCgroup(p.PID); err != nil {
		notes = append(notes, "cgroup: "+err.Error())
	}
	h.note = strings.Join(notes, "; ")
	go h.waitLoop()
	return h, nil
}

// reattach opens for reading the pipe that process pid writes to as fd, if
// it is one the driver made: a pipe the task holds open read-write. Anything
// else (a file, a terminal, a pipe of the task's own, or the same pipe as
// stdout after a 2>&1 inside the task) is left alone.
func reattach(pid, fd int, not uint64, dst io.Writer) (*pipe, uint64, error) {
	base := "/proc/" + strconv.Itoa(pid) + "/fd"
	info, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/fdinfo/" + strconv.Itoa(fd))
	if err != nil {
		return nil, 0, fmt.Errorf("not open: %w", err)
	}
	if flags, ok := fdinfoFlags(info); !ok || flags&unix.O_ACCMODE != unix.O_RDWR {
		return nil, 0, errors.New("not the pipe the agent made (the task replaced it); its output is not collected")
	}
	rfd, err := unix.Open(base+"/"+strconv.Itoa(fd), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("reopen: %w", err)
	}
	var sb unix.Stat_t
	if err := unix.Fstat(rfd, &sb); err != nil || sb.Mode&unix.S_IFMT != unix.S_IFIFO || sb.Ino == not {
		unix.Close(rfd)
		return nil, 0, errors.New("not the pipe the agent made (the task replaced it); its output is not collected")
	}
	p := &pipe{r: os.NewFile(uintptr(rfd), "task-output"), done: make(chan struct{})}
	go p.copy(dst)
	return p, sb.Ino, nil
}

// fdinfoFlags reads the "flags:" line (octal) of /proc/PID/fdinfo/N.
func fdinfoFlags(info []byte) (int, bool) {
	for line := range strings.SplitSeq(string(info), "\n") {
		if v, ok := strings.CutPrefix(line, "flags:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 8, 64)
			return int(n), err == nil
		}
	}
	return 0, false
}

type adoptedHandle struct {
	pid            int
	start          uint64
	pidfd          *os.File        // nil: poll /proc instead
	cg             cgroups.Manager // nil: not isolated
	stdout, stderr *pipe           // nil when that output could not be re-attached
	note           string
	exited         chan struct{}
	wait           chan driver.Exit
	exit           driver.Exit
}

var _ driver.Handle = (*adoptedHandle)(nil)

func (h *adoptedHandle) PID() int                 { return h.pid }
func (h *adoptedHandle) Wait() <-chan driver.Exit { return h.wait }

// Note says what of the task could not be taken over (its output), or "".
func (h *adoptedHandle) Note() string { return h.note }

// Detach stops reading the task's output; the task keeps running for the
// next agent to adopt.
func (h *adoptedHandle) Detach() {
	h.stdout.detach()
	h.stderr.detach()
}

// Usage is the task's CPU time and memory (see measure).
func (h *adoptedHandle) Usage(_ context.Context, r *driver.Round) (driver.Usage, error) {
	return measure(r, h.cg, h.pid)
}

func (h *adoptedHandle) Stop(ctx context.Context, grace time.Duration) (driver.Exit, error) {
	return stopGroup(ctx, h.pid, grace, h.exited, &h.exit)
}

// Signal sends sig to the task's process group.
func (h *adoptedHandle) Signal(sig syscall.Signal) error {
	select {
	case <-h.exited:
		return errors.New("the task has exited")
	default:
	}
	return syscall.Kill(-h.pid, sig)
}

func (h *adoptedHandle) waitLoop() {
	h.waitExit()
	e := driver.Exit{Time: time.Now(), Code: -1, Unknown: true}
	// Until something reaps it, an exited process is a zombie whose stat
	// still holds its wait status; its start time says it is still ours.
	if st, err := proc.ReadStat(h.pid); err == nil && st.StartTicks == h.start && st.State == 'Z' && st.HasExitCode {
		e = exitFromStatus(syscall.WaitStatus(st.ExitCode), e.Time)
	}
	// As for a started task: the task is over when its main process is.
	syscall.Kill(-h.pid, syscall.SIGKILL)
	e = adoptedOOM(h.cg, e)
	removeCgroup(h.cg)
	drainOutput(h.stdout, h.stderr)
	if h.pidfd != nil {
		h.pidfd.Close()
	}
	h.exit = e
	close(h.exited)
	h.wait <- e
}

// adoptedOOM is oomKilled for an adopted task, whose exit status is often
// unknown (another process reaped it). Its cgroup's OOM kill count is then
// the only witness, and it says how the task most likely ended: the OOM
// killer sends SIGKILL, and nothing else kills a task on its own.
func adoptedOOM(cg cgroups.Manager, e driver.Exit) driver.Exit {
	if e.Unknown && cg != nil {
		if n, err := cg.OOMKillCount(); err == nil && n > 0 {
			e.Unknown, e.Signal = false, "SIGKILL"
		}
	}
	e.OOMKilled = oomKilled(cg, e)
	return e
}

// waitExit returns once the process has exited.
func (h *adoptedHandle) waitExit() {
	if h.pidfd != nil && awaitPidfd(h.pidfd) == nil {
		return
	}
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		st, err := proc.ReadStat(h.pid)
		if err != nil || st.StartTicks != h.start || st.Dead() {
			return
		}
		<-t.C
	}
}

// openPidfd opens a pidfd for process pid that the Go runtime's poller can
// wait on (non-blocking), or returns nil, and no error, on a kernel that
// has none (before 5.10; 5.3 without PIDFD_NONBLOCK).
func openPidfd(pid int) (*os.File, error) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	switch {
	case err == nil:
		return os.NewFile(uintptr(fd), "pidfd:"+strconv.Itoa(pid)), nil
	case errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL):
		return nil, nil
	}
	return nil, fmt.Errorf("pidfd_open: %w", err)
}

// awaitPidfd returns once the pidfd's process has exited. It waits on the
// runtime's poller (epoll), not in a system call: a thousand tasks waited
// on cost no thread each, where a blocking wait4 or waitid costs one.
func awaitPidfd(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	// A pidfd becomes readable when its process exits; it cannot be read,
	// so readiness is checked with a poll that does not block, and Read
	// parks the goroutine on the poller until the next edge.
	var perr error
	err = rc.Read(func(fd uintptr) bool {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(pfd, 0)
		if err != nil && err != unix.EINTR {
			perr = err
			return true
		}
		return n > 0
	})
	return cmp.Or(err, perr)
}

func exitFromStatus(ws syscall.WaitStatus, at time.Time) driver.Exit {
	e := driver.Exit{Time: at}
	if ws.Signaled() {
		e.Code, e.Signal = -1, ws.Signal().String()
		if name := signalName(ws.Signal()); name != "" {
			e.Signal = name
		}
	} else {
		e.Code = ws.ExitStatus()
	}
	return e
}

// drainOutput gives output a moment to drain after the task's exit, but
// never waits on a grandchild that holds a pipe open: its output keeps
// flowing in the background. One deadline for both pipes, as a channel
// that stays closed: a timer's channel fires once, so a second wait on it
// would block until the grandchild exits.
func drainOutput(pipes ...*pipe) {
	drained := make(chan struct{})
	drain := time.AfterFunc(200*time.Millisecond, func() { close(drained) })
	defer drain.Stop()
	for _, p := range pipes {
		if p == nil {
			continue
		}
		select {
		case <-p.done:
		case <-drained:
		}
	}
}

// stopGroup sends SIGTERM to the process group pgid, then SIGKILL after
// grace, and returns the exit once exited is closed and *exit set. The
// group is signalled even after the leader exits, so no child is left.
func stopGroup(ctx context.Context, pgid int, grace time.Duration, exited <-chan struct{}, exit *driver.Exit) (driver.Exit, error) {
	select {
	case <-exited:
		syscall.Kill(-pgid, syscall.SIGKILL)
		return *exit, nil
	default:
	}
	syscall.Kill(-pgid, syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-exited:
		syscall.Kill(-pgid, syscall.SIGKILL)
		return *exit, nil
	case <-t.C:
	case <-ctx.Done():
		syscall.Kill(-pgid, syscall.SIGKILL)
		return driver.Exit{}, ctx.Err()
	}
	syscall.Kill(-pgid, syscall.SIGKILL)
	select {
	case <-exited:
		return *exit, nil
	case <-ctx.Done():
		return driver.Exit{}, ctx.Err()
	}
}

// reopenReadWrite opens pipe fd again, read-write, through procfs. The
// new descriptor is blocking (the task gets it as is), and close-on-exec
// until the child's dup2 onto fd 1 or 2.
func reopenReadWrite(fd int) (*os.File, error) {
	rw, err := unix.Open("/proc/self/fd/"+strconv.Itoa(fd), unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("task output pipe: %w", err)
	}
	if bigPipes {
		// Best effort: room for what a task writes while no agent reads.
		unix.FcntlInt(uintptr(rw), unix.F_SETPIPE_SZ, 1<<20)
	}
	return os.NewFile(uintptr(rw), "|1"), nil
}

// bigPipes: the pipe buffer is raised to 1 MB only as root. The kernel
// counts pipe capacity against the user's fs.pipe-user-pages-soft (64 MB),
// past which every new pipe of that user gets a tiny buffer; root is
// exempt.
var bigPipes = os.Geteuid() == 0
