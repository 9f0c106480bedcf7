package chaos

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/testbin"
)

var droverBin string

func TestMain(m *testing.M) { testbin.Main(m, &droverBin) }

// TestChaos runs the suite at its CI size on each etcd kind: one round of
// every fault while jobs are submitted, updated, scaled and stopped, with
// 200 foreign writes/s on the same etcd. It fails on any violated
// invariant, listing what the evidence showed.
func TestChaos(t *testing.T) {
	testbin.TouchSources("../..")
	task := filepath.Join(filepath.Dir(droverBin), "chaostask")
	if out, err := exec.Command("go", "build", "-o", task, "./chaostask").CombinedOutput(); err != nil {
		t.Fatalf("build chaostask: %v\n%s", err, out)
	}
	for _, kind := range []string{EtcdEmbedded, EtcdExternal} {
		t.Run(kind, func(t *testing.T) {
			cfg := Config{Drover: droverBin, Task: task, Etcd: kind, Agents: 3, Submissions: 30, Rounds: 1, Rate: 4,
				ForeignWrites: 200, Seed: uint64(time.Now().UnixNano()), Log: testWriter{t}}
			if kind == EtcdExternal {
				cfg.EtcdBin = systemEtcd(t)
			}
			t.Logf("seed %d", cfg.Seed)
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			if d, ok := t.Deadline(); ok && time.Until(d) < 5*time.Minute {
				// End in time to clean up: a test binary that times out
				// skips every cleanup.
				cancel()
				ctx, cancel = context.WithDeadline(context.Background(), d.Add(-time.Minute))
			}
			defer cancel()
			res, err := Run(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(res)
			t.Logf("result: %s", b)
			if res.LeaderChanges < 2 || res.Acknowledged == 0 || res.TasksStarted < cfg.Submissions {
				t.Fatalf("the run did too little to prove anything: %d leader faults, %d acknowledged, %d tasks started",
					res.LeaderChanges, res.Acknowledged, res.TasksStarted)
			}
			if !res.OK() {
				for _, p := range res.Problems {
					t.Error(p)
				}
				t.Fatalf("invariants violated: lost %d, overlaps %d, healthy restarted %d, healthy stopped %d, missing events %d, converged %v",
					res.Lost, res.Overlaps, res.HealthyRestart, res.HealthyStopped, res.MissingEvents, res.Converged)
			}
		})
	}
}

// systemEtcd returns Debian's etcd, or skips (fails when CI=true).
func systemEtcd(t *testing.T) string {
	if _, err := os.Stat("/usr/bin/etcd"); err == nil {
		return "/usr/bin/etcd"
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("etcd is not installed (CI=true): apt-get install -y etcd-server")
	}
	t.Skip("needs Debian's etcd-server (/usr/bin/etcd); apt-get install etcd-server")
	return ""
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p[:len(p)-1]))
	return len(p), nil
}
