package registry

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestEtcdSnapshotSaveWipeRestore: a snapshot taken from a running
// embedded member, the member stopped and its data directory deleted, a
// new data directory restored from the file: the member started on it
// holds the jobs that were there at the snapshot and not the one written
// after it, at a revision raised past every one used before.
func TestEtcdSnapshotSaveWipeRestore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	peer := freeAddr(t)
	dir := t.TempDir()
	e, err := StartEmbedded(ctx, EmbeddedConfig{DataDir: filepath.Join(dir, "etcd"), ClientAddr: "127.0.0.1:0", PeerAddr: peer, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	r := open(t, e)
	for _, name := range []string{"web", "batch"} {
		if _, _, err := r.PutJob(ctx, testJob(name, "/bin/sleep 60"), 0); err != nil {
			t.Fatal(err)
		}
	}
	before, err := r.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "drover.snap")
	info, err := SaveEtcdSnapshot(ctx, Options{Endpoints: e.Endpoints()}, file, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("saved: %+v", info)
	if info.Revision < before || info.Keys == 0 || info.Bytes == 0 || info.Endpoint != e.Endpoints()[0] {
		t.Fatalf("snapshot info %+v: want revision >= %d, keys and bytes, endpoint %s", info, before, e.Endpoints()[0])
	}
	if _, err := SaveEtcdSnapshot(ctx, Options{Endpoints: e.Endpoints()}, file, testLogger(t)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("saving over an existing snapshot: got %v, want ErrInvalid", err)
	}
	if _, _, err := r.PutJob(ctx, testJob("late", "/bin/sleep 60"), 0); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}

	cfg, err := EmbeddedRestoreConfig(file, filepath.Join(dir, "etcd"), peer)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RevisionBump = 1_000_000
	// A data directory that holds anything is refused, not merged.
	busy := t.TempDir()
	os.WriteFile(filepath.Join(busy, "x"), nil, 0o600)
	bad := cfg
	bad.DataDir = busy
	if _, err := RestoreEtcdSnapshot(bad, testLogger(t)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("restore into a non-empty directory: got %v, want ErrInvalid", err)
	}
	restored, err := RestoreEtcdSnapshot(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if restored.Revision != info.Revision+1_000_000 {
		t.Fatalf("restored revision %d, want the snapshot's %d + 1000000", restored.Revision, info.Revision)
	}

	e2, err := StartEmbedded(ctx, EmbeddedConfig{DataDir: filepath.Join(dir, "etcd"), ClientAddr: "127.0.0.1:0", PeerAddr: peer, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e2.Close() })
	r2 := open(t, e2)
	for _, name := range []string{"web", "batch"} {
		if _, err := r2.GetJob(ctx, name); err != nil {
			t.Errorf("job %s after the restore: %v", name, err)
		}
	}
	if _, err := r2.GetJob(ctx, "late"); !errors.Is(err, ErrNotFound) {
		t.Errorf("job late, written after the snapshot: got %v, want ErrNotFound", err)
	}
	rev, err := r2.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rev < before+1_000_000 {
		t.Errorf("revision after the restore %d, want at least %d", rev, before+1_000_000)
	}
}

// TestEtcdSnapshotBadInput: what is not a snapshot, and restore
// settings etcd would reject later, are refused with ErrInvalid.
func TestEtcdSnapshotBadInput(t *testing.T) {
	notSnap := filepath.Join(t.TempDir(), "notes.txt")
	os.WriteFile(notSnap, []byte("not a database\n"), 0o600)
	if _, err := EtcdSnapshotStatus(notSnap); !errors.Is(err, ErrInvalid) {
		t.Errorf("status of a text file: got %v, want ErrInvalid", err)
	}
	if _, err := EmbeddedRestoreConfig(notSnap, t.TempDir(), "127.0.0.1:0"); !errors.Is(err, ErrInvalid) {
		t.Errorf("restore for peer port 0: got %v, want ErrInvalid", err)
	}
	base := RestoreConfig{SnapshotPath: notSnap, DataDir: filepath.Join(t.TempDir(), "d"), Name: "m1", PeerURL: "http://127.0.0.1:2380"}
	for name, c := range map[string]func(*RestoreConfig){
		"not a snapshot":         func(*RestoreConfig) {},
		"member not in cluster":  func(c *RestoreConfig) { c.InitialCluster = "m2=http://127.0.0.1:2381" },
		"initial cluster syntax": func(c *RestoreConfig) { c.InitialCluster = "m1" },
		"peer URL":               func(c *RestoreConfig) { c.PeerURL = "127.0.0.1:2380" },
		"no name":                func(c *RestoreConfig) { c.Name = "" },
	} {
		cfg := base
		c(&cfg)
		if _, err := RestoreEtcdSnapshot(cfg, testLogger(t)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", name, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := SaveEtcdSnapshot(ctx, Options{Endpoints: []string{"http://" + freeAddr(t)}, DialTimeout: time.Second}, filepath.Join(t.TempDir(), "s"), testLogger(t)); !errors.Is(err, ErrUnavailable) {
		t.Errorf("no etcd at the endpoint: got %v, want ErrUnavailable", err)
	}
}

// freeAddr is a free 127.0.0.1:port.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
