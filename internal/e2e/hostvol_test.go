package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/dockertest"
	"github.com/drover-org/drover/internal/spec"
)

// hostVolDev starts drover dev with host volume shared (writable) and
// certs (read-only), and returns it with their paths.
func hostVolDev(t *testing.T) (d *devProc, dir, shared, certs string) {
	dir = t.TempDir()
	shared, certs = filepath.Join(dir, "shared"), filepath.Join(dir, "certs")
	for _, p := range []string{shared, certs} {
		if err := os.Mkdir(p, 0o777); err != nil {
			t.Fatal(err)
		}
		// Tasks may run as another user (docker's image user); let them write.
		if err := os.Chmod(p, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	d = startDevFlags(t, dir+"/data", []string{"--host-volume", "shared=" + shared, "--host-volume", "certs=" + certs + ":ro"})
	return d, dir, shared, certs
}

// TestHostVolumeExec: drover dev offers host volumes given with
// --host-volume, its node publishes them (drover nodes NODE shows them),
// and raw_exec tasks write through their volume_mount (a link in the
// task's directory at a relative destination, or in the alloc's shared
// directory under ${NOMAD_ALLOC_DIR}) into the host's directory.
func TestHostVolumeExec(t *testing.T) {
	d, dir, shared, _ := hostVolDev(t)
	nodes := cliOK(t, d, "nodes")
	name := strings.Fields(strings.Split(strings.TrimSpace(nodes), "\n")[1])[0]
	if out := cliOK(t, d, "nodes", name); !strings.Contains(out, "shared") || !strings.Contains(out, "certs (read-only)") {
		t.Errorf("drover nodes %s does not show the host volumes:\n%s", name, out)
	}
	job := writeJob(t, dir, "hv.nomad", `
job "hvexec" {
  type = "batch"
  group "g" {
    volume "data" {
      type   = "host"
      source = "shared"
    }
    task "server" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo written by ${NOMAD_ALLOC_ID} > data/out.txt"]
      }
      volume_mount {
        volume      = "data"
        destination = "data"
      }
      resources {
        cpu    = 10
        memory = 16
      }
    }
    task "other" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo from other > ${NOMAD_ALLOC_DIR}/vol/out2.txt"]
      }
      volume_mount {
        volume      = "data"
        destination = "${NOMAD_ALLOC_DIR}/vol"
      }
      resources {
        cpu    = 10
        memory = 16
      }
    }
  }
}
`)
	if out, errOut, code := d.cli("", "run", job); code != 0 {
		t.Fatalf("drover run: exit %d\n%s%s", code, out, errOut)
	}
	a := waitAlloc(t, d, "hvexec", 30*time.Second, "the task to complete", func(a *spec.Alloc) bool {
		return a.ClientStatusOr() == spec.ClientComplete
	})
	b, err := os.ReadFile(filepath.Join(shared, "out.txt"))
	if err != nil || strings.TrimSpace(string(b)) != "written by "+a.ID {
		t.Fatalf("the host volume holds %q (%v), want the task's line %q", b, err, "written by "+a.ID)
	}
	if b, err := os.ReadFile(filepath.Join(shared, "out2.txt")); err != nil || strings.TrimSpace(string(b)) != "from other" {
		t.Fatalf("the write through ${NOMAD_ALLOC_DIR}/vol: %q (%v)", b, err)
	}
}

// TestHostVolumeNotPlaced: a job asking for a host volume no node has,
// or writable where the node has it read-only, is never placed: drover
// run exits 2 with the reason; a raw_exec task whose volume_mount is at
// an absolute path outside its directory fails with an event that says
// what to write instead.
func TestHostVolumeNotPlaced(t *testing.T) {
	d, dir, _, _ := hostVolDev(t)
	job := func(name, source, dest string) string {
		return writeJob(t, dir, name+".nomad", `
job "`+name+`" {
  group "g" {
    volume "v" {
      type   = "host"
      source = "`+source+`"
    }
    task "server" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["30"]
      }
      volume_mount {
        volume      = "v"
        destination = "`+dest+`"
      }
      resources {
        cpu    = 10
        memory = 16
      }
    }
  }
}
`)
	}
	for _, tc := range []struct{ name, source, want string }{
		{"hvnone", "nope", "0/1 nodes fit: no node has host volume nope"},
		{"hvro", "certs", "0/1 nodes fit: host volume certs is read-only on 1 node"},
	} {
		out, errOut, code := d.cli("", "run", job(tc.name, tc.source, "local/v"))
		if code != 2 || !strings.Contains(out, tc.want) {
			t.Errorf("drover run %s: exit %d, want 2 with %q\n%s%s", tc.name, code, tc.want, out, errOut)
		}
	}
	out, errOut, code := d.cli("", "run", "--detach", job("hvabs", "shared", "/srv/data"))
	if code != 0 {
		t.Fatalf("drover run hvabs: exit %d\n%s%s", code, out, errOut)
	}
	waitAlloc(t, d, "hvabs", 30*time.Second, "the task to fail with the destination named", func(a *spec.Alloc) bool {
		for _, e := range a.Status.Tasks["server"].Events {
			if e.Type == spec.EventDriverFail && strings.Contains(e.Message, `destination "/srv/data" is outside the task's directory`) {
				return true
			}
		}
		return false
	})
}

// TestHostVolumeMissingDirRefused: an agent (here drover dev's) given a
// host volume whose path does not exist refuses to start and says which.
func TestHostVolumeMissingDirRefused(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(droverBin, "dev", "--http-addr", "127.0.0.1:0", "--data-dir", dir+"/data", "--dns-addr", "",
		"--host-volume", "gone="+dir+"/nothing")
	done := make(chan []byte, 1)
	go func() { b, _ := cmd.CombinedOutput(); done <- b }()
	select {
	case out := <-done:
		want := `host volume "gone" (gone=` + dir + `/nothing): ` + dir + `/nothing does not exist`
		if cmd.ProcessState.ExitCode() == 0 || !strings.Contains(string(out), want) {
			t.Errorf("drover dev with a missing host volume: exit %d, want an error with %q\n%s", cmd.ProcessState.ExitCode(), want, out)
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatal("drover dev with a missing host volume did not exit within 60s")
	}
}

// TestHostVolumeDocker: a docker task gets its host volumes as bind
// mounts: what it writes at a writable one's destination appears in the
// host's directory, and a read-only one refuses its writes.
func TestHostVolumeDocker(t *testing.T) {
	dockertest.Require(t)
	image := dockertest.Image(t)
	d, dir, shared, certs := hostVolDev(t)
	job := writeJob(t, dir, "hvd.nomad", `
job "hvdocker" {
  type = "batch"
  group "g" {
    volume "data" {
      source = "shared"
    }
    volume "certs" {
      source    = "certs"
      read_only = true
    }
    task "server" {
      driver = "docker"
      config {
        image = "`+image+`"
        args  = ["-report", "-dirs", "/data,/etc/certs", "-exit", "0"]
      }
      volume_mount {
        volume      = "data"
        destination = "/data"
      }
      volume_mount {
        volume      = "certs"
        destination = "/etc/certs"
      }
      resources {
        memory = 64
      }
    }
  }
}
`)
	if out, errOut, code := d.cli("", "run", job); code != 0 {
		t.Fatalf("drover run: exit %d\n%s%s", code, out, errOut)
	}
	a := waitAlloc(t, d, "hvdocker", 60*time.Second, "the container to complete", func(a *spec.Alloc) bool {
		return a.ClientStatusOr() == spec.ClientComplete
	})
	if _, err := os.Stat(filepath.Join(shared, "probe")); err != nil {
		t.Errorf("the container's write to /data is not in the host volume: %v", err)
	}
	if _, err := os.Stat(filepath.Join(certs, "probe")); err == nil {
		t.Error("the container wrote into the read-only host volume")
	}
	logs := cliOK(t, d, "logs", "--alloc", a.ID)
	if !strings.Contains(logs, "dir /data: ok") || !strings.Contains(logs, "dir /etc/certs: open /etc/certs/probe: read-only file system") {
		t.Errorf("the task's report:\n%s", logs)
	}
}

// TestHostVolumePerAllocExec: with per_alloc, instance N of a group
// mounts host volume data[N]: drover dev offers data[0] and data[1] (names
// with an instance index, given with --host-volume), a count = 2 batch
// job's raw_exec tasks each write their NOMAD_ALLOC_INDEX through the
// volume, and each directory on disk holds its own instance's index.
// A third instance, whose data[2] no node has, is not placed, and drover
// run says so.
func TestHostVolumePerAllocExec(t *testing.T) {
	dir := t.TempDir()
	dirs := []string{filepath.Join(dir, "vol0"), filepath.Join(dir, "vol1")}
	flags := []string{}
	for i, p := range dirs {
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		flags = append(flags, "--host-volume", fmt.Sprintf("data[%d]=%s", i, p))
	}
	d := startDevFlags(t, dir+"/data", flags)
	job := func(name string, count int) string {
		return writeJob(t, dir, name+".nomad", fmt.Sprintf(`
job %q {
  type = "batch"
  group "db" {
    count = %d
    volume "data" {
      type      = "host"
      source    = "data"
      per_alloc = true
    }
    task "replica" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo $NOMAD_ALLOC_INDEX > local/data/%s-index.txt"]
      }
      volume_mount {
        volume      = "data"
        destination = "local/data"
      }
      resources {
        cpu    = 10
        memory = 16
      }
    }
  }
}
`, name, count, name))
	}
	if out, errOut, code := d.cli("", "run", job("pa", 2)); code != 0 {
		t.Fatalf("drover run pa: exit %d\n%s%s", code, out, errOut)
	}
	for i, p := range dirs {
		b, err := os.ReadFile(filepath.Join(p, "pa-index.txt"))
		if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(i) {
			t.Errorf("%s (host volume data[%d]) holds %q (%v), want instance %d's index", p, i, b, err, i)
		}
	}
	want := "no node has host volume data[2]"
	if out, errOut, code := d.cli("", "run", job("pa3", 3)); code != 2 || !strings.Contains(out, want) {
		t.Errorf("drover run pa3 (count 3): exit %d, want 2 with %q\n%s%s", code, want, out, errOut)
	}
}

// TestHostVolumePerAllocDocker: a docker task of a per_alloc volume gets
// its own instance's host volume as its bind mount. Each host directory
// holds a subdirectory named for the instance it belongs to (from0 in
// data[0], from1 in data[1]); each container makes a file in
// /data/from$NOMAD_ALLOC_INDEX, which exists only if it got its own.
func TestHostVolumePerAllocDocker(t *testing.T) {
	dockertest.Require(t)
	image := dockertest.Image(t)
	dir := t.TempDir()
	var flags, subs []string
	for i := range 2 {
		p := filepath.Join(dir, fmt.Sprintf("vol%d", i))
		sub := filepath.Join(p, fmt.Sprintf("from%d", i))
		if err := os.MkdirAll(sub, 0o777); err != nil {
			t.Fatal(err)
		}
		// The image's user may not be ours; let it write.
		if err := os.Chmod(sub, 0o777); err != nil {
			t.Fatal(err)
		}
		flags = append(flags, "--host-volume", fmt.Sprintf("data[%d]=%s", i, p))
		subs = append(subs, sub)
	}
	d := startDevFlags(t, dir+"/data", flags)
	job := writeJob(t, dir, "pad.nomad", `
job "padocker" {
  type = "batch"
  group "g" {
    count = 2
    volume "data" {
      source    = "data"
      per_alloc = true
    }
    task "server" {
      driver = "docker"
      config {
        image = "`+image+`"
        args  = ["-report", "-dirs", "/data/from${NOMAD_ALLOC_INDEX}", "-exit", "0"]
      }
      volume_mount {
        volume      = "data"
        destination = "/data"
      }
      resources {
        memory = 64
      }
    }
  }
}
`)
	if out, errOut, code := d.cli("", "run", job); code != 0 {
		t.Fatalf("drover run: exit %d\n%s%s", code, out, errOut)
	}
	for i, sub := range subs {
		if _, err := os.Stat(filepath.Join(sub, "probe")); err != nil {
			t.Errorf("instance %d's write to /data/from%d is not in host volume data[%d]: %v", i, i, i, err)
		}
	}
}
