package execdriver_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/driver"
	"github.com/drover-org/drover/internal/driver/execdriver"
	"github.com/drover-org/drover/internal/netbridge"
	"github.com/drover-org/drover/internal/spec"
)

// noneNamespace makes a network namespace of mode none for the test, or
// skips where the machine does not allow it (fails under CI=true).
func noneNamespace(t *testing.T, alloc string) string {
	t.Helper()
	// The default bridge, as any agent on this machine opens it: no
	// other bridge is left behind.
	cfg, err := netbridge.ParseConfig("", "")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Owner = "execdrv"
	m, err := netbridge.Open(cfg)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI runs as root, but network namespaces are not available: %v", err)
		}
		t.Skipf("network namespaces not available here: %v", err)
	}
	n, err := m.Setup(alloc, netbridge.ModeNone, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Teardown(alloc) })
	return n.Namespace
}

// Tasks of both exec drivers start in the namespace they are given (the
// exec driver also in its cgroup), and the agent's own threads all stay in
// the agent's namespace: none is left in a task's.
func TestStartInNetworkNamespace(t *testing.T) {
	path := noneNamespace(t, "4d000000-0000-0000-0000-000000000001")
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	wantNS := fmt.Sprintf("net:[%d]", st.Sys().(*syscall.Stat_t).Ino)
	self, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"raw_exec", "exec"} {
		d := execdriver.New(name)
		for i := range 5 {
			var out bytes.Buffer
			h, err := d.Start(context.Background(), driver.Task{Command: "readlink", Args: []string{"/proc/self/ns/net"}, Env: []string{testPATH},
				Dir: t.TempDir(), ID: driver.TaskID{AllocID: "4d000000-0000-0000-0000-000000000001", Task: name}, Resources: spec.Resources{CPU: 100, MemoryMB: 64},
				Stdout: &out, NetNS: path})
			if err != nil {
				t.Fatalf("%s: Start: %v", name, err)
			}
			if e := waitExit(t, h, 10*time.Second); !e.Successful() {
				t.Fatalf("%s: readlink: %s", name, e)
			}
			got := strings.TrimSpace(out.String())
			if got != wantNS || got == self {
				t.Errorf("%s start %d: task in %q, want the alloc's %q (the agent's is %q)", name, i, got, wantNS, self)
			}
		}
		if name == "exec" {
			t.Logf("exec isolated by %s", d.Isolation()) // v1 and v2 start differently
		}
	}
	threads, _ := filepath.Glob("/proc/self/task/*/ns/net")
	for _, th := range threads {
		if l, err := os.Readlink(th); err == nil && l != self {
			t.Errorf("agent thread %s is in %s, not the agent's namespace %s", th, l, self)
		}
	}
}
