package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-org/drover/internal/spec"
)

// The alloc verbs on one instance, by ID or unique prefix: Nomad's alloc
// status, restart, stop and signal. The noun group is nouns.go's.

func newAllocStatusCmd(g *globals) *cobra.Command {
	return outputs(&cobra.Command{
		Use:               "status ALLOC",
		Short:             "Show one instance, by ID or prefix: its tasks, their states and events, its resources",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: g.completeAllocs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel, c, err := g.readCommand(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			a, err := c.Alloc(ctx, args[0])
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if g.output != "table" {
				return g.print(out, a)
			}
			printAlloc(out, a, time.Now())
			return nil
		},
	}, documents...)
}

// printAlloc renders one instance: what and where it is, what it reserves,
// each task's state, and each task's recent events, oldest first.
func printAlloc(w io.Writer, a *spec.Alloc, now time.Time) {
	fmt.Fprintf(w, "ID           %s\n", a.ID)
	fmt.Fprintf(w, "Instance     %s\n", a.Name)
	fmt.Fprintf(w, "Job          %s (version %d, %s)\n", a.Job, a.JobVersion, a.JobType)
	fmt.Fprintf(w, "Node         %s (%s)\n", dash(a.NodeName), short(a.NodeID))
	state := instanceState(a, now)
	if a.NodeDown && !a.Terminal() {
		state = "lost (node down; last reported " + state + ")"
	}
	fmt.Fprintf(w, "State        %s\n", state)
	if a.Status != nil && a.Status.Description != "" && a.ClientStatusOr() == spec.ClientFailed {
		fmt.Fprintf(w, "Why          %s\n", a.Status.Description)
	}
	desired := string(a.DesiredStatus)
	if a.DesiredReason != "" {
		desired += " (" + a.DesiredReason + ")"
	}
	fmt.Fprintf(w, "Desired      %s\n", desired)
	if a.DeploymentID != "" {
		canary := ""
		if a.Canary {
			canary = ", canary"
		}
		health := ""
		if a.Status != nil && a.Status.DeploymentHealth != nil {
			health = ", healthy"
			if !a.Status.DeploymentHealth.Healthy {
				health = ", unhealthy"
			}
		}
		fmt.Fprintf(w, "Deployment   %s%s%s\n", short(a.DeploymentID), canary, health)
	}
	res := fmt.Sprintf("cpu %d MHz, memory %d MB", a.Resources.CPU, a.Resources.MemoryMB)
	if m := memoryMax(a); m != "" {
		res += " (max " + m + ")"
	}
	if a.Resources.DiskMB > 0 {
		res += fmt.Sprintf(", disk %d MB", a.Resources.DiskMB)
	}
	fmt.Fprintf(w, "Resources    %s\n", res)
	if len(a.Ports) > 0 {
		ports := make([]string, len(a.Ports))
		for i, p := range a.Ports {
			ports[i] = p.Label + "=" + strconv.Itoa(p.Value)
		}
		fmt.Fprintf(w, "Ports        %s\n", strings.Join(ports, ", "))
	}
	fmt.Fprintf(w, "Created      %s ago\n", age(now, a.CreateTime))
	fmt.Fprintln(w)

	var tasks map[string]*spec.TaskState
	if a.Status != nil {
		tasks = a.Status.Tasks
	}
	t := newTable(w, "TASK", "DRIVER", "STATE", "RESTARTS", "PID", "EXIT", "STARTED")
	for _, task := range a.Tasks {
		ts := tasks[task.Name]
		if ts == nil {
			t.row(task.Name, task.Driver, "pending (not reported yet)", "0", "-", "-", "-")
			continue
		}
		state := string(ts.State)
		if ts.Failed {
			state += " (failed)"
		}
		pid, exit := "-", "-"
		if ts.PID > 0 {
			pid = strconv.Itoa(ts.PID)
		}
		if ts.ExitCode != nil {
			exit = strconv.Itoa(*ts.ExitCode)
		}
		started := "-"
		if !ts.StartedAt.IsZero() {
			started = age(now, ts.StartedAt) + " ago"
		}
		t.row(task.Name, task.Driver, state, strconv.Itoa(ts.Restarts), pid, exit, started)
	}
	t.flush()
	names := make([]string, 0, len(tasks))
	for n := range tasks {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		evs := tasks[n].Events
		if len(evs) == 0 {
			continue
		}
		fmt.Fprintf(w, "\nEvents of task %s (oldest first)\n", n)
		et := newTable(w, "TIME", "TYPE", "MESSAGE")
		for _, e := range evs {
			et.row(e.Time.Local().Format("15:04:05"), string(e.Type), e.Message)
		}
		et.flush()
	}
	fmt.Fprintf(w, "\nIts job, with events and pending reasons: drover status %s\n", a.Job)
}

// memoryMax is the instance's hard memory limit when a task of it sets
// memory_max: "unlimited" when one has none (memory_max = -1), else the sum
// of its tasks' limits in MB; "" when no task sets memory_max (the limit is
// the memory reserved).
func memoryMax(a *spec.Alloc) string {
	limit, set := 0, false
	for _, t := range a.Tasks {
		if t.Resources.MemoryUnlimited() {
			return "unlimited"
		}
		set = set || t.Resources.MemoryMaxMB > 0
		limit += t.Resources.MemoryLimitMB()
	}
	if !set {
		return ""
	}
	return fmt.Sprintf("%d MB", limit)
}

func newAllocRestartCmd(g *globals) *cobra.Command {
	var task string
	cmd := &cobra.Command{
		Use:   "restart ALLOC",
		Short: "Restart an instance's task in place (not counted by its restart policy)",
		Long: `Restart has the instance's agent stop its running task (with its kill_signal
and kill_timeout, and its stop command) and start it again at once, on the
same node, in the same directory. The restart policy does not count it.
Without --task, every running task of the instance is restarted.`,
		Example:           "  drover alloc restart 6c2f0e1a\n  drover alloc restart 6c2f0e1a --task api",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: g.completeAllocs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.allocAction(cmd, func(ctx context.Context) (*spec.TaskActionResult, error) {
				c, err := g.client()
				if err != nil {
					return nil, err
				}
				return c.RestartAlloc(ctx, args[0], task)
			})
		},
	}
	cmd.Flags().StringVar(&task, "task", "", "the task to restart (default: every running task of the instance)")
	return cmd
}

func newAllocSignalCmd(g *globals) *cobra.Command {
	var task string
	cmd := &cobra.Command{
		Use:   "signal ALLOC SIGNAL",
		Short: "Send a signal (SIGHUP, USR1, ...) to an instance's running task",
		Long: `Signal has the instance's agent send the signal to its running task through
the task's driver: every process of an exec or raw_exec task's process
group, or a docker task's container. The signal is a name, with or without
SIG (HUP, SIGHUP). Give --task when the instance has more than one.`,
		Example:           "  drover alloc signal 6c2f0e1a SIGHUP\n  drover alloc signal 6c2f0e1a USR1 --task api",
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: g.completeAllocs,
		RunE: func(cmd *cobra.Command, args []string) error {
			sig := "SIG" + strings.TrimPrefix(strings.ToUpper(args[1]), "SIG")
			if msg := spec.CheckSignal(sig); msg != "" {
				return fmt.Errorf("%s", msg)
			}
			return g.allocAction(cmd, func(ctx context.Context) (*spec.TaskActionResult, error) {
				c, err := g.client()
				if err != nil {
					return nil, err
				}
				return c.SignalAlloc(ctx, args[0], task, sig)
			})
		},
	}
	cmd.Flags().StringVar(&task, "task", "", "the task to signal (default: the instance's only task)")
	return cmd
}

// allocAction runs a lifecycle verb on one task and says what was done.
func (g *globals) allocAction(cmd *cobra.Command, do func(context.Context) (*spec.TaskActionResult, error)) error {
	ctx, cancel := context.WithTimeout(cmd.Context(), readTimeout)
	defer cancel()
	res, err := do(ctx)
	if err != nil {
		return err
	}
	what := "Task"
	if strings.Contains(res.Task, ", ") {
		what = "Tasks"
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s %s of allocation %s: %s.\nSee it with: drover alloc status %s\n", what, res.Task, short(res.Alloc), res.Message, short(res.Alloc))
	return nil
}

func newAllocStopCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "stop ALLOC",
		Short: "Stop an instance; the leader places its replacement",
		Long: `Stop asks the leader to stop the instance at once (its tasks get their
kill_signal and kill_timeout) and to place a replacement, as Nomad's alloc
stop does: the job keeps its count. To stop every instance, stop the job
(drover stop JOB). A system job's instances are refused: drain the node.`,
		Example:           "  drover alloc stop 6c2f0e1a",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: g.completeAllocs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel, c, err := g.readCommand(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			a, _, err := c.StopAlloc(ctx, args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Allocation %s (%s): stop requested; the leader stops it and places its replacement.\nFollow it with: drover status %s\n",
				short(a.ID), a.Name, a.Job)
			return nil
		},
	}
}
