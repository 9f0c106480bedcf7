package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/drover-org/drover/internal/dockertest"
	"github.com/drover-org/drover/internal/driver/dockerdriver"
	"github.com/drover-org/drover/internal/spec"
)

// dockerJobs are the jobs of TestDevDocker; %[1]s is the test image.
const dockerJobs = `
job "e2edocker" {
  group "web" {
    network {
      port "http" {
        to = 8080
      }
    }
    task "server" {
      driver = "docker"
      config {
        image = "%[1]s"
        args  = ["-listen", "0.0.0.0:8080"]
        ports = ["http"]
      }
      kill_timeout = "3s"
      resources {
        memory = 64
      }
    }
  }
}
---
job "e2edockermissing" {
  group "web" {
    # A retry would show within the test's few seconds.
    restart {
      attempts = 3
      interval = "1m"
      delay    = "100ms"
      mode     = "fail"
    }
    # Nor a replacement by the server, whatever the test's timing.
    reschedule {
      attempts = 0
    }
    task "server" {
      driver = "docker"
      config {
        image = "drover-test/missing:none"
      }
      resources {
        memory = 64
      }
    }
  }
}
---
job "e2edockercheck" {
  group "web" {
    network {
      port "http" {
        to = 8080
      }
    }
    task "server" {
      driver = "docker"
      config {
        image = "%[1]s"
        ports = ["http"]
      }
      service {
        name = "e2e-docker-check"
        port = "http"
        check {
          type     = "script"
          command  = "/testapp"
          args     = ["-exit", "0"]
          interval = "500ms"
        }
      }
      kill_timeout = "3s"
      resources {
        memory = 64
      }
    }
  }
}
`

// Docker tasks through the drover binary: a container from a job file runs,
// answers on its host port, has its output in drover logs and is stopped
// and removed by drover stop; a missing image fails the task at once,
// without restarts; a script check runs in the container and makes the
// service healthy in drover services.
func TestDevDocker(t *testing.T) {
	dc := dockertest.Require(t)
	image := dockertest.Image(t)
	jobs := []string{"e2edocker", "e2edockermissing", "e2edockercheck"}
	// Registered before startDev, so it runs after drover dev has stopped:
	// whatever a failed test left.
	t.Cleanup(func() {
		for _, job := range jobs {
			for _, id := range containersOfJob(t, dc, job) {
				dc.ContainerRemove(context.Background(), id, client.ContainerRemoveOptions{Force: true})
			}
		}
	})
	dir := t.TempDir()
	d := startDev(t, dir+"/data")
	files := strings.Split(fmt.Sprintf(dockerJobs, image), "---\n")
	for i, job := range jobs {
		f := writeJob(t, dir, job+".hcl", files[i])
		if out, errOut, code := d.cli("", "run", "--detach", f); code != 0 {
			t.Fatalf("drover run %s: exit %d\n%s%s", job, code, out, errOut)
		}
	}

	t.Run("lifecycle", func(t *testing.T) {
		a := waitAlloc(t, d, "e2edocker", 60*time.Second, "the container running", func(a *spec.Alloc) bool {
			ts := a.Status.Tasks["server"]
			return ts.State == spec.TaskRunning && ts.ContainerID != ""
		})
		ts := a.Status.Tasks["server"]
		if ids := containersOfJob(t, dc, "e2edocker"); len(ids) != 1 || ids[0] != ts.ContainerID {
			t.Fatalf("containers of the job: %v, want only %s (the task's)", ids, ts.ContainerID)
		}
		// drover exec runs in the container: its hostname is the
		// container's short ID; stdout, stderr and the exit code come back.
		if out, errOut, code := d.cli("", "exec", "e2edocker", "--", "/testapp", "-exit", "7"); code != 7 ||
			!strings.Contains(out, "testapp started on "+ts.ContainerID[:12]) || !strings.Contains(errOut, "testapp stderr line") {
			t.Errorf("drover exec in the container: exit %d, stdout %q, stderr %q", code, out, errOut)
		}
		port := 0
		for _, p := range a.Ports {
			if p.Label == "http" {
				port = p.Value
			}
		}
		if port == 0 {
			t.Fatalf("the alloc has no http port: %+v", a.Ports)
		}
		url := "http://127.0.0.1:" + strconv.Itoa(port) + "/"
		waitFor(t, 10*time.Second, "GET "+url+" to answer ok", func() bool {
			return strings.HasPrefix(httpGet(url), "ok ")
		})

		out := cliOK(t, d, "logs", "e2edocker")
		// The listen address is the job's args: the image's entrypoint
		// got them.
		for _, want := range []string{"testapp started", "testapp listening on 0.0.0.0:8080"} {
			if !strings.Contains(out, want) {
				t.Errorf("drover logs e2edocker lacks %q:\n%s", want, out)
			}
		}
		if out := cliOK(t, d, "logs", "--stderr", "e2edocker"); !strings.Contains(out, "testapp stderr line") || strings.Contains(out, "testapp started") {
			t.Errorf("drover logs --stderr e2edocker: want the stderr line only:\n%s", out)
		}

		cliOK(t, d, "stop", "e2edocker")
		// The stop is a SIGTERM the program sees, not a kill after
		// kill_timeout.
		if out := cliOK(t, d, "logs", "e2edocker"); !strings.Contains(out, "testapp got terminated, stopping") {
			t.Errorf("after drover stop, the log lacks testapp's SIGTERM line:\n%s", out)
		}
		waitFor(t, 10*time.Second, "the job's container removed", func() bool {
			return len(containersOfJob(t, dc, "e2edocker")) == 0
		})
		if st := d.jobStatus("e2edocker"); len(st.Allocations) != 1 || st.Allocations[0].ClientStatusOr() != spec.ClientComplete {
			t.Errorf("after drover stop: want one complete alloc, got:\n%s", allocsLine(st.Allocations))
		}
	})

	t.Run("missing image", func(t *testing.T) {
		a := waitAlloc(t, d, "e2edockermissing", 30*time.Second, "the alloc failed", func(a *spec.Alloc) bool {
			return a.ClientStatusOr() == spec.ClientFailed
		})
		failedAt := time.Now()
		ts := a.Status.Tasks["server"]
		var msg string
		for _, e := range ts.Events {
			if e.Type == spec.EventDriverFail {
				msg = e.Message
			}
		}
		if !strings.Contains(msg, "image drover-test/missing:none") || !strings.Contains(msg, "could not be pulled") {
			t.Errorf("want a %s event naming the image and why; events: %+v", spec.EventDriverFail, ts.Events)
		}
		// Long enough for the policy's 100ms restarts to have shown.
		time.Sleep(time.Until(failedAt.Add(3 * time.Second)))
		st := d.jobStatus("e2edockermissing")
		for _, a := range st.Allocations {
			ts := a.Status.Tasks["server"]
			if a.ClientStatusOr() != spec.ClientFailed || ts.Restarts != 0 || ts.State != spec.TaskDead {
				t.Errorf("want the alloc failed, the task dead with no restart; got:\n%s", allocsLine(st.Allocations))
			}
		}
		if len(containersOfJob(t, dc, "e2edockermissing")) != 0 {
			t.Error("a container exists for the job whose image is missing")
		}
	})

	t.Run("script check", func(t *testing.T) {
		a := waitAlloc(t, d, "e2edockercheck", 60*time.Second, "the instance healthy", func(a *spec.Alloc) bool {
			return a.Status.Health == spec.HealthHealthy
		})
		checks := a.Status.Tasks["server"].Checks
		if len(checks) != 1 || checks[0].Check != "e2e-docker-check-script" || checks[0].Status != spec.CheckPassing {
			t.Errorf("checks: %+v, want e2e-docker-check-script passing", checks)
		}
		out := cliOK(t, d, "services", "e2e-docker-check")
		if !strings.Contains(out, "healthy") || !strings.Contains(out, a.Name) || !strings.Contains(out, "e2e-docker-check-script passing") {
			t.Errorf("drover services e2e-docker-check does not list %s as healthy:\n%s", a.Name, out)
		}
	})
}

// waitAlloc polls the job's status (the CLI's JSON) until its only alloc
// has a status and satisfies cond.
func waitAlloc(t *testing.T, d *devProc, job string, within time.Duration, what string, cond func(*spec.Alloc) bool) *spec.Alloc {
	t.Helper()
	var last []*spec.Alloc
	deadline := time.Now().Add(within)
	for {
		last = d.jobStatus(job).Allocations
		if len(last) > 1 {
			t.Fatalf("job %s has %d allocs, want 1:\n%s", job, len(last), allocsLine(last))
		}
		if len(last) == 1 && last[0].Status != nil && last[0].Status.Tasks["server"] != nil && cond(last[0]) {
			return last[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s: timed out after %s waiting for %s; allocs:\n%s", job, within, what, allocsLine(last))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// allocsLine describes allocs for a failure message.
func allocsLine(allocs []*spec.Alloc) string {
	var b strings.Builder
	for _, a := range allocs {
		fmt.Fprintf(&b, "  %s %s", a.Name, a.ClientStatusOr())
		if a.Status != nil {
			for name, ts := range a.Status.Tasks {
				fmt.Fprintf(&b, "\n    task %s: %s restarts=%d container=%.12s", name, ts.State, ts.Restarts, ts.ContainerID)
				for _, e := range ts.Events {
					fmt.Fprintf(&b, "\n      %s: %s", e.Type, e.Message)
				}
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// cliOK runs a drover command that must succeed and returns its stdout.
func cliOK(t *testing.T, d *devProc, args ...string) string {
	t.Helper()
	out, errOut, code := d.cli("", args...)
	if code != 0 {
		t.Fatalf("drover %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// containersOfJob lists the IDs of the job's containers, running or not.
func containersOfJob(t *testing.T, dc *client.Client, job string) []string {
	t.Helper()
	res, err := dc.ContainerList(context.Background(), client.ContainerListOptions{
		All: true, Filters: make(client.Filters).Add("label", dockerdriver.LabelJob+"="+job),
	})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, ct := range res.Items {
		ids = append(ids, ct.ID)
	}
	return ids
}

// httpGet returns the body of a GET, or "" when it fails.
func httpGet(url string) string {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
