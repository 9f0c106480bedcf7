package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/spec"
)

func newLogsCmd(g *globals) *cobra.Command {
	var f logFlags
	cmd := &cobra.Command{
		Use:   "logs JOB[/TASK]",
		Short: "Print a job's task output, by name; no allocation ID needed",
		Long: `Logs prints the output of a job's tasks. With several instances (or tasks),
each line is prefixed with [instance/task]. It shows the running instances, or,
when none runs, the latest instance of each index.`,
		Example: `  drover logs hello
  drover logs hello/greeter -f
  drover logs report --stderr --tail 20`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			jobName, task, _ := strings.Cut(args[0], "/")
			ctx := cmd.Context()
			st, _, err := c.Job(ctx, jobName, nil)
			if err != nil {
				return err
			}
			streams := logTargets(st.Allocations, task)
			if len(streams) == 0 {
				if task != "" {
					return fmt.Errorf("job %q has no instance with a task %q", jobName, task)
				}
				return fmt.Errorf("job %q has no instances yet; see drover status %s", jobName, jobName)
			}
			return f.print(ctx, c, cmd.OutOrStdout(), streams)
		},
	}
	f.register(cmd)
	return cmd
}

// logFlags are the flags of drover logs and drover alloc logs.
type logFlags struct {
	follow, stderr bool
	tail           int
	since          time.Duration
}

func (f *logFlags) register(cmd *cobra.Command) {
	cmd.Flags().BoolVarP(&f.follow, "follow", "f", false, "keep printing new output")
	cmd.Flags().BoolVar(&f.stderr, "stderr", false, "show stderr instead of stdout")
	cmd.Flags().IntVar(&f.tail, "tail", -1, "show only the last N lines (-1: all)")
	cmd.Flags().DurationVar(&f.since, "since", 0, "show only output written in the last this long, such as 10m (to about a second)")
}

// print copies the streams' output to w: one stream as it is, several
// prefixed with [instance/task].
func (f *logFlags) print(ctx context.Context, c *client.Client, w io.Writer, streams []logStream) error {
	out := &lockedWriter{w: w}
	if f.since < 0 {
		return fmt.Errorf("--since must be positive, such as 10m or 2h")
	}
	opts := client.LogOptions{Stderr: f.stderr, Tail: f.tail, Follow: f.follow, Since: f.since}
	if len(streams) == 1 {
		opts.Task = streams[0].task
		return copyLog(ctx, c, streams[0].alloc.ID, opts, out, "")
	}
	// Several streams: without -f print them one after the other;
	// with -f interleave them line by line.
	if !f.follow {
		for _, s := range streams {
			o := opts
			o.Task = s.task
			if err := copyLog(ctx, c, s.alloc.ID, o, out, s.prefix()); err != nil {
				return err
			}
		}
		return nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(streams))
	for _, s := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := opts
			o.Task = s.task
			errs <- copyLog(ctx, c, s.alloc.ID, o, out, s.prefix())
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil && ctx.Err() == nil {
			return err
		}
	}
	return nil
}

type logStream struct {
	alloc *spec.Alloc
	task  string
}

func (s logStream) prefix() string { return "[" + s.alloc.Name + "/" + s.task + "] " }

// logTargets picks, per instance index, the live alloc or else the newest
// one, and the tasks to show.
func logTargets(allocs []*spec.Alloc, task string) []logStream {
	best := map[string]*spec.Alloc{}
	var order []string
	for _, a := range allocs {
		key := a.Name
		b, ok := best[key]
		if !ok {
			order = append(order, key)
		}
		switch {
		case !ok:
			best[key] = a
		case b.Terminal() && !a.Terminal():
			best[key] = a
		case b.Terminal() == a.Terminal() && a.CreateIndex > b.CreateIndex:
			best[key] = a
		}
	}
	var out []logStream
	for _, key := range order {
		a := best[key]
		for _, t := range a.Tasks {
			if task == "" || t.Name == task {
				out = append(out, logStream{alloc: a, task: t.Name})
			}
		}
	}
	return out
}

func copyLog(ctx context.Context, c *client.Client, allocID string, o client.LogOptions, out io.Writer, prefix string) error {
	rc, err := c.Logs(ctx, allocID, o)
	if err != nil {
		return err
	}
	defer rc.Close()
	if prefix == "" {
		_, err := io.Copy(out, rc)
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	sc := bufio.NewScanner(rc)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fmt.Fprintf(out, "%s%s\n", prefix, sc.Bytes())
	}
	if ctx.Err() != nil {
		return nil
	}
	return sc.Err()
}

// lockedWriter keeps lines from concurrent streams whole.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
