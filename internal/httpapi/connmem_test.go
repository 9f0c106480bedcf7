package httpapi

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/link"
	"github.com/drover-org/drover/internal/pki"
)

// connMemChildEnv, set, makes TestIdleTLSConnsCostLittleMemory the
// clients' side: "address,TLS directory,connections".
const connMemChildEnv = "DROVER_CONNMEM_CHILD"

// connMemServerEnv, set, makes the test the server's side.
const connMemServerEnv = "DROVER_CONNMEM_SERVER"

// TestIdleTLSConnsCostLittleMemory: what a server keeps for each idle
// agent, measured on the server's side of real mutual TLS connections
// speaking HTTP/2, the clients in a process of their own (this test run
// again) so that the process's heap and stacks are the server's. Each
// connection first makes one request and idles; then each holds one
// request the handler keeps waiting, as an agent's blocking query for its
// assignments.
func TestIdleTLSConnsCostLittleMemory(t *testing.T) {
	idle, waits := measureConnMem(t, false)
	// Measured (Go 1.26, amd64): idle, 12.1 KB of stacks (HTTP/2's loop
	// 8 KB, its frame reader 4 KB) and 24 KB of heap in use; with the
	// waiting request (its handler's goroutine 4 KB, its 4 KB response
	// buffer, the request) 16 KB and 30 KB. With the TLS handshake on
	// HTTP/2's loop goroutine it was 20 KB of stacks idle, 54 KB in all
	// with the waiting request; with header tables of 256 bytes, 48 KB
	// (TestHTTP2TablesAreSmall holds them).
	if idle.goroutines > 2.05 || waits.goroutines > 3.05 {
		t.Errorf("%.2f goroutines per idle connection, %.2f with a waiting request; want 2 and 3", idle.goroutines, waits.goroutines)
	}
	if idle.stack > 14<<10 {
		t.Errorf("%.1f KB of goroutine stacks per idle connection, want at most 14 KB", idle.stack/1024)
	}
	if all := waits.stack + waits.heap; all > 50<<10 {
		t.Errorf("%.1f KB of stacks and heap in use per connection with a waiting request, want at most 50 KB", all/1024)
	}
}

// TestIdleLinksCostLittleMemory is TestIdleTLSConnsCostLittleMemory over
// links (internal/link), as agents connect: the waiting request is parked
// (link.Park), and each connection keeps one goroutine.
func TestIdleLinksCostLittleMemory(t *testing.T) {
	idle, waits := measureConnMem(t, true)
	// Measured (Go 1.26, amd64): idle, no stack (no goroutine: the
	// poller reads a link only when it has bytes) and 13.0 KB of heap in
	// use, 10.9 KB of it live (mostly the TLS connection: its read and
	// handshake buffers, ciphers and the client's parsed certificate);
	// with the parked request 13.5 KB, 11.3 live. When each link kept a
	// goroutine reading it: 4.2 KB of stacks and 1 goroutine more per
	// link, 14.1-15.0 KB of heap in use. Before a connection kept no
	// context and no copy of its TLS state, 11.8 and 12.1 KB live.
	want := 0.05 // goroutines per link: none but the poller's
	if runtime.GOOS != "linux" {
		want = 1.05 // a goroutine per link, reading it (link.WrapConn)
	}
	if idle.goroutines > want || waits.goroutines > want {
		t.Errorf("%.2f goroutines per idle link, %.2f with a parked request; want at most %.2f", idle.goroutines, waits.goroutines, want)
	}
	bound := 16.0
	if runtime.GOOS != "linux" {
		bound = 21
	}
	if all := waits.stack + waits.heap; all > bound*1024 {
		t.Errorf("%.1f KB of stacks and heap in use per link with a parked request, want at most %.0f KB", all/1024, bound)
	}
	if waits.live > 11.75*1024 {
		t.Errorf("%.1f KB of live heap per link with a parked request, want at most 11.75 KB", waits.live/1024)
	}
}

// measureConnMem measures, per connection, what the server keeps once
// each client made one request, and once each has a request waiting:
// over HTTP/2, or over links.
func measureConnMem(t *testing.T, linked bool) (idle, waits mem) {
	if arg := os.Getenv(connMemChildEnv); arg != "" {
		connMemClients(t, arg)
		t.SkipNow()
	}
	if raceEnabled {
		t.Skip("memory bounds are for a build without -race (its shadow memory and larger stacks)")
	}
	if os.Getenv(connMemServerEnv) == "" {
		// The server's side runs in a process of its own too: memory
		// that this package's earlier tests freed would be reused, and
		// make a connection look cheaper than it is.
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), connMemServerEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("the server's process: %v\n%s", err, out)
		}
		for _, l := range strings.Split(string(out), "\n") {
			if _, rest, ok := strings.Cut(l, "connmem result: "); ok {
				if _, err := fmt.Sscanf(rest, "%g %g %g %g %g %g %g %g", &idle.stack, &idle.heap, &idle.live, &idle.goroutines, &waits.stack, &waits.heap, &waits.live, &waits.goroutines); err != nil {
					t.Fatalf("the server's process said %q: %v", l, err)
				}
				t.Logf("per idle connection: %s", idle)
				t.Logf("per connection with a waiting request: %s", waits)
				return idle, waits
			}
		}
		t.Fatalf("the server's process said no result:\n%s", out)
	}
	const conns = 300
	dir := t.TempDir()
	if _, err := pki.Init(dir, pki.InitOptions{}); err != nil {
		t.Fatal(err)
	}
	serve, err := pki.ServerConfig(pki.DirFiles(dir, pki.RoleServer))
	if err != nil {
		t.Fatal(err)
	}
	serve.ClientAuth = tls.VerifyClientCertIfGiven // as drover server serves
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var waiting atomic.Int64
	mux := http.NewServeMux()
	// Headers as the API's: an index and JSON, after a node's secret.
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Drover-Index", "123456")
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, "{}\n")
	})
	var wakes []func()
	var wakesMu sync.Mutex
	mux.HandleFunc("/wait", func(w http.ResponseWriter, r *http.Request) {
		if link.Woken(r) {
			io.WriteString(w, "ok\n")
			return
		}
		if link.Park(r, func(wake func()) func() {
			wakesMu.Lock()
			wakes = append(wakes, wake)
			wakesMu.Unlock()
			waiting.Add(1)
			return func() {}
		}) {
			return
		}
		if linked {
			t.Errorf("a request over a link was not parked")
		}
		waiting.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
		io.WriteString(w, "ok\n")
	})
	s := Serve(ln, mux, Limits{TLS: serve}, slog.New(slog.DiscardHandler))
	var releaseOnce sync.Once
	releaseAll := func() {
		close(release)
		wakesMu.Lock()
		defer wakesMu.Unlock()
		for _, wake := range wakes {
			wake()
		}
	}
	t.Cleanup(func() { releaseOnce.Do(releaseAll); s.Close() })
	base := serverMem()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%s,%d,%t", connMemChildEnv, ln.Addr(), dir, conns, linked))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close() // the clients' process ends
		if err := cmd.Wait(); err != nil && ctx.Err() == nil && !t.Failed() {
			t.Errorf("the clients' process: %v\n%s", err, stderr.String())
		}
	}()
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	said := func(want string) {
		t.Helper()
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the clients' process ended before saying %q:\n%s", want, stderr.String())
				}
				if l == want {
					return
				}
			case <-ctx.Done():
				t.Fatalf("the clients' process did not say %q in time:\n%s", want, stderr.String())
			}
		}
	}

	said("connmem: idle")
	idle = serverMem().minus(base).per(conns)
	io.WriteString(stdin, "wait\n")
	for waiting.Load() < conns {
		if ctx.Err() != nil {
			t.Fatalf("%d of %d requests waiting in time", waiting.Load(), conns)
		}
		time.Sleep(10 * time.Millisecond)
	}
	waits = serverMem().minus(base).per(conns)
	releaseOnce.Do(releaseAll)
	fmt.Printf("connmem result: %g %g %g %g %g %g %g %g\n", idle.stack, idle.heap, idle.live, idle.goroutines, waits.stack, waits.heap, waits.live, waits.goroutines)
	t.SkipNow() // the parent process judges
	return
}

// mem is a process's goroutine stacks and heap in use, after collections.
type mem struct{ stack, heap, live, goroutines float64 }

func serverMem() mem {
	// Three collections: stacks halve at most once at each, and
	// sync.Pool's idle objects go at the second.
	for range 3 {
		runtime.GC()
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return mem{stack: float64(m.StackInuse), heap: float64(m.HeapInuse), live: float64(m.HeapAlloc), goroutines: float64(runtime.NumGoroutine())}
}

func (m mem) minus(o mem) mem {
	return mem{m.stack - o.stack, m.heap - o.heap, m.live - o.live, m.goroutines - o.goroutines}
}

func (m mem) per(n int) mem {
	return mem{m.stack / float64(n), m.heap / float64(n), m.live / float64(n), m.goroutines / float64(n)}
}

func (m mem) String() string {
	return fmt.Sprintf("%.1f KB of stacks, %.1f KB of heap in use (%.1f KB live), %.2f goroutines", m.stack/1024, m.heap/1024, m.live/1024, m.goroutines)
}

// connMemClients is the clients' side: each of n clients, an agent's
// certificate and a transport of its own, makes one request over HTTP/2
// ("connmem: idle" once all have), then on "wait" one request the server
// holds; it ends when its stdin does.
func connMemClients(t *testing.T, arg string) {
	parts := strings.Split(arg, ",")
	if len(parts) != 4 {
		t.Fatalf("%s=%q: want address,TLS directory,connections,linked", connMemChildEnv, arg)
	}
	linked := parts[3] == "true"
	addr, dir := parts[0], parts[1]
	n, err := strconv.Atoi(parts[2])
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pki.ClientConfig(pki.DirFiles(dir, pki.RoleAgent), pki.ServerName)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	secret := strings.Repeat("0123456789abcdef", 4)
	clients := make([]*http.Client, n)
	for i := range clients {
		var tr http.RoundTripper = &http.Transport{TLSClientConfig: cfg.Clone(), ForceAttemptHTTP2: true}
		if linked {
			tr = &link.Transport{TLS: cfg.Clone(), Fallback: tr}
		}
		clients[i] = &http.Client{Timeout: 2 * time.Minute, Transport: tr}
		req, _ := http.NewRequest("GET", "https://"+addr+"/ok", nil)
		req.Header.Set("X-Drover-Node-Secret", secret)
		resp, err := clients[i].Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if want := map[bool]int{false: 2, true: 1}[linked]; resp.ProtoMajor != want {
			t.Fatalf("spoke %s, want HTTP/%d (HTTP/1.1 messages over a link)", resp.Proto, want)
		}
	}
	fmt.Println("connmem: idle")
	in := bufio.NewScanner(os.Stdin)
	if !in.Scan() {
		return
	}
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, "GET", "https://"+addr+"/wait", nil)
			req.Header.Set("X-Drover-Node-Secret", secret)
			if resp, err := c.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	io.Copy(io.Discard, os.Stdin) // until the test ends
	cancel()
	wg.Wait()
}
