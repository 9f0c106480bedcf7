package agent_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/agent"
	"github.com/drover-org/drover/internal/driver"
	"github.com/drover-org/drover/internal/driver/execdriver"
	"github.com/drover-org/drover/internal/spec"
)

// tarEntry is one entry of a test archive: a file with body, or a
// symbolic link to link.
type tarEntry struct {
	name, body, link string
}

// tarGz is a gzipped tar holding entries, written as given: a hostile
// archive's names are not cleaned.
func tarGz(t *testing.T, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.body)), Typeflag: tar.TypeReg}
		if e.link != "" {
			h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, e.link, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// artifactServer serves files by path on 127.0.0.1; a path under
// /private/ needs the header X-Token: let-me-in. It counts requests.
func artifactServer(t *testing.T, files map[string][]byte) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if strings.HasPrefix(r.URL.Path, "/private/") && r.Header.Get("X-Token") != "let-me-in" {
			http.Error(w, "no token", http.StatusForbidden)
			return
		}
		b, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestArtifactsFetchedBeforeTheStart: a plain file (checksum verified), a
// tar.gz unpacked into its destination, the same archive kept whole with
// archive = false, a file on the node in mode file, a directory on the
// node, a source with
// ${NOMAD_JOB_NAME} interpolated and one that needs a header are all in
// the task's directory when it starts, and before its templates render: a
// template's source is a fetched file.
func TestArtifactsFetchedBeforeTheStart(t *testing.T) {
	t.Parallel()
	plain := []byte("hello artifact\n")
	bundle := tarGz(t, tarEntry{name: "dir/a.txt", body: "A\n"}, tarEntry{name: "b.txt", body: "B\n"})
	srv, _ := artifactServer(t, map[string][]byte{
		"/plain.txt":       plain,
		"/bundle.tar.gz":   bundle,
		"/jobs/arts.txt":   []byte("named for the job\n"),
		"/private/key.txt": []byte("with the header\n"),
		"/app.tpl":         []byte(`alloc={{ env "NOMAD_ALLOC_ID" }}` + "\n"),
	})
	onNode := filepath.Join(t.TempDir(), "node.txt")
	if err := os.WriteFile(onNode, []byte("from the node\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tree := t.TempDir()
	if err := os.MkdirAll(filepath.Join(tree, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tree, "sub", "c.txt"), []byte("a directory on the node\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	c := newCluster(t)
	c.startAgent(t.TempDir(), true)
	task := shTask("t", `cat local/plain.txt local/bundle/dir/a.txt local/bundle/b.txt local/copied.txt local/arts.txt local/key.txt local/tree/sub/c.txt local/app.conf; `+
		`tar tzf local/raw/bundle.tar.gz | sort`)
	task.Artifacts = []*spec.Artifact{
		{Source: srv.URL + "/plain.txt", Options: map[string]string{"checksum": "sha256:" + sha256Hex(plain)}},
		{Source: srv.URL + "/bundle.tar.gz", Destination: "local/bundle"},
		{Source: srv.URL + "/bundle.tar.gz", Destination: "${NOMAD_TASK_DIR}/raw", Options: map[string]string{"archive": "false"}},
		{Source: onNode, Mode: "file", Destination: "local/copied.txt"},
		{Source: "file://" + tree, Destination: "local/tree"},
		{Source: srv.URL + "/jobs/${NOMAD_JOB_NAME}.txt"},
		{Source: srv.URL + "/private/key.txt", Headers: map[string]string{"X-Token": "let-me-in"}},
		{Source: srv.URL + "/app.tpl"},
	}
	task.Templates = []*spec.Template{{Source: "local/app.tpl", Destination: "local/app.conf"}}
	c.submit(job("arts", spec.JobBatch, task))
	a := c.alloc("arts", 20*time.Second, "alloc complete", clientStatus(spec.ClientComplete))
	out := logs(t, c.client, a.ID, "t", false)
	want := "hello artifact\nA\nB\nfrom the node\nnamed for the job\nwith the header\na directory on the node\nalloc=" + a.ID + "\nb.txt\ndir/a.txt\n"
	if out != want {
		t.Errorf("task printed\n%s\nwant\n%s\n%s", out, want, describe(a))
	}
	ev := events(taskState(a, "t"), spec.EventArtifacts)
	if len(ev) != 1 || !strings.Contains(ev[0].Message, srv.URL+"/jobs/arts.txt") {
		t.Errorf("Downloading Artifacts events %+v, want one naming the interpolated source", ev)
	}
}

// TestArtifactsNotFetchedAgainOnARestart: a task restarted in place
// finds its artifacts where they were put; they are fetched once.
func TestArtifactsNotFetchedAgainOnARestart(t *testing.T) {
	t.Parallel()
	srv, requests := artifactServer(t, map[string][]byte{"/plain.txt": []byte("fetched once\n")})
	c := newCluster(t)
	c.startAgent(t.TempDir(), true)
	task := shTask("t", "test -e ran || { touch ran; exit 1; }; cat local/plain.txt")
	task.Artifacts = []*spec.Artifact{{Source: srv.URL + "/plain.txt"}}
	task.Restart = restart(1, time.Minute, 100*time.Millisecond, spec.RestartFail)
	c.submit(job("once", spec.JobBatch, task))
	a := c.alloc("once", 20*time.Second, "alloc complete", clientStatus(spec.ClientComplete))
	ts := taskState(a, "t")
	if out := logs(t, c.client, a.ID, "t", false); out != "fetched once\n" || ts.Restarts != 1 || requests.Load() != 1 {
		t.Errorf("task printed %q after %d restarts, %d requests; want the file, 1 and 1\n%s", out, ts.Restarts, requests.Load(), describe(a))
	}
}

// TestArtifactBadChecksumFailsTheStart: a checksum that does not match
// fails the start with a Failed Artifact Download event naming the URL,
// its password and query values redacted, and the restart policy applies:
// the fetch is tried again, then the task fails.
func TestArtifactBadChecksumFailsTheStart(t *testing.T) {
	t.Parallel()
	srv, _ := artifactServer(t, map[string][]byte{"/plain.txt": []byte("not what was promised\n")})
	c := newCluster(t)
	c.startAgent(t.TempDir(), true)
	task := shTask("t", "echo started")
	src := strings.Replace(srv.URL, "http://", "http://user:hunter2secret@", 1) + "/plain.txt?token=sekrit-token-value"
	task.Artifacts = []*spec.Artifact{{Source: src, Options: map[string]string{"checksum": "sha256:" + sha256Hex([]byte("the promised content\n"))}}}
	task.Restart = restart(1, time.Minute, 100*time.Millisecond, spec.RestartFail)
	c.submit(job("badsum", spec.JobBatch, task))
	a := c.alloc("badsum", 20*time.Second, "alloc failed", clientStatus(spec.ClientFailed))
	ts := taskState(a, "t")
	ev := events(ts, spec.EventArtifactFail)
	if len(ev) != 2 || ts.Restarts != 1 {
		t.Fatalf("%d Failed Artifact Download events and %d restarts, want 2 and 1 (restart policy: 1 attempt)\n%s", len(ev), ts.Restarts, describe(a))
	}
	for _, e := range ev {
		m := e.Message
		if !strings.Contains(m, "artifact 1 of 1 (") || !strings.Contains(m, "/plain.txt") || !strings.Contains(m, "checksum") {
			t.Errorf("event %q does not name the artifact, its URL and the checksum", m)
		}
		if strings.Contains(m, "hunter2secret") || strings.Contains(m, "sekrit-token-value") {
			t.Errorf("event %q shows the URL's secrets", m)
		}
	}
	if n := len(events(ts, spec.EventStarted)); n != 0 {
		t.Errorf("task started %d times with a bad artifact", n)
	}
}

// TestArtifactNotFoundFailsWithoutRestarts: a 404 will not get better, so
// the task fails at once, its restart policy unused.
func TestArtifactNotFoundFailsWithoutRestarts(t *testing.T) {
	t.Parallel()
	srv, requests := artifactServer(t, nil)
	c := newCluster(t)
	c.startAgent(t.TempDir(), true)
	task := shTask("t", "echo started")
	task.Artifacts = []*spec.Artifact{{Source: srv.URL + "/missing.tar.gz"}}
	task.Restart = restart(3, time.Minute, 100*time.Millisecond, spec.RestartFail)
	c.submit(job("missing", spec.JobBatch, task))
	a := c.alloc("missing", 20*time.Second, "alloc failed", clientStatus(spec.ClientFailed))
	ts := taskState(a, "t")
	ev := events(ts, spec.EventArtifactFail)
	if len(ev) != 1 || ts.Restarts != 0 || requests.Load() != 1 {
		t.Fatalf("%d Failed Artifact Download events, %d restarts, %d requests; want 1, 0, 1\n%s", len(ev), ts.Restarts, requests.Load(), describe(a))
	}
	if !strings.Contains(ev[0].Message, srv.URL+"/missing.tar.gz") || !strings.Contains(ev[0].Message, "404") {
		t.Errorf("event %q does not name the URL and the 404", ev[0].Message)
	}
}

// TestArtifactHostileArchives: an archive entry with ../ fails the fetch
// and writes nothing outside; an archive's absolute symbolic link does not
// become a link that a later entry is written through; and a destination
// that a sibling task made a symbolic link to a directory outside the
// alloc's is refused rather than followed.
func TestArtifactHostileArchives(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	srv, _ := artifactServer(t, map[string][]byte{
		"/dotdot.tar.gz":  tarGz(t, tarEntry{name: "ok.txt", body: "ok\n"}, tarEntry{name: "../../escape.txt", body: "escaped\n"}),
		"/symlink.tar.gz": tarGz(t, tarEntry{name: "link", link: outside}, tarEntry{name: "link/pwned.txt", body: "pwned\n"}),
		"/fine.tar.gz":    tarGz(t, tarEntry{name: "fine.txt", body: "fine\n"}),
	})
	dataDir := t.TempDir()
	c := newCluster(t)
	c.startAgent(dataDir, true)

	for _, name := range []string{"dotdot", "symlink"} {
		task := shTask("t", "echo started")
		task.Artifacts = []*spec.Artifact{{Source: srv.URL + "/" + name + ".tar.gz"}}
		task.Restart = restart(0, time.Minute, 100*time.Millisecond, spec.RestartFail)
		c.submit(job(name, spec.JobBatch, task))
		a := c.alloc(name, 20*time.Second, "alloc failed", clientStatus(spec.ClientFailed))
		ev := events(taskState(a, "t"), spec.EventArtifactFail)
		if len(ev) != 1 {
			t.Errorf("%s: Failed Artifact Download events %+v, want 1\n%s", name, ev, describe(a))
			continue
		}
		t.Logf("%s: %s", name, ev[0].Message)
	}

	// A directory on the node holding a symbolic link to outside is
	// refused, not copied as a link nor followed.
	srcDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(srcDir, "ok.txt"), []byte("ok\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(srcDir, "link")); err != nil {
		t.Fatal(err)
	}
	task := shTask("t", "echo started")
	task.Artifacts = []*spec.Artifact{{Source: srcDir, Destination: "local/tree"}}
	task.Restart = restart(0, time.Minute, 100*time.Millisecond, spec.RestartFail)
	c.submit(job("dirlink", spec.JobBatch, task))
	a := c.alloc("dirlink", 20*time.Second, "alloc failed", clientStatus(spec.ClientFailed))
	if ev := events(taskState(a, "t"), spec.EventArtifactFail); len(ev) != 1 || !strings.Contains(ev[0].Message, "link is a symbolic link") {
		t.Errorf("dirlink: Failed Artifact Download events %+v, want 1 about the symbolic link\n%s", ev, describe(a))
	} else {
		t.Logf("dirlink: %s", ev[0].Message)
	}

	// A prestart task plants alloc/data/link -> outside; the main task's
	// artifact goes to ${NOMAD_ALLOC_DIR}/data/link.
	plant := shTask("plant", `ln -s `+outside+` "$NOMAD_ALLOC_DIR/data/link"`)
	plant.Lifecycle = &spec.Lifecycle{Hook: spec.HookPrestart}
	main := shTask("t", "echo started")
	main.Artifacts = []*spec.Artifact{{Source: srv.URL + "/fine.tar.gz", Destination: "${NOMAD_ALLOC_DIR}/data/link"}}
	main.Restart = restart(0, time.Minute, 100*time.Millisecond, spec.RestartFail)
	c.submit(job("planted", spec.JobBatch, plant, main))
	a = c.alloc("planted", 20*time.Second, "alloc failed", clientStatus(spec.ClientFailed))
	if ev := events(taskState(a, "t"), spec.EventArtifactFail); len(ev) != 1 || !strings.Contains(ev[0].Message, "escapes") {
		t.Errorf("planted: Failed Artifact Download events %+v, want 1 saying the path escapes\n%s", ev, describe(a))
	} else {
		t.Logf("planted: %s", ev[0].Message)
	}

	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("the directory outside holds %v", entries)
	}
	_ = filepath.WalkDir(dataDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && (d.Name() == "escape.txt" || d.Name() == "pwned.txt") {
			t.Errorf("%s was written", p)
		}
		return nil
	})
	if _, err := os.Stat(filepath.Join(filepath.Dir(dataDir), "escape.txt")); err == nil {
		t.Errorf("escape.txt was written beside the data directory")
	}
}

// TestArtifactLimits: a fetch that takes longer than the agent's
// ArtifactTimeout, and a download larger than its ArtifactMaxBytes, fail
// the start saying so.
func TestArtifactLimits(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/slow.txt":
			select {
			case <-release:
			case <-r.Context().Done():
			}
		case "/big.bin":
			_, _ = w.Write(bytes.Repeat([]byte("x"), 2<<20))
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	c := newCluster(t)
	c.startAgentWith(agent.Config{
		DataDir: t.TempDir(), Drivers: []driver.Driver{execdriver.New("raw_exec")}, StopTasksOnExit: true,
		ArtifactTimeout: 500 * time.Millisecond, ArtifactMaxBytes: 1 << 20,
	})
	for name, want := range map[string]string{"slow": "not fetched within 500ms", "big": "larger than the agent's limit of 1048576 bytes (--artifact-max-mb)"} {
		task := shTask("t", "echo started")
		task.Artifacts = []*spec.Artifact{{Source: srv.URL + map[string]string{"slow": "/slow.txt", "big": "/big.bin"}[name]}}
		task.Restart = restart(0, time.Minute, 100*time.Millisecond, spec.RestartFail)
		c.submit(job(name, spec.JobBatch, task))
		a := c.alloc(name, 20*time.Second, "alloc failed", clientStatus(spec.ClientFailed))
		ev := events(taskState(a, "t"), spec.EventArtifactFail)
		if len(ev) != 1 || !strings.Contains(ev[0].Message, want) {
			t.Errorf("%s: Failed Artifact Download events %+v, want one saying %q\n%s", name, ev, want, describe(a))
		}
	}
}
