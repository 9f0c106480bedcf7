package agent

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/drover-org/drover/internal/driver"
	"github.com/drover-org/drover/internal/execstream"
	"github.com/drover-org/drover/internal/spec"
)

// serveExec is GET /v1/client/allocations/{id}/exec?task=T&tty=1&cmd=...:
// after an upgrade to execstream's protocol, it runs the command in the
// running task through its driver (driver.Sheller) and streams it. Only a
// server calls it (Handler's certificate check); the server checked the
// operator's token and exec capability.
func (a *Agent) serveExec(w http.ResponseWriter, r *http.Request) {
	id, q := r.PathValue("id"), r.URL.Query()
	task, cmd, tty := q.Get("task"), q["cmd"], q.Get("tty") == "1"
	var size driver.TermSize
	if c, err := strconv.ParseUint(q.Get("cols"), 10, 16); err == nil {
		size.Cols = uint16(c)
	}
	if r, err := strconv.ParseUint(q.Get("rows"), 10, 16); err == nil {
		size.Rows = uint16(r)
	}
	if r.Header.Get("Upgrade") != execstream.Protocol {
		httpError(w, http.StatusBadRequest, "exec needs Upgrade: "+execstream.Protocol)
		return
	}
	if len(cmd) == 0 {
		httpError(w, http.StatusBadRequest, "no command: give cmd=... (one per argument)")
		return
	}
	tr, h, err := a.runningTask(id, task)
	if err != nil {
		httpError(w, http.StatusConflict, err.Error())
		return
	}
	sh, ok := tr.drv.(driver.Sheller)
	if !ok {
		httpError(w, http.StatusBadRequest, fmt.Sprintf("driver %s cannot run commands in its tasks yet", tr.task.Driver))
		return
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		httpError(w, http.StatusInternalServerError, "cannot take over the connection: "+err.Error())
		return
	}
	defer conn.Close()
	conn.SetDeadline(time.Time{}) // the request's timeouts end here: a shell may last
	fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: %s\r\nConnection: Upgrade\r\n\r\n", execstream.Protocol)
	if err := brw.Flush(); err != nil {
		return
	}
	st, err := tr.shellTask()
	code := 0
	if err == nil {
		code, err = runShell(r.Context(), conn, brw.Reader, sh, h, st, driver.ExecStreams{Cmd: cmd, TTY: tty, Size: size})
	}
	out := execstream.NewWriter(conn)
	if err != nil {
		out.Frame(execstream.Error, []byte(tr.ar.redact(err.Error())))
		return
	}
	a.log.Info("exec ended", "alloc", id, "task", tr.task.Name, "code", code)
	out.Exit(code)
}

// runShell pumps frames between the connection and the command.
func runShell(ctx context.Context, conn net.Conn, in *bufio.Reader, sh driver.Sheller, h driver.Handle, t driver.Task, s driver.ExecStreams) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := execstream.NewWriter(conn)
	stdinR, stdinW := io.Pipe()
	resize := make(chan driver.TermSize, 4)
	go func() {
		// Frames from the client; a broken connection ends the command.
		defer stdinW.Close()
		for {
			typ, p, err := execstream.Read(in)
			if err != nil {
				cancel()
				return
			}
			switch typ {
			case execstream.Stdin:
				if _, err := stdinW.Write(p); err != nil {
					return
				}
			case execstream.CloseStdin:
				stdinW.Close()
			case execstream.Resize:
				if cols, rows, err := execstream.ParseResize(p); err == nil {
					select {
					case resize <- driver.TermSize{Cols: cols, Rows: rows}:
					default:
					}
				}
			}
		}
	}()
	s.Stdin, s.Stdout, s.Stderr, s.Resize = stdinR, out.Stream(execstream.Stdout), out.Stream(execstream.Stderr), resize
	return sh.Shell(ctx, h, t, s)
}

// runningTask finds the task runner and the handle of a running task of an
// alloc on this node; task "" is the alloc's only task.
func (a *Agent) runningTask(allocID, task string) (*taskRunner, driver.Handle, error) {
	a.mu.Lock()
	ar := a.runners[allocID]
	a.mu.Unlock()
	if ar == nil {
		return nil, nil, fmt.Errorf("allocation %s does not run on this node", allocID)
	}
	var tr *taskRunner
	ar.mu.Lock()
	for _, t := range ar.tasks {
		if t.task.Name == task || (task == "" && len(ar.tasks) == 1) {
			tr = t
		}
	}
	ar.mu.Unlock()
	if tr == nil {
		return nil, nil, fmt.Errorf("allocation %s has no task %q", ar.alloc.Name, task)
	}
	h := a.usage.handle(allocID, tr.task.Name)
	if h == nil {
		return nil, nil, fmt.Errorf("task %s of %s is not running", tr.task.Name, ar.alloc.Name)
	}
	return tr, h, nil
}

// shellTask is what a command run in the task gets: the task's
// environment, directory and user.
func (tr *taskRunner) shellTask() (driver.Task, error) {
	// A task adopted from an earlier agent has not made its alloc's
	// namespace in this one: find it, so the command runs beside the task.
	if _, err := tr.ar.network(); err != nil {
		return driver.Task{}, err
	}
	return tr.driverTask(spec.Command{}, false)
}
