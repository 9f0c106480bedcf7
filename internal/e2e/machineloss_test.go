package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/spec"
	"github.com/drover-org/drover/internal/testbin"
)

// startAgent runs a second node, `drover agent`, against a dev server,
// with more flags when given.
func startAgent(t *testing.T, d *devProc, name, dataDir string, flags ...string) *exec.Cmd {
	t.Helper()
	args := append([]string{"agent", "--server", d.addr, "--data-dir", dataDir, "--tls-dir", filepath.Join(d.dataDir, "tls"),
		"--http-addr", "127.0.0.1:0", "--name", name, "--log-level", "warn"}, portRange...)
	cmd := exec.Command(droverBin, append(args, flags...)...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// A killed agent leaves its tasks running, by design: they go too,
	// also when the test fails.
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		testbin.KillTasks(t, "", dataDir+"/")
	})
	waitFor(t, 20*time.Second, "node "+name+" registered", func() bool {
		nodes, _, err := d.client().Nodes(t.Context(), nil)
		if err != nil {
			return false
		}
		for _, n := range nodes {
			if n.Name == name && n.Status == spec.NodeReady {
				return true
			}
		}
		return false
	})
	return cmd
}

// Machine loss: a node dies (its agent and its tasks, SIGKILL); once its
// heartbeats have been missing for the node TTL it is down, its instances
// are replaced on the node that is left, and the history says why.
func TestMachineLossReplacesInstances(t *testing.T) {
	dir := t.TempDir()
	d := startDev(t, dir+"/data")
	agent := startAgent(t, d, "doomed", dir+"/agent2")

	// Four instances over two nodes: least-loaded placement spreads them
	// (binpack, the default, would put them all on one).
	job := strings.NewReplacer(`count = 3`, `count = 4`, `"e2eweb" {`, `"e2elost" {`+"\n  scoring = \"least_loaded\"").Replace(webJob)
	out, errOut, code := d.cli("", "run", "--min-healthy-time", "1s", writeJob(t, dir, "lost.hcl", job))
	if code != 0 {
		t.Fatalf("drover run: exit %d\n%s%s", code, out, errOut)
	}
	st := d.jobStatus("e2elost")
	var doomed []*spec.Alloc
	for _, a := range st.Allocations {
		if a.NodeName == "doomed" {
			doomed = append(doomed, a)
		}
	}
	if len(doomed) == 0 {
		t.Fatalf("nothing was placed on the second node: %+v", st.Allocations)
	}

	// The machine dies: its agent and its tasks, all at once.
	agent.Process.Kill()
	for _, a := range doomed {
		syscall.Kill(-a.Status.Tasks["server"].PID, syscall.SIGKILL)
	}
	killed := time.Now()

	waitFor(t, 30*time.Second, "the lost instances replaced and running on the other node", func() bool {
		st := d.jobStatus("e2elost")
		if st.Summary.Running != 4 {
			return false
		}
		for _, a := range st.Allocations {
			if a.DesiredStatus == spec.DesiredRun && a.NodeName == "doomed" {
				return false
			}
		}
		return true
	})
	t.Logf("machine loss -> all 4 instances running again: %s", time.Since(killed).Round(10*time.Millisecond))

	st = d.jobStatus("e2elost")
	for _, old := range doomed {
		var found *spec.Alloc
		for _, a := range st.Allocations {
			if a.ID == old.ID {
				found = a
			}
		}
		if found == nil || found.DesiredStatus != spec.DesiredStop || !strings.Contains(found.DesiredReason, "node doomed is down") {
			t.Errorf("lost alloc %s: want desired stop because its node is down, got %+v", old.Name, found)
		}
	}
	table, _, _ := d.cli("", "status", "e2elost")
	if !strings.Contains(table, "lost (node down") {
		t.Errorf("drover status does not show the old instances as lost:\n%s", table)
	}
	if !strings.Contains(table, "lost with node doomed") && !strings.Contains(table, "node doomed is down") {
		t.Fatalf("drover status does not say why instances moved:\n%s", table)
	}
	nodes, _ := exec.Command(droverBin, "nodes", "--address", d.addr).Output()
	if !strings.Contains(string(nodes), "down") {
		t.Fatalf("drover nodes does not show the dead node down:\n%s", nodes)
	}
}
