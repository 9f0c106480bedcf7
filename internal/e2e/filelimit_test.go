package e2e

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

var serverLine = regexp.MustCompile(`API at https://(\S+), embedded etcd at (http://\S+)`)

// A server started with a soft open-file limit of 512 and a hard one of
// 1024 runs with 1024 and says so. Flooded with more connections than
// that, it keeps descriptors for itself rather than accepting until none
// are left: its embedded etcd (which dies when it finds none) still takes
// a new connection, and once the flood ends the API answers.
func TestServerAtItsFileLimit(t *testing.T) {
	sourcesOnce.Do(func() { touchSources("../..") })
	dir := t.TempDir()
	cmd := exec.Command("sh", "-c", `ulimit -Sn 512 && ulimit -Hn 1024 && exec "$0" "$@"`, droverBin, "server", "--name", "s1",
		"--data-dir", dir, "--http-addr", "127.0.0.1:0", "--etcd-client-addr", "127.0.0.1:0", "--etcd-peer-addr", "127.0.0.1:0")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var mu sync.Mutex
	var logged strings.Builder
	addrs := make(chan []string, 1)
	go func() {
		defer close(addrs) // it exited
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			mu.Lock()
			logged.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if m := serverLine.FindStringSubmatch(sc.Text()); m != nil {
				addrs <- m[1:]
			}
		}
	}()
	log := func() string { mu.Lock(); defer mu.Unlock(); return logged.String() }
	var api, etcd string
	select {
	case a, ok := <-addrs:
		if !ok {
			t.Fatalf("drover server exited:\n%s", log())
		}
		api, etcd = a[0], a[1]
	case <-time.After(60 * time.Second):
		t.Fatalf("drover server did not print its address within 60s:\n%s", log())
	}
	if !strings.Contains(log(), `msg="open-file limit" limit=1024`) {
		t.Fatalf("the server did not log its open-file limit as 1024 (the hard limit):\n%s", log())
	}

	// More connections than the process has descriptors, held open.
	var flood []net.Conn
	defer func() {
		for _, c := range flood {
			c.Close()
		}
	}()
	for range 1100 {
		c, err := net.DialTimeout("tcp", api, 5*time.Second)
		if err != nil {
			t.Fatalf("dial %d: %v", len(flood), err)
		}
		flood = append(flood, c)
	}
	// The flood's connections are closed after the TLS handshake's
	// deadline (10 s): look well within it.
	full := regexp.MustCompile(`HTTP connection limit reached|too many open files`)
	for deadline := time.Now().Add(5 * time.Second); !full.MatchString(log()); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the server neither took nor refused the flood within 5s:\n%s", log())
		}
	}
	hc := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Get(etcd + "/health")
	if err != nil {
		t.Fatalf("the embedded etcd did not answer a new connection while the API was flooded (out of descriptors?): %v\n%s", err, log())
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("etcd /health: %s", resp.Status)
	}

	for _, c := range flood {
		c.Close()
	}
	flood = nil
	d := &devProc{t: t, addr: "https://" + api, tlsDir: filepath.Join(dir, "tls")}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		if _, err := d.client().Leader(ctx); err == nil {
			break
		} else if ctx.Err() != nil {
			t.Fatalf("the API did not answer within 30s of the flood ending: %v\n%s", err, log())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if strings.Contains(log(), "panic") {
		t.Fatalf("the server panicked:\n%s", log())
	}
}
