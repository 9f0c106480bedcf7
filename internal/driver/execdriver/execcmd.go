package execdriver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"

	"github.com/creack/pty"

	"github.com/drover-org/drover/internal/driver"
)

// Shell runs a command beside a running task: the task's environment,
// working directory, user and network namespace, and for the exec driver
// its cgroup, so that
// what it runs counts against the task's limits. It ends with ctx (the
// caller went away): then the command is killed.
func (d *Driver) Shell(ctx context.Context, h driver.Handle, t driver.Task, s driver.ExecStreams) (int, error) {
	if len(s.Cmd) == 0 {
		return 0, errors.New("no command to run")
	}
	path, err := lookPath(s.Cmd[0], t.Env)
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(path, s.Cmd[1:]...)
	cmd.Args[0] = s.Cmd[0]
	cmd.Env, cmd.Dir = t.Env, t.Dir
	hd, _ := h.(*handle)
	var release *os.File // v1: the command waits on it until it is in the cgroup
	if hd != nil && hd.cg != nil && d.cg != nil && !d.cg.v2 {
		// cgroup v1 cannot fork into a cgroup, and an exec'd command (cat
		// /proc/self/cgroup) may be done before it is moved. So a shell
		// holds it: it waits for a byte on fd 3, which comes once the
		// process is in the task's cgroup, then execs the command in the
		// same process.
		r, w, err := os.Pipe()
		if err != nil {
			return 0, err
		}
		defer r.Close()
		defer w.Close()
		release = w
		cmd = exec.Command("/bin/sh", append([]string{"-c", `read -r _ <&3; exec 3<&-; exec "$0" "$@"`, path}, s.Cmd[1:]...)...)
		cmd.Env, cmd.Dir = t.Env, t.Dir
		cmd.ExtraFiles = []*os.File{r}
	}
	attr := &syscall.SysProcAttr{}
	if t.User != "" {
		cred, err := credential(t.User)
		if err != nil {
			return 0, err
		}
		attr.Credential = cred
	}
	if hd != nil && hd.cg != nil && d.cg != nil && d.cg.v2 {
		dir, err := os.Open(hd.cg.Path(""))
		if err == nil {
			defer dir.Close()
			attr.UseCgroupFD, attr.CgroupFD = true, int(dir.Fd())
		}
	}
	var tty *os.File
	if s.TTY {
		// pty sets Setsid and Setctty on attr: the command leads its own
		// session on the terminal.
		cmd.SysProcAttr = attr
		size := &pty.Winsize{Cols: 80, Rows: 24}
		if s.Size.Cols > 0 && s.Size.Rows > 0 {
			size.Cols, size.Rows = s.Size.Cols, s.Size.Rows
		}
		err = inNetns(t.NetNS, func() (err error) {
			tty, err = pty.StartWithAttrs(cmd, size, attr)
			return err
		})
		if err != nil {
			return 0, fmt.Errorf("start %s on a terminal: %w", s.Cmd[0], err)
		}
		defer tty.Close()
	} else {
		attr.Setpgid = true
		cmd.SysProcAttr = attr
		cmd.Stdout, cmd.Stderr = s.Stdout, s.Stderr
		var stdin io.WriteCloser
		if s.Stdin != nil {
			if stdin, err = cmd.StdinPipe(); err != nil {
				return 0, err
			}
		}
		if err := inNetns(t.NetNS, cmd.Start); err != nil {
			return 0, fmt.Errorf("start %s: %w", s.Cmd[0], err)
		}
		if stdin != nil {
			go func() { io.Copy(stdin, s.Stdin); stdin.Close() }()
		}
	}
	if release != nil {
		err := hd.cg.Apply(cmd.Process.Pid)
		release.Write([]byte("\n")) // in the cgroup, or not: the command runs either way
		release.Close()
		if err != nil {
			fmt.Fprintf(s.Stderr, "drover: the command runs outside the task's cgroup: %v\n", err)
		}
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			// The caller went away: the command goes too.
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			cmd.Process.Kill()
		case <-done:
		}
	}()
	if tty != nil {
		go func() {
			for sz := range s.Resize {
				pty.Setsize(tty, &pty.Winsize{Cols: sz.Cols, Rows: sz.Rows})
			}
		}()
		if s.Stdin != nil {
			go io.Copy(tty, s.Stdin)
		}
		io.Copy(s.Stdout, tty) // ends with EIO when the command and its children close the terminal
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return ee.ExitCode(), nil
	}
	return 0, err
}
