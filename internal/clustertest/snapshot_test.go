package clustertest

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/client"
)

// TestSnapshotRestoreEmbedded follows docs/operations.md's backup and
// restore for a server's embedded etcd: `drover operator snapshot save`
// from s1's member while the cluster runs, a job submitted after it, every
// server stopped, s1's DATA-DIR/etcd deleted and `drover operator snapshot
// restore FILE --data-dir DATA-DIR/etcd --etcd-peer-addr ...` in its place,
// the servers started again. The saved job's instances are the same
// allocations with the same processes, and the later job is gone.
func TestSnapshotRestoreEmbedded(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 1)
	kept, late := sleepJob("snapkept", 2), sleepJob("snaplate", 1)
	c.submit(kept)
	before := c.waitRunning(kept.Name, 2, 30*time.Second)

	file := filepath.Join(t.TempDir(), "backup.snap")
	s1 := c.server("s1")
	if out, err := exec.Command(droverBin, "operator", "snapshot", "save", "--etcd-endpoints", s1.etcd, file).CombinedOutput(); err != nil {
		t.Fatalf("snapshot save: %v\n%s", err, out)
	} else {
		t.Logf("%s", out)
	}
	c.submit(late)
	c.waitRunning(late.Name, 1, 30*time.Second)

	for i := len(c.servers) - 1; i >= 0; i-- { // s1, whose etcd the others use, last
		p := c.servers[i]
		p.signal(syscall.SIGTERM)
		if err := p.wait(30 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	etcdDir := filepath.Join(c.dir, "s1", "etcd")
	if err := os.RemoveAll(etcdDir); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(droverBin, "operator", "snapshot", "restore", file, "--data-dir", etcdDir, "--etcd-peer-addr", c.s1Peer).CombinedOutput()
	if err != nil {
		t.Fatalf("snapshot restore: %v\n%s", err, out)
	}
	t.Logf("%s", out)
	for _, p := range c.servers {
		p.start()
	}
	c.waitLeader(nil, 30*time.Second)

	after := c.waitRunning(kept.Name, 2, 30*time.Second)
	pids := map[string]int{}
	for _, a := range runningAllocs(before) {
		pids[a.ID] = a.Status.Tasks["t"].PID
	}
	for _, a := range runningAllocs(after) {
		if pid, ok := pids[a.ID]; !ok || pid != a.Status.Tasks["t"].PID || a.Restarts() != 0 {
			t.Errorf("instance %s after the restore: pid %d, restarts %d; before: pid %d (present %v)", a.ID, a.Status.Tasks["t"].PID, a.Restarts(), pid, ok)
		}
	}
	if _, err := c.jobStatus(late.Name); !client.IsStatus(err, http.StatusNotFound) {
		t.Errorf("job %s, submitted after the snapshot: got %v, want not found", late.Name, err)
	}
	waitFor(t, 30*time.Second, "the unknown job's task stopped", func() bool { return len(c.taskProcs(late.Name)) == 0 })
}
