// Package testkit holds what the tests of several packages share: raw
// connections to an HTTP server (for the tests of its limits) and the
// runner of golden transcripts (the scheduler's and the planner's). Only
// tests import it.
package testkit

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Dial opens a TCP connection to addr, closed when the test ends.
func Dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// ClosedWithin waits for the server to close c (EOF or reset) and returns
// how long that took from start; it fails when c is still open after
// limit.
func ClosedWithin(c net.Conn, start time.Time, limit time.Duration) (time.Duration, error) {
	c.SetReadDeadline(start.Add(limit))
	_, err := io.Copy(io.Discard, c) // whatever the server answers, then its close
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return 0, fmt.Errorf("still open after %s", limit)
	}
	return time.Since(start), nil
}

// Trickle sends a request's line and headers, announcing a body of 100
// bytes, and then the body one byte a second; it returns the server's
// answer and how long it took to come.
func Trickle(t *testing.T, addr, method, path string, header http.Header, within time.Duration) (*http.Response, string, time.Duration) {
	t.Helper()
	c := Dial(t, addr)
	start := time.Now()
	var req strings.Builder
	fmt.Fprintf(&req, "%s %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n", method, path)
	header.Write(&req)
	req.WriteString("\r\n")
	io.WriteString(c, req.String())
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	go func() {
		for {
			if _, err := c.Write([]byte("{")); err != nil {
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
		}
	}()
	c.SetReadDeadline(start.Add(within))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%s %s: no answer within %s: %v", method, path, within, err)
	}
	b, _ := io.ReadAll(resp.Body)
	took := time.Since(start)
	if _, err := ClosedWithin(c, time.Now(), 2*time.Second); err != nil {
		t.Errorf("%s %s: connection after the answer: %v", method, path, err)
	}
	return resp, string(b), took
}

// Golden runs every script testdata/golden/*.txt through run and compares
// what it prints with the script's .golden file, or rewrites that file
// when update is set. pkg names the package in the hint to rewrite.
func Golden(t *testing.T, pkg string, update bool, run func(path, src string) (string, error)) {
	scripts, err := filepath.Glob(filepath.Join("testdata", "golden", "*.txt"))
	if err != nil || len(scripts) == 0 {
		t.Fatalf("no scripts in testdata/golden (%v)", err)
	}
	for _, path := range scripts {
		name := strings.TrimSuffix(filepath.Base(path), ".txt")
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			got, err := run(path, string(src))
			if err != nil {
				t.Fatal(err)
			}
			golden := strings.TrimSuffix(path, ".txt") + ".golden"
			if update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v; run go test ./%s -run TestGolden -update to write it", err, pkg)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("%s differs (-want +got):\n%s\nIf the change is intended, rewrite it with -update and review the diff.", golden, diff)
			}
		})
	}
}

// FreePort returns a loopback TCP port that nothing listens on now, for a
// test to give a task as a static port. It is taken from 10000-19999:
// below the ports the scheduler hands out (20000-32000), which a test
// cluster of another test hands out from the same first one, and below
// the kernel's ephemeral range (32768 up), where a port found free by
// listening on :0 can become the local port of any outgoing connection
// (of this test binary or of another package's) before the task binds it.
// A port is handed out once per test binary.
func FreePort(t *testing.T) int {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 1000 {
		p := 10000 + rand.IntN(10000)
		if portsGiven[p] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		l.Close()
		portsGiven[p] = true
		return p
	}
	t.Fatal("testkit: no free port in 10000-19999 after 1000 tries")
	return 0
}

var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)

// ProcessCPU is the CPU time this process has used, user and system: for
// bounds on the work a test's code does, which other tests loading the
// machine do not inflate as they do the wall clock.
func ProcessCPU(t testing.TB) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
