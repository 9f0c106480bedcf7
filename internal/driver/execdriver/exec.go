// Package execdriver runs tasks as child processes of the agent, each in its
// own process group so that stopping a task stops everything it started.
//
// It serves two driver names. raw_exec runs the command as the agent's user
// with no isolation. exec is meant to add isolation (cgroup limits, a
// chroot); until the containers issue lands it runs exactly like raw_exec,
// and says so in its doc and in the README rather than pretending.
package execdriver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/drover-org/drover/internal/driver"
)

// Driver starts processes.
type Driver struct{ name string }

// New returns a process driver registered under name ("exec" or "raw_exec").
func New(name string) *Driver { return &Driver{name: name} }

var _ driver.Driver = (*Driver)(nil)

// Name returns the driver's name.
func (d *Driver) Name() string { return d.name }

// Start runs t.Command in t.Dir with t.Env, in a new process group. Output is
// copied through pipes so that the task's exit is seen even if a grandchild
// keeps the pipe open.
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

	stdout, err := pipeTo(t.Stdout)
	if err != nil {
		return nil, err
	}
	stderr, err := pipeTo(t.Stderr)
	if err != nil {
		stdout.close()
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = stdout.w, stderr.w
	if err := cmd.Start(); err != nil {
		stdout.close()
		stderr.close()
		return nil, fmt.Errorf("start %s: %w", t.Command, err)
	}
	// The child has its copies; close ours so that EOF arrives when it exits.
	stdout.w.Close()
	stderr.w.Close()

	h := &handle{cmd: cmd, exited: make(chan struct{}), wait: make(chan driver.Exit, 1)}
	go h.waitLoop(stdout, stderr)
	return h, nil
}

// lookPath resolves a bare command name against the task's own PATH.
func lookPath(command string, env []string) (string, error) {
	if command == "" {
		return "", errors.New("no command")
	}
	if strings.Contains(command, "/") {
		if _, err := os.Stat(command); err != nil {
			return "", fmt.Errorf("command %s: %w", command, err)
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
	return "", fmt.Errorf("command %q not found in PATH %s", command, pathEnv)
}

type pipe struct {
	r, w *os.File
	done chan struct{}
}

func pipeTo(dst io.Writer) (*pipe, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	p := &pipe{r: r, w: w, done: make(chan struct{})}
	if dst == nil {
		dst = io.Discard
	}
	go func() {
		defer close(p.done)
		io.Copy(dst, r)
		r.Close()
	}()
	return p, nil
}

func (p *pipe) close() { p.w.Close(); <-p.done }

type handle struct {
	cmd    *exec.Cmd
	exited chan struct{}
	wait   chan driver.Exit
	exit   driver.Exit
}

func (h *handle) PID() int { return h.cmd.Process.Pid }

func (h *handle) Wait() <-chan driver.Exit { return h.wait }

func (h *handle) waitLoop(stdout, stderr *pipe) {
	err := h.cmd.Wait()
	// The task is over when its main process is: take down whatever it
	// left in its process group, so a restart does not pile up strays.
	syscall.Kill(-h.cmd.Process.Pid, syscall.SIGKILL)
	e := driver.Exit{Time: time.Now()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		ws := ee.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			e.Code, e.Signal = -1, ws.Signal().String()
			if name := signalName(ws.Signal()); name != "" {
				e.Signal = name
			}
		} else {
			e.Code = ws.ExitStatus()
		}
	default:
		e.Err = err
	}
	// Give output a moment to drain, but never wait on a grandchild that
	// holds the pipe open: its output keeps flowing in the background.
	// One deadline for both pipes, as a channel that stays closed: a
	// timer's channel fires once, so a second wait on it would block until
	// the grandchild exits.
	drained := make(chan struct{})
	drain := time.AfterFunc(200*time.Millisecond, func() { close(drained) })
	select {
	case <-stdout.done:
	case <-drained:
	}
	select {
	case <-stderr.done:
	case <-drained:
	}
	drain.Stop()
	h.exit = e
	close(h.exited)
	h.wait <- e
}

// Stop sends SIGTERM to the process group, then SIGKILL after grace. The
// group is signalled even after the leader exits, so no child is left behind.
func (h *handle) Stop(ctx context.Context, grace time.Duration) (driver.Exit, error) {
	pgid := h.cmd.Process.Pid
	select {
	case <-h.exited:
		syscall.Kill(-pgid, syscall.SIGKILL)
		return h.exit, nil
	default:
	}
	syscall.Kill(-pgid, syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-h.exited:
		syscall.Kill(-pgid, syscall.SIGKILL)
		return h.exit, nil
	case <-t.C:
	case <-ctx.Done():
		syscall.Kill(-pgid, syscall.SIGKILL)
		return driver.Exit{}, ctx.Err()
	}
	syscall.Kill(-pgid, syscall.SIGKILL)
	select {
	case <-h.exited:
		return h.exit, nil
	case <-ctx.Done():
		return driver.Exit{}, ctx.Err()
	}
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
