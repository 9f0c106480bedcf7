package etcdcluster

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/spec"
)

// TestSnapshotRestoreOnDebianEtcd follows docs/operations.md's backup and
// restore on Debian's etcd 3.4: `drover operator snapshot save` from the
// running three-member cluster, a job submitted after it, then the drover
// server and every etcd member stopped and their data deleted, `drover
// operator snapshot restore` once per member, etcd started on the restored
// directories and the server again. The job saved is back with its
// instances still running (same processes, no restart: the agent kept them
// and the restored allocations name them), the job submitted after the
// snapshot is gone, and the management token from before still works.
func TestSnapshotRestoreOnDebianEtcd(t *testing.T) {
	t.Parallel()
	ec := startEtcd(t, 3, nil)
	dc := startDrover(t, ec.endpoints(), 1, 1)
	job, late := jobName("snap-kept"), jobName("snap-late")
	dc.run(job, serviceJob(job, 2))
	before := running(t, dc, job)
	if len(before) != 2 {
		t.Fatalf("want 2 running instances, got %v", before)
	}

	file := filepath.Join(t.TempDir(), "backup.snap")
	out, errOut, code := dc.cli(time.Minute, "operator", "snapshot", "save", "--etcd-endpoints", strings.Join(ec.endpoints(), ","), file)
	if code != 0 {
		t.Fatalf("snapshot save: exit %d\n%s%s", code, out, errOut)
	}
	t.Logf("drover operator snapshot save:\n%s", out)
	if !strings.Contains(out, "etcd 3.4") {
		t.Errorf("save should name the member's etcd version: %s", out)
	}
	var info struct {
		Revision int64 `json:"revision"`
		Keys     int   `json:"keys"`
	}
	if err := dc.cliJSON(&info, "operator", "snapshot", "inspect", file); err != nil {
		t.Fatal(err)
	}
	if info.Revision == 0 || info.Keys == 0 {
		t.Fatalf("inspect: %+v", info)
	}
	dc.run(late, serviceJob(late, 1))

	// Stop the server, then etcd; delete every member's data.
	addr := strings.TrimPrefix(dc.addrs[0], "https://")
	s := dc.servers[0]
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		s.done <- err
	case <-time.After(30 * time.Second):
		t.Fatalf("drover server did not stop within 30s of SIGTERM\n%s", tail(s.out.String(), 30))
	}
	var initial []string
	for _, m := range ec.members {
		m.kill()
		if err := os.RemoveAll(m.dataDir); err != nil {
			t.Fatal(err)
		}
		initial = append(initial, m.name+"="+m.peerURL)
	}

	restored := t.TempDir()
	for _, m := range ec.members {
		m.dataDir = filepath.Join(restored, m.name)
		out, errOut, code := dc.cli(time.Minute, "operator", "snapshot", "restore", file, "--data-dir", m.dataDir,
			"--name", m.name, "--initial-advertise-peer-urls", m.peerURL,
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-token", "restored")
		if code != 0 {
			t.Fatalf("snapshot restore for %s: exit %d\n%s%s", m.name, code, out, errOut)
		}
		t.Logf("restore %s: %s", m.name, strings.TrimSpace(out))
	}
	for _, m := range ec.members {
		m.proc, _ = startProc(t, "etcd "+m.name+" (restored)", etcdBinary(t), m.args(), nil)
	}
	for _, m := range ec.members {
		waitFor(t, 30*time.Second, "restored etcd "+m.name+" healthy", func() bool {
			if err, done := m.exited(); done {
				t.Fatalf("restored etcd %s exited: %v\n%s", m.name, err, m.out)
			}
			return ec.healthy(m)
		})
	}
	p, _ := startProc(t, "drover server s1 (after the restore)", dc.bin, []string{"server", "--etcd-endpoints", strings.Join(ec.endpoints(), ","),
		"--http-addr", addr, "--name", "s1", "--log-level", logLevel(), "--tls-dir", dc.tlsDir}, apiLine)
	dc.servers[0] = p

	// The saved job runs on, unchanged; the later one is unknown.
	waitFor(t, 30*time.Second, "the job's instances running after the restore", func() bool {
		var st spec.JobStatus
		return dc.cliJSON(&st, "status", job) == nil && len(running(t, dc, job)) == 2
	})
	after := running(t, dc, job)
	for id, in := range before {
		if got, ok := after[id]; !ok || got.pid != in.pid || got.restarts != in.restarts {
			t.Errorf("instance %s: before the restore %+v, after %+v (present %v)", id, in, got, ok)
		}
	}
	checkProcs(t, job, before)
	var jobs []json.RawMessage
	if err := dc.cliJSON(&jobs, "status"); err != nil {
		t.Fatal(err)
	}
	if o, e, code := dc.cli(30*time.Second, "status", late); code == 0 || !strings.Contains(o+e, "no job named") {
		t.Errorf("job %s was submitted after the snapshot: status should say there is no such job, got exit %d\n%s%s", late, code, o, e)
	}
	// The late job's task was stopped by its agent: no server knows it.
	waitFor(t, 30*time.Second, fmt.Sprintf("the task of %s (unknown after the restore) stopped", late), func() bool {
		return len(taskProcs(late)) == 0
	})
}
