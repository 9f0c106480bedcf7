package agent

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/driver"
	"github.com/drover-org/drover/internal/driver/execdriver"
	"github.com/drover-org/drover/internal/spec"
)

func TestRateMHz(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, c := range []struct {
		name     string
		from, to cpuPoint
		want     int
	}{
		{"one core busy", cpuPoint{0, t0}, cpuPoint{10 * time.Second, t0.Add(10 * time.Second)}, 2400},
		{"half a core", cpuPoint{time.Second, t0}, cpuPoint{6 * time.Second, t0.Add(10 * time.Second)}, 1200},
		{"two cores", cpuPoint{0, t0}, cpuPoint{2 * time.Second, t0.Add(time.Second)}, 4800},
		{"idle", cpuPoint{time.Second, t0}, cpuPoint{time.Second, t0.Add(time.Second)}, 0},
		{"CPU went back (another process)", cpuPoint{5 * time.Second, t0}, cpuPoint{time.Second, t0.Add(time.Second)}, 0},
		{"no time passed", cpuPoint{0, t0}, cpuPoint{time.Second, t0}, 0},
	} {
		if got := rateMHz(c.from, c.to, 2400); got != c.want {
			t.Errorf("%s: %d MHz, want %d", c.name, got, c.want)
		}
	}
}

// busyScript keeps a core busy while holding about 20 MB.
const busyScript = `x=$(head -c 20000000 /dev/zero | tr '\0' a); while :; do :; done`

func TestUsageEndpointReturnsRunningTasks(t *testing.T) {
	c, err := client.New("http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{DataDir: t.TempDir(), Name: "n1", Client: c})
	if err != nil {
		t.Fatal(err)
	}
	h, err := execdriver.New("raw_exec").Start(context.Background(), driver.Task{
		Command: "sh", Args: []string{"-c", busyScript}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-h.PID(), syscall.SIGKILL) })
	idle, err := execdriver.New("raw_exec").Start(context.Background(), driver.Task{
		Command: "sleep", Args: []string{"30"}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-idle.PID(), syscall.SIGKILL) })
	a.setHandle("alloc-1", "web", h, true)
	a.setHandle("alloc-2", "idle", idle, true)
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()

	// The shell needs a moment to build its 20 MB string.
	var nu spec.NodeUsage
	deadline := time.Now().Add(10 * time.Second)
	for {
		nu = getUsage(t, srv.URL)
		if web := nu.Allocs["alloc-1"]["web"]; web.CPU > 0 && web.MemoryMB >= 15 || time.Now().After(deadline) {
			break
		}
		time.Sleep(1100 * time.Millisecond) // past usageFresh: a new sample
	}
	web, sleeper := nu.Allocs["alloc-1"]["web"], nu.Allocs["alloc-2"]["idle"]
	if nu.NodeID != a.NodeID() || len(nu.Allocs) != 2 || time.Since(nu.Time) > 5*time.Second {
		t.Fatalf("usage = %+v, want node %s's two allocs, sampled just now", nu, a.NodeID())
	}
	if web.CPU <= 0 || web.MemoryMB < 15 || web.MemoryMB > 200 {
		t.Errorf("busy task's usage = %+v, want CPU > 0 and about 20 MB", web)
	}
	if sleeper.CPU > 50 || sleeper.MemoryMB > 20 {
		t.Errorf("sleeping task's usage = %+v, want about nothing", sleeper)
	}
	if want := (spec.Usage{CPU: web.CPU + sleeper.CPU, MemoryMB: web.MemoryMB + sleeper.MemoryMB}); nu.Tasks != want {
		t.Errorf("node total = %+v, want the tasks' sum %+v", nu.Tasks, want)
	}

	a.clearHandle("alloc-1", "web")
	a.clearHandle("alloc-2", "idle")
	time.Sleep(usageFresh + 100*time.Millisecond)
	if nu := getUsage(t, srv.URL); len(nu.Allocs) != 0 || nu.Tasks != (spec.Usage{}) {
		t.Fatalf("usage after the tasks' handles were cleared = %+v, want none", nu)
	}
}

func getUsage(t *testing.T, base string) spec.NodeUsage {
	t.Helper()
	resp, err := http.Get(base + "/v1/client/usage")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/client/usage: %s", resp.Status)
	}
	var nu spec.NodeUsage
	if err := json.NewDecoder(resp.Body).Decode(&nu); err != nil {
		t.Fatal(err)
	}
	return nu
}
