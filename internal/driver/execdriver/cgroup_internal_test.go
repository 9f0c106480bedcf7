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
		for _, name := range []string{slot.name, "alloc-web"} {
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
	if err != nil || slot.name != "pool-test-3" {
		t.Fatalf("make = %q, %v; want pool-test-3, nil", slot.name, err)
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

// writeV1Limits writes only the limits a cgroup does not hold, and the
// kernel's defaults where the task wants none but the cgroup holds one;
// a cgroup whose limits are unknown (left by an earlier agent) gets each.
// Plain files stand for the kernel's, each empty at first (not written).
func TestWriteV1LimitsWritesWhatDiffers(t *testing.T) {
	s, root := fakeV1(t)
	s.swap = true
	files := map[string]string{"memory.limit_in_bytes": "memory", "memory.memsw.limit_in_bytes": "memory",
		"memory.soft_limit_in_bytes": "memory", "cpu.shares": "cpu,cpuacct"}
	reset := func() {
		for f, h := range files {
			dir := filepath.Join(root, h, cgroupDirName, "alloc-web")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	read := func() map[string]string {
		got := map[string]string{}
		for f, h := range files {
			b, err := os.ReadFile(filepath.Join(root, h, cgroupDirName, "alloc-web", f))
			if err != nil {
				t.Fatal(err)
			}
			got[f] = string(b)
		}
		return got
	}
	job := s.v1Limits(spec.Resources{CPU: 300, MemoryMB: 48})
	soft := s.v1Limits(spec.Resources{MemoryMB: 32, MemoryMaxMB: 96})
	for _, c := range []struct {
		what       string
		have, want v1Limits
		written    map[string]string
	}{
		{"a pooled cgroup holding the task's limits", job, job, map[string]string{}},
		{"a new cgroup", v1Limits{}, job, map[string]string{"memory.limit_in_bytes": "50331648", "memory.memsw.limit_in_bytes": "50331648", "cpu.shares": "300"}},
		{"a pooled cgroup holding another job's limits", job, soft, map[string]string{"memory.limit_in_bytes": "100663296",
			"memory.memsw.limit_in_bytes": "100663296", "memory.soft_limit_in_bytes": "33554432", "cpu.shares": "1024"}},
		{"a pooled cgroup holding limits, for a task without", job, v1Limits{}, map[string]string{"memory.limit_in_bytes": "-1", "memory.memsw.limit_in_bytes": "-1", "cpu.shares": "1024"}},
		{"a left cgroup", unknownV1Limits, job, map[string]string{"memory.limit_in_bytes": "50331648", "memory.memsw.limit_in_bytes": "50331648",
			"memory.soft_limit_in_bytes": "-1", "cpu.shares": "300"}},
	} {
		reset()
		if err := s.writeV1Limits("alloc-web", c.have, c.want); err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		for f, got := range read() {
			if want := c.written[f]; got != want {
				t.Errorf("%s: %s = %q, want %q", c.what, f, got, want)
			}
		}
	}
}
