package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sigs.k8s.io/yaml"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// drover version, --version and -v print the same, from what the binary
// carries; -o json has every field, and what is not known says so.
func TestVersionCommands(t *testing.T) {
	want, code := runDrover(t, "", "version")
	if code != 0 {
		t.Fatalf("drover version: exit %d\n%s", code, want)
	}
	for _, line := range []string{"drover devel\n", "Go           " + runtime.Version() + "\n", "etcd client  v3."} {
		if !strings.Contains(want, line) {
			t.Errorf("drover version lacks %q:\n%s", line, want)
		}
	}
	for _, args := range [][]string{{"--version"}, {"-v"}} {
		if out, code := runDrover(t, "", args...); code != 0 || out != want {
			t.Errorf("drover %s: exit %d\n%s\nwant what drover version prints:\n%s", args[0], code, out, want)
		}
	}

	out, code := runDrover(t, "", "version", "-o", "json")
	var v versionInfo
	if err := json.Unmarshal([]byte(out), &v); code != 0 || err != nil {
		t.Fatalf("drover version -o json: exit %d, %v\n%s", code, err, out)
	}
	// A test binary carries no VCS stamp: the commit is unknown, not made up.
	if v.Version != "devel" || v.Commit != unknown || v.GoVersion != runtime.Version() || !strings.HasPrefix(v.EtcdClient, "v3.") {
		t.Errorf("drover version -o json = %+v", v)
	}
	if out, code := runDrover(t, "", "-v", "-o", "json"); code != 0 || !strings.Contains(out, `"etcd_client_version"`) {
		t.Errorf("drover -v -o json: exit %d\n%s", code, out)
	}
	var y versionInfo
	if out, code := runDrover(t, "", "version", "-o", "yaml"); code != 0 || yaml.Unmarshal([]byte(out), &y) != nil || y != v {
		t.Errorf("drover version -o yaml: exit %d, %+v\n%s", code, y, out)
	}
	if out, code := runDrover(t, "", "version", "-o", "xml"); code != exitFailure || !strings.Contains(out, `unknown output format "xml": use -o table, -o json or -o yaml`) {
		t.Errorf("drover version -o xml: exit %d\n%s", code, out)
	}
}

// What the toolchain records becomes the version: a tag, or devel with
// the commit for a build from a checkout; a stamped version wins.
func TestBuildVersion(t *testing.T) {
	vcs := []debug.BuildSetting{
		{Key: "vcs.revision", Value: "88f2bb0c0ffee"},
		{Key: "vcs.time", Value: "2026-01-02T15:04:05Z"},
		{Key: "vcs.modified", Value: "true"},
	}
	deps := []*debug.Module{{Path: etcdClientModule, Version: "v3.7.3"}}
	for _, tc := range []struct {
		name, main, stamped string
		want                versionInfo
	}{
		{"pseudo-version from a dirty checkout", "v0.0.0-20260102150405-88f2bb0c0ffe+dirty", "",
			versionInfo{"devel", "88f2bb0c0ffee", true, "2026-01-02T15:04:05Z", "go1.26.8", "v3.7.3"}},
		{"go install of a tag", "v1.2.0", "",
			versionInfo{"v1.2.0", "88f2bb0c0ffee", true, "2026-01-02T15:04:05Z", "go1.26.8", "v3.7.3"}},
		{"release build", "(devel)", "v1.3.0",
			versionInfo{"v1.3.0", "88f2bb0c0ffee", true, "2026-01-02T15:04:05Z", "go1.26.8", "v3.7.3"}},
	} {
		bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: tc.main}, Deps: deps, Settings: vcs}
		if d := cmp.Diff(tc.want, buildVersion(bi, stamp{version: tc.stamped})); d != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, d)
		}
	}
	if d := cmp.Diff(versionInfo{"devel", unknown, false, unknown, unknown, unknown}, buildVersion(nil, stamp{})); d != "" {
		t.Errorf("no build info (-want +got):\n%s", d)
	}
	// dist/release.sh stamps the commit: it wins over the toolchain's
	// record, and stands alone where there is none (a git worktree).
	rel := stamp{"v1.4.0", "c0ffee1234", "2026-03-04T05:06:07Z", "false"}
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Deps: deps, Settings: vcs}
	if d := cmp.Diff(versionInfo{"v1.4.0", "c0ffee1234", false, "2026-03-04T05:06:07Z", "go1.26.8", "v3.7.3"}, buildVersion(bi, rel)); d != "" {
		t.Errorf("stamped over vcs (-want +got):\n%s", d)
	}
	bi.Settings = nil
	if d := cmp.Diff(versionInfo{"v1.4.0", "c0ffee1234", false, "2026-03-04T05:06:07Z", "go1.26.8", "v3.7.3"}, buildVersion(bi, rel)); d != "" {
		t.Errorf("stamped without vcs (-want +got):\n%s", d)
	}
}

// A release build stamps its version with -ldflags -X main.version: the
// name the release instructions give is the variable drover prints.
func TestVersionStampedByLdflags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds drover: skipped with -short")
	}
	bin := filepath.Join(t.TempDir(), "drover")
	build := exec.Command("go", "build", "-ldflags", "-X main.version=v9.8.7", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "drover v9.8.7\n") {
		t.Errorf("stamped drover --version: %v\n%s", err, out)
	}
}
