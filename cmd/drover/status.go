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

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/planview"
	"github.com/drover-org/drover/internal/spec"
)

func newStatusCmd(g *globals) *cobra.Command {
	var events int
	cmd := &cobra.Command{
		Use:   "status [JOB]",
		Short: "Show jobs, or one job's instances, events and why anything is pending",
		Example: `  drover status
  drover status hello
  drover status hello -o json | drover run -`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel, c, err := g.readCommand(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			out := cmd.OutOrStdout()
			if len(args) == 0 {
				jobs, _, err := c.Jobs(ctx, &client.QueryOptions{Namespace: g.listNamespace()})
				if err != nil {
					return err
				}
				if g.output != "table" {
					return g.print(out, jobs)
				}
				leader, _ := c.Leader(ctx)
				fmt.Fprintf(out, "Server %s, leader %s\n\n", c.Address(), dash(leader))
				if len(jobs) == 0 {
					fmt.Fprintln(out, "No jobs. Run one: drover run examples/hello.hcl")
					return nil
				}
				t := newTable(out, "NAME", "TYPE", "PRIORITY", "VERSION", "STATUS", "INSTANCES", "REASON")
				for _, j := range jobs {
					s := j.Summary
					t.row(j.Name, string(j.Type), strconv.Itoa(j.Priority), strconv.FormatUint(j.Version, 10),
						string(s.State), s.Progress(), dash(s.Reason))
				}
				t.flush()
				return nil
			}
			st, _, err := c.Job(ctx, args[0], nil)
			if err != nil {
				return err
			}
			if g.output != "table" {
				return g.print(out, st)
			}
			// The latest deployment, if the job has one; a job without is
			// a 404, which says nothing more.
			dep, _, _ := c.LatestDeployment(ctx, st.Job.Name, nil)
			printJobStatus(out, st, dep, jobUsage(ctx, c, st.Allocations), time.Now(), events)
			return nil
		},
	}
	cmd.Flags().IntVar(&events, "events", 10, "how many recent task events to show")
	return outputs(cmd, documents...)
}

// printJobStatus renders one job for people: what it is, where each
// instance runs, why anything is pending, and what happened lately.
// dep is its latest deployment, or nil; usage is what the running
// instances use, by alloc ID (jobUsage).
func printJobStatus(w io.Writer, st *spec.JobStatus, dep *spec.Deployment, usage map[string]map[string]spec.Usage, now time.Time, events int) {
	j, s := st.Job, st.Summary
	fmt.Fprintf(w, "Job        %s\n", j.Name)
	fmt.Fprintf(w, "Type       %s (priority %d)\n", j.Type, j.Priority)
	fmt.Fprintf(w, "Version    %d, submitted %s ago\n", j.Version, age(now, j.SubmitTime))
	fmt.Fprintf(w, "Status     %s: %s\n", s.State, summaryCounts(s))
	if s.Reason != "" {
		fmt.Fprintf(w, "Why        %s\n", s.Reason)
	}
	if j.ParentID != "" {
		fmt.Fprintf(w, "Parent     %s, launched %s\n", j.ParentID, j.LaunchTime.UTC().Format(time.RFC3339))
	}
	if j.IsTemplate() {
		if !st.NextLaunch.IsZero() {
			fmt.Fprintf(w, "Next       %s (in %s)\n", st.NextLaunch.UTC().Format(time.RFC3339), st.NextLaunch.Sub(now).Round(time.Second))
		}
		fmt.Fprintf(w, "Children   %d", len(st.Children))
		if n := len(st.Children); n > 0 {
			fmt.Fprintf(w, ", the newest %s", st.Children[n-1])
		}
		fmt.Fprintln(w)
		return
	}
	if dep != nil {
		fmt.Fprintf(w, "Deployment version %d: %s\n", dep.JobVersion, deploymentLine(dep))
	}
	for _, f := range st.Failures {
		if f.NoNodeMatched {
			fmt.Fprintf(w, "Pending    %s\n", planview.FailureLine(f))
			continue
		}
		fmt.Fprintf(w, "Pending    %d instance(s) of group %s cannot be placed: %s\n", f.Missing, f.Group, f.String())
	}
	fmt.Fprintln(w)
	if len(st.Allocations) == 0 {
		fmt.Fprintln(w, "No instances yet.")
	} else {
		printAllocTable(w, st.Allocations, now, false)
		printAllocUsage(w, st.Allocations, usage)
	}
	if ev := recentEvents(st.Allocations, events); len(ev) > 0 {
		fmt.Fprintln(w, "\nRecent events")
		t := newTable(w, "TIME", "INSTANCE", "TASK", "EVENT", "MESSAGE")
		for _, e := range ev {
			t.row(e.Time.Local().Format("15:04:05"), e.alloc, e.task, string(e.Type), dash(e.Message))
		}
		t.flush()
	}
}

// jobUsage fetches, from the nodes that run the job's running instances,
// what each instance's tasks use: alloc ID -> task -> usage. An instance
// whose node does not answer is missing.
func jobUsage(ctx context.Context, c *client.Client, allocs []*spec.Alloc) map[string]map[string]spec.Usage {
	seen := map[string]bool{}
	var nodes []string
	for _, a := range allocs {
		if a.ClientStatusOr() == spec.ClientRunning && a.NodeID != "" && !seen[a.NodeID] {
			seen[a.NodeID] = true
			nodes = append(nodes, a.NodeID)
		}
	}
	out := map[string]map[string]spec.Usage{}
	for _, nu := range fetchUsage(ctx, c, nodes) {
		for id, tasks := range nu.Allocs {
			out[id] = tasks
		}
	}
	return out
}

// printAllocUsage shows, for each running instance, what its tasks use
// now against what it reserves ("-" when its node did not answer).
func printAllocUsage(w io.Writer, allocs []*spec.Alloc, usage map[string]map[string]spec.Usage) {
	var running []*spec.Alloc
	for _, a := range allocs {
		if a.ClientStatusOr() == spec.ClientRunning {
			running = append(running, a)
		}
	}
	if len(running) == 0 {
		return
	}
	fmt.Fprintln(w, "\nUsage (used/reserved)")
	t := newTable(w, "ID", "INSTANCE", "NODE", "CPU (MHz)", "MEMORY (MB)")
	for _, a := range running {
		cpu, mem := "-", "-"
		if tasks, ok := usage[a.ID]; ok {
			var u spec.Usage
			for _, tu := range tasks {
				u.CPU += tu.CPU
				u.MemoryMB += tu.MemoryMB
			}
			cpu, mem = strconv.Itoa(u.CPU), strconv.Itoa(u.MemoryMB)
		}
		mem += "/" + strconv.Itoa(a.Resources.MemoryMB)
		if m := memoryMax(a); m != "" {
			mem += " (max " + m + ")"
		}
		t.row(short(a.ID), a.Name, dash(a.NodeName), cpu+"/"+strconv.Itoa(a.Resources.CPU), mem)
	}
	t.flush()
}

func summaryCounts(s spec.JobSummary) string {
	parts := []string{fmt.Sprintf("%d desired", s.Desired)}
	for _, c := range []struct {
		n    int
		name string
	}{{s.Running, "running"}, {s.Pending, "pending"}, {s.Complete, "complete"}, {s.Failed, "failed"}, {s.Lost, "lost"}} {
		if c.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c.n, c.name))
		}
	}
	return strings.Join(parts, ", ")
}

// printAllocTable lists instances; withJob adds the job column (drover ps).
func printAllocTable(w io.Writer, allocs []*spec.Alloc, now time.Time, withJob bool) {
	header := []string{"ID", "INSTANCE", "NODE", "STATE", "DESIRED", "RESTARTS", "VERSION", "AGE"}
	t := newTable(w, header...)
	for _, a := range allocs {
		desired := string(a.DesiredStatus)
		if a.DesiredStatus == spec.DesiredStop && a.DesiredReason != "" {
			desired += " (" + a.DesiredReason + ")"
		}
		state := instanceState(a, now)
		if a.NodeDown && !a.Terminal() {
			state = "lost (node down; last reported " + state + ")"
		}
		t.row(short(a.ID), a.Name, dash(a.NodeName), state, desired, strconv.Itoa(a.Restarts()),
			strconv.FormatUint(a.JobVersion, 10), age(now, a.CreateTime))
	}
	t.flush()
}

// tableCut is the most of a failure's description a table shows; the
// whole of it is in `drover status JOB` (its Why line) and in -o json.
const tableCut = 60

// instanceState is an instance's STATE in tables: its client status, a
// failure's description (cut to tableCut), or, while a task that died
// waits to start again, when and which attempt.
func instanceState(a *spec.Alloc, now time.Time) string {
	state := string(a.ClientStatusOr())
	if a.Status == nil {
		return state
	}
	if a.ClientStatusOr() == spec.ClientFailed && a.Status.Description != "" {
		return state + ": " + cut(a.Status.Description, tableCut)
	}
	if a.Terminal() {
		return state
	}
	names := make([]string, 0, len(a.Status.Tasks))
	for name := range a.Status.Tasks {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		ts := a.Status.Tasks[name]
		if ts.State != spec.TaskPending || ts.RestartAt.IsZero() {
			continue
		}
		when := "restarting now"
		if left := ts.RestartAt.Sub(now).Round(time.Second); left > 0 {
			when = "restarting in " + left.String()
		}
		if len(a.Status.Tasks) > 1 {
			when = name + " " + when
		}
		if ts.RestartAttempt > 0 {
			return fmt.Sprintf("%s (attempt %d of %d)", when, ts.RestartAttempt, ts.RestartAttempts)
		}
		return fmt.Sprintf("%s (%d restarts used; waiting for the interval)", when, ts.RestartAttempts)
	}
	return state
}

// cut shortens s to at most n runes, ending in "…" when it did.
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

type event struct {
	spec.TaskEvent
	alloc, task string
}

func recentEvents(allocs []*spec.Alloc, n int) []event {
	var out []event
	for _, a := range allocs {
		if a.Status == nil {
			continue
		}
		for task, ts := range a.Status.Tasks {
			for _, e := range ts.Events {
				out = append(out, event{TaskEvent: e, alloc: a.Name, task: task})
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].Time.Equal(out[j].Time) {
			return out[i].Time.Before(out[j].Time)
		}
		return out[i].alloc < out[j].alloc
	})
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out
}
