package ui

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestVendoredFilesMatchNPM rebuilds static/vendor/ from web/package-lock.json
// with build.sh (npm ci) into a temporary directory and fails when a
// committed file differs from what it builds, is missing, or is one the
// build no longer makes. Without npm it skips, unless CI=true.
func TestVendoredFilesMatchNPM(t *testing.T) {
	if _, err := exec.LookPath("npm"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("no npm: CI needs it to check internal/ui/static/vendor (apt-get install nodejs npm)")
		}
		t.Skip("no npm here (apt-get install nodejs npm): the vendored files are not checked against their sources")
	}
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "build.sh", out)
	cmd.Env = append(os.Environ(), "npm_config_cache="+filepath.Join(t.TempDir(), "npm-cache"))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build.sh %s: %v\n%s", out, err, b)
	}
	built, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(built) == 0 {
		t.Fatal("build.sh built no files")
	}
	names := map[string]bool{}
	for _, e := range built {
		names[e.Name()] = true
		want, err := os.ReadFile(filepath.Join(out, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join("static", "vendor", e.Name()))
		switch {
		case os.IsNotExist(err):
			t.Errorf("internal/ui/static/vendor/%s is missing: run internal/ui/build.sh", e.Name())
		case err != nil:
			t.Error(err)
		case !bytes.Equal(got, want):
			t.Errorf("internal/ui/static/vendor/%s differs from what `npm ci` builds: run internal/ui/build.sh", e.Name())
		}
	}
	committed, err := os.ReadDir(filepath.Join("static", "vendor"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range committed {
		if !names[e.Name()] {
			t.Errorf("internal/ui/static/vendor/%s is not built by internal/ui/build.sh: remove it, or add it to the script", e.Name())
		}
	}
}
