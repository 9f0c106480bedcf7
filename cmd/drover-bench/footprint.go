package main

// drover-bench footprint: what a real agent costs its machine.
//
//	go run ./cmd/drover-bench footprint              # 30 s idle, 30 s with 100 exec tasks, 30 s with 100 raw_exec tasks, then an agent restart
//	go run ./cmd/drover-bench footprint -tasks 1000  # the same with 1,000 tasks of each driver
//	go run ./cmd/drover-bench footprint -quick       # 3 s each
//
// It runs `drover server` (embedded etcd) and `drover agent` as two
// processes, so that the agent is measured alone. Once the node is ready
// and has settled, it samples the agent's VmRSS and Threads
// (/proc/PID/status) every 500 ms and its CPU time (utime+stime,
// /proc/PID/stat) over the interval: first idle, then with N exec tasks
// (sleep) running, then, in a new agent process so that the first run's
// heap is not counted again, with N raw_exec tasks. The tasks are the
// agent's children but their own processes, so they are not counted.
// Then it stops that agent (SIGTERM: a standalone agent leaves its tasks
// running) and starts it again, and measures how long the new agent takes,
// from its start, until the server shows every task adopted, and counts
// the tasks whose process the restart changed (its PID or start time in
// /proc) or that were restarted.
// Targets: idle <= 20 MB RSS and <= 0.5% of a core; <= 32 MB with 100
// tasks and <= 100 MB with 1,000, of either driver; <= 24 OS threads with
// any number of tasks; every task re-adopted, none restarted, within 3 s.

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/proc"
	"github.com/drover-org/drover/internal/spec"
)

func init() {
	register(scenario{name: "footprint", about: "a real drover agent's RSS, CPU and threads, idle and with 100 exec and 100 raw_exec tasks; its restart with the raw_exec tasks", flags: footprintFlags})
}

// The targets for the agent: issue 5's idle ones, issue 19's with tasks.
const (
	idleRSSTargetMB      = 20
	idleCPUTarget        = 0.5 // percent of one core
	tasksRSSTargetMB     = 32  // up to 100 tasks
	manyTasksRSSTargetMB = 100 // up to 1,000 tasks
	threadsTarget        = 24
	readoptTarget        = 3 * time.Second
)

// rssTargetMB is the RSS target for an agent running n tasks.
func rssTargetMB(n int) float64 {
	if n <= 100 {
		return tasksRSSTargetMB
	}
	return manyTasksRSSTargetMB
}

func footprintFlags(fs *flag.FlagSet, o *options) func() (*report, error) {
	interval := fs.Duration("interval", 30*time.Second, "how long to measure, idle and then with the tasks (-quick: 3s)")
	tasks := fs.Int("tasks", 100, "tasks (sleep) for the second measurement (exec) and the third (raw_exec)")
	return func() (*report, error) {
		return footprint(o.drover, sized(fs, o, "interval", *interval, 3*time.Second), *tasks)
	}
}

// procUsage is what one interval cost a process.
type procUsage struct {
	peakRSSKB int64
	// peakAnonKB is the part of RSS that is not file pages: heap, stacks.
	// The rest is mostly the pages of the drover binary that were touched
	// (it links the server and etcd too), shared with the page cache.
	peakAnonKB int64
	// peakThreads is the most OS threads the process had at once.
	peakThreads int64
	cpuPct      float64 // of one core
}

func footprint(bin string, interval time.Duration, tasks int) (rep *report, err error) {
	if err := need("/bin/sleep", "/proc/self/status", "/proc/self/stat"); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "drover-bench-footprint-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w (process logs kept in %s)", err, tmp)
			return
		}
		os.RemoveAll(tmp)
	}()
	if bin, err = droverBinary(bin, tmp); err != nil {
		return nil, err
	}
	newProc := func(name string, args ...string) (*benchProc, error) {
		f, err := os.Create(filepath.Join(tmp, name+".log"))
		return &benchProc{name: name, log: f, args: func() []string { return append([]string{bin}, args...) }}, err
	}
	srv, err := newProc("server", "server", "--name", "s1", "--data-dir", filepath.Join(tmp, "server"),
		"--http-addr", "127.0.0.1:0", "--etcd-client-addr", "127.0.0.1:0", "--etcd-peer-addr", "127.0.0.1:0", "--log-level", "warn")
	if err != nil {
		return nil, err
	}
	if err := srv.start(); err != nil {
		return nil, err
	}
	defer srv.stop()
	ag, err := newProc("agent", "agent", "--name", "footprint", "--servers", srv.api, "--data-dir", filepath.Join(tmp, "agent"),
		"--tls-dir", filepath.Join(tmp, "server", "tls"),
		"--http-addr", "127.0.0.1:0", "--log-level", "warn")
	if err != nil {
		return nil, err
	}
	if err := ag.start(); err != nil {
		return nil, err
	}
	defer ag.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, err := clusterClient(ctx, filepath.Join(tmp, "server", "tls"), srv.api)
	if err != nil {
		return nil, err
	}
	defer stopAllJobs(ctx, c) // the agent leaves its tasks running when it stops
	if err := waitNode(ctx, c); err != nil {
		return nil, err
	}
	pid := ag.cmd.Process.Pid
	// Settle: registration, the first status report and the Go runtime's
	// start-up are not the idle state.
	time.Sleep(time.Second)
	idle, err := measure(pid, interval)
	if err != nil {
		return nil, err
	}
	execUse, err := measureTasks(ctx, c, ag.cmd.Process.Pid, "exec", tasks, interval)
	if err != nil {
		return nil, err
	}
	stopAllJobs(ctx, c)
	// A new agent process for raw_exec: the Go heap the exec tasks grew
	// is not returned at once, and would be counted again.
	ag.stop()
	if err := ag.start(); err != nil {
		return nil, err
	}
	rawUse, err := measureTasks(ctx, c, ag.cmd.Process.Pid, "raw_exec", tasks, interval)
	if err != nil {
		return nil, err
	}
	readoptIn, restarted, err := readopt(ctx, c, ag, rawJob)
	if err != nil {
		return nil, err
	}
	stopAllJobs(ctx, c)
	srvIdle, err := measure(srv.cmd.Process.Pid, 0)
	if err != nil {
		return nil, err
	}

	mb := func(kb int64) float64 { return float64(kb) / 1024 }
	threads := max(execUse.peakThreads, rawUse.peakThreads)
	rep = newReport("footprint")
	rep.linef("drover-bench footprint: one drover agent (drover server in its own process), %s per measurement, %d CPUs, %s/%s",
		interval, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)
	rep.linef("idle                       peak RSS %6.1f MB (target <= %d: %s), %5.1f MB of it anonymous; CPU %5.2f%% of a core (target <= %.1f%%: %s); %d threads",
		mb(idle.peakRSSKB), idleRSSTargetMB, verdict(mb(idle.peakRSSKB) <= idleRSSTargetMB), mb(idle.peakAnonKB), idle.cpuPct, idleCPUTarget, verdict(idle.cpuPct <= idleCPUTarget), idle.peakThreads)
	for _, r := range []struct {
		drv string
		u   procUsage
	}{{"exec", execUse}, {"raw_exec", rawUse}} {
		rep.linef("%4d %-8s tasks running peak RSS %6.1f MB (target <= %.0f: %s), %5.1f MB of it anonymous; CPU %5.2f%% of a core; %d threads (target <= %d: %s)",
			tasks, r.drv, mb(r.u.peakRSSKB), rssTargetMB(tasks), verdict(mb(r.u.peakRSSKB) <= rssTargetMB(tasks)), mb(r.u.peakAnonKB), r.u.cpuPct,
			r.u.peakThreads, threadsTarget, verdict(r.u.peakThreads <= threadsTarget))
	}
	rep.linef("agent restart with %d raw_exec tasks: all adopted %.2f s after its start (target <= %s: %s), %d restarted or changed process (target 0: %s)",
		tasks, readoptIn.Seconds(), readoptTarget, verdict(readoptIn <= readoptTarget), restarted, verdict(restarted == 0))
	rep.linef("(the rest of the RSS is file pages, mostly of the drover binary; the server with its embedded etcd has RSS %.1f MB)", mb(srvIdle.peakRSSKB))
	rep.set("interval_seconds", interval.Seconds())
	rep.set("tasks", tasks)
	rep.set("idle_rss_mb", mb(idle.peakRSSKB))
	rep.set("idle_rss_anon_mb", mb(idle.peakAnonKB))
	rep.set("idle_cpu_percent", idle.cpuPct)
	rep.set("idle_threads", idle.peakThreads)
	rep.set("exec_tasks_rss_mb", mb(execUse.peakRSSKB))
	rep.set("exec_tasks_rss_anon_mb", mb(execUse.peakAnonKB))
	rep.set("exec_tasks_cpu_percent", execUse.cpuPct)
	rep.set("raw_exec_tasks_rss_mb", mb(rawUse.peakRSSKB))
	rep.set("raw_exec_tasks_rss_anon_mb", mb(rawUse.peakAnonKB))
	rep.set("raw_exec_tasks_cpu_percent", rawUse.cpuPct)
	rep.set("tasks_threads", threads)
	rep.set("readopt_seconds", readoptIn.Seconds())
	rep.set("readopt_restarted", restarted)
	rep.set("server_rss_mb", mb(srvIdle.peakRSSKB))
	return rep, nil
}

// rawJob is the job of the raw_exec measurement.
const rawJob = "footprint-raw-exec"

// measureTasks runs n sleep tasks of driver drv on the agent (process pid)
// and measures the agent over interval once all run; the tasks go on.
func measureTasks(ctx context.Context, c *client.Client, pid int, drv string, n int, interval time.Duration) (procUsage, error) {
	if err := waitNode(ctx, c); err != nil {
		return procUsage{}, err
	}
	job := sleepJob("footprint-"+strings.ReplaceAll(drv, "_", "-"), n)
	job.Groups[0].Tasks[0].Driver = drv
	if _, err := c.SubmitJob(ctx, job, 0); err != nil {
		return procUsage{}, err
	}
	if err := waitRunningAll(ctx, c, job.Name, n); err != nil {
		return procUsage{}, err
	}
	time.Sleep(time.Second) // the status reports of the starts
	return measure(pid, interval)
}

// readopt restarts the agent ag while job's tasks run, and returns how long
// after the new agent's start the server showed every task adopted (an
// Adopted event since), and how many tasks were restarted or run another
// process than before: a PID that no longer names the process it did
// (its start time in /proc changed), a PID or restart count the server
// shows changed.
func readopt(ctx context.Context, c *client.Client, ag *benchProc, job string) (time.Duration, int, error) {
	st, _, err := c.Job(ctx, job, nil)
	if err != nil {
		return 0, 0, err
	}
	type task struct {
		pid, restarts int
		startTicks    uint64
	}
	before := map[string]task{}
	for _, a := range st.Allocations {
		if a.Status == nil || a.Status.Tasks["t"] == nil {
			return 0, 0, fmt.Errorf("task %s has no status", a.ID)
		}
		ts := a.Status.Tasks["t"]
		ps, err := proc.ReadStat(ts.PID)
		if err != nil {
			return 0, 0, fmt.Errorf("task %s: pid %d: %w", a.ID, ts.PID, err)
		}
		before[a.ID] = task{ts.PID, ts.Restarts, ps.StartTicks}
	}
	ag.stop()
	t0 := time.Now()
	if err := ag.start(); err != nil {
		return 0, 0, err
	}
	deadline := t0.Add(time.Minute)
	for {
		st, _, err = c.Job(ctx, job, nil)
		if err != nil {
			return 0, 0, err
		}
		if adoptedSince(st.Allocations, t0) == len(before) {
			break
		}
		if time.Now().After(deadline) {
			return 0, 0, fmt.Errorf("agent restart: %d of %d tasks adopted within a minute", adoptedSince(st.Allocations, t0), len(before))
		}
		time.Sleep(100 * time.Millisecond)
	}
	took := time.Since(t0)
	changed := 0
	for _, a := range st.Allocations {
		b, ok := before[a.ID]
		ts := a.Status.Tasks["t"]
		ps, err := proc.ReadStat(b.pid)
		if !ok || ts.PID != b.pid || ts.Restarts != b.restarts || err != nil || ps.StartTicks != b.startTicks {
			changed++
		}
	}
	return took, changed, nil
}

// adoptedSince counts the allocs whose task has an Adopted event at or
// after t.
func adoptedSince(allocs []*spec.Alloc, t time.Time) int {
	n := 0
	for _, a := range allocs {
		if a.Status == nil || a.Status.Tasks["t"] == nil {
			continue
		}
		if slices.ContainsFunc(a.Status.Tasks["t"].Events, func(e spec.TaskEvent) bool {
			return e.Type == spec.EventAdopted && !e.Time.Before(t)
		}) {
			n++
		}
	}
	return n
}

// measure samples pid's RSS every 500 ms for d and returns the peak and
// the share of one core its CPU time took over d (d = 0: RSS only).
func measure(pid int, d time.Duration) (procUsage, error) {
	var u procUsage
	st0, err := proc.ReadStat(pid)
	if err != nil {
		return u, err
	}
	start := time.Now()
	for {
		rss, anon, threads, err := statusFigures(pid)
		if err != nil {
			return u, err
		}
		u.peakRSSKB, u.peakAnonKB = max(u.peakRSSKB, rss), max(u.peakAnonKB, anon)
		u.peakThreads = max(u.peakThreads, threads)
		left := d - time.Since(start)
		if left <= 0 {
			break
		}
		time.Sleep(min(left, 500*time.Millisecond))
	}
	st1, err := proc.ReadStat(pid)
	if err != nil {
		return u, err
	}
	if d > 0 {
		u.cpuPct = 100 * (st1.CPUTime() - st0.CPUTime()).Seconds() / time.Since(start).Seconds()
	}
	return u, nil
}

// statusFigures reads VmRSS and RssAnon (kB) and Threads from
// /proc/PID/status.
func statusFigures(pid int) (rss, anon, threads int64, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0, 0, err
	}
	found := 0
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		var dst *int64
		switch k {
		case "VmRSS":
			dst = &rss
		case "RssAnon":
			dst = &anon
		case "Threads":
			dst = &threads
		default:
			continue
		}
		if *dst, err = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64); err != nil {
			return 0, 0, 0, fmt.Errorf("/proc/%d/status: %s: %w", pid, k, err)
		}
		found++
	}
	if found != 3 {
		return 0, 0, 0, fmt.Errorf("/proc/%d/status: no VmRSS, RssAnon or Threads line (Linux 4.5 or later has them)", pid)
	}
	return rss, anon, threads, nil
}
