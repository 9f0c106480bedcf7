package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/drover-org/drover/internal/driver"
	"github.com/drover-org/drover/internal/spec"
)

// Health checks. While a task runs, a checkRunner probes each check of its
// services every Interval, each probe bounded by Timeout. A check's status
// moves so:
//
//	pending --pass--> passing --fail--> failing --pass--> passing
//	   |                                   ^
//	   +--fail, once Grace has passed------+
//
// Failures within Grace of the task's start leave the check pending; the
// first pass ends the grace early. Only a change of status is written to
// the alloc's status (with an event): a repeated verdict changes only the
// in-memory failure count and output, which go out with the next change,
// so that a healthy cluster does not write to etcd every interval.
//
// check_restart counts consecutive failures past both graces; at Limit the
// runner asks supervise, over a channel, to restart the task, which then
// goes through the restart policy like a failed exit.

// checkSpec is one check of a task with the job file defaults applied.
type checkSpec struct {
	service string
	check   spec.Check
	// port is the check's port label, else its service's.
	port string
	// restartGrace is check_restart's grace, defaulting to the check's.
	restartGrace time.Duration
}

// taskChecks returns the checks of all the task's services in job file
// order. It applies the defaults the job file decoder's Canonicalize
// applies, for jobs submitted without them (through the API as JSON).
func taskChecks(t *spec.Task) []checkSpec {
	var out []checkSpec
	for _, svc := range t.Services {
		seen := map[spec.CheckType]int{}
		for _, c := range svc.Checks {
			cs := checkSpec{service: svc.Name, check: *c, port: c.PortLabel}
			seen[c.Type]++
			if cs.check.Name == "" {
				cs.check.Name = svc.Name + "-" + string(c.Type)
				if n := seen[c.Type]; n > 1 {
					cs.check.Name += "-" + strconv.Itoa(n)
				}
			}
			if cs.check.Interval <= 0 {
				cs.check.Interval = spec.DefaultCheckInterval
			}
			// A ticker needs a positive interval; validation rejects less
			// than the minimum, this only keeps an unvalidated job from
			// spinning.
			cs.check.Interval = max(cs.check.Interval, spec.MinCheckInterval)
			if cs.check.Timeout <= 0 {
				cs.check.Timeout = min(spec.DefaultCheckTimeout, cs.check.Interval)
			}
			if cs.check.Type == spec.CheckHTTP && cs.check.Path == "" {
				cs.check.Path = "/"
			}
			if cs.port == "" {
				cs.port = svc.PortLabel
			}
			cs.restartGrace = c.Grace.Std()
			if c.Restart != nil && c.Restart.Grace > 0 {
				cs.restartGrace = c.Restart.Grace.Std()
			}
			out = append(out, cs)
		}
	}
	return out
}

// checkTracker decides one check's status from its probes' results. It is
// pure: time comes in as now.
type checkTracker struct {
	grace        time.Duration
	restartGrace time.Duration
	limit        int // check_restart's; 0 restarts never
	started      time.Time
	// passed is set by the first pass, which ends the grace early.
	passed bool
	// restartFails counts the consecutive failures that count for
	// check_restart.
	restartFails int
	state        spec.CheckState
}

func newCheckTracker(cs checkSpec, started time.Time) *checkTracker {
	k := &checkTracker{
		grace:        cs.check.Grace.Std(),
		restartGrace: cs.restartGrace,
		started:      started,
		state:        spec.CheckState{Service: cs.service, Check: cs.check.Name, Status: spec.CheckPending, Since: started},
	}
	if cs.check.Restart != nil {
		k.limit = cs.check.Restart.Limit
	}
	return k
}

// observe takes one probe's result. changed says the status changed (and
// must be reported); restart says check_restart's limit was reached, after
// which counting starts over.
func (k *checkTracker) observe(now time.Time, pass bool, output string) (changed, restart bool) {
	k.state.Output = output
	if pass {
		k.passed = true
		k.restartFails = 0
		k.state.Failures = 0
		if k.state.Status == spec.CheckPassing {
			return false, false
		}
		k.state.Status, k.state.Since = spec.CheckPassing, now
		return true, false
	}
	k.state.Failures++
	since := now.Sub(k.started)
	if !k.passed && since < k.grace {
		return false, false // pending through the grace
	}
	if k.state.Status != spec.CheckFailing {
		k.state.Status, k.state.Since = spec.CheckFailing, now
		changed = true
	}
	if k.limit > 0 && since >= k.restartGrace {
		k.restartFails++
		if k.restartFails >= k.limit {
			k.restartFails = 0
			restart = true
		}
	}
	return changed, restart
}

// checkRunner probes the checks of one running task; see the top of the file.
type checkRunner struct {
	tr     *taskRunner
	h      driver.Handle
	checks []checkSpec
	client *http.Client

	mu       sync.Mutex // orders the trackers' changes and their writes
	trackers []*checkTracker

	// restart carries check_restart's reason to supervise; one pending
	// request is enough, as the task is stopped on the first.
	restart chan string
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// newCheckRunner returns the runner of the task's checks for the run that
// started at started, or nil when the task has none. prev, when not nil,
// are the states an earlier agent reported for this same process (an
// adopted task): they carry on instead of starting over from pending.
func (tr *taskRunner) newCheckRunner(h driver.Handle, started time.Time, prev []spec.CheckState) *checkRunner {
	// The services as the catalog names them (spec.TaskRuntime.Service).
	t := *tr.task
	t.Services = make([]*spec.Service, len(tr.task.Services))
	rt := tr.runtime()
	for i, svc := range tr.task.Services {
		t.Services[i] = rt.Service(svc)
	}
	checks := taskChecks(&t)
	if len(checks) == 0 {
		return nil
	}
	cr := &checkRunner{
		tr: tr, h: h, checks: checks,
		// No keep-alive: a connection kept between probes would hide a
		// server that no longer accepts new ones.
		client:  &http.Client{Transport: &http.Transport{DisableKeepAlives: true}},
		restart: make(chan string, 1),
	}
	for i, cs := range checks {
		k := newCheckTracker(cs, started)
		if len(prev) == len(checks) && prev[i].Service == cs.service && prev[i].Check == cs.check.Name {
			k.state = prev[i]
			k.passed = k.state.Status != spec.CheckPending
		}
		cr.trackers = append(cr.trackers, k)
	}
	return cr
}

// states returns the checks' current states in job file order.
func (cr *checkRunner) states() []spec.CheckState {
	if cr == nil {
		return nil
	}
	cr.mu.Lock()
	defer cr.mu.Unlock()
	return cr.statesLocked()
}

func (cr *checkRunner) statesLocked() []spec.CheckState {
	out := make([]spec.CheckState, len(cr.trackers))
	for i, k := range cr.trackers {
		out[i] = k.state
	}
	return out
}

// start starts one goroutine per check. Probes stop when ctx ends or stop
// is called.
func (cr *checkRunner) start(ctx context.Context) {
	if cr == nil {
		return
	}
	ctx, cr.cancel = context.WithCancel(ctx)
	for i := range cr.checks {
		cr.wg.Add(1)
		go func() {
			defer cr.wg.Done()
			cr.loop(ctx, i)
		}()
	}
}

// stop stops the probes and returns once none runs, so that no check
// writes the status after the task's exit has been written.
func (cr *checkRunner) stop() {
	if cr == nil || cr.cancel == nil {
		return
	}
	cr.cancel()
	cr.wg.Wait()
}

// restarts yields check_restart's requests; nil (never) without checks.
func (cr *checkRunner) restarts() <-chan string {
	if cr == nil {
		return nil
	}
	return cr.restart
}

func (cr *checkRunner) loop(ctx context.Context, i int) {
	cs := cr.checks[i]
	t := time.NewTicker(cs.check.Interval.Std())
	defer t.Stop()
	for {
		pass, output := cr.probe(ctx, cs)
		if ctx.Err() != nil {
			return // cut short by the stop: not a verdict
		}
		cr.record(i, pass, output)
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
}

// record applies one probe's result and reports a change of status.
func (cr *checkRunner) record(i int, pass bool, output string) {
	cr.mu.Lock()
	defer cr.mu.Unlock() // held while writing, so that writes keep the order of changes
	k := cr.trackers[i]
	failures, was := k.state.Failures, k.state.Status
	changed, restart := k.observe(time.Now().UTC(), pass, output)
	name := cr.tr.task.Name
	if changed {
		typ, msg := spec.EventCheckFailing, "check "+k.state.Check+": "+output
		if pass {
			typ = spec.EventCheckPassing
			// The failures counted in memory since the check failed:
			// those within the grace of a pending check are no news.
			switch {
			case was != spec.CheckFailing:
			case failures == 1:
				msg += " (after 1 failure)"
			default:
				msg += fmt.Sprintf(" (after %d failures in a row)", failures)
			}
		}
		states := cr.statesLocked()
		// A verdict is news that traffic waits on (the catalog and DNS
		// serve only healthy instances): sent without the report's
		// coalescing wait.
		cr.tr.ar.agent.reportSoon()
		cr.tr.ar.taskEvent(name, typ, msg, func(ts *spec.TaskState) { ts.Checks = states })
	}
	if restart {
		select {
		case cr.restart <- fmt.Sprintf("check %s failed %d times in a row", k.state.Check, k.limit):
		default:
		}
	}
}

// probe runs one probe of cs, bounded by its timeout, and returns whether
// it passed and what it said.
func (cr *checkRunner) probe(ctx context.Context, cs checkSpec) (bool, string) {
	timeout := cs.check.Timeout.Std()
	switch cs.check.Type {
	case spec.CheckHTTP, spec.CheckTCP:
		addr, err := checkAddr(cr.tr.ar.alloc, cs)
		if err != nil {
			return false, err.Error()
		}
		pctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		if cs.check.Type == spec.CheckTCP {
			var d net.Dialer
			c, err := d.DialContext(pctx, "tcp", addr)
			if err != nil {
				return false, probeError(err, timeout)
			}
			c.Close()
			return true, "connected to " + addr
		}
		req, err := http.NewRequestWithContext(pctx, http.MethodGet, "http://"+addr+cs.check.Path, nil)
		if err != nil {
			return false, err.Error()
		}
		req.Header.Set("User-Agent", "drover-health-check")
		resp, err := cr.client.Do(req)
		if err != nil {
			return false, probeError(err, timeout)
		}
		resp.Body.Close()
		return resp.StatusCode >= 200 && resp.StatusCode < 300, "HTTP " + strconv.Itoa(resp.StatusCode)
	case spec.CheckScript:
		return cr.script(ctx, cs)
	}
	return false, fmt.Sprintf("unknown check type %q", cs.check.Type)
}

// checkAddr is the host:port an http or tcp check probes: the alloc's port
// of the check's label, at its host IP, or the port the check names by
// number, at the alloc's address.
func checkAddr(a *spec.Alloc, cs checkSpec) (string, error) {
	if cs.port == "" {
		return "", fmt.Errorf("no port to probe: neither check %s nor service %s names a port", cs.check.Name, cs.service)
	}
	ip, port, ok := a.ServicePort(cs.port)
	if !ok {
		return "", fmt.Errorf("port %q is not among the alloc's ports", cs.port)
	}
	return net.JoinHostPort(ip, strconv.Itoa(port)), nil
}

// probeError says briefly why a connection or request failed: "connection
// refused" rather than the whole chain of a URL and a dial.
func probeError(err error, timeout time.Duration) string {
	var errno syscall.Errno
	var nerr net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &nerr) && nerr.Timeout():
		return "no answer within " + timeout.String()
	case errors.As(err, &errno):
		return errno.Error()
	}
	return err.Error()
}

// maxScriptOutput bounds what is kept of a script check's output: only its
// first line is reported.
const maxScriptOutput = 4 << 10

// script runs a script check: inside the task's container when its handle
// can exec, else as a hook through the task's driver (so that an agent
// restarted meanwhile kills it rather than adopting it as the task), with
// the task's environment.
func (cr *checkRunner) script(ctx context.Context, cs checkSpec) (bool, string) {
	timeout := cs.check.Timeout.Std()
	timedOut := "timed out after " + timeout.String() + "; stopped it"
	if ex, ok := cr.h.(driver.Execer); ok {
		pctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		code, out, err := ex.Exec(pctx, append([]string{cs.check.Command}, cs.check.Args...))
		switch {
		case pctx.Err() != nil:
			return false, timedOut
		case err != nil:
			return false, err.Error()
		}
		return code == 0, scriptOutput(out, code)
	}
	var out boundedBuffer
	h, err := cr.tr.start(ctx, spec.Command{Command: cs.check.Command, Args: cs.check.Args}, true, &out, &out)
	if err != nil {
		return false, err.Error()
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case exit := <-h.Wait():
		return exit.Successful(), scriptOutput(out.Bytes(), exit.Code)
	case <-t.C:
	case <-ctx.Done():
	}
	// No grace: a check is a probe, not the task; what it was doing is
	// of no value once its verdict is late.
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h.Stop(sctx, 0)
	return false, timedOut
}

// scriptOutput is a script's first line of output, or its exit code when
// it printed nothing.
func scriptOutput(out []byte, code int) string {
	line, _, _ := bytes.Cut(bytes.TrimSpace(out), []byte("\n"))
	s := strings.TrimSpace(string(line))
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	if s == "" {
		return "exit code " + strconv.Itoa(code)
	}
	return s
}

// boundedBuffer keeps the first maxScriptOutput bytes written to it; the
// driver may write stdout and stderr from two goroutines.
type boundedBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (w *boundedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if room := maxScriptOutput - len(w.b); room > 0 {
		w.b = append(w.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (w *boundedBuffer) Bytes() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b
}

// allocHealth is an alloc's health from its tasks' states: "" when no task
// has a service; otherwise unhealthy when a check fails, or when a task
// with services is not running after the alloc had a verdict (judged: it
// was healthy or unhealthy before, so a restarting or dead instance is not
// merely "not yet"); pending when a task is not running yet or a check has
// no verdict; healthy when every such task runs and all checks pass.
func allocHealth(tasks []*spec.Task, states map[string]*spec.TaskState, judged bool) spec.Health {
	h := spec.Health("")
	for _, t := range tasks {
		if len(t.Services) == 0 {
			continue
		}
		if h == "" {
			h = spec.HealthHealthy
		}
		ts := states[t.Name]
		if ts == nil || ts.State != spec.TaskRunning {
			if judged {
				return spec.HealthUnhealthy
			}
			h = spec.HealthPending
			continue
		}
		n := 0
		for _, s := range t.Services {
			n += len(s.Checks)
		}
		if len(ts.Checks) != n {
			h = spec.HealthPending // the run's checks are not set up yet
			continue
		}
		for _, c := range ts.Checks {
			switch c.Status {
			case spec.CheckFailing:
				return spec.HealthUnhealthy
			case spec.CheckPending:
				h = spec.HealthPending
			}
		}
	}
	return h
}
