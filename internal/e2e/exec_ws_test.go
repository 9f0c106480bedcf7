package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/drover-org/drover/internal/execstream"
	"github.com/drover-org/drover/internal/spec"
)

// TestExecWebSocket opens the web UI's exec WebSocket on a real drover dev
// as the page does (the session cookie from dev's login link, the UI's
// Origin) and runs a shell in a running task through the server and the
// agent: a resize reaches the command's terminal, typed input runs, a file
// it writes is on disk in the task's directory, and the exit code comes
// back, followed by a close; a command whose socket drops is ended.
func TestExecWebSocket(t *testing.T) {
	d := startDev(t, t.TempDir(), "../../examples/hello.hcl")
	alloc := runningAlloc(t, d, "hello", "greeter")

	// The session cookie, as the page gets it from dev's link.
	pool := x509.NewCertPool()
	ca, err := os.ReadFile(filepath.Join(d.dataDir, "tls", "ca.pem"))
	if err != nil || !pool.AppendCertsFromPEM(ca) {
		t.Fatalf("dev's CA: %v", err)
	}
	tlsCfg := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg}, Timeout: 10 * time.Second}
	link := devLoginLink(t, d)
	code := link[strings.Index(link, "#login=")+len("#login="):]
	req, _ := http.NewRequest("POST", d.addr+"/v1/ui/session", strings.NewReader(`{"code":"`+code+`"}`))
	req.Header.Set("Origin", d.addr)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var cookie string
	for _, c := range resp.Cookies() {
		if c.Name == "drover_session" {
			cookie = c.Name + "=" + c.Value
		}
	}
	if cookie == "" {
		t.Fatalf("login: %d, no session cookie", resp.StatusCode)
	}

	q := url.Values{"task": {"greeter"}, "tty": {"1"}, "cmd": {"/bin/sh"}}
	u := "wss" + strings.TrimPrefix(d.addr, "https") + "/v1/allocations/" + alloc.ID + "/exec?" + q.Encode()
	dialer := websocket.Dialer{TLSClientConfig: tlsCfg, HandshakeTimeout: 10 * time.Second}
	hdr := http.Header{"Cookie": {cookie}, "Origin": {d.addr}}
	if _, resp, err := dialer.Dial(u, http.Header{"Cookie": {cookie}, "Origin": {"https://evil.example"}}); err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("a WebSocket from another origin: %v %v; want a 403", err, resp)
	}
	ws, _, err := dialer.Dial(u, hdr)
	if err != nil {
		t.Fatalf("open the exec WebSocket: %v", err)
	}
	defer ws.Close()
	send := func(typ byte, p []byte) {
		t.Helper()
		if err := ws.WriteMessage(websocket.BinaryMessage, append([]byte{typ}, p...)); err != nil {
			t.Fatal(err)
		}
	}
	size := make([]byte, 4)
	binary.BigEndian.PutUint16(size[:2], 97)
	binary.BigEndian.PutUint16(size[2:], 31)
	send(execstream.Resize, size)
	send(execstream.Stdin, []byte("stty size; echo hi-from-ws > \"$NOMAD_TASK_DIR/from-ws\"; exit 3\n"))

	var out strings.Builder
	exit := -1
	ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	for exit < 0 {
		typ, msg, err := ws.ReadMessage()
		if err != nil {
			t.Fatalf("reading the exec WebSocket before an exit code: %v; output so far:\n%s", err, out.String())
		}
		if typ != websocket.BinaryMessage || len(msg) == 0 {
			t.Fatalf("a message of type %d, %d bytes; want binary frames", typ, len(msg))
		}
		switch msg[0] {
		case execstream.Stdout, execstream.Stderr:
			out.Write(msg[1:])
		case execstream.Exit:
			if exit, err = execstream.ParseExit(msg[1:]); err != nil {
				t.Fatal(err)
			}
		case execstream.Error:
			t.Fatalf("exec error: %s", msg[1:])
		}
	}
	if exit != 3 {
		t.Errorf("exit code %d, want 3", exit)
	}
	if !strings.Contains(out.String(), "31 97") {
		t.Errorf("stty size printed %q; want the resize's 31 rows, 97 columns", out.String())
	}
	// After the exit code, the server closes the socket.
	if _, _, err := ws.ReadMessage(); !websocket.IsCloseError(err, websocket.CloseNormalClosure) {
		t.Errorf("after the exit code: %v; want a normal close", err)
	}
	// The file is on disk, in the instance's task directory.
	if got := readTaskFile(t, d, alloc.ID, "from-ws"); got != "hi-from-ws\n" {
		t.Errorf("the file the command wrote holds %q; want hi-from-ws", got)
	}

	// The browser's side ending ends the command: a sleep runs until its
	// socket drops (no close message, as when a tab is closed).
	secs := strconv.Itoa(100000 + os.Getpid())
	u = "wss" + strings.TrimPrefix(d.addr, "https") + "/v1/allocations/" + alloc.ID + "/exec?" + url.Values{"task": {"greeter"}, "cmd": {"/bin/sleep", secs}}.Encode()
	ws2, _, err := dialer.Dial(u, hdr)
	if err != nil {
		t.Fatalf("open a second exec WebSocket: %v", err)
	}
	eventually(t, "the exec'd sleep running", func() (bool, string) {
		n := len(procsWithArgs("/bin/sleep", secs))
		return n == 1, fmt.Sprintf("%d processes /bin/sleep %s", n, secs)
	})
	ws2.NetConn().Close()
	eventually(t, "the exec'd sleep ended after its socket dropped", func() (bool, string) {
		n := len(procsWithArgs("/bin/sleep", secs))
		return n == 0, fmt.Sprintf("%d processes /bin/sleep %s", n, secs)
	})
}

// procsWithArgs lists the PIDs in /proc whose command line is args.
func procsWithArgs(args ...string) []string {
	want := strings.Join(args, "\x00") + "\x00"
	var pids []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && string(b) == want {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

// runningAlloc waits (30 s) for an instance of job whose task runs, with
// a PID, and returns it.
func runningAlloc(t *testing.T, d *devProc, job, task string) *spec.Alloc {
	t.Helper()
	var alloc *spec.Alloc
	eventually(t, job+"'s instances running", func() (bool, string) {
		for _, a := range d.jobStatus(job).Allocations {
			if a.Status == nil {
				continue
			}
			if ts := a.Status.Tasks[task]; a.ClientStatusOr() == spec.ClientRunning && ts != nil && ts.PID > 0 {
				alloc = a
				return true, ""
			}
		}
		return false, "none running"
	})
	return alloc
}

// readTaskFile reads the one file named name that a task of alloc wrote
// under dev's data directory (its task directories are there).
func readTaskFile(t *testing.T, d *devProc, alloc, name string) string {
	t.Helper()
	found := findTaskFiles(d, alloc, name)
	if len(found) != 1 {
		t.Fatalf("files named %s under dev's data dir for alloc %s: %v; want one", name, alloc, found)
	}
	b, err := os.ReadFile(found[0])
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// findTaskFiles lists the files named name under dev's data directory in
// alloc's directories.
func findTaskFiles(d *devProc, alloc, name string) []string {
	var found []string
	filepath.WalkDir(d.dataDir, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.Name() == name && strings.Contains(p, alloc) {
			found = append(found, p)
		}
		return nil
	})
	return found
}
