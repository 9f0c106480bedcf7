package dockerdriver

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/drover-org/drover/internal/driver"
)

var _ driver.Sheller = (*Driver)(nil)

// Shell runs an operator's command in the task's container (docker exec),
// streaming its input and output, on a terminal when asked.
func (d *Driver) Shell(ctx context.Context, h driver.Handle, t driver.Task, s driver.ExecStreams) (int, error) {
	hd, ok := h.(*handle)
	if !ok {
		return 0, errors.New("the task's container is not known to this agent")
	}
	if len(s.Cmd) == 0 {
		return 0, errors.New("no command to run")
	}
	opts := client.ExecCreateOptions{Cmd: s.Cmd, TTY: s.TTY, AttachStdin: s.Stdin != nil, AttachStdout: true, AttachStderr: !s.TTY}
	if s.TTY && s.Size.Cols > 0 && s.Size.Rows > 0 {
		opts.ConsoleSize = client.ConsoleSize{Height: uint(s.Size.Rows), Width: uint(s.Size.Cols)}
	}
	created, err := d.c.ExecCreate(ctx, hd.id, opts)
	if err != nil {
		return 0, fmt.Errorf("docker exec %q: %w", s.Cmd, err)
	}
	att, err := d.c.ExecAttach(ctx, created.ID, client.ExecAttachOptions{TTY: s.TTY, ConsoleSize: opts.ConsoleSize})
	if err != nil {
		return 0, fmt.Errorf("docker exec %q: %w", s.Cmd, err)
	}
	defer att.Close()
	stop := context.AfterFunc(ctx, func() { att.Close() }) // the caller went away
	defer stop()
	if s.Stdin != nil {
		go func() {
			io.Copy(att.Conn, s.Stdin)
			att.CloseWrite()
		}()
	}
	if s.TTY {
		go func() {
			for sz := range s.Resize {
				d.c.ExecResize(ctx, created.ID, client.ExecResizeOptions{Height: uint(sz.Rows), Width: uint(sz.Cols)})
			}
		}()
		_, err = io.Copy(s.Stdout, att.Reader)
	} else {
		_, err = stdcopy.StdCopy(s.Stdout, s.Stderr, att.Reader)
	}
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	if err != nil {
		return 0, fmt.Errorf("docker exec %q: %w", s.Cmd, err)
	}
	ins, err := d.c.ExecInspect(context.WithoutCancel(ctx), created.ID, client.ExecInspectOptions{})
	if err != nil {
		return 0, fmt.Errorf("docker exec %q: %w", s.Cmd, err)
	}
	return ins.ExitCode, nil
}
