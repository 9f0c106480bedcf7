package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// artifactJob fetches a tar.gz holding a script, unpacked into local/app,
// and runs the script; SRV is the server's URL.
const artifactJob = `
job "fetch" {
  type = "batch"
  group "g" {
    task "t" {
      driver = "raw_exec"
      artifact {
        source      = "SRV/app.tar.gz"
        destination = "local/app"
      }
      config {
        command = "/bin/sh"
        args    = ["-c", "local/app/bin/hello.sh"]
      }
    }
  }
}
`

// TestDevArtifact: through drover dev, a Nomad job's artifact (a tar.gz
// on an http server on 127.0.0.1) is unpacked into the task's directory
// before it starts, its script's mode kept, and the task runs it; an
// artifact the server does not have fails the job with the URL and the
// 404 in its events, without restarts.
func TestDevArtifact(t *testing.T) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	script := "#!/bin/sh\necho hello from the artifact\n"
	if err := tw.WriteHeader(&tar.Header{Name: "bin/hello.sh", Mode: 0o755, Size: int64(len(script)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write([]byte(script)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/app.tar.gz" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(buf.Bytes())
	}))
	defer srv.Close()

	dir := t.TempDir()
	d := startDev(t, dir+"/data")
	out, errOut, code := d.cli("", "run", writeJob(t, dir, "fetch.hcl", strings.ReplaceAll(artifactJob, "SRV", srv.URL)))
	if code != 0 || !strings.Contains(out, "1/1 instances completed") {
		t.Fatalf("drover run fetch: exit %d\n%s\n%s", code, out, errOut)
	}
	if logs, _, _ := d.cli("", "logs", "fetch"); logs != "hello from the artifact\n" {
		t.Errorf("the task printed %q", logs)
	}

	missing := strings.ReplaceAll(strings.ReplaceAll(artifactJob, "SRV/app.tar.gz", srv.URL+"/gone.tar.gz"), `"fetch"`, `"gone"`)
	out, errOut, code = d.cli("", "run", writeJob(t, dir, "gone.hcl", missing))
	if code != 1 {
		t.Fatalf("drover run gone: exit %d, want 1\n%s\n%s", code, out, errOut)
	}
	status, _, _ := d.cli("", "status", "gone")
	if !strings.Contains(status, "Failed Artifact Download") || !strings.Contains(status, srv.URL+"/gone.tar.gz") || !strings.Contains(status, "404") {
		t.Errorf("drover status gone does not show the failed download:\n%s", status)
	}
}
