package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Bad input to drover operator snapshot is refused before anything is
// written, with what is wrong and what to give instead.
func TestOperatorSnapshotBadInput(t *testing.T) {
	dir := t.TempDir()
	existing := filepath.Join(dir, "old.snap")
	notSnap := filepath.Join(dir, "notes.txt")
	os.WriteFile(existing, []byte("x"), 0o600)
	os.WriteFile(notSnap, []byte("not a snapshot\n"), 0o600)
	busy := t.TempDir()
	os.WriteFile(filepath.Join(busy, "member"), nil, 0o600)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"operator", "snapshot", "save", existing}, "already exists"},
		{[]string{"operator", "snapshot", "save", "--etcd-ca", notSnap, filepath.Join(dir, "new.snap")}, "no PEM certificate"},
		{[]string{"operator", "snapshot", "inspect", notSnap}, "is not an etcd snapshot"},
		{[]string{"operator", "snapshot", "inspect", filepath.Join(dir, "missing.snap")}, "no such file"},
		{[]string{"operator", "snapshot", "restore", notSnap}, "--data-dir is required"},
		{[]string{"operator", "snapshot", "restore", notSnap, "--data-dir", filepath.Join(dir, "d"), "--name", "m1"}, "needs its --name and --initial-advertise-peer-urls"},
		{[]string{"operator", "snapshot", "restore", notSnap, "--data-dir", filepath.Join(dir, "d"), "--name", "m1",
			"--initial-advertise-peer-urls", "http://10.0.0.1:2380", "--etcd-peer-addr", "127.0.0.1:2380"}, "--etcd-peer-addr is for a drover server's embedded member"},
		{[]string{"operator", "snapshot", "restore", notSnap, "--data-dir", filepath.Join(dir, "d"), "--name", "m1",
			"--initial-advertise-peer-urls", "http://10.0.0.1:2380", "--initial-cluster", "m2=http://10.0.0.2:2380"}, "does not list member m1"},
		{[]string{"operator", "snapshot", "restore", notSnap, "--data-dir", busy}, "is not empty"},
		{[]string{"operator", "snapshot", "restore", notSnap, "--data-dir", filepath.Join(dir, "d"), "--etcd-peer-addr", "127.0.0.1:0"}, "not 0"},
		{[]string{"operator", "snapshot", "restore", notSnap, "--data-dir", filepath.Join(dir, "d")}, "is not an etcd snapshot"},
		{[]string{"operator", "snapshot", "inspect", notSnap, "-o", "xml"}, "use -o table, -o json or -o yaml"},
		{[]string{"operator", "snapshot", "sav"}, `did you mean "operator snapshot save"?`},
	} {
		out, code := runDrover(t, "", tc.args...)
		if code != exitFailure || !strings.Contains(out, tc.want) {
			t.Errorf("drover %s: exit %d, want 1 and %q in:\n%s", strings.Join(tc.args, " "), code, tc.want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "d")); !os.IsNotExist(err) {
		t.Errorf("a refused restore left %s behind (%v)", filepath.Join(dir, "d"), err)
	}
}
