package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/drover-org/drover/internal/spec"
)

func TestPrintDeployment(t *testing.T) {
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	d := &spec.Deployment{
		ID: "6c2f0e1a-1111-2222-3333-444455556666", Job: "web", JobVersion: 3, Status: spec.DeploymentRunning,
		Description: "group api: 1 canaries healthy, waiting for promotion (drover deployment promote 6c2f0e1a)",
		Groups: map[string]*spec.DeploymentGroup{
			"worker": {Desired: 2, Placed: 1, Healthy: 0, Unhealthy: 1},
			"api": {Desired: 3, DesiredCanaries: 1, PlacedCanaries: []string{"x"}, Placed: 1, Healthy: 1,
				RequireProgressBy: now.Add(9*time.Minute + 30*time.Second)},
			"cache": {Desired: 1, DesiredCanaries: 1, PlacedCanaries: []string{"y"}, Promoted: true, Placed: 1, Healthy: 1,
				RequireProgressBy: now.Add(-time.Second)},
		},
		Request:    &spec.DeploymentRequest{Promote: true, Time: now.Add(-5 * time.Second)},
		CreateTime: now.Add(-2 * time.Minute),
	}
	var b strings.Builder
	printDeployment(&b, d, now)
	want := `ID           6c2f0e1a-1111-2222-3333-444455556666
Job          web (version 3)
Status       running
Description  group api: 1 canaries healthy, waiting for promotion (drover deployment promote 6c2f0e1a)
Requested    promotion, 5s ago
Started      2m ago

GROUP   DESIRED  CANARIES      PLACED  HEALTHY  UNHEALTHY  PROGRESS DEADLINE
api     3        1/1           1       1        0          in 9m
cache   1        1/1 promoted  1       1        0          passed
worker  2        -             1       0        1          -
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("printDeployment (-want +got):\n%s", diff)
	}

	b.Reset()
	failed := &spec.Deployment{ID: "bbbbbbbb-2", Job: "web", JobVersion: 2, Status: spec.DeploymentFailed, RevertTo: 1, Failure: spec.FailedUnhealthy,
		Description: "web.api[1] unhealthy: task server restarted: exit code 1; reverting to version 1",
		Request:     &spec.DeploymentRequest{Fail: true}, CreateTime: now.Add(-time.Hour)}
	printDeployment(&b, failed, now)
	want = `ID           bbbbbbbb-2
Job          web (version 2)
Status       failed
Description  web.api[1] unhealthy: task server restarted: exit code 1; reverting to version 1
Failure      unhealthy: an instance was unhealthy, in a group whose progress_deadline is 0 (the first unhealthy instance fails it)
Reverted     to version 1
Started      1h ago

No groups yet.
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("printDeployment of a failed one (-want +got):\n%s", diff)
	}
}

// TestDeploymentStatusShowsTheFailure: deployment status shows a failed
// deployment's typed cause, each with what it means; an unknown one (a
// newer server's) as it is; none for a deployment that did not fail.
func TestDeploymentStatusShowsTheFailure(t *testing.T) {
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	for f, want := range map[spec.DeploymentFailure]string{
		spec.FailedUnhealthy:           "Failure      unhealthy: an instance was unhealthy, in a group whose progress_deadline is 0",
		spec.FailedProgressDeadline:    "Failure      progress-deadline: no instance of a group became healthy within its progress_deadline\n",
		spec.FailedRescheduleExhausted: "Failure      reschedule-exhausted: an instance was unhealthy and its group's reschedule policy allows no more replacements\n",
		spec.FailedByOperator:          "Failure      operator: an operator failed it (drover deployment fail)\n",
		"out-of-cheese":                "Failure      out-of-cheese\n",
		"":                             "",
	} {
		var b strings.Builder
		printDeployment(&b, &spec.Deployment{ID: "cccccccc-3", Job: "web", JobVersion: 4, Status: spec.DeploymentFailed, Failure: f, CreateTime: now}, now)
		got := b.String()
		if want == "" && strings.Contains(got, "Failure") || !strings.Contains(got, want) {
			t.Errorf("failure %q: printed\n%s\nwant a line %q", f, got, want)
		}
	}
}

func TestPrintDeploymentList(t *testing.T) {
	var b strings.Builder
	printDeploymentList(&b, []*spec.Deployment{
		{ID: "6c2f0e1a-1111", Job: "web", JobVersion: 3, Status: spec.DeploymentRunning, Description: "deployment is running"},
		{ID: "0badc0de-2222", Job: "api", JobVersion: 12, Status: spec.DeploymentCancelled},
	})
	printDeploymentList(&b, nil)
	want := `ID        JOB  VERSION  STATUS     DESCRIPTION
6c2f0e1a  web  3        running    deployment is running
0badc0de  api  12       cancelled  -
No deployments. A service job with an update block makes one for each new version.
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("printDeploymentList (-want +got):\n%s", diff)
	}
}

func TestDeploymentOutcome(t *testing.T) {
	groups := map[string]*spec.DeploymentGroup{
		"api":    {Desired: 3, DesiredCanaries: 1, PlacedCanaries: []string{"x"}, Placed: 1, Healthy: 1},
		"worker": {Desired: 1, Placed: 1, Unhealthy: 1},
	}
	waiting := "group api: 1 canaries healthy, waiting for promotion (drover deployment promote 6c2f0e1a)"
	d := func(st spec.DeploymentStatus, desc string, revertTo uint64, req *spec.DeploymentRequest) *spec.Deployment {
		return &spec.Deployment{ID: "6c2f0e1a-1111", Job: "web", JobVersion: 2, Status: st, Description: desc, RevertTo: revertTo, Request: req, Groups: groups,
			AwaitingPromotion: desc == waiting}
	}
	cases := []struct {
		name string
		d    *spec.Deployment
		done bool
		code int // exit status when done
		out  string
	}{
		{"running", d(spec.DeploymentRunning, "deployment is running", 0, nil), false, 0, ""},
		{"successful", d(spec.DeploymentSuccessful, "every instance is healthy", 0, nil), true, 0,
			"✓ Deployment 6c2f0e1a of job \"web\" version 2 successful: every instance is healthy.\n"},
		{"waits for promotion", d(spec.DeploymentRunning, waiting, 0, nil), true, 0,
			"canaries healthy; promote with: drover deployment promote 6c2f0e1a\n"},
		{"promotion asked, not acted on yet", d(spec.DeploymentRunning, waiting, 0, &spec.DeploymentRequest{Promote: true}), false, 0, ""},
		// The words alone decide nothing: the leader's flag does.
		{"says it waits, flag unset", func() *spec.Deployment {
			x := d(spec.DeploymentRunning, waiting, 0, nil)
			x.AwaitingPromotion = false
			return x
		}(), false, 0, ""},
		{"failed and reverted", d(spec.DeploymentFailed, "web.worker[0] unhealthy: task w restarted: exit code 1; reverting to version 1", 1, nil), true, 1,
			"✗ Deployment 6c2f0e1a of job \"web\" version 2 failed: web.worker[0] unhealthy: task w restarted: exit code 1; reverting to version 1\n" +
				"Job \"web\" reverted to version 1: that spec is now the job's next version (drover history web).\n"},
		{"failed, nothing to revert to", d(spec.DeploymentFailed, "failed by an operator", 0, nil), true, 1,
			"✗ Deployment 6c2f0e1a of job \"web\" version 2 failed: failed by an operator\nSee why: drover status web; drover logs web --stderr\n"},
		{"cancelled", d(spec.DeploymentCancelled, "superseded by version 3", 0, nil), true, 1,
			"✗ Deployment 6c2f0e1a of job \"web\" version 2 cancelled: superseded by version 3\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b strings.Builder
			done, err := deploymentOutcome(&b, c.d)
			code := 0
			if err != nil {
				var ee *exitError
				if !errors.As(err, &ee) || !ee.silent {
					t.Fatalf("error %v is not a silent exitError: the outcome is printed already", err)
				}
				code = ee.code
			}
			if done != c.done || code != c.code {
				t.Errorf("done, exit = %v, %d; want %v, %d", done, code, c.done, c.code)
			}
			if diff := cmp.Diff(c.out, b.String()); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
		})
	}
	got := deploymentLine(d(spec.DeploymentRunning, "deployment is running", 0, nil))
	want := "deployment 6c2f0e1a running: api 1/3 placed, 1 healthy, 0 unhealthy, canaries 1/1; worker 1/1 placed, 0 healthy, 1 unhealthy; deployment is running"
	if got != want {
		t.Errorf("deploymentLine:\n got %s\nwant %s", got, want)
	}
}

func TestRollsOut(t *testing.T) {
	j := historyJob()
	if rollsOut(j) {
		t.Error("a job without update blocks rolls out as a deployment")
	}
	j.Update = &spec.UpdateStrategy{}
	if !rollsOut(j) {
		t.Error("a service job with a job-level update block does not roll out as a deployment")
	}
	j.Groups[0].Update = &spec.UpdateStrategy{MaxParallel: intp(0)}
	if rollsOut(j) {
		t.Error("max_parallel 0 rolls out as a deployment")
	}
	j.Groups[0].Update, j.Type = nil, spec.JobBatch
	if rollsOut(j) {
		t.Error("a batch job rolls out as a deployment")
	}
}

func TestStatusShowsLatestDeployment(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	st := &spec.JobStatus{Job: &spec.Job{Name: "web", Type: spec.JobService, Priority: 50, Version: 2, SubmitTime: now},
		Summary: spec.JobSummary{State: spec.JobRunning, Desired: 2, Running: 2}}
	dep := &spec.Deployment{ID: "0123456789ab", Job: "web", JobVersion: 2, Status: spec.DeploymentFailed,
		Description: "web.api[0] unhealthy: check http failing; reverting to version 1",
		Groups:      map[string]*spec.DeploymentGroup{"api": {Desired: 2, Placed: 1, Unhealthy: 1}}}
	var b strings.Builder
	printJobStatus(&b, st, dep, nil, now, 0)
	want := "Deployment version 2: deployment 01234567 failed: api 1/2 placed, 0 healthy, 1 unhealthy; web.api[0] unhealthy: check http failing; reverting to version 1\n"
	if !strings.Contains(b.String(), want) {
		t.Fatalf("status lacks the deployment line %q:\n%s", want, b.String())
	}
	b.Reset()
	printJobStatus(&b, st, nil, nil, now, 0)
	if strings.Contains(b.String(), "Deployment") {
		t.Fatalf("a job without deployments shows one:\n%s", b.String())
	}
}
