package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fleetTemplate is a fleet template unit. Each instance writes its
// instance name (%i) and its PID to files; its ExecStopPost= records
// whether that PID was still alive when it ran. OUT is replaced by the
// test's directory.
const fleetTemplate = `[Unit]
Description=e2e fleet instance %i
After=network.target

[Service]
ExecStart=/bin/sh -c "echo %i > OUT/started-%p-%i; echo $$$$ > OUT/pid-%i; exec sleep 600"
ExecStopPost=/bin/sh -c "if kill -0 $$(cat OUT/pid-%i) 2>/dev/null; then echo alive; else echo gone; fi > OUT/poststop-%n"
TimeoutStopSec=2

[X-Fleet]
Conflicts=nothing-like-this*.service

[Install]
WantedBy=multi-user.target
`

// TestFleetTemplateInstancesAndExecStopPost runs two instances of a fleet
// template unit by their instance names, as fleetctl start does: each is a
// job of its own, running with %i expanded. Stopping one runs its
// ExecStopPost= once its process is gone, and the CLI prints the warnings
// for the keys drover ignores.
func TestFleetTemplateInstancesAndExecStopPost(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	writeJob(t, dir, "e2efleet@.service", strings.ReplaceAll(fleetTemplate, "OUT", out))
	d := startDev(t, dir+"/data")

	for _, inst := range []string{"1", "2"} {
		stdout, stderr, code := d.cli("", "run", filepath.Join(dir, "e2efleet@"+inst+".service"))
		if code != 0 {
			t.Fatalf("drover run e2efleet@%s.service: exit %d\n%s\n%s", inst, code, stdout, stderr)
		}
		tmpl := filepath.Join(dir, "e2efleet@.service")
		for _, w := range []string{tmpl + ":3: After= in [Unit]: drover ignores it", tmpl + ":14: [Install] is ignored"} {
			if !strings.Contains(stderr, "warning: "+w) {
				t.Errorf("drover run did not warn %q:\n%s", w, stderr)
			}
		}
		started := filepath.Join(out, "started-e2efleet-"+inst)
		waitFor(t, 30*time.Second, "instance "+inst+" writes "+started, func() bool {
			b, err := os.ReadFile(started)
			return err == nil && string(b) == inst+"\n"
		})
	}
	for _, job := range []string{"e2efleet@1", "e2efleet@2"} {
		if n := len(taskProcs(job, d.dataDir)); n != 1 {
			t.Fatalf("job %s: want 1 task process, found %d", job, n)
		}
	}

	post := filepath.Join(out, "poststop-e2efleet@1.service")
	if _, err := os.Stat(post); !os.IsNotExist(err) {
		t.Fatalf("ExecStopPost ran before the stop: %v", err)
	}
	if stdout, stderr, code := d.cli("", "stop", "e2efleet@1"); code != 0 {
		t.Fatalf("drover stop: exit %d\n%s\n%s", code, stdout, stderr)
	}
	waitFor(t, 30*time.Second, "ExecStopPost writes "+post, func() bool {
		b, err := os.ReadFile(post)
		return err == nil && len(b) > 0
	})
	if b, _ := os.ReadFile(post); string(b) != "gone\n" {
		t.Errorf("ExecStopPost found the task's process %q; want it gone before ExecStopPost runs", strings.TrimSpace(string(b)))
	}
	if _, err := os.Stat(filepath.Join(out, "poststop-e2efleet@2.service")); !os.IsNotExist(err) {
		t.Errorf("stopping e2efleet@1 ran e2efleet@2's ExecStopPost: %v", err)
	}
	if n := len(taskProcs("e2efleet@2", d.dataDir)); n != 1 {
		t.Errorf("e2efleet@2 stopped with e2efleet@1: %d task processes", n)
	}
	table, _, _ := d.cli("", "status", "e2efleet@1")
	if !strings.Contains(table, "poststop command 1 of 1") {
		t.Errorf("drover status does not show the poststop command:\n%s", table)
	}

	// A process that ends on its own is followed by ExecStopPost= too.
	once := writeJob(t, dir, "e2efleetonce.service", "[Service]\nType=oneshot\nExecStart=/bin/true\n"+
		"ExecStopPost=/bin/sh -c \"echo done > "+out+"/poststop-once\"\n")
	if stdout, stderr, code := d.cli("", "run", once); code != 0 {
		t.Fatalf("drover run %s: exit %d\n%s\n%s", once, code, stdout, stderr)
	}
	waitFor(t, 30*time.Second, "the oneshot's ExecStopPost writes its file", func() bool {
		b, err := os.ReadFile(filepath.Join(out, "poststop-once"))
		return err == nil && string(b) == "done\n"
	})
}
