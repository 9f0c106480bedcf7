package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/execstream"
	"github.com/drover-org/drover/internal/spec"
)

func newExecCmd(g *globals) *cobra.Command {
	var f execFlags
	cmd := &cobra.Command{
		Use:   "exec JOB[/TASK] -- COMMAND [ARG...]",
		Short: "Run a command inside a running task, on a terminal when interactive",
		Long: `Exec runs a command inside a running instance of a job: with the task's
environment, working directory and user, and for the exec driver inside the
task's cgroup, so it counts against the task's limits. Its input, output and
exit code are the command's. On a terminal it gets a terminal of its own
(-t), sized like yours; --tty=false streams plain stdout and stderr.

It runs in the job's first running instance by name, or in --alloc ID. It
needs the exec capability in the job's namespace.`,
		Example: "  drover exec web -- ls -l\n  drover exec web/server -- sh\n  drover exec --alloc 3f2a web -- cat /proc/1/status",
		Args:    cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			dash := cmd.ArgsLenAtDash()
			if dash != 1 {
				return fmt.Errorf("give the job, then -- and the command: drover exec JOB[/TASK] -- COMMAND [ARG...]")
			}
			job, task, _ := strings.Cut(args[0], "/")
			return f.run(cmd, g, job, task, args[1:])
		},
	}
	cmd.Flags().StringVar(&f.allocID, "alloc", "", "run in this instance (an ID or its prefix) instead of the job's first running one")
	f.register(cmd)
	return cmd
}

// execFlags are the flags of drover exec and drover alloc exec.
type execFlags struct {
	allocID    string
	tty, stdin bool
}

func (f *execFlags) register(cmd *cobra.Command) {
	cmd.Flags().BoolVarP(&f.tty, "tty", "t", false, "give the command a terminal (default: when stdin and stdout are terminals)")
	cmd.Flags().BoolVarP(&f.stdin, "stdin", "i", true, "pass your input to the command")
}

// run runs command in the job's task (task "" the first) of the instance
// f.allocID, or of the job's first running one.
func (f *execFlags) run(cmd *cobra.Command, g *globals, job, task string, command []string) error {
	tty := f.tty
	if !cmd.Flags().Changed("tty") {
		tty = f.stdin && term.IsTerminal(int(os.Stdin.Fd())) && term.IsTerminal(int(os.Stdout.Fd()))
	}
	c, err := g.client()
	if err != nil {
		return err
	}
	ctx := signalContext(cmd.Context())
	id, err := execTarget(ctx, c, job, f.allocID)
	if err != nil {
		return err
	}
	cols, rows := 0, 0
	if tty {
		cols, rows, _ = term.GetSize(int(os.Stdout.Fd()))
	}
	conn, err := c.Exec(ctx, id, task, command, tty, cols, rows)
	if err != nil {
		return err
	}
	defer conn.Close()
	code, err := runExec(ctx, conn, tty, f.stdin, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	if code != 0 {
		return &exitError{code: code, err: fmt.Errorf("exit code %d", code), silent: true}
	}
	return nil
}

// execTarget picks the instance: --alloc, else the job's first running one.
func execTarget(ctx context.Context, c *client.Client, job, allocID string) (string, error) {
	rctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	if allocID != "" {
		a, err := c.Alloc(rctx, allocID)
		if err != nil {
			return "", err
		}
		if a.Job != job {
			return "", fmt.Errorf("allocation %s is job %s's, not %s's", a.ID, a.Job, job)
		}
		return a.ID, nil
	}
	st, _, err := c.Job(rctx, job, nil)
	if err != nil {
		return "", err
	}
	var running []*spec.Alloc
	for _, a := range st.Allocations {
		if a.DesiredStatus == spec.DesiredRun && a.Status != nil && a.Status.ClientStatus == spec.ClientRunning {
			running = append(running, a)
		}
	}
	if len(running) == 0 {
		return "", fmt.Errorf("job %s has no running instance to exec in (drover status %s says why)", job, job)
	}
	slices.SortFunc(running, func(a, b *spec.Alloc) int { return strings.Compare(a.Name, b.Name) })
	return running[0].ID, nil
}

// runExec pumps the terminal (or pipes) and the connection's frames until
// the command exits, and returns its exit code.
func runExec(ctx context.Context, conn io.ReadWriteCloser, tty, withStdin bool, in io.Reader, out, errOut io.Writer) (int, error) {
	w := execstream.NewWriter(conn)
	if tty {
		if f, ok := in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			old, err := term.MakeRaw(int(f.Fd()))
			if err == nil {
				defer term.Restore(int(f.Fd()), old)
			}
			sendSize := func() {
				if cols, rows, err := term.GetSize(int(f.Fd())); err == nil {
					w.Resize(uint16(cols), uint16(rows))
				}
			}
			sendSize()
			winch := make(chan os.Signal, 1)
			signal.Notify(winch, syscall.SIGWINCH)
			defer signal.Stop(winch)
			go func() {
				for range winch {
					sendSize()
				}
			}()
		}
	}
	if withStdin {
		go func() {
			io.Copy(w.Stream(execstream.Stdin), in)
			w.Frame(execstream.CloseStdin, nil)
		}()
	} else {
		w.Frame(execstream.CloseStdin, nil)
	}
	go func() {
		<-ctx.Done()
		conn.Close() // Ctrl-C outside a terminal, SIGTERM: the command is killed
	}()
	for {
		typ, p, err := execstream.Read(conn)
		if err != nil {
			if ctx.Err() != nil {
				return 130, nil
			}
			if errors.Is(err, io.EOF) {
				return 0, errors.New("the connection ended before the command's exit code came")
			}
			return 0, err
		}
		switch typ {
		case execstream.Stdout:
			out.Write(p)
		case execstream.Stderr:
			errOut.Write(p)
		case execstream.Exit:
			return execstream.ParseExit(p)
		case execstream.Error:
			return 0, errors.New(string(p))
		}
	}
}
