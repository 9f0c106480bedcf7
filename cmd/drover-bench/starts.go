package main

// drover-bench starts: one real agent starts exec and raw_exec tasks.
//
//	go run ./cmd/drover-bench starts                 # 500 instances, 1 run
//	go run ./cmd/drover-bench starts -instances 100 -runs 5
//
// It starts `drover dev` (real server, agent and embedded etcd with fsync),
// submits an exec job of N instances of /bin/sleep, then the same as a
// raw_exec job, and reads each instance's start time as the agent recorded
// it: submit -> running. Just before each job it times raw fork/exec of
// the same command N times, that job's baseline: each driver's start rate
// (N / submit to last running) should be at least 0.6 of the raw fork/exec
// rate measured just before its job. Beside the
// rates, which a busy machine moves a lot, it reports the CPU time a start
// costs: drover dev's (server, etcd and agent) from the submit until every
// instance is seen running, and this process's for raw fork/exec.
//
// Each measured window (a job's submit to its last start, and the raw
// fork/exec loop) starts on a quiet agent: before it, the bench waits until
// drover dev's CPU time, read from /proc/PID/stat, has grown by at most
// quietCPU over the last quietWindow, so that the previous job's purge (its
// tasks stopped, their directories recycled and cgroups removed) and the
// pools refilling after it are not counted in the next window, nor slow
// raw fork/exec. -quiet-timeout bounds each wait; a wait that hits it is
// reported (the line "quiet waits") and the window measured anyway. While
// a job starts, its status (every alloc) is read at most ten times a
// second: the starts' times are the agent's own record, and each read
// costs drover dev CPU that a slower window would pay more of.

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"syscall"
	"time"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/proc"
	"github.com/drover-org/drover/internal/spec"
)

func init() {
	register(scenario{name: "starts", about: "one real agent (drover dev) starts 500 exec and 500 raw_exec tasks; start rate against raw fork/exec", flags: startsFlags})
}

// startsTarget is issue 19's floor: each driver's start rate as a fraction
// of raw fork/exec measured in the same run.
const startsTarget = 0.6

func startsFlags(fs *flag.FlagSet, o *options) func() (*report, error) {
	instances := fs.Int("instances", 500, "instances per job (-quick: 50)")
	runs := fs.Int("runs", 1, "jobs to submit, one after the other")
	pprof := fs.String("pprof-addr", "", "have drover dev serve Go profiles here")
	first := fs.String("first", "exec", "the driver of each run's first job, exec or raw_exec: the first job on a fresh agent finds fewer directory trees made ahead")
	gap := fs.Duration("gap", 0, "pause before each job (then the wait for a quiet agent and the raw fork/exec baseline): time for the agent to make directories and cgroups ahead, as between bursts of starts on a node")
	quiet := fs.Duration("quiet-timeout", time.Minute, "before each measured window (each job, and raw fork/exec), wait at most this long for drover dev to be quiet: its CPU time grown by at most 20 ms over the last second (read from /proc), the previous job's purge and the pools' refill done; a wait that hits it is reported. 0: no wait, each window begins as soon as the previous job's allocs are gone")
	warmup := fs.Bool("warmup", false, "first run one unmeasured job of each driver, of the same size: the measured jobs then find the agent as one that has run a burst that size before (its directory and cgroup pools grown to it), not fresh")
	return func() (*report, error) {
		return starts(o.drover, sized(fs, o, "instances", *instances, 50), *runs, *pprof, *first, *gap, *quiet, *warmup)
	}
}

// An agent is quiet when its CPU time grew by at most quietCPU over the
// last quietWindow, sampled every quietPoll. An idle drover dev (heartbeats,
// etcd) used 5 to 10 ms a second on the VM of docs/performance.md; the
// purge of 500 tasks uses hundreds.
//
// While a job starts, the bench reads its status at most every statusPoll.
const (
	statusPoll  = 100 * time.Millisecond
	quietCPU    = 20 * time.Millisecond
	quietWindow = time.Second
	quietPoll   = 100 * time.Millisecond
)

// quietWaits records the bench's waits for a quiet agent.
type quietWaits struct {
	n, timeouts int
	total, max  time.Duration
}

// waitQuiet waits until process pid has been quiet (quietCPU over
// quietWindow), at most timeout (0: not at all). It records how long it
// waited, and whether it gave up, in w.
func (w *quietWaits) waitQuiet(ctx context.Context, pid int, timeout time.Duration) error {
	if timeout <= 0 {
		return nil
	}
	start := time.Now()
	deadline := start.Add(timeout)
	// samples[i] is the CPU time at start + i*quietPoll.
	var samples []time.Duration
	per := int(quietWindow / quietPoll)
	for {
		cpu, err := cpuTime(pid)
		if err != nil {
			return fmt.Errorf("waiting for drover dev to be quiet: %w", err)
		}
		samples = append(samples, cpu)
		if len(samples) > per && cpu-samples[len(samples)-1-per] <= quietCPU {
			break
		}
		if time.Now().After(deadline) {
			w.timeouts++
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(quietPoll):
		}
	}
	d := time.Since(start)
	w.n++
	w.total += d
	w.max = max(w.max, d)
	return nil
}

func starts(bin string, n, runs int, pprofAddr, first string, gap, quietTimeout time.Duration, warmup bool) (*report, error) {
	if first != "exec" && first != "raw_exec" {
		return nil, fmt.Errorf("-first %q: want exec or raw_exec", first)
	}
	if err := need("/bin/sleep", "/proc/self"); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "drover-bench-starts-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	if bin, err = droverBinary(bin, tmp); err != nil {
		return nil, err
	}
	var extra []string
	if pprofAddr != "" {
		extra = []string{"--pprof-addr", pprofAddr}
	}
	c, pid, stop, err := devNode(bin, filepath.Join(tmp, "data"), extra...)
	if err != nil {
		return nil, err
	}
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	var quiet quietWaits
	settle := func() error { return quiet.waitQuiet(ctx, pid, quietTimeout) }
	if warmup {
		for _, drv := range []string{"exec", "raw_exec"} {
			if _, _, _, _, _, err := submitToRunning(ctx, c, pid, "warmup-"+drv, drv, n, 0, nil); err != nil {
				return nil, fmt.Errorf("warm-up job: %w", err)
			}
		}
	}
	var lat, rawExecLat, placed, raw []time.Duration
	// received: submit -> the agent's task runner began (its Received
	// event); the rest of submit -> running is the agent's start.
	var received, rawExecReceived []time.Duration
	var droverSpan, rawExecSpan time.Duration
	var droverCPU, rawExecCPU, rawCPU time.Duration
	// rawSpans: the raw fork/exec loop timed just before each driver's
	// job, the baseline of that driver's ratio.
	rawSpans := map[string]time.Duration{}
	for r := 0; r < runs; r++ {
		// beforeJob waits for a quiet agent, then times raw fork/exec
		// just before driver drv's job is submitted: each driver's
		// ratio has for baseline the machine as it was at its window.
		beforeJob := func(drv string) func() error {
			return func() error {
				if err := settle(); err != nil {
					return err
				}
				rw, rspan, cpu, err := rawForkExec(n)
				if err != nil {
					return err
				}
				raw = append(raw, rw...)
				rawSpans[drv] += rspan
				rawCPU += cpu
				return nil
			}
		}
		execJob := func() error {
			l, p, rc, span, cpu, err := submitToRunning(ctx, c, pid, fmt.Sprintf("bench%d", r), "exec", n, gap, beforeJob("exec"))
			lat, placed, received = append(lat, l...), append(placed, p...), append(received, rc...)
			droverSpan += span
			droverCPU += cpu
			return err
		}
		rawExecJob := func() error {
			l, _, rc, span, cpu, err := submitToRunning(ctx, c, pid, fmt.Sprintf("bench%d-raw", r), "raw_exec", n, gap, beforeJob("raw_exec"))
			rawExecLat, rawExecReceived = append(rawExecLat, l...), append(rawExecReceived, rc...)
			rawExecSpan += span
			rawExecCPU += cpu
			return err
		}
		jobs := []func() error{execJob, rawExecJob}
		if first == "raw_exec" {
			jobs[0], jobs[1] = rawExecJob, execJob
		}
		for _, job := range jobs {
			if err := job(); err != nil {
				return nil, err
			}
		}
	}
	perStart := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / float64(n*runs) }
	dr := float64(n*runs) / droverSpan.Seconds()
	der := float64(n*runs) / rawExecSpan.Seconds()
	rrExec := float64(n*runs) / rawSpans["exec"].Seconds()
	rrRawExec := float64(n*runs) / rawSpans["raw_exec"].Seconds()
	rr := float64(2*n*runs) / (rawSpans["exec"] + rawSpans["raw_exec"]).Seconds()
	rep := newReport("starts")
	agent := "a fresh drover dev"
	if warmup {
		agent = "drover dev after a warm-up job of each driver"
	}
	rep.linef("drover-bench starts: %d instances x %d runs of /bin/sleep, exec and raw_exec drivers, %s, %d CPUs, %s/%s",
		n, runs, agent, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)
	rep.linef("submit->placed per instance            %s", dist(placed))
	rep.linef("submit->received per instance, exec    %s", dist(received))
	rep.linef("submit->running per instance, exec     %s", dist(lat))
	rep.linef("submit->received per instance, raw_exec %s", dist(rawExecReceived))
	rep.linef("submit->running per instance, raw_exec %s", dist(rawExecLat))
	rep.linef("raw fork/exec per process              %s", dist(raw))
	rep.linef("starts/s: exec %.0f, raw_exec %.0f (submit to last running), raw fork/exec %.0f before exec's job, %.0f before raw_exec's (sequential); exec/raw = %.2f, raw_exec/raw = %.2f (target >= %.2f each: %s, %s)",
		dr, der, rrExec, rrRawExec, dr/rrExec, der/rrRawExec, startsTarget, verdict(dr/rrExec >= startsTarget), verdict(der/rrRawExec >= startsTarget))
	rep.linef("CPU per start: drover dev exec %.2f ms, raw_exec %.2f ms (submit to all seen running); raw fork/exec %.2f ms",
		perStart(droverCPU), perStart(rawExecCPU), perStart(rawCPU)/2)
	if quietTimeout > 0 {
		rep.linef("quiet waits: %d before the windows, %.1f s in all, longest %.1f s; %d hit -quiet-timeout %s (drover dev's CPU still above %d ms a second: that window measured anyway)",
			quiet.n, quiet.total.Seconds(), quiet.max.Seconds(), quiet.timeouts, quietTimeout, quietCPU.Milliseconds())
	} else {
		rep.linef("quiet waits: none (-quiet-timeout 0): each window begins as soon as the previous job's allocs are gone")
	}
	rep.set("quiet_waits", quiet.n)
	rep.set("quiet_wait_total_ms", quiet.total)
	rep.set("quiet_wait_max_ms", quiet.max)
	rep.set("quiet_wait_timeouts", quiet.timeouts)
	rep.set("instances", n)
	rep.set("runs", runs)
	rep.set("starts_per_second", dr)
	rep.set("raw_exec_starts_per_second", der)
	rep.set("raw_fork_exec_per_second", rr)
	rep.set("raw_fork_exec_before_exec_per_second", rrExec)
	rep.set("raw_fork_exec_before_raw_exec_per_second", rrRawExec)
	rep.set("ratio_to_raw", dr/rrExec)
	rep.set("raw_exec_ratio_to_raw", der/rrRawExec)
	rep.set("exec_cpu_ms_per_start", perStart(droverCPU))
	rep.set("raw_exec_cpu_ms_per_start", perStart(rawExecCPU))
	rep.set("raw_fork_exec_cpu_ms_per_start", perStart(rawCPU)/2)
	rep.setDist("submit_to_running", lat)
	rep.setDist("raw_exec_submit_to_running", rawExecLat)
	rep.setDist("submit_to_placed", placed)
	rep.setDist("raw_fork_exec", raw)
	return rep, nil
}

// submitToRunning submits one job of driver drv and returns each instance's time from the
// submit call to its task's start as recorded by the agent, the time to
// the last one, and the CPU time process pid (drover dev) used from the
// submit until all were seen running. It stops and purges the job afterwards.
// before, when not nil, runs after the gap, just before the submit (the
// wait for a quiet agent, and the baseline).
func submitToRunning(ctx context.Context, c *client.Client, pid int, name, drv string, n int, gap time.Duration, before func() error) (lat, placed, received []time.Duration, span, cpu time.Duration, err error) {
	job := sleepJob(name, n)
	job.Groups[0].Tasks[0].Driver = drv
	time.Sleep(gap)
	if before != nil {
		if err := before(); err != nil {
			return nil, nil, nil, 0, 0, err
		}
	}
	cpu0, err := cpuTime(pid)
	if err != nil {
		return nil, nil, nil, 0, 0, err
	}
	t0 := time.Now()
	if _, err := c.SubmitJob(ctx, job, 0); err != nil {
		return nil, nil, nil, 0, 0, err
	}
	var index int64
	for first := true; ; first = false {
		if !first {
			// At most one read of the job's status per statusPoll: each
			// costs drover dev the encoding of all n allocs, which
			// would count in the window's CPU, and more in a slower
			// window (a blocking query returns at every change).
			time.Sleep(statusPoll)
		}
		st, idx, err := c.Job(ctx, name, &client.QueryOptions{Index: index, Wait: 30 * time.Second})
		if err != nil {
			return nil, nil, nil, 0, 0, err
		}
		index = idx
		lat, placed, received = lat[:0], placed[:0], received[:0]
		for _, a := range st.Allocations {
			placed = append(placed, a.CreateTime.Sub(t0))
			var ts *spec.TaskState
			if a.Status != nil {
				ts = a.Status.Tasks["t"]
			}
			if ts == nil || ts.StartedAt.IsZero() {
				continue
			}
			lat = append(lat, ts.StartedAt.Sub(t0))
			for _, e := range ts.Events {
				if e.Type == spec.EventReceived {
					received = append(received, e.Time.Sub(t0))
					break
				}
			}
		}
		if len(lat) == n {
			break
		}
		if len(st.Failures) > 0 {
			return nil, nil, nil, 0, 0, fmt.Errorf("job %s cannot be placed: %s", name, st.Failures[0].String())
		}
	}
	span = slices.Max(lat)
	cpu1, err := cpuTime(pid)
	if err != nil {
		return nil, nil, nil, 0, 0, err
	}
	if _, err := c.StopJob(ctx, name, true); err != nil {
		return nil, nil, nil, 0, 0, err
	}
	// Wait for the instances to go so that runs do not overlap.
	for {
		allocs, idx, err := c.Allocs(ctx, name, "", &client.QueryOptions{Index: index, Wait: 30 * time.Second})
		if err != nil {
			return nil, nil, nil, 0, 0, err
		}
		index = idx
		if len(allocs) == 0 {
			break
		}
	}
	return lat, placed, received, span, cpu1 - cpu0, nil
}

// cpuTime is the CPU time process pid has used.
func cpuTime(pid int) (time.Duration, error) {
	st, err := proc.ReadStat(pid)
	return st.CPUTime(), err
}

// rawForkExec starts the same command n times in a row, each in its own
// process group as the exec driver does, timing each start, and returns
// the CPU time this process used for them.
func rawForkExec(n int) ([]time.Duration, time.Duration, time.Duration, error) {
	var out []time.Duration
	var cmds []*exec.Cmd
	defer func() {
		for _, c := range cmds {
			c.Process.Kill()
			c.Wait()
		}
	}()
	cpu0, err := cpuTime(os.Getpid())
	if err != nil {
		return nil, 0, 0, err
	}
	start := time.Now()
	for i := 0; i < n; i++ {
		t := time.Now()
		cmd := exec.Command("/bin/sleep", "1000")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			return nil, 0, 0, err
		}
		out = append(out, time.Since(t))
		cmds = append(cmds, cmd)
	}
	span := time.Since(start)
	cpu1, err := cpuTime(os.Getpid())
	return out, span, cpu1 - cpu0, err
}
