package agent_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/spec"
)

// The deployment health tests place a job's alloc "by a deployment": the
// cluster tells the agent so (placedBy), as a server placing a deployment
// would, and the tests read the verdict the agent reported.

type deployed struct {
	id     string
	update *spec.UpdateStrategy
}

// placedBy makes the agent read the job's allocs as placed by deployment
// id with strategy u. Call it before submitting the job.
func (c *cluster) placedBy(job, id string, u *spec.UpdateStrategy) {
	c.depMu.Lock()
	defer c.depMu.Unlock()
	if c.deploys == nil {
		c.deploys = map[string]deployed{}
	}
	c.deploys[job] = deployed{id: id, update: u}
}

// withDeploys rewrites the agents' assignment answers with placedBy's
// deployments.
func (c *cluster) withDeploys(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Every assignment answer, even with no deployments yet: an
		// agent's blocking query is in flight before placedBy.
		if r.Method != http.MethodGet || !strings.HasPrefix(r.URL.Path, "/v1/nodes/") || !strings.HasSuffix(r.URL.Path, "/allocations") {
			h.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		var allocs []*spec.Alloc
		if rec.Code == http.StatusOK && json.Unmarshal(body, &allocs) == nil {
			c.depMu.Lock()
			for _, a := range allocs {
				if d, ok := c.deploys[a.Job]; ok {
					a.DeploymentID, a.Update = d.id, d.update
				}
				if f := c.rewrites[a.Job]; f != nil {
					f(a)
				}
			}
			c.depMu.Unlock()
			body, _ = json.Marshal(allocs)
		}
		for k, v := range rec.Header() {
			if k != "Content-Length" {
				w.Header()[k] = v
			}
		}
		w.WriteHeader(rec.Code)
		w.Write(body)
	})
}

func update(mode string, minHealthy, deadline time.Duration) *spec.UpdateStrategy {
	u := &spec.UpdateStrategy{HealthCheck: mode, MinHealthyTime: spec.Duration(minHealthy), HealthyDeadline: spec.Duration(deadline)}
	return u.WithDefaults(spec.DefaultUpdate())
}

func hasVerdict(a *spec.Alloc) bool { return a.Status != nil && a.Status.DeploymentHealth != nil }

// healthySince is when the alloc's task last started or its check last
// turned passing, whichever is later.
func healthySince(t *testing.T, a *spec.Alloc) time.Time {
	t.Helper()
	ts := taskState(a, "app")
	since := ts.StartedAt
	for _, c := range ts.Checks {
		if c.Status != spec.CheckPassing {
			t.Fatalf("check %s is %s, want passing\n%s", c.Check, c.Status, describe(a))
		}
		if c.Since.After(since) {
			since = c.Since
		}
	}
	return since
}

func TestDeploymentHealthyAfterMinHealthyTime(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startAgent(t.TempDir(), true)
	minHealthy := 300 * time.Millisecond
	j := webJob(t, "dep-healthy", fastCheck(&spec.Check{Type: spec.CheckHTTP, Path: "/health", Grace: spec.Duration(5 * time.Second)}))
	c.placedBy(j.Name, "dep-1", update(spec.HealthChecks, minHealthy, 5*time.Second))
	c.submit(j)

	sawPassingUnjudged := false
	a := c.alloc(j.Name, 10*time.Second, "deployment verdict", func(a *spec.Alloc) bool {
		if cs := checkState(a, "web-http"); cs != nil && cs.Status == spec.CheckPassing && !hasVerdict(a) {
			sawPassingUnjudged = true
		}
		return hasVerdict(a)
	})
	dh := *a.Status.DeploymentHealth
	if !dh.Healthy || dh.Reason != "" {
		t.Fatalf("verdict %+v, want healthy\n%s", dh, describe(a))
	}
	since := healthySince(t, a)
	if d := dh.Time.Sub(since); d < minHealthy || d > minHealthy+time.Second {
		t.Errorf("healthy %s after the check passed, want min_healthy_time %s (and promptly after)", d, minHealthy)
	}
	if !sawPassingUnjudged {
		t.Errorf("never saw the check passing without a verdict: judged before min_healthy_time")
	}

	// Final: a check failing afterwards changes nothing.
	httpPost(t, "http://"+allocAddr(t, a, "http")+"/fail")
	a = c.alloc(j.Name, 5*time.Second, "check failing", checkIs("web-http", spec.CheckFailing))
	if got := a.Status.DeploymentHealth; got == nil || *got != dh {
		t.Errorf("verdict after the check failed: %+v, want it kept: %+v", got, dh)
	}
}

func TestDeploymentUnhealthyOnRestart(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startAgent(t.TempDir(), true)
	task := shTask("app", "sleep 0.1; exit 1")
	task.Restart = restart(5, time.Minute, 100*time.Millisecond, spec.RestartFail)
	j := job("dep-restart", spec.JobService, task)
	c.placedBy(j.Name, "dep-1", update(spec.HealthChecks, 300*time.Millisecond, 2*time.Second))
	c.submit(j)

	a := c.alloc(j.Name, 10*time.Second, "deployment verdict", hasVerdict)
	dh := *a.Status.DeploymentHealth
	if dh.Healthy || dh.Reason != "task app restarted: exit code 1" {
		t.Fatalf("verdict %+v, want unhealthy: task app restarted: exit code 1\n%s", dh, describe(a))
	}
	terminated := events(taskState(a, "app"), spec.EventTerminated)
	if len(terminated) == 0 {
		t.Fatalf("a verdict with no Terminated event\n%s", describe(a))
	}
	if d := dh.Time.Sub(terminated[0].Time); d < 0 || d > 500*time.Millisecond {
		t.Errorf("verdict %s after the first exit, want at it", d)
	}
	// The restarts go on (the policy allows 5); the verdict stays.
	a = c.alloc(j.Name, 10*time.Second, "two restarts", func(a *spec.Alloc) bool {
		ts := taskState(a, "app")
		return ts != nil && ts.Restarts >= 2
	})
	if got := a.Status.DeploymentHealth; got == nil || *got != dh {
		t.Errorf("verdict after more restarts: %+v, want it kept: %+v", got, dh)
	}
}

// failingWeb is a web job whose check always fails (404), from the first
// probe on once testapp listens.
func failingWeb(t *testing.T, name string) *spec.Job {
	return webJob(t, name, fastCheck(&spec.Check{Type: spec.CheckHTTP, Path: "/missing"}))
}

func TestDeploymentUnhealthyAtHealthyDeadline(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startAgent(t.TempDir(), true)
	deadline := 2 * time.Second
	j := failingWeb(t, "dep-deadline")
	c.placedBy(j.Name, "dep-1", update(spec.HealthChecks, 300*time.Millisecond, deadline))
	c.submit(j)

	a := c.alloc(j.Name, 10*time.Second, "deployment verdict", hasVerdict)
	dh := *a.Status.DeploymentHealth
	// The check's last failure: HTTP 404 once testapp listens, or, on a
	// machine loaded enough that it does not within the deadline, the
	// refused connection before.
	want := "not healthy within healthy_deadline 2s: check web-http failing: "
	if dh.Healthy || (dh.Reason != want+"HTTP 404" && dh.Reason != want+"connection refused") {
		t.Fatalf("verdict %+v, want unhealthy: %sHTTP 404 (or connection refused)\n%s", dh, want, describe(a))
	}
	started := taskState(a, "app").StartedAt
	if d := dh.Time.Sub(started); d < deadline || d > deadline+time.Second {
		t.Errorf("verdict %s after the start, want at healthy_deadline %s", d, deadline)
	}
}

func TestDeploymentTaskStatesIgnoresChecks(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startAgent(t.TempDir(), true)
	minHealthy := 300 * time.Millisecond
	j := failingWeb(t, "dep-states")
	c.placedBy(j.Name, "dep-1", update(spec.HealthTaskStates, minHealthy, 2*time.Second))
	c.submit(j)

	a := c.alloc(j.Name, 10*time.Second, "deployment verdict", hasVerdict)
	dh := *a.Status.DeploymentHealth
	if !dh.Healthy || dh.Reason != "" {
		t.Fatalf("verdict %+v, want healthy: task_states ignores checks\n%s", dh, describe(a))
	}
	if d := dh.Time.Sub(taskState(a, "app").StartedAt); d < minHealthy || d > minHealthy+time.Second {
		t.Errorf("healthy %s after the start, want min_healthy_time %s", d, minHealthy)
	}
	if a.Status.Health != spec.HealthUnhealthy {
		// The check did fail meanwhile: it was ignored, not missed.
		a = c.alloc(j.Name, 5*time.Second, "check failing", checkIs("web-http", spec.CheckFailing))
	}
	if !a.Status.DeploymentHealth.Healthy {
		t.Errorf("verdict changed: %+v", a.Status.DeploymentHealth)
	}
}

func TestNoDeploymentHealthWithoutStrategy(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startAgent(t.TempDir(), true)
	j := webJob(t, "dep-none", fastCheck(&spec.Check{Type: spec.CheckHTTP, Path: "/health", Grace: spec.Duration(5 * time.Second)}))
	// Neither a deployment nor a move placed it: no strategy to judge by.
	c.submit(j)

	c.alloc(j.Name, 10*time.Second, "check passing", checkIs("web-http", spec.CheckPassing))
	time.Sleep(time.Second) // well past min_healthy_time
	a := c.alloc(j.Name, time.Second, "alloc", nil)
	if a.Status.Health != spec.HealthHealthy || hasVerdict(a) {
		t.Errorf("health %q, deployment health %+v; want healthy and no verdict", a.Status.Health, a.Status.DeploymentHealth)
	}
}

func TestNoDeploymentHealthWhenStoppedFirst(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.startAgent(t.TempDir(), true)
	deadline := 2 * time.Second
	j := failingWeb(t, "dep-stopped")
	c.placedBy(j.Name, "dep-1", update(spec.HealthChecks, 300*time.Millisecond, deadline))
	c.submit(j)

	a := c.alloc(j.Name, 10*time.Second, "task running", running("app"))
	started := taskState(a, "app").StartedAt
	if _, err := c.client.StopJob(context.Background(), j.Name, false); err != nil {
		t.Fatal(err)
	}
	c.alloc(j.Name, 10*time.Second, "alloc complete", clientStatus(spec.ClientComplete))
	time.Sleep(time.Until(started.Add(deadline + 500*time.Millisecond)))
	a = c.alloc(j.Name, time.Second, "alloc", nil)
	if hasVerdict(a) {
		t.Errorf("deployment health %+v of an alloc stopped before its verdict, want none\n%s", a.Status.DeploymentHealth, describe(a))
	}
}

func TestDeploymentHealthSurvivesAgentRestart(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	dataDir := t.TempDir()
	first := c.startAgent(dataDir, false)
	j := webJob(t, "dep-adopted", fastCheck(&spec.Check{Type: spec.CheckHTTP, Path: "/health", Grace: spec.Duration(5 * time.Second)}))
	c.placedBy(j.Name, "dep-1", update(spec.HealthChecks, 300*time.Millisecond, 5*time.Second))
	c.submit(j)
	before := *c.alloc(j.Name, 10*time.Second, "deployment verdict", hasVerdict).Status.DeploymentHealth
	if !before.Healthy {
		t.Fatalf("verdict %+v, want healthy", before)
	}

	first.stop(t)
	c.startAgent(dataDir, false)
	after := c.alloc(j.Name, 10*time.Second, "task adopted", func(a *spec.Alloc) bool {
		ts := taskState(a, "app")
		return ts != nil && ts.State == spec.TaskRunning && len(events(ts, spec.EventAdopted)) == 1
	})
	if got := after.Status.DeploymentHealth; got == nil || !got.Time.Equal(before.Time) || got.Healthy != before.Healthy || got.Reason != before.Reason {
		t.Errorf("verdict after the agent restart %+v, want the one given before: %+v", got, before)
	}
}
