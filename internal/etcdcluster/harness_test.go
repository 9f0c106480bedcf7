package etcdcluster

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/testbin"

	"github.com/drover-org/drover/internal/spec"
)

// binDir holds the drover binary, built on first use by droverBinary.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "drover-etcdcluster-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := testbin.Run(m, dir)
	os.RemoveAll(dir)
	os.Exit(code)
}

// etcdBinary returns the etcd binary, or skips the test (fails it when
// CI=true) when there is none.
func etcdBinary(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat("/usr/bin/etcd"); err == nil {
		return "/usr/bin/etcd"
	}
	if p, err := exec.LookPath("etcd"); err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("etcd is not installed (CI=true): apt-get install -y etcd-server")
	}
	t.Skip("etcd not installed (/usr/bin/etcd or etcd in PATH); apt-get install etcd-server to run this test")
	return ""
}

var (
	buildOnce sync.Once
	buildErr  error
	builtBin  string
)

// droverBinary builds cmd/drover once and returns its path.
func droverBinary(t *testing.T) string {
	t.Helper()
	touchSources("../..")
	buildOnce.Do(func() { builtBin, buildErr = testbin.Build(binDir) })
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

// proc is a started process whose output is kept.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan error // receives Wait's result once; put back by whoever reads it
}

// startProc starts bin with args; when match is set, it waits until a line
// of the output matches and returns the first submatch.
func startProc(t *testing.T, name, bin string, args []string, match *regexp.Regexp) (*proc, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = cleanEnv()
	out := &syncBuffer{}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	p := &proc{name: name, cmd: cmd, out: out, done: make(chan error, 1)}
	found := make(chan string, 1)
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			out.Write([]byte(sc.Text() + "\n"))
			if match != nil {
				if m := match.FindStringSubmatch(sc.Text()); m != nil {
					select {
					case found <- m[1]:
					default:
					}
				}
			}
		}
		io.Copy(io.Discard, pr)
	}()
	go func() {
		err := cmd.Wait()
		<-scanned
		p.done <- err
	}()
	if match == nil {
		return p, ""
	}
	select {
	case s := <-found:
		return p, s
	case err := <-p.done:
		p.done <- err
		t.Fatalf("%s exited early: %v\n%s", name, err, out)
	case <-time.After(60 * time.Second):
		p.kill()
		t.Fatalf("%s did not print %q within 60s\n%s", name, match, out)
	}
	return nil, ""
}

// cleanEnv is the environment without ETCD_* (etcd reads its flags from
// those) and DROVER_*.
func cleanEnv() []string {
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "ETCD") && !strings.HasPrefix(e, "DROVER_") {
			env = append(env, e)
		}
	}
	return env
}

// kill SIGKILLs the process and waits for it.
func (p *proc) kill() {
	if p.cmd.Process == nil {
		return
	}
	p.cmd.Process.Kill()
	select {
	case err := <-p.done:
		p.done <- err
	case <-time.After(10 * time.Second):
	}
}

// exited reports whether the process has ended.
func (p *proc) exited() (error, bool) {
	select {
	case err := <-p.done:
		p.done <- err
		return err, true
	default:
		return nil, false
	}
}

// freePorts returns n distinct free ports on 127.0.0.1, holding them all
// open at once so that none is handed out twice.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// ---- etcd ----

// etcdMember is one running etcd process.
type etcdMember struct {
	*proc
	name      string
	clientURL string
	peerURL   string
	dataDir   string
}

// args are the member's flags for its name, data directory, URLs and
// logging; the initial cluster's and TLS's are the caller's.
func (m *etcdMember) args() []string {
	return []string{
		"--name", m.name,
		"--data-dir", m.dataDir,
		"--listen-client-urls", m.clientURL, "--advertise-client-urls", m.clientURL,
		"--listen-peer-urls", m.peerURL, "--initial-advertise-peer-urls", m.peerURL,
		"--logger", "zap", "--log-level", "warn",
	}
}

// etcdCluster is a running three-member etcd cluster.
type etcdCluster struct {
	t       *testing.T
	members []*etcdMember
	http    *http.Client // for /health and the JSON gateway
}

// certFiles are the PEM files for an etcd cluster with TLS on its client
// URLs and client-certificate authentication.
type certFiles struct {
	CA                    string
	ServerCert, ServerKey string // the members' (also usable as a client cert)
	ClientCert, ClientKey string // drover's
	clientTLS             *tls.Config
}

var clusterSeq atomic.Int64

// startEtcd starts an n-member cluster on 127.0.0.1 and waits until every
// member reports healthy. With certs, client URLs are https and require a
// client certificate signed by certs.CA.
func startEtcd(t *testing.T, n int, certs *certFiles) *etcdCluster {
	t.Helper()
	return startEtcdAttempt(t, n, certs, 1)
}

func startEtcdAttempt(t *testing.T, n int, certs *certFiles, attempt int) *etcdCluster {
	t.Helper()
	etcd := etcdBinary(t)
	ports := freePorts(t, 2*n)
	scheme := "http"
	hc := &http.Client{Timeout: 2 * time.Second}
	if certs != nil {
		scheme = "https"
		hc.Transport = &http.Transport{TLSClientConfig: certs.clientTLS}
	}
	ec := &etcdCluster{t: t, http: hc}
	var initial []string
	for i := range n {
		m := &etcdMember{
			name:      fmt.Sprintf("m%d", i+1),
			clientURL: fmt.Sprintf("%s://127.0.0.1:%d", scheme, ports[2*i]),
			peerURL:   fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1]),
		}
		ec.members = append(ec.members, m)
		initial = append(initial, m.name+"="+m.peerURL)
	}
	token := fmt.Sprintf("drover-test-%d-%d-%d", os.Getpid(), clusterSeq.Add(1), time.Now().UnixNano())
	dir := t.TempDir()
	for _, m := range ec.members {
		m.dataDir = filepath.Join(dir, m.name)
		args := append(m.args(), "--initial-cluster", strings.Join(initial, ","),
			"--initial-cluster-state", "new",
			"--initial-cluster-token", token)
		if certs != nil {
			args = append(args, "--cert-file", certs.ServerCert, "--key-file", certs.ServerKey,
				"--trusted-ca-file", certs.CA, "--client-cert-auth")
		}
		m.proc, _ = startProc(t, "etcd "+m.name, etcd, args, nil)
	}
	t.Cleanup(func() {
		for _, m := range ec.members {
			m.kill()
		}
		if t.Failed() {
			for _, m := range ec.members {
				t.Logf("---- etcd %s output (tail):\n%s", m.name, tail(m.out.String(), 30))
			}
		}
	})
	start := time.Now()
	for _, m := range ec.members {
		waitFor(t, 30*time.Second, "etcd "+m.name+" healthy", func() bool {
			if err, done := m.exited(); done {
				if strings.Contains(m.out.String(), "address already in use") && attempt < 3 {
					return true // handled below
				}
				t.Fatalf("etcd %s exited: %v\n%s", m.name, err, m.out)
			}
			return ec.healthy(m)
		})
		if _, done := m.exited(); done {
			// Another process took a port between freePorts and etcd's
			// bind: start over on new ports.
			t.Logf("etcd %s: a port was taken by another process; starting the cluster again", m.name)
			for _, m := range ec.members {
				m.kill()
			}
			return startEtcdAttempt(t, n, certs, attempt+1)
		}
	}
	t.Logf("etcd: %d members healthy in %s (%s)", n, time.Since(start).Round(time.Millisecond), strings.Join(ec.endpoints(), ","))
	return ec
}

func (ec *etcdCluster) endpoints() []string {
	var eps []string
	for _, m := range ec.members {
		eps = append(eps, m.clientURL)
	}
	return eps
}

// healthy asks the member's /health; true means it has a leader and serves.
func (ec *etcdCluster) healthy(m *etcdMember) bool {
	resp, err := ec.http.Get(m.clientURL + "/health")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var h struct {
		Health string `json:"health"`
	}
	return json.NewDecoder(resp.Body).Decode(&h) == nil && h.Health == "true"
}

// status asks the member's JSON gateway for its id and its raft leader's.
func (ec *etcdCluster) status(m *etcdMember) (id, leader string, err error) {
	resp, err := ec.http.Post(m.clientURL+"/v3/maintenance/status", "application/json", strings.NewReader("{}"))
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", "", fmt.Errorf("%s: %s", resp.Status, body)
	}
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber() // uint64 ids: the gateway sends strings, but never lose digits
	var st struct {
		Header struct {
			MemberID any `json:"member_id"`
		} `json:"header"`
		Leader any `json:"leader"`
	}
	if err := d.Decode(&st); err != nil {
		return "", "", fmt.Errorf("decode %s: %w", body, err)
	}
	id, leader = fmt.Sprint(st.Header.MemberID), fmt.Sprint(st.Leader)
	if id == "" || id == "<nil>" || leader == "" || leader == "<nil>" || leader == "0" {
		return "", "", fmt.Errorf("no member or leader id in %s", body)
	}
	return id, leader, nil
}

// pick returns the member to kill: etcd's raft leader, or a follower.
func (ec *etcdCluster) pick(leader bool) *etcdMember {
	ec.t.Helper()
	for attempt := 0; attempt < 50; attempt++ {
		ids := map[*etcdMember]string{}
		var lead string
		ok := true
		for _, m := range ec.members {
			id, l, err := ec.status(m)
			if err != nil {
				ec.t.Logf("status of etcd %s: %v", m.name, err)
				ok = false
				break
			}
			if lead != "" && l != lead {
				ok = false // an election in progress
				break
			}
			ids[m], lead = id, l
		}
		if ok {
			for _, m := range ec.members {
				if (ids[m] == lead) == leader {
					return m
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	ec.t.Fatal("could not tell etcd's leader from POST /v3/maintenance/status")
	return nil
}

// ---- drover ----

var apiLine = regexp.MustCompile(`API at (https://\S+),`)

// droverCluster is two servers and three agents on an etcd cluster.
type droverCluster struct {
	t       *testing.T
	bin     string
	servers []*proc
	addrs   []string // the servers' API URLs
	tlsDir  string   // drover's own CA and certificates (not etcd's), made by s1
	token   string   // the management token's secret, for the CLI
	agents  []*proc
	mu      sync.Mutex
	jobs    []string // whose task processes the cleanup kills
}

// startDrover starts nServers `drover server --etcd-endpoints` and nAgents
// `drover agent --servers <all>`, and waits until every agent's node is
// ready. extra is added to every server's flags (TLS options).
func startDrover(t *testing.T, endpoints []string, nServers, nAgents int, extra ...string) *droverCluster {
	t.Helper()
	dir := t.TempDir()
	dc := &droverCluster{t: t, bin: droverBinary(t), tlsDir: filepath.Join(dir, "tls")}
	t.Cleanup(dc.cleanup)
	for i := range nServers {
		name := fmt.Sprintf("s%d", i+1)
		args := append([]string{"server", "--etcd-endpoints", strings.Join(endpoints, ","),
			"--http-addr", "127.0.0.1:0", "--name", name, "--log-level", logLevel(), "--tls-dir", dc.tlsDir}, extra...)
		p, addr := startProc(t, "drover server "+name, dc.bin, args, apiLine)
		dc.servers = append(dc.servers, p)
		dc.addrs = append(dc.addrs, addr)
	}
	var tok spec.ACLToken
	if err := dc.cliJSON(&tok, "acl", "bootstrap"); err != nil {
		t.Fatal(err)
	}
	dc.token = tok.SecretID
	for i := range nAgents {
		name := fmt.Sprintf("a%d", i+1)
		// Each agent's list starts at a different server.
		servers := append(append([]string(nil), dc.addrs[i%nServers:]...), dc.addrs[:i%nServers]...)
		args := []string{"agent", "--servers", strings.Join(servers, ","), "--data-dir", filepath.Join(dir, name),
			"--http-addr", "127.0.0.1:0", "--name", name, "--log-level", logLevel(), "--tls-dir", dc.tlsDir}
		p, _ := startProc(t, "drover agent "+name, dc.bin, args, nil)
		dc.agents = append(dc.agents, p)
	}
	waitFor(t, 30*time.Second, fmt.Sprintf("%d nodes ready", nAgents), func() bool {
		var nodes []*spec.Node
		if dc.cliJSON(&nodes, "nodes") != nil {
			return false
		}
		ready := 0
		for _, n := range nodes {
			if n.Status == spec.NodeReady {
				ready++
			}
		}
		return ready == nAgents
	})
	return dc
}

// logLevel is the servers' and agents' --log-level: $DROVER_TEST_LOG_LEVEL,
// default warn.
func logLevel() string {
	if l := os.Getenv("DROVER_TEST_LOG_LEVEL"); l != "" {
		return l
	}
	return "warn"
}

// cleanup kills the agents, then their task processes, then the servers.
func (dc *droverCluster) cleanup() {
	if dc.t.Failed() {
		dc.mu.Lock()
		jobs := append([]string(nil), dc.jobs...)
		dc.mu.Unlock()
		for _, j := range jobs {
			out, errOut, _ := dc.cli(10*time.Second, "status", j)
			dc.t.Logf("---- drover status %s:\n%s%s", j, out, errOut)
		}
	}
	for _, a := range dc.agents {
		a.kill()
	}
	dc.mu.Lock()
	for _, j := range dc.jobs {
		for _, pid := range taskProcs(j) {
			syscall.Kill(-pid, syscall.SIGKILL)
		}
	}
	dc.mu.Unlock()
	for _, s := range dc.servers {
		s.kill()
	}
	if dc.t.Failed() {
		for _, p := range append(append([]*proc(nil), dc.servers...), dc.agents...) {
			dc.t.Logf("---- %s output (tail):\n%s", p.name, tail(p.out.String(), 60))
		}
	}
}

// cli runs a drover CLI command against the servers (DROVER_ADDR lists
// them all; DROVER_TLS_DIR and DROVER_TOKEN are the cluster's) and returns
// its stdout, stderr and exit code.
func (dc *droverCluster) cli(timeout time.Duration, args ...string) (string, string, int) {
	dc.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, dc.bin, args...)
	cmd.Env = append(cleanEnv(), "DROVER_ADDR="+strings.Join(dc.addrs, ","),
		"DROVER_TLS_DIR="+dc.tlsDir, "DROVER_TOKEN="+dc.token)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		return stdout.String(), stderr.String() + fmt.Sprintf("\n(killed after %s)", timeout), -1
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return stdout.String(), stderr.String(), ee.ExitCode()
	} else if err != nil {
		dc.t.Fatalf("drover %v: %v", args, err)
	}
	return stdout.String(), stderr.String(), 0
}

// cliJSON runs a read command with -o json and decodes its output into v.
func (dc *droverCluster) cliJSON(v any, args ...string) error {
	dc.t.Helper()
	out, errOut, code := dc.cli(30*time.Second, append(args, "-o", "json")...)
	if code != 0 {
		return fmt.Errorf("drover %s: exit %d: %s", strings.Join(args, " "), code, errOut)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		return fmt.Errorf("drover %s -o json: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// jobStatus reads a job's status through the CLI, failing the test on error.
func (dc *droverCluster) jobStatus(name string) *spec.JobStatus {
	dc.t.Helper()
	var st spec.JobStatus
	if err := dc.cliJSON(&st, "status", name); err != nil {
		dc.t.Fatal(err)
	}
	return &st
}

// run submits a job file with `drover run` and requires exit 0 (every
// instance running).
func (dc *droverCluster) run(name, text string) {
	dc.t.Helper()
	dc.track(name)
	file := filepath.Join(dc.t.TempDir(), name+".hcl")
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		dc.t.Fatal(err)
	}
	start := time.Now()
	out, errOut, code := dc.cli(2*time.Minute, "run", "--timeout", "90s", "--min-healthy-time", "2s", file)
	if code != 0 {
		dc.t.Fatalf("drover run %s: exit %d after %s\n%s%s", name, code, time.Since(start).Round(time.Millisecond), out, errOut)
	}
	dc.t.Logf("drover run %s: all running after %s", name, time.Since(start).Round(time.Millisecond))
}

// jobName makes base unique to this test process: task processes are
// found by their job's name machine-wide, and another `go test` may be
// running the same tests beside this one.
func jobName(base string) string {
	return fmt.Sprintf("%s-%d", base, os.Getpid())
}

// track adds a job whose task processes the cleanup kills.
func (dc *droverCluster) track(job string) {
	dc.mu.Lock()
	dc.jobs = append(dc.jobs, job)
	dc.mu.Unlock()
}

// serviceJob is a service job of count sleeping instances.
func serviceJob(name string, count int) string {
	return fmt.Sprintf(`
job %q {
  group "g" {
    count = %d
    restart {
      attempts = 3
      interval = "1m"
      delay    = "200ms"
      mode     = "fail"
    }
    task "t" {
      driver = "exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "exec sleep 1000"]
      }
      resources {
        cpu    = 10
        memory = 8
      }
      kill_timeout = "1s"
    }
  }
}
`, name, count)
}

// ---- processes ----

// ---- small helpers ----

// Shared with the other end-to-end packages (internal/testbin).
type syncBuffer = testbin.SyncBuffer

var (
	waitFor      = testbin.WaitFor
	zombie       = testbin.Zombie
	touchSources = testbin.TouchSources
	tail         = testbin.Tail
)

func taskProcs(job string) []int { return testbin.TaskProcs(job, "") }
