package dockerdriver

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"time"

	"github.com/moby/moby/client"

	"github.com/drover-org/drover/internal/driver"
	"github.com/drover-org/drover/internal/proc"
)

// Adopt takes over running container p.ID, which an earlier agent started.
// Its output is followed from now on: what it wrote while no agent ran is
// in docker's own log, not repeated into the task's.
func (d *Driver) Adopt(ctx context.Context, p driver.Process, stdout, stderr io.Writer) (driver.Handle, error) {
	since := time.Now()
	ins, err := d.c.ContainerInspect(ctx, p.ID, client.ContainerInspectOptions{})
	if err != nil {
		return nil, fmt.Errorf("adopt container %s: %w", p.ID, err)
	}
	st := ins.Container.State
	if st == nil || !st.Running {
		code := -1
		if st != nil {
			code = st.ExitCode
		}
		return nil, fmt.Errorf("adopt container %s: not running (exit code %d)", p.ID, code)
	}
	// Seconds and nanoseconds: whole seconds would repeat up to a second
	// of output.
	s := strconv.FormatInt(since.Unix(), 10) + "." + fmt.Sprintf("%09d", since.Nanosecond())
	return d.follow(ins.Container.ID, st.Pid, s, stdout, stderr), nil
}

// Find returns the containers of node nodeID, running or exited, oldest
// first. A running one's PID and start time are its main process's on
// this host; an exited one has PID 0.
func (d *Driver) Find(ctx context.Context, nodeID string) ([]driver.Found, error) {
	list, err := d.c.ContainerList(ctx, client.ContainerListOptions{
		All: true, Filters: make(client.Filters).Add("label", LabelNodeID+"="+nodeID),
	})
	if err != nil {
		return nil, fmt.Errorf("docker: list containers: %w", err)
	}
	type found struct {
		driver.Found
		created time.Time
	}
	var out []found
	for _, c := range list.Items {
		f := found{Found: driver.Found{Process: driver.Process{ID: c.ID}, AllocID: c.Labels[LabelAllocID], Task: c.Labels[LabelTask]}}
		f.created = time.Unix(c.Created, 0)
		ins, err := d.c.ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{})
		if err != nil {
			continue // removed meanwhile
		}
		if t, err := time.Parse(time.RFC3339Nano, ins.Container.Created); err == nil {
			f.created = t
		}
		if st := ins.Container.State; st != nil && st.Running && st.Pid > 0 {
			f.PID = st.Pid
			if ps, err := proc.ReadStat(st.Pid); err == nil {
				f.StartTicks = ps.StartTicks
			}
		}
		out = append(out, f)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].created.Equal(out[j].created) {
			return out[i].created.Before(out[j].created)
		}
		return out[i].ID < out[j].ID
	})
	res := make([]driver.Found, len(out))
	for i, f := range out {
		res[i] = f.Found
	}
	return res, nil
}

// Remove kills container p.ID and removes it.
func (d *Driver) Remove(ctx context.Context, p driver.Process) error {
	if err := d.removeCtx(ctx, p.ID); err != nil {
		return fmt.Errorf("docker: remove container %s: %w", p.ID, err)
	}
	return nil
}
