package dockerdriver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"

	"github.com/drover-org/drover/internal/driver"
)

var (
	_ driver.Handle   = (*handle)(nil)
	_ driver.Detacher = (*handle)(nil)
	_ driver.Execer   = (*handle)(nil)
	_ driver.Measurer = (*handle)(nil)
)

// reinspectFor bounds how long a handle waits for the daemon to come back
// when its wait connection breaks: a daemon restart takes seconds, and
// reporting an exit that did not happen would restart a running task.
const reinspectFor = 2 * time.Minute

// drainFor bounds how long the exit waits for the last of the output: the
// log stream ends when the container does, unless the daemon is in trouble.
const drainFor = 5 * time.Second

// execOutputMax bounds what Exec keeps of a command's output.
const execOutputMax = 4 << 10

type handle struct {
	d   *Driver
	id  string
	pid int
	// ctx ends when the handle is detached: the log stream and the wait
	// both stop, and the container is left as it is.
	ctx    context.Context
	detach context.CancelFunc

	logsDone chan struct{}
	exited   chan struct{} // closed once exit is set and the container removed
	exit     driver.Exit
	wait     chan driver.Exit
}

func (h *handle) PID() int                 { return h.pid }
func (h *handle) Wait() <-chan driver.Exit { return h.wait }

// ContainerID is the task's container.
func (h *handle) ContainerID() string { return h.id }

// Detach stops following the container's output and its exit; the
// container keeps running for a later agent to adopt.
func (h *handle) Detach() {
	h.detach()
	<-h.logsDone
}

// waitLoop waits for the container to exit, lets the last of its output
// arrive, removes it and reports the exit.
func (h *handle) waitLoop() {
	e, ok := h.waitExit()
	if !ok {
		return // detached
	}
	t := time.NewTimer(drainFor)
	select {
	case <-h.logsDone:
	case <-t.C:
	}
	t.Stop()
	// A container that cannot be removed now is removed by the next start
	// of the task (same name) or found by the next agent.
	h.d.remove(h.id)
	h.exit = e
	close(h.exited)
	h.wait <- e
}

// waitExit returns the container's exit; false if the handle was detached
// first.
func (h *handle) waitExit() (driver.Exit, bool) {
	for {
		res := h.d.c.ContainerWait(h.ctx, h.id, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
		select {
		case <-res.Result:
			// The wait's own status lacks OOMKilled: inspect says it all.
		case err := <-res.Error:
			if h.ctx.Err() != nil {
				return driver.Exit{}, false
			}
			if cerrdefs.IsNotFound(err) {
				return driver.Exit{Code: -1, Err: fmt.Errorf("container %s: removed by someone else: %w", h.id, err), Time: time.Now()}, true
			}
			// The connection broke, most likely a daemon restart: the
			// container may well still be running.
		}
		st, err := h.reinspect()
		switch {
		case h.ctx.Err() != nil:
			return driver.Exit{}, false
		case err != nil:
			return driver.Exit{Code: -1, Err: err, Time: time.Now()}, true
		case st.Running || st.Restarting || st.Paused:
			continue
		}
		e := driver.Exit{Code: st.ExitCode, OOMKilled: st.OOMKilled, Time: time.Now()}
		if t, err := time.Parse(time.RFC3339Nano, st.FinishedAt); err == nil && !t.IsZero() && t.Year() > 1 {
			e.Time = t
		}
		return e, true
	}
}

// reinspect reads the container's state, retrying with backoff for up to
// reinspectFor while the daemon does not answer.
func (h *handle) reinspect() (*container.State, error) {
	deadline := time.Now().Add(reinspectFor)
	delay := 100 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(h.ctx, 10*time.Second)
		ins, err := h.d.c.ContainerInspect(ctx, h.id, client.ContainerInspectOptions{})
		cancel()
		switch {
		case err == nil && ins.Container.State != nil:
			return ins.Container.State, nil
		case cerrdefs.IsNotFound(err):
			return nil, fmt.Errorf("container %s: removed by someone else", h.id)
		case h.ctx.Err() != nil:
			return nil, h.ctx.Err()
		case time.Now().After(deadline):
			return nil, fmt.Errorf("container %s: docker daemon unreachable for %s: %v", h.id, reinspectFor, err)
		}
		select {
		case <-time.After(delay):
		case <-h.ctx.Done():
			return nil, h.ctx.Err()
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// Stop stops the container (SIGTERM, SIGKILL after grace, by the daemon)
// and returns its exit once it is read and the container removed.
func (h *handle) Stop(ctx context.Context, grace time.Duration) (driver.Exit, error) {
	secs := int(math.Ceil(grace.Seconds()))
	_, err := h.d.c.ContainerStop(ctx, h.id, client.ContainerStopOptions{Timeout: &secs})
	if err != nil && !cerrdefs.IsNotFound(err) && ctx.Err() == nil {
		// The daemon refused, or the connection broke: a kill is the most
		// that can be done; the wait loop reports what happened.
		h.d.c.ContainerKill(ctx, h.id, client.ContainerKillOptions{})
	}
	select {
	case <-h.exited:
		return h.exit, nil
	case <-ctx.Done():
		return driver.Exit{}, ctx.Err()
	}
}

// Signal sends sig to the container's main process.
func (h *handle) Signal(sig syscall.Signal) error {
	name := unix.SignalName(sig)
	if name == "" {
		return fmt.Errorf("signal %d has no name", int(sig))
	}
	_, err := h.d.c.ContainerKill(context.Background(), h.id, client.ContainerKillOptions{Signal: name})
	return err
}

// Exec runs cmd in the container and returns its exit code and its
// combined output, of which the first 4 KiB are kept.
func (h *handle) Exec(ctx context.Context, cmd []string) (int, []byte, error) {
	created, err := h.d.c.ExecCreate(ctx, h.id, client.ExecCreateOptions{Cmd: cmd, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return 0, nil, fmt.Errorf("docker exec %q: %w", cmd, err)
	}
	att, err := h.d.c.ExecAttach(ctx, created.ID, client.ExecAttachOptions{})
	if err != nil {
		return 0, nil, fmt.Errorf("docker exec %q: %w", cmd, err)
	}
	defer att.Close()
	// Closing the connection is what ends a read when ctx ends first.
	stop := context.AfterFunc(ctx, func() { att.Close() })
	defer stop()
	out := &boundedBuffer{max: execOutputMax}
	_, err = stdcopy.StdCopy(out, out, att.Reader)
	if ctx.Err() != nil {
		return 0, out.Bytes(), fmt.Errorf("docker exec %q: %w", cmd, ctx.Err())
	}
	if err != nil {
		return 0, out.Bytes(), fmt.Errorf("docker exec %q: reading output: %w", cmd, err)
	}
	ins, err := h.d.c.ExecInspect(ctx, created.ID, client.ExecInspectOptions{})
	if err != nil {
		return 0, out.Bytes(), fmt.Errorf("docker exec %q: %w", cmd, err)
	}
	return ins.ExitCode, out.Bytes(), nil
}

// boundedBuffer keeps the first max bytes written and accepts the rest
// without keeping it, so that the writer never blocks or fails.
type boundedBuffer struct {
	bytes.Buffer
	max int
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// Usage reads one sample of the container's stats: cumulative CPU time,
// and memory in use less the page cache the kernel can drop (as docker
// stats shows it).
func (h *handle) Usage(ctx context.Context, _ *driver.Round) (driver.Usage, error) {
	res, err := h.d.c.ContainerStats(ctx, h.id, client.ContainerStatsOptions{})
	if err != nil {
		return driver.Usage{}, fmt.Errorf("docker stats: %w", err)
	}
	defer res.Body.Close()
	var s container.StatsResponse
	if err := json.NewDecoder(res.Body).Decode(&s); err != nil && !errors.Is(err, io.EOF) {
		return driver.Usage{}, fmt.Errorf("docker stats: %w", err)
	}
	mem := s.MemoryStats.Usage
	// cgroup v1 reports total_inactive_file, v2 inactive_file.
	if v, ok := s.MemoryStats.Stats["total_inactive_file"]; ok && v < mem {
		mem -= v
	} else if v, ok := s.MemoryStats.Stats["inactive_file"]; ok && v < mem {
		mem -= v
	}
	return driver.Usage{CPU: time.Duration(s.CPUStats.CPUUsage.TotalUsage), MemoryBytes: mem}, nil
}
