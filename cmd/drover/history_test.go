package main

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/drover-org/drover/internal/spec"
)

// historyJob is a small valid service job; edit the copy it returns.
func historyJob() *spec.Job {
	return &spec.Job{Name: "web", Type: spec.JobService, Priority: 50, Groups: []*spec.Group{{
		Name: "api", Count: 2,
		Tasks: []*spec.Task{{
			Name: "server", Driver: "exec",
			Config:    spec.TaskConfig{Command: "/bin/app", Args: []string{"-v1"}},
			Resources: spec.Resources{CPU: 100, MemoryMB: 64},
		}},
	}}}
}

func intp(n int) *int { return &n }

func TestPrintHistory(t *testing.T) {
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	v1 := historyJob()
	v1.Version, v1.SubmitTime = 1, now.Add(-3*time.Hour)
	v2 := historyJob()
	v2.Version, v2.SubmitTime = 2, now.Add(-10*time.Minute)
	v2.Groups[0].Tasks[0].Config.Args = []string{"-v2"}
	v3 := historyJob()
	v3.Version, v3.SubmitTime = 3, now.Add(-30*time.Second)
	deps := []*spec.Deployment{
		{ID: "cccccccc-3", Job: "web", JobVersion: 3, Status: spec.DeploymentRunning},
		{ID: "bbbbbbbb-2", Job: "web", JobVersion: 2, Status: spec.DeploymentFailed, RevertTo: 1},
		{ID: "aaaaaaaa-1", Job: "web", JobVersion: 1, Status: spec.DeploymentSuccessful},
	}
	versions := []*spec.Job{v3, v2, v1}

	var b strings.Builder
	printHistory(&b, versions, deps, now, true)
	want := `VERSION  SUBMITTED  DEPLOYMENT
3        30s ago    running
  ~ groups[api].tasks[server].config.args: ["-v2"] -> ["-v1"]
2        10m ago    failed (reverted to 1)
  ~ groups[api].tasks[server].config.args: ["-v1"] -> ["-v2"]
1        3h ago     successful (stable)
`
	if d := cmp.Diff(want, b.String()); d != "" {
		t.Errorf("printHistory (-want +got):\n%s", d)
	}

	b.Reset()
	printHistory(&b, versions[1:], deps[2:], now, false)
	want = `VERSION  SUBMITTED  DEPLOYMENT
2        10m ago    -
1        3h ago     successful (stable)
`
	if d := cmp.Diff(want, b.String()); d != "" {
		t.Errorf("printHistory --no-diff (-want +got):\n%s", d)
	}
}
