package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/spec"
)

func newLogsCmd(g *globals) *cobra.Command {
	var f logFlags
	var allocID string
	cmd := &cobra.Command{
		Use:   "logs JOB[INDEX][/TASK]",
		Short: "Print a job's task output, by name; no allocation ID needed",
		Long: `Logs prints the output of a job's tasks. With several instances (or tasks),
each line is prefixed with [instance/task]. It shows the running instances, or,
when none runs, the latest instance of each index.

One instance: its index after the job's name (web[2], or web.api[2] with the
group, as status names it), or its ID (or a unique prefix) with --alloc.

With -o json each line is a JSON object of its own: the instance's ID and
name, the task, the stream (stdout or stderr) and the line.`,
		Example: `  drover logs hello
  drover logs hello[1]/greeter -f
  drover logs --alloc 3f2a9c1e
  drover logs report --stderr --tail 20 -o json`,
		Args: cobra.RangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 && allocID == "" {
				return fmt.Errorf("name a job (drover logs web, web[2] for one instance, web/task for one task) or an instance (--alloc ID)")
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			f.json = g.output == "json"
			ctx := cmd.Context()
			target := ""
			if len(args) == 1 {
				target = args[0]
			}
			streams, err := logStreams(ctx, c, target, allocID)
			if err != nil {
				return err
			}
			return f.print(ctx, c, cmd.OutOrStdout(), streams)
		},
	}
	cmd.Flags().StringVar(&allocID, "alloc", "", "one instance, by its ID or a unique prefix (drover status JOB lists them)")
	f.register(cmd)
	return outputs(cmd, "json")
}

// logStreams are the streams drover logs prints for target (JOB,
// JOB[INDEX] or JOB.GROUP[INDEX], each with an optional /TASK) and
// allocID (an instance's ID or prefix, or "").
func logStreams(ctx context.Context, c *client.Client, target, allocID string) ([]logStream, error) {
	name, task, _ := strings.Cut(target, "/")
	if allocID != "" {
		rctx, cancel := context.WithTimeout(ctx, readTimeout)
		a, err := c.Alloc(rctx, allocID)
		cancel()
		if err != nil {
			return nil, err
		}
		if name != "" && name != a.Job && name != a.Name {
			return nil, fmt.Errorf("instance %s is %s, of job %q, not of %q", short(a.ID), a.Name, a.Job, name)
		}
		streams := logTargets([]*spec.Alloc{a}, task)
		if len(streams) == 0 {
			return nil, fmt.Errorf("instance %s (%s) has no task %q", short(a.ID), a.Name, task)
		}
		return streams, nil
	}
	job, index, hasIndex, err := parseInstance(name)
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	st, _, err := c.Job(rctx, job, nil)
	group := ""
	if err != nil && hasIndex && strings.Contains(job, ".") && client.IsStatus(err, http.StatusNotFound) {
		// web.api[2]: the job is what comes before the group.
		j, g := job[:strings.LastIndexByte(job, '.')], job[strings.LastIndexByte(job, '.')+1:]
		if st2, _, err2 := c.Job(rctx, j, nil); err2 == nil {
			st, job, group, err = st2, j, g, nil
		}
	}
	if err != nil {
		return nil, err
	}
	allocs := st.Allocations
	if hasIndex {
		allocs = nil
		groups := map[string]bool{}
		for _, a := range st.Allocations {
			if a.Index == index && (group == "" || a.Group == group) {
				allocs = append(allocs, a)
				groups[a.Group] = true
			}
		}
		if len(allocs) == 0 {
			return nil, fmt.Errorf("job %q has no instance %s; drover status %s lists them", job, name, job)
		}
		if len(groups) > 1 {
			return nil, fmt.Errorf("job %q has an instance [%d] in each of groups %s: name one, such as %s.%s[%d]", job, index,
				strings.Join(slices.Sorted(maps.Keys(groups)), ", "), job, allocs[0].Group, index)
		}
	}
	streams := logTargets(allocs, task)
	if len(streams) == 0 {
		if task != "" {
			return nil, fmt.Errorf("job %q has no instance with a task %q", job, task)
		}
		return nil, fmt.Errorf("job %q has no instances yet; see drover status %s", job, job)
	}
	return streams, nil
}

// parseInstance splits "web[2]" into the job (or job.group) and the
// index; a name without brackets is a job.
func parseInstance(s string) (name string, index int, ok bool, err error) {
	open := strings.IndexByte(s, '[')
	if open < 0 {
		return s, 0, false, nil
	}
	n, convErr := strconv.Atoi(strings.TrimSuffix(s[open+1:], "]"))
	if !strings.HasSuffix(s, "]") || convErr != nil || n < 0 || open == 0 {
		return "", 0, false, fmt.Errorf("%q: want JOB, JOB[INDEX] or JOB.GROUP[INDEX], such as web[0]", s)
	}
	return s[:open], n, true, nil
}

// logFlags are the flags of drover logs and drover alloc logs.
type logFlags struct {
	follow, stderr bool
	tail           int
	since          time.Duration
	// json prints each line as a logLine (-o json).
	json bool
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
		return f.copy(ctx, c, streams[0], opts, out, false)
	}
	// Several streams: without -f print them one after the other;
	// with -f interleave them line by line.
	if !f.follow {
		for _, s := range streams {
			if err := f.copy(ctx, c, s, opts, out, true); err != nil {
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
			errs <- f.copy(ctx, c, s, opts, out, true)
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

// logLine is one line of -o json: the scripting shape of a log line.
type logLine struct {
	AllocID  string `json:"alloc_id"`
	Instance string `json:"instance"`
	Task     string `json:"task"`
	Stream   string `json:"stream"`
	Line     string `json:"line"`
}

// copy copies one stream's output to out: as it is, each line prefixed
// with [instance/task] (prefixed), or each line as a logLine (-o json).
func (f *logFlags) copy(ctx context.Context, c *client.Client, s logStream, o client.LogOptions, out io.Writer, prefixed bool) error {
	o.Task = s.task
	rc, err := c.Logs(ctx, s.alloc.ID, o)
	if err != nil {
		return err
	}
	defer rc.Close()
	if !prefixed && !f.json {
		_, err := io.Copy(out, rc)
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	stream := "stdout"
	if o.Stderr {
		stream = "stderr"
	}
	sc := bufio.NewScanner(rc)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if f.json {
			b, err := json.Marshal(logLine{AllocID: s.alloc.ID, Instance: s.alloc.Name, Task: s.task, Stream: stream, Line: sc.Text()})
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "%s\n", b)
			continue
		}
		fmt.Fprintf(out, "%s%s\n", s.prefix(), sc.Bytes())
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
