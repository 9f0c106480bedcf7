package execdriver

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/drover-org/drover/internal/spec"
)

// fakeV1 lays out v1 hierarchies in a temporary directory as most
// distributions mount them, cpu and cpuacct together (cpu,cpuacct, with
// links cpu and cpuacct to it), each with a drover directory and the
// agent's tasks file, and returns the setup openV1 made of them. Plain
// directories: no kernel cgroup behind them, so no root needed.
func fakeV1(t *testing.T) (*cgroupSetup, string) {
	t.Helper()
	root := t.TempDir()
	for _, h := range []string{"memory", "cpu,cpuacct"} {
		if err := os.MkdirAll(filepath.Join(root, h, cgroupDirName), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, h, "tasks"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, link := range []string{"cpu", "cpuacct"} {
		if err := os.Symlink("cpu,cpuacct", filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	s := &cgroupSetup{parents: map[string]string{}}
	for _, c := range v1Controllers {
		s.parents[c] = filepath.Join(root, c, cgroupDirName)
	}
	if err := s.openV1(); err != nil {
		t.Fatal(err)
	}
	return s, root
}

// Controllers mounted together are one hierarchy, listed once: a pooled
// cgroup and a task's cgroup are made once in it (a second mkdir there
// failed with EEXIST and turned the pool off for good).
func TestOpenV1ListsCoMountedControllersOnce(t *testing.T) {
	s, root := fakeV1(t)
	if len(s.v1) != 2 || s.v1[0].controllers != "memory" || s.v1[1].controllers != "cpu,cpuacct" {
		var got []string
		for _, h := range s.v1 {
			got = append(got, h.controllers)
		}
		t.Fatalf("openV1 listed hierarchies %q, want [memory cpu,cpuacct]", got)
	}
	p := &cgroupPool{s: s, prefix: "pool-test-"}
	slot, err := p.make()
	if err != nil {
		t.Fatalf("pool make: %v", err)
	}
	if err := s.makeV1("alloc-web", spec.Resources{}); err != nil {
		t.Fatalf("makeV1: %v", err)
	}
	for _, h := range []string{"memory", "cpu,cpuacct"} {
		for _, name := range []string{slot, "alloc-web"} {
			if fi, err := os.Stat(filepath.Join(root, h, cgroupDirName, name)); err != nil || !fi.IsDir() {
				t.Errorf("%s/%s: %v, want a directory", h, name, err)
			}
		}
	}
}

// A pooled cgroup's name that exists (left by an earlier agent with the
// same pid) is passed over: the pool makes the next one and stays on.
func TestCgroupPoolSkipsLeftoverNames(t *testing.T) {
	s, root := fakeV1(t)
	p := &cgroupPool{s: s, prefix: "pool-test-"}
	// pool-test-1 in both hierarchies, pool-test-2 in the second only.
	for _, d := range []string{"memory/drover/pool-test-1", "cpu,cpuacct/drover/pool-test-1", "cpu,cpuacct/drover/pool-test-2"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	slot, err := p.make()
	if err != nil || slot != "pool-test-3" {
		t.Fatalf("make = %q, %v; want pool-test-3, nil", slot, err)
	}
	if _, err := os.Stat(filepath.Join(root, "memory/drover/pool-test-2")); !os.IsNotExist(err) {
		t.Errorf("memory/drover/pool-test-2, made while trying that name, is still there (%v)", err)
	}
	for _, d := range []string{"memory/drover/pool-test-1", "cpu,cpuacct/drover/pool-test-2", "memory/drover/pool-test-3", "cpu,cpuacct/drover/pool-test-3"} {
		if _, err := os.Stat(filepath.Join(root, d)); err != nil {
			t.Errorf("%s: %v", d, err)
		}
	}
}
