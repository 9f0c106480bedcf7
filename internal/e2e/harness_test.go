package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/testbin"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/spec"
)

// droverBin is the binary under test, built once by TestMain.
var droverBin string

// portRange is this package's dynamic ports, apart from those of the other
// packages whose tests run at the same time (cmd/drover-bench uses
// 22000-22999): tasks bind the host ports they are given.
var portRange = []string{"--min-dynamic-port", "21000", "--max-dynamic-port", "21999"}

func TestMain(m *testing.M) { testbin.Main(m, &droverBin) }

var sourcesOnce sync.Once

// devProc is a running `drover dev`.
type devProc struct {
	t       *testing.T
	cmd     *exec.Cmd
	addr    string
	dataDir string
	out     *syncBuffer
	done    chan error
	// tlsDir and token are for a `drover server` (startServer); a dev
	// leaves them for the CLI on this machine, so they stay empty.
	tlsDir, token string
}

var apiLine = regexp.MustCompile(`API at (https://\S+),`)

// readyLine is what dev prints once it has submitted the files it was
// given (after its address).
const readyLine = "Press Ctrl-C to stop the tasks and exit."

// startDev runs `drover dev` on a free port with dataDir and waits until it
// prints its address and has submitted files.
func startDev(t *testing.T, dataDir string, files ...string) *devProc {
	t.Helper()
	return startDevFlags(t, dataDir, nil, files...)
}

// startDevFlags is startDev with more flags for drover dev.
func startDevFlags(t *testing.T, dataDir string, flags []string, files ...string) *devProc {
	t.Helper()
	sourcesOnce.Do(func() { touchSources("../..") })
	args := append([]string{"dev", "--http-addr", "127.0.0.1:0", "--data-dir", dataDir}, portRange...)
	args = append(append(args, flags...), files...)
	cmd := exec.Command(droverBin, args...)
	out := &syncBuffer{}
	pr, pw, _ := os.Pipe()
	cmd.Stdout, cmd.Stderr = pw, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	d := &devProc{t: t, cmd: cmd, dataDir: dataDir, out: out, done: make(chan error, 1)}
	addrc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		addr := ""
		for sc.Scan() {
			out.Write([]byte(sc.Text() + "\n"))
			if m := apiLine.FindStringSubmatch(sc.Text()); m != nil {
				addr = m[1]
			}
			if sc.Text() == readyLine && addr != "" {
				addrc <- addr
			}
		}
	}()
	go func() { d.done <- cmd.Wait() }()
	select {
	case d.addr = <-addrc:
	case err := <-d.done:
		t.Fatalf("drover dev exited early: %v\n%s", err, out)
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("drover dev did not print its address and %q within 60s\n%s", readyLine, out)
	}
	// A dev stops its tasks when it exits; one killed for not exiting
	// leaves them.
	t.Cleanup(func() {
		d.stop()
		testbin.KillTasks(t, "", dataDir+"/")
	})
	return d
}

// stop sends SIGTERM and waits for a clean exit.
func (d *devProc) stop() error {
	if d.cmd.ProcessState != nil {
		return nil
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.done:
		d.done <- err
		return err
	case <-time.After(30 * time.Second):
		d.cmd.Process.Kill()
		return fmt.Errorf("drover dev did not exit within 30s of SIGTERM")
	}
}

func (d *devProc) client() *client.Client {
	c, err := client.Config{Addresses: []string{d.addr}, TLSDir: d.tlsDir, Token: d.token}.Resolve().Client()
	if err != nil {
		d.t.Fatal(err)
	}
	return c
}

// cli runs a drover CLI command against this dev server and returns its
// stdout, stderr and exit code.
func (d *devProc) cli(stdin string, args ...string) (string, string, int) {
	d.t.Helper()
	var env []string
	if d.tlsDir != "" {
		env = []string{"DROVER_TLS_DIR=" + d.tlsDir, "DROVER_TOKEN=" + d.token}
	}
	return d.cliWith(env, stdin, args...)
}

// cliWith is cli with more environment (which wins over the process's).
func (d *devProc) cliWith(env []string, stdin string, args ...string) (string, string, int) {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, droverBin, args...)
	cmd.Env = append(append(os.Environ(), "DROVER_ADDR="+d.addr), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		d.t.Fatalf("drover %v: %v", args, err)
	}
	return stdout.String(), stderr.String(), code
}

// jobStatus reads a job through the CLI's JSON output, the scripting contract.
func (d *devProc) jobStatus(name string) *spec.JobStatus {
	d.t.Helper()
	out, errOut, code := d.cli("", "status", name, "-o", "json")
	if code != 0 {
		d.t.Fatalf("drover status %s: exit %d: %s", name, code, errOut)
	}
	var st spec.JobStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		d.t.Fatalf("drover status -o json is not a JobStatus: %v\n%s", err, out)
	}
	return &st
}

// writeJob writes a job file into dir.
func writeJob(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Shared with the other end-to-end packages (internal/testbin).
type syncBuffer = testbin.SyncBuffer

var (
	waitFor      = testbin.WaitFor
	zombie       = testbin.Zombie
	touchSources = testbin.TouchSources
)

// taskProcs counts job's task processes, below under[0] when given.
func taskProcs(job string, under ...string) []int {
	u := ""
	if len(under) > 0 {
		u = under[0]
	}
	return testbin.TaskProcs(job, u)
}
