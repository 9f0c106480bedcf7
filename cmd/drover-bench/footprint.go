package main

// drover-bench footprint: what a real agent costs its machine.
//
//	go run ./cmd/drover-bench footprint              # 30 s idle, 30 s with 100 exec tasks, 30 s with 100 raw_exec tasks
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
// Targets: idle <= 20 MB RSS and <= 0.5% of a core; <= 32 MB with 100
// tasks and <= 100 MB with 1,000, of either driver; <= 24 OS threads with
// any number of tasks.

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/drover-org/drover/internal/client"
)

func init() {
	register(scenario{name: "footprint", about: "a real drover agent's RSS, CPU and threads, idle and with 100 exec and 100 raw_exec tasks", flags: footprintFlags})
}

// The targets for the agent: issue 5's idle ones, issue 19's with tasks.
const (
	idleRSSTargetMB      = 20
	idleCPUTarget        = 0.5 // percent of one core
	tasksRSSTargetMB     = 32  // up to 100 tasks
	manyTasksRSSTargetMB = 100 // up to 1,000 tasks
	threadsTarget        = 24
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
	rep.set("server_rss_mb", mb(srvIdle.peakRSSKB))
	return rep, nil
}

// measureTasks runs n sleep tasks of driver drv on the agent (process pid),
// measures the agent over interval once all run, and stops them.
func measureTasks(ctx context.Context, c *client.Client, pid int, drv string, n int, interval time.Duration) (procUsage, error) {
	if err := waitNode(ctx, c); err != nil {
		return procUsage{}, err
	}
	job := sleepJob("footprint-"+strings.ReplaceAll(drv, "_", "-"), n)
	job.Groups[0].Tasks[0].Driver = drv
	if _, err := c.SubmitJob(ctx, job, 0); err != nil {
		return procUsage{}, err
	}
	defer stopAllJobs(ctx, c)
	if err := waitRunningAll(ctx, c, job.Name, n); err != nil {
		return procUsage{}, err
	}
	time.Sleep(time.Second) // the status reports of the starts
	return measure(pid, interval)
}

// measure samples pid's RSS every 500 ms for d and returns the peak and
// the share of one core its CPU time took over d (d = 0: RSS only).
func measure(pid int, d time.Duration) (procUsage, error) {
	var u procUsage
	cpu0, err := cpuTicks(pid)
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
	cpu1, err := cpuTicks(pid)
	if err != nil {
		return u, err
	}
	if d > 0 {
		cpuSeconds := float64(cpu1-cpu0) / userHZ
		u.cpuPct = 100 * cpuSeconds / time.Since(start).Seconds()
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

// userHZ is the unit of /proc's CPU times: 100 on every Linux
// architecture Go supports.
const userHZ = 100

// cpuTicks reads utime+stime (fields 14 and 15) from /proc/PID/stat, in
// clock ticks.
func cpuTicks(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces and parentheses: the
	// fields that follow start after the last ')'; field n is f[n-3].
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("/proc/" + strconv.Itoa(pid) + "/stat: no ')' after the command name")
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 15-2 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the command name, want at least 13", pid, len(f))
	}
	ut, err := strconv.ParseUint(string(f[14-3]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat utime: %w", pid, err)
	}
	st, err := strconv.ParseUint(string(f[15-3]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat stime: %w", pid, err)
	}
	return ut + st, nil
}
