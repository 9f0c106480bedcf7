package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/spec"
)

// deployJob is a service of real HTTP servers (internal/testapp) rolled out
// one instance at a time; %[1]s is the testapp binary, %[2]s its
// arguments (the bad build answers /health with 503), %[3]s a version tag.
const deployJob = `
job "e2edeploy" {
  update {
    max_parallel      = 1
    min_healthy_time  = "1s"
    healthy_deadline  = "4s"
    progress_deadline = "20s"
    auto_revert       = true
  }
  group "web" {
    count = 4
    network {
      port "http" {}
    }
    task "server" {
      driver = "raw_exec"
      config {
        command = "%[1]s"
        args    = [%[2]s]
      }
      env {
        VERSION = "%[3]s"
      }
      service {
        name = "e2edeploy"
        port = "http"
        check {
          type     = "http"
          path     = "/health"
          interval = "300ms"
          timeout  = "300ms"
        }
      }
      kill_timeout = "2s"
      resources {
        cpu    = 20
        memory = 32
      }
    }
  }
}
`

// buildTestapp builds internal/testapp into dir.
func buildTestapp(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "testapp")
	if out, err := exec.Command("go", "build", "-o", bin, "../testapp").CombinedOutput(); err != nil {
		t.Fatalf("building internal/testapp: %v\n%s", err, out)
	}
	return bin
}

// The seed's bad build: version 2's health checks fail. Its first
// replacement is unhealthy after healthy_deadline (4s) and would be
// replaced after the reschedule policy's 30s, but progress_deadline (20s)
// passes first: the rollout stops after that one replacement, at least
// count - max_parallel instances stay healthy throughout, version 1 comes
// back on its own, and drover run exits 1 saying why.
func TestBadBuildNeverDropsBelowMinimumHealthy(t *testing.T) {
	dir := t.TempDir()
	app := buildTestapp(t, dir)
	sick := filepath.Join(dir, "sick")
	if err := os.WriteFile(sick, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	v1 := writeJob(t, dir, "v1.hcl", fmt.Sprintf(deployJob, app, "", "v1"))
	v2 := writeJob(t, dir, "v2.hcl", fmt.Sprintf(deployJob, app, fmt.Sprintf(`"-unhealthy-file", %q`, sick), "v2"))
	d := startDev(t, dir+"/data")

	out, errOut, code := d.cli("", "run", v1)
	if code != 0 {
		t.Fatalf("drover run v1: exit %d\n%s\n%s", code, out, errOut)
	}
	c := d.client()
	waitFor(t, 30*time.Second, "version 1's deployment to succeed", func() bool {
		dep, _, err := c.LatestDeployment(context.Background(), "e2edeploy", nil)
		return err == nil && dep.JobVersion == 1 && dep.Status == spec.DeploymentSuccessful
	})

	// Sample the healthy count from the service catalog all along.
	var mu sync.Mutex
	minHealthy, samples := 4, 0
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			n, err := passing(c)
			if err != nil {
				continue
			}
			mu.Lock()
			minHealthy, samples = min(minHealthy, n), samples+1
			mu.Unlock()
		}
	}()

	out, errOut, code = d.cli("", "run", v2)
	if code != 1 {
		t.Fatalf("drover run of the bad build: exit %d, want 1\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(out+errOut, "unhealthy") || !strings.Contains(out+errOut, "version 1") {
		t.Fatalf("drover run does not say why it failed and where it went back to:\n%s\n%s", out, errOut)
	}

	// Version 3 (version 1's spec) rolls out and succeeds; every instance
	// runs version 1's tasks again.
	waitFor(t, 60*time.Second, "the revert's deployment to succeed", func() bool {
		dep, _, err := c.LatestDeployment(context.Background(), "e2edeploy", nil)
		return err == nil && dep.JobVersion == 3 && dep.Status == spec.DeploymentSuccessful
	})
	close(stop)
	<-sampled
	st := d.jobStatus("e2edeploy")
	if st.Job.Version != 3 {
		t.Fatalf("job version %d, want 3 (the revert)", st.Job.Version)
	}
	running := 0
	for _, a := range st.Allocations {
		if a.DesiredStatus == spec.DesiredRun && a.ClientStatusOr() == spec.ClientRunning {
			running++
			if v := a.Tasks[0].Env["VERSION"]; v != "v1" {
				t.Errorf("%s runs version %q after the revert", a.Name, v)
			}
		}
	}
	if running != 4 {
		t.Fatalf("%d instances running after the revert, want 4", running)
	}
	// The failed deployment says why, and what it reverted to.
	deps, _, err := c.JobDeployments(context.Background(), "e2edeploy", nil)
	if err != nil {
		t.Fatal(err)
	}
	var failed *spec.Deployment
	for _, dep := range deps {
		if dep.JobVersion == 2 {
			failed = dep
		}
	}
	if failed == nil || failed.Status != spec.DeploymentFailed || failed.Failure != spec.FailedProgressDeadline || failed.RevertTo != 1 ||
		!strings.Contains(failed.Description, "unhealthy") {
		t.Fatalf("version 2's deployment: %+v", failed)
	}
	if g := failed.Groups["web"]; g.Placed != 1 || g.Unhealthy != 1 {
		t.Errorf("version 2 placed %d and %d were unhealthy; want 1 and 1 (max_parallel 1)", g.Placed, g.Unhealthy)
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("healthy instances: at least %d of 4 in %d samples during the bad build and the revert", minHealthy, samples)
	if samples < 20 || minHealthy < 3 {
		t.Fatalf("healthy instances dropped to %d (of 4, max_parallel 1) in %d samples; want at least 3", minHealthy, samples)
	}
}

// passing counts the instances the catalog serves: their checks pass.
func passing(c *client.Client) (int, error) {
	ins, _, err := c.Service(context.Background(), "e2edeploy", false, nil)
	return len(ins), err
}

// flakyJob is a service whose task records each of its starts in a file
// (%[1]s), one line each, and runs %[2]s; %[3]s is a version tag.
const flakyJob = `
job "e2eflaky" {
  update {
    max_parallel      = 1
    health_check      = "task_states"
    min_healthy_time  = "1s"
    healthy_deadline  = "10s"
    progress_deadline = "1m"
  }
  group "app" {
    count = 2
    restart {
      attempts = 1
      delay    = "5s"
      mode     = "fail"
    }
    reschedule {
      delay          = "1s"
      delay_function = "constant"
      unlimited      = true
    }
    task "main" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo $$ >> %[1]s; %[2]s"]
      }
      env {
        VERSION = "%[3]s"
      }
      kill_timeout = "1s"
      resources {
        cpu    = 20
        memory = 32
      }
    }
  }
}
`

// As Nomad's with progress_deadline > 0: version 2's first instance
// exits 3 on its first start, which makes it unhealthy (a task that exits
// to be restarted is), and the deployment replaces it as the group's
// reschedule policy says (after 1s, before its restart's 5s delay is up)
// instead of failing; the replacement and the next instance are healthy,
// and the deployment succeeds. The task's own record of its starts, and
// /proc, say what ran.
func TestDeploymentOutlivesAnInstanceThatFailsOnce(t *testing.T) {
	dir := t.TempDir()
	starts := filepath.Join(dir, "starts")
	v1 := writeJob(t, dir, "v1.hcl", fmt.Sprintf(flakyJob, filepath.Join(dir, "starts-v1"), "exec sleep 600", "v1"))
	// The first start of version 2 fails; every later one runs.
	flaky := fmt.Sprintf(`if [ $(wc -l < %s) -eq 1 ]; then exit 3; fi; exec sleep 600`, starts)
	v2 := writeJob(t, dir, "v2.hcl", fmt.Sprintf(flakyJob, starts, flaky, "v2"))
	d := startDev(t, dir+"/data")

	if out, errOut, code := d.cli("", "run", v1); code != 0 {
		t.Fatalf("drover run v1: exit %d\n%s\n%s", code, out, errOut)
	}
	out, errOut, code := d.cli("", "run", v2)
	if code != 0 {
		t.Fatalf("drover run v2, whose first instance fails once: exit %d, want 0 (the deployment goes on)\n%s\n%s", code, out, errOut)
	}
	c := d.client()
	dep, _, err := c.LatestDeployment(context.Background(), "e2eflaky", nil)
	if err != nil {
		t.Fatal(err)
	}
	if dep.JobVersion != 2 || dep.Status != spec.DeploymentSuccessful {
		t.Fatalf("version 2's deployment: %s (%s: %s)", dep.Status, dep.Failure, dep.Description)
	}
	if g := dep.Groups["app"]; g.Unhealthy != 1 || g.Healthy != 2 || g.Placed != 3 {
		t.Errorf("group progress %+v; want 3 placed, 1 unhealthy, 2 healthy", g)
	}
	// The task's own record: the failed start, the replacement, the
	// second instance.
	b, err := os.ReadFile(starts)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(strings.Fields(string(b))); n != 3 {
		t.Errorf("version 2 started %d times, want 3 (fail, replacement, second instance):\n%s", n, b)
	}
	waitFor(t, 10*time.Second, "two task processes of the job", func() bool { return len(taskProcs("e2eflaky")) == 2 })
	st := d.jobStatus("e2eflaky")
	stopped := 0
	for _, a := range st.Allocations {
		if a.DesiredStatus == spec.DesiredStop && a.DesiredCause == spec.CauseUnhealthy {
			stopped++
		}
	}
	if stopped != 1 {
		t.Errorf("%d allocs stopped for being unhealthy, want 1", stopped)
	}
}
