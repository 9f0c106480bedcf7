package dockertest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

// Daemon is a dockerd of one test's own, for a test that restarts or kills
// the daemon: doing that to the shared one would break the docker tests of
// other packages running at the same time. It runs in a network namespace
// of its own and has no bridge network: a dockerd started with --bridge
// none deletes the host's docker0, the shared daemon's bridge, and one with
// a bridge would share docker0 or its iptables rules with the shared one.
// So its containers have no network at all, not even loopback up.
type Daemon struct {
	// Host is the daemon's address, for DOCKER_HOST or dockerdriver's
	// Config.Host.
	Host string
	// Client talks to the daemon; it reconnects across restarts.
	Client *client.Client

	t    testing.TB
	dir  string
	cmd  *exec.Cmd
	done chan error
}

// StartDaemon starts a private dockerd with all its state in a new
// directory, and stops it and its containerd when the test ends. It skips
// the test when not root or when dockerd is not installed, and fails it
// instead when CI=true.
func StartDaemon(t testing.TB) *Daemon {
	t.Helper()
	skip := ""
	if _, err := exec.LookPath("dockerd"); err != nil {
		skip = "docker: dockerd is not installed, so no private daemon can be started"
	} else if os.Geteuid() != 0 {
		skip = "docker: a private dockerd needs root"
	}
	if skip != "" {
		if os.Getenv("CI") == "true" {
			t.Fatal(skip)
		}
		t.Skip(skip)
	}
	// Not t.TempDir: its path, named after the test, can make the sockets
	// below it longer than a unix socket path may be (108 bytes).
	dir, err := os.MkdirTemp("", "dockerd")
	if err != nil {
		t.Fatal(err)
	}
	d := &Daemon{Host: "unix://" + filepath.Join(dir, "docker.sock"), t: t, dir: dir}
	t.Cleanup(d.cleanup)
	d.start()
	d.Client, err = client.New(client.WithHost(d.Host))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// start runs dockerd and waits until it answers.
func (d *Daemon) start() {
	t := d.t
	t.Helper()
	logf, err := os.OpenFile(filepath.Join(d.dir, "dockerd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	d.cmd = exec.Command("dockerd",
		"--host", d.Host,
		"--data-root", filepath.Join(d.dir, "root"),
		// dockerd starts its own containerd below the exec root (none
		// runs at the system's default socket here, or it would use that).
		"--exec-root", filepath.Join(d.dir, "exec"),
		"--pidfile", filepath.Join(d.dir, "dockerd.pid"),
		"--config-file", filepath.Join(d.dir, "daemon.json"),
		"--bridge", "none", "--iptables=false", "--ip6tables=false", "--ip-masq=false",
	)
	if err := os.WriteFile(filepath.Join(d.dir, "daemon.json"), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	// Its own network namespace, inherited by its containerd and the
	// shims: nothing it does to interfaces reaches the host's.
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("dockertest: starting dockerd: %v", err)
	}
	done := make(chan error, 1)
	d.done = done
	go func() { done <- d.cmd.Wait() }()
	c, err := client.New(client.WithHost(d.Host))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := c.Ping(ctx, client.PingOptions{})
		cancel()
		if err == nil {
			return
		}
		select {
		case werr := <-done:
			done <- werr
			t.Fatalf("dockertest: dockerd exited at start (%v):\n%s", werr, d.logTail())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("dockertest: dockerd did not answer within 30s (%v):\n%s", err, d.logTail())
		}
	}
}

// Restart sends dockerd sig, waits for it to exit and starts it again on
// the same state. After SIGTERM dockerd stops its containers and its
// containerd. After SIGKILL the containers' shims outlive it, and so may
// its containerd (dockerd 20.10 has the kernel kill it with its parent):
// the new dockerd takes over a containerd still running and starts one
// otherwise, which finds the shims.
func (d *Daemon) Restart(sig syscall.Signal) {
	d.t.Helper()
	if err := d.stop(sig, 30*time.Second); err != nil {
		d.t.Fatalf("dockertest: %v\n%s", err, d.logTail())
	}
	// A dead containerd is a zombie until init reaps it, and the new
	// dockerd would take a zombie's pid file for a running containerd and
	// wait for its socket in vain; init reaps late on some machines.
	pidFile := d.containerdPidFile()
	if pid := readPid(pidFile); pid > 0 {
		deadline := time.Now().Add(5 * time.Second)
		for isContainerd(pid) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if !isContainerd(pid) {
			os.Remove(pidFile)
		}
	}
	d.start()
}

func (d *Daemon) containerdPidFile() string {
	return filepath.Join(d.dir, "exec", "containerd", "containerd.pid")
}

// readPid returns the pid in file, or 0.
func readPid(file string) int {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	return pid
}

// stop signals dockerd and waits up to within for it to exit, then kills it.
func (d *Daemon) stop(sig syscall.Signal, within time.Duration) error {
	select {
	case err := <-d.done:
		d.done <- err
		return nil // already gone
	default:
	}
	d.cmd.Process.Signal(sig)
	select {
	case err := <-d.done:
		d.done <- err
		return nil
	case <-time.After(within):
		d.cmd.Process.Kill()
		err := <-d.done
		d.done <- err
		return fmt.Errorf("dockerd did not exit within %s of %s; killed it", within, sig)
	}
}

// cleanup stops dockerd, then its containerd if that outlived it, undoes
// any mount left below the directory and removes it.
func (d *Daemon) cleanup() {
	t := d.t
	if d.Client != nil {
		d.Client.Close()
	}
	if d.t.Failed() {
		t.Logf("dockertest: the private dockerd's log ends with:\n%s", d.logTail())
	}
	if d.cmd != nil {
		// dockerd stops its containers (testapp exits on SIGTERM) and then
		// its containerd.
		if err := d.stop(syscall.SIGTERM, 45*time.Second); err != nil {
			t.Errorf("dockertest: %v", err)
		}
	}
	if pid := readPid(d.containerdPidFile()); pid > 0 && isContainerd(pid) {
		syscall.Kill(pid, syscall.SIGTERM)
		deadline := time.Now().Add(10 * time.Second)
		for isContainerd(pid) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if isContainerd(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	killShims(d.dir)
	if err := unmountBelow(d.dir); err != nil {
		t.Errorf("dockertest: %v", err)
	}
	if err := os.RemoveAll(d.dir); err != nil {
		t.Errorf("dockertest: removing the private daemon's directory: %v", err)
	}
}

// isContainerd reports whether pid is a live containerd (not a process that
// reused the pid; a zombie is not live).
func isContainerd(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	// "pid (comm) state ...": comm may hold spaces, so cut at the last ')'.
	i := strings.LastIndexByte(s, ')')
	if i < 0 || !strings.Contains(s[:i], "(containerd") {
		return false
	}
	f := strings.Fields(s[i+1:])
	return len(f) > 0 && f[0] != "Z"
}

// killShims kills what a daemon that failed to stop cleanly left: the
// shims of its containerd (their command line names its socket, below
// dir) and the containers' first processes, their children.
func killShims(dir string) {
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + p.Name() + "/cmdline")
		if err != nil || !strings.Contains(string(cmdline), "containerd-shim") || !strings.Contains(string(cmdline), dir+"/") {
			continue
		}
		// Killing a container's first process ends its pid namespace.
		children, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
		for _, c := range strings.Fields(string(children)) {
			if cpid, err := strconv.Atoi(c); err == nil {
				syscall.Kill(cpid, syscall.SIGKILL)
			}
		}
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// unmountBelow detaches every mount at or below dir, deepest first.
func unmountBelow(dir string) error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// Field 5 is the mount point, with spaces as \040.
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		p := strings.ReplaceAll(fields[4], `\040`, " ")
		if p == dir || strings.HasPrefix(p, dir+"/") {
			points = append(points, p)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	var errs []error
	for i := len(points) - 1; i >= 0; i-- {
		if err := syscall.Unmount(points[i], syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", points[i], err))
		}
	}
	return errors.Join(errs...)
}

// logTail is the end of dockerd's log, for a failure message.
func (d *Daemon) logTail() string {
	b, _ := os.ReadFile(filepath.Join(d.dir, "dockerd.log"))
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-30):], "\n")
}

// ImageIn builds the test image (see Image) in the daemon c talks to, a
// daemon other than the shared one, and returns its name.
func ImageIn(t testing.TB, c *client.Client) string {
	t.Helper()
	tag, err := build(c)
	if err != nil {
		t.Fatalf("dockertest: building the test image: %v", err)
	}
	return tag
}
