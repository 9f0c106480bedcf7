package agent_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/spec"
)

// TestLogsDisabledKeepNoFiles: a task whose logs block says disabled
// prints to stdout and stderr, and no log file of it appears in the
// alloc's log directory, where its sibling's do; the task runs on (its
// output is read, not left to fill a pipe), and asking for its logs
// says why there are none.
func TestLogsDisabledKeepNoFiles(t *testing.T) {
	c := newCluster(t)
	dataDir := t.TempDir()
	c.startAgent(dataDir, true)

	// 256 KB on each stream, more than a pipe holds: a task whose output
	// were not read would block before it touched its file.
	quiet := shTask("quiet", `i=0; while [ $i -lt 64 ]; do head -c 4096 /dev/zero | tr '\0' x; echo; head -c 4096 /dev/zero | tr '\0' y >&2; i=$((i+1)); done
touch "$NOMAD_ALLOC_DIR/quiet-done"; exec sleep 600`)
	quiet.Logs = &spec.LogConfig{Disabled: true}
	loud := shTask("loud", `echo hello from loud; echo oops >&2; exec sleep 600`)
	c.submit(job("nolog", spec.JobService, quiet, loud))
	a := c.alloc("nolog", 20*time.Second, "nolog running", func(a *spec.Alloc) bool { return running("quiet")(a) && running("loud")(a) })
	allocDir := filepath.Join(dataDir, "allocs", a.ID, "alloc")
	waitFor(t, 20*time.Second, "the quiet task to print all it prints", func() bool {
		_, err := os.Stat(filepath.Join(allocDir, "quiet-done"))
		return err == nil
	})
	waitFor(t, 10*time.Second, "the loud task's output", func() bool {
		return strings.Contains(logs(t, c.client, a.ID, "loud", false), "hello from loud")
	})
	entries, err := os.ReadDir(filepath.Join(allocDir, "logs"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
		if strings.HasPrefix(e.Name(), "quiet.") {
			t.Errorf("the log directory holds %s of the task whose logs are disabled", e.Name())
		}
	}
	if !strings.Contains(strings.Join(names, " "), "loud.stdout.log") {
		t.Errorf("the log directory holds %v, want loud.stdout.log beside", names)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rc, err := c.client.Logs(ctx, a.ID, client.LogOptions{Task: "quiet"})
	if err == nil {
		b, _ := io.ReadAll(rc)
		rc.Close()
		t.Fatalf("logs of the task whose logs are disabled: got %q, want an error", b)
	}
	if !client.IsStatus(err, 404) || !strings.Contains(err.Error(), "keeps no logs") || !strings.Contains(err.Error(), "disabled = true") {
		t.Errorf("logs of the task whose logs are disabled: %v, want 404 saying it keeps no logs and why", err)
	}
}
