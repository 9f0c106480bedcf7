package jobfile

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/drover-org/drover/internal/spec"
)

// TestServicesFromFile decodes the job that uses every docker config key
// and every service and check field, in each format, and compares the
// whole job with the one it must mean, check defaults included.
func TestServicesFromFile(t *testing.T) {
	sec := func(n float64) spec.Duration { return spec.Duration(n * float64(time.Second)) }
	task := func(name, driver string, c spec.TaskConfig, services ...*spec.Service) *spec.Task {
		return &spec.Task{
			Name: name, Driver: driver, Config: c, Services: services,
			Resources:   spec.Resources{CPU: spec.DefaultCPU, MemoryMB: spec.DefaultMemoryMB},
			Restart:     spec.DefaultRestart(spec.JobService),
			KillTimeout: spec.DefaultKillTimeout,
		}
	}
	want := &spec.Job{
		Name: "shop", Namespace: spec.DefaultNamespace, Type: spec.JobService, Priority: spec.DefaultPriority,
		Groups: []*spec.Group{{
			Name: "web", Count: 1, Reschedule: spec.DefaultReschedule(spec.JobService),
			Network: &spec.Network{Ports: []spec.Port{{Label: "http", To: 8080}, {Label: "admin", Static: 9000}}},
			Tasks: []*spec.Task{
				task("app", "docker", spec.TaskConfig{
					Image: "drover-testapp:1", Entrypoint: []string{"/testapp"},
					Command: "/testapp", Args: []string{"-listen", ":8080"},
					Ports: []string{"http"}, Labels: map[string]string{"team": "a"},
					NetworkMode: "bridge", Volumes: []string{"/srv/data:/data:ro"},
				}, &spec.Service{
					Name: "web", PortLabel: "http", Tags: []string{"v1", "primary"},
					Checks: []*spec.Check{
						{Name: "web-http", Type: spec.CheckHTTP, Path: "/health", Interval: sec(5), Timeout: sec(1), Grace: sec(10),
							Restart: &spec.CheckRestart{Limit: 3, Grace: sec(30)}},
						{Name: "web-tcp", Type: spec.CheckTCP, Interval: sec(10), Timeout: spec.DefaultCheckTimeout},
						{Name: "web-script", Type: spec.CheckScript, Command: "/bin/check", Args: []string{"-q"},
							Interval: spec.DefaultCheckInterval, Timeout: spec.DefaultCheckTimeout},
					},
				}),
				task("admin", "raw_exec", spec.TaskConfig{Command: "/usr/local/bin/admin"},
					&spec.Service{
						Name: "web", PortLabel: "admin",
						Checks: []*spec.Check{
							// check_restart's grace is the check's own (0).
							{Name: "web-http", Type: spec.CheckHTTP, Path: "/", Interval: spec.DefaultCheckInterval,
								Timeout: spec.DefaultCheckTimeout, Restart: &spec.CheckRestart{Limit: 2}},
							// A 1s interval caps the default timeout at 1s.
							{Name: "deep", Type: spec.CheckHTTP, PortLabel: "http", Path: "/", Interval: sec(1), Timeout: sec(1)},
							// The third http check is "-3", counting the named one.
							{Name: "web-http-3", Type: spec.CheckHTTP, Path: "/", Interval: spec.DefaultCheckInterval,
								Timeout: spec.DefaultCheckTimeout, Grace: sec(5), Restart: &spec.CheckRestart{Limit: 1, Grace: sec(5)}},
						},
					},
					&spec.Service{Name: "admin"}),
			},
		}},
	}
	for _, name := range []string{"services.hcl", "services.json", "services.yaml"} {
		got, err := decodeTestFile(t, filepath.Join("testdata/good", name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}
