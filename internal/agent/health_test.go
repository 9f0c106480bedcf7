package agent_test

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/spec"
	"github.com/drover-org/drover/internal/testkit"
)

// The health check tests run internal/testapp as the task, through the
// exec driver, with a group port "http" it listens on.

var (
	testappOnce sync.Once
	testappPath string
	testappErr  error
)

// buildTestapp builds internal/testapp once per test binary. The binary goes to
// a fixed place under the temp directory, replaced atomically, so that
// runs neither pile up copies nor see a half-written one.
func buildTestapp(t *testing.T) string {
	t.Helper()
	testappOnce.Do(func() {
		dir := filepath.Join(os.TempDir(), "drover-agent-testapp")
		if testappErr = os.MkdirAll(dir, 0o755); testappErr != nil {
			return
		}
		tmp := filepath.Join(dir, "testapp."+strconv.Itoa(os.Getpid()))
		cmd := exec.Command("go", "build", "-o", tmp, "./internal/testapp")
		cmd.Dir = filepath.Join("..", "..") // the module root
		if out, err := cmd.CombinedOutput(); err != nil {
			testappErr = &buildError{err: err, out: string(out)}
			return
		}
		testappPath = filepath.Join(dir, "testapp")
		testappErr = os.Rename(tmp, testappPath)
	})
	if testappErr != nil {
		t.Fatalf("building internal/testapp: %v", testappErr)
	}
	return testappPath
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }

// webJob is a service job of one testapp task "app" with a group port
// "http" and one service "web" on it, with checks.
func webJob(t *testing.T, name string, checks ...*spec.Check) *spec.Job {
	task := &spec.Task{
		Name: "app", Driver: "exec",
		Config:      spec.TaskConfig{Command: buildTestapp(t)},
		Resources:   spec.Resources{CPU: 10, MemoryMB: 64},
		KillTimeout: spec.Duration(2 * time.Second),
		Services:    []*spec.Service{{Name: "web", PortLabel: "http", Checks: checks}},
	}
	j := job(name, spec.JobService, task)
	j.Groups[0].Network = &spec.Network{Ports: []spec.Port{{Label: "http", Static: testkit.FreePort(t)}}}
	return j
}

func fastCheck(c *spec.Check) *spec.Check {
	c.Interval, c.Timeout = spec.Duration(200*time.Millisecond), spec.Duration(200*time.Millisecond)
	return c
}

func scriptCheck(name string, timeout time.Duration, cmd string, args ...string) *spec.Check {
	return &spec.Check{Name: name, Type: spec.CheckScript, Command: cmd, Args: args,
		Interval: spec.Duration(time.Second), Timeout: spec.Duration(timeout)}
}

func checkState(a *spec.Alloc, check string) *spec.CheckState {
	ts := taskState(a, "app")
	if ts == nil {
		return nil
	}
	for i := range ts.Checks {
		if ts.Checks[i].Check == check {
			return &ts.Checks[i]
		}
	}
	return nil
}

func checkIs(check string, s spec.CheckStatus) func(*spec.Alloc) bool {
	return func(a *spec.Alloc) bool {
		cs := checkState(a, check)
		return cs != nil && cs.Status == s
	}
}

func allocAddr(t *testing.T, a *spec.Alloc, label string) string {
	t.Helper()
	for _, p := range a.Ports {
		if p.Label == label {
			ip := p.HostIP
			if ip == "" {
				ip = "127.0.0.1"
			}
			return ip + ":" + strconv.Itoa(p.Value)
		}
	}
	t.Fatalf("alloc %s has no port %q: %+v", a.Name, label, a.Ports)
	return ""
}

func httpPost(t *testing.T, url string) {
	t.Helper()
	resp, err := http.Post(url, "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %s", url, resp.Status)
	}
}

// checkEvents returns the task's check events, as "type: message".
func checkEvents(ts *spec.TaskState) []string {
	var out []string
	for _, e := range ts.Events {
		switch e.Type {
		case spec.EventCheckPassing, spec.EventCheckFailing, spec.EventCheckRestart:
			out = append(out, string(e.Type)+": "+e.Message)
		}
	}
	return out
}

// stableFor asserts that the alloc's reported status does not change for d:
// a repeated verdict is no status write.
func (c *cluster) stableFor(job string, d time.Duration, what string) *spec.Alloc {
	t := c.t
	t.Helper()
	before := c.alloc(job, time.Second, "alloc", nil)
	time.Sleep(d)
	after := c.alloc(job, time.Second, "alloc", nil)
	if !after.Status.UpdateTime.Equal(before.Status.UpdateTime) || after.ModifyIndex != before.ModifyIndex {
		t.Errorf("%s: status written within %s (update time %s -> %s); repeated verdicts must not write\n%s",
			what, d, before.Status.UpdateTime, after.Status.UpdateTime, describe(after))
	}
	return after
}

func TestHTTPCheckPendingPassingFailingPassing(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startAgent(t.TempDir(), true)
	// The grace keeps the probes that come before testapp listens pending.
	c.submit(webJob(t, "web", fastCheck(&spec.Check{Type: spec.CheckHTTP, Path: "/health", Grace: spec.Duration(5 * time.Second)})))

	a := c.alloc("web", 10*time.Second, "check web-http passing", checkIs("web-http", spec.CheckPassing))
	if a.Status.Health != spec.HealthHealthy {
		t.Errorf("health %q with its only check passing, want healthy\n%s", a.Status.Health, describe(a))
	}
	if got, want := checkEvents(taskState(a, "app")), []string{"Check Passing: check web-http: HTTP 200"}; !slices.Equal(got, want) {
		t.Errorf("check events %q, want %q", got, want)
	}
	a = c.stableFor("web", time.Second, "passing")

	base := "http://" + allocAddr(t, a, "http")
	httpPost(t, base+"/fail")
	a = c.alloc("web", 5*time.Second, "check failing", checkIs("web-http", spec.CheckFailing))
	if a.Status.Health != spec.HealthUnhealthy {
		t.Errorf("health %q with a failing check, want unhealthy\n%s", a.Status.Health, describe(a))
	}
	if cs := checkState(a, "web-http"); cs.Output != "HTTP 503" || cs.Failures != 1 {
		t.Errorf("failing check output %q failures %d, want HTTP 503 and 1", cs.Output, cs.Failures)
	}
	// Five probes fail the same way: no write, the count grows in memory.
	c.stableFor("web", time.Second, "failing")

	httpPost(t, base+"/recover")
	a = c.alloc("web", 5*time.Second, "check passing again", checkIs("web-http", spec.CheckPassing))
	if a.Status.Health != spec.HealthHealthy {
		t.Errorf("health %q after recovery, want healthy\n%s", a.Status.Health, describe(a))
	}
	evs := checkEvents(taskState(a, "app"))
	if len(evs) != 3 || evs[1] != "Check Failing: check web-http: HTTP 503" || !strings.HasPrefix(evs[2], "Check Passing: check web-http: HTTP 200 (after ") {
		t.Fatalf("check events %q, want passing, failing (HTTP 503), passing (after N failures)", evs)
	}
	// The failures counted in memory are reported with the change.
	n, err := strconv.Atoi(strings.Fields(strings.TrimPrefix(evs[2], "Check Passing: check web-http: HTTP 200 (after "))[0])
	if err != nil || n < 4 {
		t.Errorf("%q: want the count of the ~5 failures (1 s at 200 ms)", evs[2])
	}
}

func TestTCPAndScriptChecks(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startAgent(t.TempDir(), true)
	c.submit(webJob(t, "probes",
		fastCheck(&spec.Check{Type: spec.CheckTCP, Grace: spec.Duration(5 * time.Second)}),
		// Scripts start through the driver (a cgroup each under exec):
		// give them time on a loaded machine.
		scriptCheck("env", time.Second, "/bin/sh", "-c", "echo task $DROVER_TASK_NAME; echo second line"),
		scriptCheck("broken", time.Second, "/bin/sh", "-c", "echo broken >&2; exit 3"),
		scriptCheck("slow", 300*time.Millisecond, "sleep", "30"),
	))
	a := c.alloc("probes", 10*time.Second, "all checks with a verdict", func(a *spec.Alloc) bool {
		for _, name := range []string{"web-tcp", "env", "broken", "slow"} {
			if cs := checkState(a, name); cs == nil || cs.Status == spec.CheckPending {
				return false
			}
		}
		return true
	})
	port := allocAddr(t, a, "http")
	want := []spec.CheckState{
		{Service: "web", Check: "web-tcp", Status: spec.CheckPassing, Output: "connected to " + port},
		{Service: "web", Check: "env", Status: spec.CheckPassing, Output: "task app"},
		{Service: "web", Check: "broken", Status: spec.CheckFailing, Output: "broken", Failures: 1},
		{Service: "web", Check: "slow", Status: spec.CheckFailing, Output: "timed out after 300ms; stopped it", Failures: 1},
	}
	got := taskState(a, "app").Checks
	for i := range got {
		got[i].Since = time.Time{}
	}
	if len(got) != len(want) {
		t.Fatalf("checks %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("check %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if a.Status.Health != spec.HealthUnhealthy {
		t.Errorf("health %q with failing checks, want unhealthy", a.Status.Health)
	}
	// The timed-out script was stopped: no sleep of this alloc is left
	// (the next probe's may run).
	time.Sleep(500 * time.Millisecond)
	if n := len(envProcsAll("DROVER_ALLOC_ID", a.ID)); n > 2 {
		t.Errorf("%d processes of the alloc, want the task and at most one probe: timed-out scripts pile up", n)
	}
}

func TestCheckGraceThenCheckRestart(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startAgent(t.TempDir(), true)
	grace := 800 * time.Millisecond
	// /missing answers 404: the check always fails.
	j := webJob(t, "restarts", fastCheck(&spec.Check{Type: spec.CheckHTTP, Path: "/missing", Grace: spec.Duration(grace),
		Restart: &spec.CheckRestart{Limit: 3}}))
	j.Groups[0].Tasks[0].Restart = restart(3, time.Minute, 100*time.Millisecond, spec.RestartFail)
	c.submit(j)

	first := c.alloc("restarts", 10*time.Second, "task running", running("app"))
	pid := taskState(first, "app").PID
	a := c.alloc("restarts", 10*time.Second, "a restart by check", func(a *spec.Alloc) bool {
		ts := taskState(a, "app")
		return ts != nil && ts.Restarts >= 1 && ts.State == spec.TaskRunning && ts.PID != pid
	})
	ts := taskState(a, "app")
	var started, failing, signaled time.Time
	for _, e := range ts.Events {
		switch {
		case e.Type == spec.EventStarted && started.IsZero():
			started = e.Time
		case e.Type == spec.EventCheckFailing && failing.IsZero():
			failing = e.Time
			if e.Message != "check web-http: HTTP 404" {
				t.Errorf("failing event %q, want check web-http: HTTP 404", e.Message)
			}
		case e.Type == spec.EventCheckRestart && signaled.IsZero():
			signaled = e.Time
			if e.Message != "check web-http failed 3 times in a row; restarting" {
				t.Errorf("restart event %q", e.Message)
			}
		}
	}
	if started.IsZero() || failing.IsZero() || signaled.IsZero() {
		t.Fatalf("missing Started, Check Failing or Restart Signaled event\n%s", describe(a))
	}
	// Failures within the grace left the check pending.
	if d := failing.Sub(started); d < grace {
		t.Errorf("check failing %s after the start, within its %s grace\n%s", d, grace, describe(a))
	}
	// Three failures past the grace, 200 ms apart, restart it.
	if d := signaled.Sub(failing); d < 300*time.Millisecond || d > 2*time.Second {
		t.Errorf("restart signaled %s after the first failure past grace; want about 400ms (3 probes)", d)
	}
	var restarting string
	for _, e := range events(ts, spec.EventRestarting) {
		restarting = e.Message
	}
	if !strings.HasPrefix(restarting, "check web-http failed 3 times in a row; restarting in 100ms (restart 1 of 3") {
		t.Errorf("Restarting event %q: want the check's reason, counted by the restart policy\n%s", restarting, describe(a))
	}
	if alive(pid) {
		t.Errorf("first process %d still alive after the check restart", pid)
	}
}

func TestAdoptedTaskKeepsItsCheckVerdicts(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	dataDir := t.TempDir()
	first := c.startAgent(dataDir, false)
	c.submit(webJob(t, "adopted", fastCheck(&spec.Check{Type: spec.CheckHTTP, Path: "/health", Grace: spec.Duration(5 * time.Second)})))
	before := c.alloc("adopted", 10*time.Second, "check passing", checkIs("web-http", spec.CheckPassing))
	since := checkState(before, "web-http").Since

	first.stop(t)
	c.startAgent(dataDir, false)
	after := c.alloc("adopted", 10*time.Second, "task adopted", func(a *spec.Alloc) bool {
		ts := taskState(a, "app")
		return ts != nil && ts.State == spec.TaskRunning && len(events(ts, spec.EventAdopted)) == 1
	})
	// The same process passes as before: its verdict carries on, with no
	// detour through pending.
	if cs := checkState(after, "web-http"); cs == nil || cs.Status != spec.CheckPassing || !cs.Since.Equal(since) {
		t.Errorf("check after adoption %+v, want passing since %s", cs, since)
	}
	if after.Status.Health != spec.HealthHealthy {
		t.Errorf("health %q after adoption, want healthy", after.Status.Health)
	}
	if n := len(events(taskState(after, "app"), spec.EventCheckPassing)); n != 1 {
		t.Errorf("%d Check Passing events, want the one before the restart\n%s", n, describe(after))
	}
	// And the new agent probes it.
	httpPost(t, "http://"+allocAddr(t, after, "http")+"/fail")
	a := c.alloc("adopted", 5*time.Second, "check failing", checkIs("web-http", spec.CheckFailing))
	if a.Status.Health != spec.HealthUnhealthy {
		t.Errorf("health %q with a failing check, want unhealthy", a.Status.Health)
	}
}
