package main

// drover-bench footprint: what a real agent costs its machine.
//
//	go run ./cmd/drover-bench footprint              # 30 s idle, 30 s with 100 tasks
//	go run ./cmd/drover-bench footprint -quick       # 3 s each
//
// It runs `drover server` (embedded etcd) and `drover agent` as two
// processes, so that the agent is measured alone. Once the node is ready
// and has settled, it samples the agent's VmRSS (/proc/PID/status) every
// 500 ms and its CPU time (utime+stime, /proc/PID/stat) over the interval:
// first idle, then with 100 exec tasks (sleep) running. The tasks are the
// agent's children but their own processes, so they are not counted.
// Targets: idle <= 20 MB RSS and <= 0.5% of a core; <= 40 MB with 100 tasks.

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
)

func init() {
	register(scenario{name: "footprint", about: "a real drover agent's RSS and CPU, idle and with 100 exec tasks", flags: footprintFlags})
}

// Issue 5's targets for the agent.
const (
	idleRSSTargetMB  = 20
	idleCPUTarget    = 0.5 // percent of one core
	tasksRSSTargetMB = 40
)

func footprintFlags(fs *flag.FlagSet, o *options) func() (*report, error) {
	interval := fs.Duration("interval", 30*time.Second, "how long to measure, idle and then with the tasks (-quick: 3s)")
	tasks := fs.Int("tasks", 100, "exec tasks (sleep) for the second measurement")
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
	cpuPct     float64 // of one core
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
	job := sleepJob("footprint", tasks)
	if _, err := c.SubmitJob(ctx, job, 0); err != nil {
		return nil, err
	}
	if err := waitRunningAll(ctx, c, job.Name, tasks); err != nil {
		return nil, err
	}
	time.Sleep(time.Second) // the status reports of the starts
	busy, err := measure(pid, interval)
	if err != nil {
		return nil, err
	}
	srvIdle, err := measure(srv.cmd.Process.Pid, 0)
	if err != nil {
		return nil, err
	}

	mb := func(kb int64) float64 { return float64(kb) / 1024 }
	rep = newReport("footprint")
	rep.linef("drover-bench footprint: one drover agent (drover server in its own process), %s per measurement, %d CPUs, %s/%s",
		interval, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)
	rep.linef("idle              peak RSS %5.1f MB (target <= %d: %s), %4.1f MB of it anonymous; CPU %5.2f%% of a core (target <= %.1f%%: %s)",
		mb(idle.peakRSSKB), idleRSSTargetMB, verdict(mb(idle.peakRSSKB) <= idleRSSTargetMB), mb(idle.peakAnonKB), idle.cpuPct, idleCPUTarget, verdict(idle.cpuPct <= idleCPUTarget))
	rep.linef("%3d tasks running peak RSS %5.1f MB (target <= %d: %s), %4.1f MB of it anonymous; CPU %5.2f%% of a core",
		tasks, mb(busy.peakRSSKB), tasksRSSTargetMB, verdict(mb(busy.peakRSSKB) <= tasksRSSTargetMB), mb(busy.peakAnonKB), busy.cpuPct)
	rep.linef("(the rest of the RSS is file pages, mostly of the drover binary; the server with its embedded etcd has RSS %.1f MB)", mb(srvIdle.peakRSSKB))
	rep.set("interval_seconds", interval.Seconds())
	rep.set("tasks", tasks)
	rep.set("idle_rss_mb", mb(idle.peakRSSKB))
	rep.set("idle_rss_anon_mb", mb(idle.peakAnonKB))
	rep.set("idle_cpu_percent", idle.cpuPct)
	rep.set("tasks_rss_mb", mb(busy.peakRSSKB))
	rep.set("tasks_rss_anon_mb", mb(busy.peakAnonKB))
	rep.set("tasks_cpu_percent", busy.cpuPct)
	rep.set("server_rss_mb", mb(srvIdle.peakRSSKB))
	return rep, nil
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
		rss, anon, err := rssKB(pid)
		if err != nil {
			return u, err
		}
		u.peakRSSKB, u.peakAnonKB = max(u.peakRSSKB, rss), max(u.peakAnonKB, anon)
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

// rssKB reads VmRSS and RssAnon from /proc/PID/status.
func rssKB(pid int) (rss, anon int64, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0, err
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
		default:
			continue
		}
		if *dst, err = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64); err != nil {
			return 0, 0, fmt.Errorf("/proc/%d/status: %s: %w", pid, k, err)
		}
		found++
	}
	if found != 2 {
		return 0, 0, fmt.Errorf("/proc/%d/status: no VmRSS or RssAnon line (Linux 4.5 or later has both)", pid)
	}
	return rss, anon, nil
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
