package agent_test

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/spec"
)

// Case 28: a task owns its directory and can replace its log files, or the
// directory itself, with symlinks to the host's files (/etc/passwd) or a
// FIFO. Reading its logs through the API must then be refused, promptly,
// never show the outside file, and not hang; a well-behaved task's logs
// still read.
//
// The tasks write nothing to a replaced stream (exec >/dev/null first), so
// the agent's log writer never opens the symlink: this test checks the
// reading side.
func TestLogsStayInsideTheAllocDir(t *testing.T) {
	c := newCluster(t)
	dataDir := t.TempDir()
	c.startAgent(dataDir, true)
	allocs := filepath.Join(dataDir, "allocs")

	const outside = "OUTSIDE-CONTENT"
	decoy := t.TempDir()
	for _, f := range []string{"outside.log", "web.stdout.log"} {
		if err := os.WriteFile(filepath.Join(decoy, f), []byte(outside+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	passwd, err := os.ReadFile("/etc/passwd")
	if err != nil || len(passwd) == 0 {
		t.Fatalf("/etc/passwd: %v", err)
	}
	passwdLine, _, _ := strings.Cut(string(passwd), "\n")

	// Files replaced inside the alloc's log directory.
	web := shTask("web", `exec >/dev/null 2>&1; cd "$NOMAD_ALLOC_DIR/logs"
rm -f web.stdout.log; ln -s /etc/passwd web.stdout.log
rm -f web.stderr.log; ln -s "$DECOY/outside.log" web.stderr.log
touch ../ready-web; exec sleep 600`)
	fifo := shTask("fifo", `exec >/dev/null 2>&1; cd "$NOMAD_ALLOC_DIR/logs"
mkfifo fifo.stdout.log; ln -s / fifo.stderr.log
touch ../ready-fifo; exec sleep 600`)
	good := shTask("good", `echo hello from inside; exec sleep 600`)
	for _, tk := range []*spec.Task{web, fifo} {
		tk.Env = map[string]string{"DECOY": decoy}
	}
	c.submit(job("files", spec.JobService, web, fifo, good))
	// The alloc directory itself replaced by a symlink to a directory
	// outside that holds a web.stdout.log.
	mover := shTask("web", `exec >/dev/null 2>&1
d=$DROVER_ALLOC_DIR; cd /; mv "$d" "$d.moved" && ln -s "$DECOY" "$d" && touch "$d.moved/ready"; exec sleep 600`)
	mover.Env = map[string]string{"DECOY": decoy}
	c.submit(job("dir", spec.JobService, mover))

	files := c.alloc("files", 20*time.Second, "files running", running("good"))
	// The log directory replaced by a symlink to another alloc's, which
	// is inside the agent's allocs directory.
	sibling := shTask("good", `exec >/dev/null 2>&1; cd "$NOMAD_ALLOC_DIR"
rm -rf logs; ln -s "../../$SIBLING/alloc/logs" logs && touch ready; exec sleep 600`)
	sibling.Env = map[string]string{"SIBLING": files.ID}
	c.submit(job("sibling", spec.JobService, sibling))
	dir := c.alloc("dir", 20*time.Second, "dir running", running("web"))
	sib := c.alloc("sibling", 20*time.Second, "sibling running", running("good"))
	waitFor(t, 20*time.Second, "the tasks to make their links", func() bool {
		for _, p := range []string{
			filepath.Join(allocs, files.ID, "alloc", "ready-web"),
			filepath.Join(allocs, files.ID, "alloc", "ready-fifo"),
			filepath.Join(allocs, dir.ID+".moved", "ready"),
			filepath.Join(allocs, sib.ID, "alloc", "ready"),
		} {
			if _, err := os.Stat(p); err != nil {
				return false
			}
		}
		return true
	})
	waitFor(t, 10*time.Second, "the good task's output", func() bool {
		return strings.Contains(logs(t, c.client, files.ID, "good", false), "hello from inside")
	})

	get := func(alloc, task, typ string, follow bool) (int, string) {
		t.Helper()
		q := "?task=" + task + "&type=" + typ + "&tail=-1"
		if follow {
			q += "&follow=true"
		}
		hc := &http.Client{Timeout: 5 * time.Second}
		resp, err := hc.Get(c.url + "/v1/allocations/" + alloc + "/logs" + q)
		if err != nil {
			t.Fatalf("logs of %s %s/%s: %v (a hung read?)", alloc[:8], task, typ, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		name             string
		alloc, task, typ string
	}{
		{"log file -> /etc/passwd", files.ID, "web", "stdout"},
		{"log file -> a file outside", files.ID, "web", "stderr"},
		{"log file is a FIFO", files.ID, "fifo", "stdout"},
		{"log file -> /", files.ID, "fifo", "stderr"},
		{"alloc dir -> a directory outside", dir.ID, "web", "stdout"},
		{"log dir -> another alloc's", sib.ID, "good", "stdout"},
	} {
		for _, follow := range []bool{false, true} {
			status, body := get(tc.alloc, tc.task, tc.typ, follow)
			if status != http.StatusForbidden {
				t.Errorf("%s (follow %v): got %d %q, want 403", tc.name, follow, status, body)
			}
			if strings.Contains(body, outside) || strings.Contains(body, passwdLine) {
				t.Errorf("%s (follow %v): served the outside file: %q", tc.name, follow, body)
			}
		}
	}
	if status, body := get(files.ID, "good", "stdout", false); status != 200 || body != "hello from inside\n" {
		t.Errorf("a well-behaved task's log: got %d %q", status, body)
	}
}
