package etcdcluster

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/drover-org/drover/internal/spec"
	"github.com/drover-org/drover/internal/testbin"
)

// guide is docs/operations.md, read as a test follows it on one machine:
// its three hosts 10.0.0.1-3 become 127.N.0.1-3 (N from the test's pid,
// so that two runs on one machine do not meet), and each host's
// /etc and /var/lib a directory of its own.
type guide struct {
	t      *testing.T
	blocks []testbin.Block
	net    string // "127.N.0."
	root   string
}

func (g *guide) block(section, prefix string) string {
	g.t.Helper()
	for _, b := range g.blocks {
		if b.Section == section && strings.HasPrefix(b.Text, prefix) {
			return b.Text
		}
	}
	g.t.Fatalf("docs/operations.md: no block starting %q under %q", prefix, section)
	return ""
}

// host is machine i's directory.
func (g *guide) host(i int) string { return filepath.Join(g.root, fmt.Sprintf("m%d", i)) }

// forHost rewrites a line of the guide for machine i: its own name and
// address (except in lists of all three: every line when all is set),
// loopback addresses, and paths below the machine's directory.
func (g *guide) forHost(i int, text string, all bool) string {
	if !all {
		text = strings.ReplaceAll(text, "10.0.0.1", fmt.Sprintf("10.0.0.%d", i))
		text = regexp.MustCompile(`\bm1\b`).ReplaceAllString(text, fmt.Sprintf("m%d", i))
	}
	text = strings.ReplaceAll(text, "10.0.0.", g.net)
	for _, dir := range []string{"/etc/drover/", "/etc/etcd/", "/var/lib/"} {
		text = strings.ReplaceAll(text, dir, g.host(i)+dir)
	}
	return text
}

// hostLines rewrites each line of a file for machine i; lines that list
// all three machines (their keys in listKeys) keep every address.
func (g *guide) hostLines(i int, text string, listKeys ...string) string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		key, _, _ := strings.Cut(line, "=")
		key = strings.TrimSpace(key)
		out = append(out, g.forHost(i, line, slices.Contains(listKeys, key)))
	}
	return strings.Join(out, "\n")
}

// configArgs turns a config file into the command's flags, for a drover
// without -config: each key is its flag, - written _.
func configArgs(t *testing.T, text string) []string {
	t.Helper()
	f, diags := hclsyntax.ParseConfig([]byte(text), "config.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	var args []string
	for name, attr := range f.Body.(*hclsyntax.Body).Attributes {
		v, diags := attr.Expr.Value(nil)
		if diags.HasErrors() {
			t.Fatal(diags.Error())
		}
		flag := "--" + strings.ReplaceAll(name, "_", "-")
		switch {
		case v.Type() == cty.String:
			args = append(args, flag, v.AsString())
		case v.Type().IsTupleType() || v.Type().IsListType():
			var vals []string
			for _, e := range v.AsValueSlice() {
				vals = append(vals, e.AsString())
			}
			args = append(args, flag, strings.Join(vals, ","))
		case v.Type() == cty.Bool:
			args = append(args, fmt.Sprintf("%s=%t", flag, v.True()))
		case v.Type() == cty.Number:
			args = append(args, flag, v.AsBigFloat().String())
		default:
			t.Fatalf("config key %s: a %s", name, v.Type().FriendlyName())
		}
	}
	return args
}

// daemonArgs are the command line of `drover CMD` with config file text
// for machine i: -config FILE when drover has it, else the file's keys as
// flags.
func (g *guide) daemonArgs(bin, cmd string, i int, text string) []string {
	g.t.Helper()
	help, _ := exec.Command(bin, cmd, "--help").CombinedOutput()
	if strings.Contains(string(help), "--config ") {
		file := filepath.Join(g.host(i), "etc", "drover", cmd+".hcl")
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			g.t.Fatal(err)
		}
		return []string{cmd, "-config", file}
	}
	return append([]string{cmd}, configArgs(g.t, text)...)
}

// TestOperationsGuideThreeHosts installs drover as docs/operations.md says,
// on three hosts that 127.N.0.1-3 stand in for: the certificate commands
// run as written, Debian's etcd with the guide's /etc/default/etcd (TLS
// and client certificates on client and peer URLs), a server and an agent
// per host with the guide's config files, the ACL bootstrap, and a job.
// Then the upgrade: each server and each agent restarted in turn, with
// the job's processes untouched; the backup command; and the restore:
// servers and etcd stopped, every member's data moved away and restored
// from the backup with the guide's commands, etcd started with the same
// settings, the servers again, and the job's processes still the same.
func TestOperationsGuideThreeHosts(t *testing.T) {
	etcdBin := etcdBinary(t)
	bin := droverBinary(t)
	md, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	g := &guide{t: t, blocks: testbin.CodeBlocks(string(md)), net: fmt.Sprintf("127.%d.0.", 100+os.Getpid()%150), root: t.TempDir()}
	pathEnv := "PATH=" + filepath.Dir(bin) + ":" + os.Getenv("PATH")

	// Certificates, on the operator's machine, as written.
	op := filepath.Join(g.root, "operator")
	os.MkdirAll(op, 0o700)
	script := g.block("Certificates for each machine", "drover tls init") + g.block("Certificates for each machine", "for i in")
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", strings.ReplaceAll(script, "10.0.0.", g.net))
	cmd.Dir, cmd.Env = op, append(cleanEnv(), pathEnv)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the certificate commands: %v\n%s", err, out)
	}
	// What the per-machine install copies (as root, to the etcd user):
	// each machine's directories into its /etc.
	for i := 1; i <= 3; i++ {
		for from, to := range map[string]string{"tls": "etc/drover/tls", "etcd-client": "etc/drover/etcd-client", "etcd-member": "etc/etcd/tls"} {
			dst := filepath.Join(g.host(i), to)
			os.MkdirAll(filepath.Dir(dst), 0o755)
			if out, err := exec.Command("cp", "-r", filepath.Join(op, fmt.Sprintf("m%d", i), from), dst).CombinedOutput(); err != nil {
				t.Fatalf("cp: %v\n%s", err, out)
			}
		}
	}

	// etcd, from /etc/default/etcd.
	settings := g.block("The etcd cluster", "# /etc/default/etcd")
	members := make([]*proc, 3)
	for i := 1; i <= 3; i++ {
		env := cleanEnv()
		for _, line := range strings.Split(g.hostLines(i, settings, "ETCD_INITIAL_CLUSTER"), "\n") {
			if strings.HasPrefix(line, "ETCD_") {
				env = append(env, line)
			}
		}
		env = append(env, "ETCD_LOG_LEVEL=warn", "ETCD_LOGGER=zap")
		c := exec.Command(etcdBin)
		c.Env = env
		members[i-1] = startCmd(t, fmt.Sprintf("etcd m%d", i), c)
	}
	etcdTLS := clientTLS(t, filepath.Join(op, "etcd-ca"))
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: etcdTLS}}
	etcdHealthy := func() {
		for i := 1; i <= 3; i++ {
			url := fmt.Sprintf("https://%s%d:2379/health", g.net, i)
			waitFor(t, 60*time.Second, "etcd m"+fmt.Sprint(i)+" healthy", func() bool {
				if err, done := members[i-1].exited(); done {
					t.Fatalf("etcd m%d exited: %v\n%s", i, err, members[i-1].out)
				}
				resp, err := hc.Get(url)
				if err != nil {
					return false
				}
				defer resp.Body.Close()
				var h struct{ Health string }
				return json.NewDecoder(resp.Body).Decode(&h) == nil && h.Health == "true"
			})
		}
	}
	etcdHealthy()

	// Servers and agents, from the config files.
	serverConf := g.block("drover servers and agents", "# /etc/drover/server.hcl")
	agentConf := g.block("drover servers and agents", "# /etc/drover/agent.hcl")
	servers, agents := make([]*proc, 3), make([]*proc, 3)
	serverArgs, agentArgs := make([][]string, 3), make([][]string, 3)
	for i := 1; i <= 3; i++ {
		serverArgs[i-1] = append(g.daemonArgs(bin, "server", i, g.hostLines(i, serverConf, "etcd_endpoints")), "--log-level", logLevel())
		servers[i-1], _ = startProc(t, fmt.Sprintf("drover server m%d", i), bin, serverArgs[i-1], apiLine)
	}
	for i := 1; i <= 3; i++ {
		agentArgs[i-1] = append(g.daemonArgs(bin, "agent", i, g.hostLines(i, agentConf, "servers")), "--log-level", logLevel())
		agents[i-1], _ = startProc(t, fmt.Sprintf("drover agent m%d", i), bin, agentArgs[i-1], nil)
	}
	job := jobName("hello")
	t.Cleanup(func() {
		for _, a := range agents {
			a.kill()
		}
		for _, pid := range testbin.TaskProcs(job, g.root) {
			syscall.Kill(-pid, syscall.SIGKILL)
		}
		for _, s := range servers {
			s.kill()
		}
		if t.Failed() {
			for _, p := range append(append(slices.Clone(servers), agents...), members...) {
				t.Logf("---- %s (tail):\n%s", p.name, tail(p.out.String(), 30))
			}
		}
	})

	// The ACL bootstrap, from the operator's machine.
	boot := g.block("Bootstrap the ACLs", "export DROVER_ADDR=")
	addr := strings.TrimPrefix(strings.Split(boot, "\n")[0], "export DROVER_ADDR=")
	env := append(cleanEnv(), "DROVER_ADDR="+strings.ReplaceAll(addr, "10.0.0.", g.net), "DROVER_TLS_DIR="+filepath.Join(op, "drover-ca"))
	cli := func(args ...string) (string, int) {
		t.Helper()
		c := exec.Command(bin, args...)
		c.Env = env
		out, errOut, err := runTimeout(c, 60*time.Second)
		if ee, ok := err.(*exec.ExitError); ok {
			return out + errOut, ee.ExitCode()
		} else if err != nil {
			t.Fatalf("drover %v: %v\n%s%s", args, err, out, errOut)
		}
		return out, 0
	}
	var tok spec.ACLToken
	waitFor(t, 30*time.Second, "drover acl bootstrap", func() bool {
		out, code := cli("acl", "bootstrap", "-o", "json")
		return code == 0 && json.Unmarshal([]byte(out), &tok) == nil && tok.SecretID != ""
	})
	env = append(env, "DROVER_TOKEN="+tok.SecretID)
	nodesReady := func() bool {
		out, code := cli("nodes", "-o", "json")
		var nodes []*spec.Node
		if code != 0 || json.Unmarshal([]byte(out), &nodes) != nil {
			return false
		}
		ready := 0
		for _, n := range nodes {
			if n.Status == spec.NodeReady {
				ready++
			}
		}
		return ready == 3
	}
	waitFor(t, 60*time.Second, "m1, m2, m3 ready", nodesReady)
	if out, code := cli("servers"); code != 0 || !strings.Contains(out, "Leader") {
		t.Fatalf("drover servers: exit %d\n%s", code, out)
	}
	hello, err := os.ReadFile("../../examples/hello.hcl")
	if err != nil {
		t.Fatal(err)
	}
	jobFile := filepath.Join(g.root, "hello.hcl")
	os.WriteFile(jobFile, []byte(strings.Replace(string(hello), `job "hello"`, fmt.Sprintf("job %q", job), 1)), 0o644)
	if out, code := cli("run", "--timeout", "90s", jobFile); code != 0 {
		t.Fatalf("drover run: exit %d\n%s", code, out)
	}
	pids := func() map[string]int {
		out, code := cli("status", job, "-o", "json")
		var st spec.JobStatus
		if code != 0 || json.Unmarshal([]byte(out), &st) != nil {
			t.Fatalf("drover status %s: exit %d\n%s", job, code, out)
		}
		m := map[string]int{}
		for _, a := range st.Allocations {
			if a.ClientStatusOr() == spec.ClientRunning && a.Status.Tasks["greeter"] != nil && a.Restarts() == 0 {
				m[a.ID] = a.Status.Tasks["greeter"].PID
			}
		}
		return m
	}
	before := pids()
	if len(before) != 3 {
		t.Fatalf("want 3 instances running, got %v", before)
	}

	// The upgrade: one machine at a time, the server then the agent.
	stop := func(p *proc) {
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-p.done:
			p.done <- err
		case <-time.After(30 * time.Second):
			t.Fatalf("%s did not stop within 30s of SIGTERM", p.name)
		}
	}
	for i := range 3 {
		stop(servers[i])
		servers[i], _ = startProc(t, servers[i].name, bin, serverArgs[i], apiLine)
		waitFor(t, 30*time.Second, "every server answers, with a leader", func() bool {
			out, code := cli("servers", "-o", "json")
			var st struct {
				Leader  string `json:"leader"`
				Servers []struct {
					Reachable bool `json:"reachable"`
				} `json:"servers"`
			}
			if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.Leader == "" {
				return false
			}
			for _, s := range st.Servers {
				if !s.Reachable {
					return false
				}
			}
			return len(st.Servers) == 3
		})
		stop(agents[i])
		agents[i], _ = startProc(t, agents[i].name, bin, agentArgs[i], nil)
		waitFor(t, 60*time.Second, "m1, m2, m3 ready after the upgrade", nodesReady)
	}
	if after := pids(); !mapsEqual(before, after) {
		t.Fatalf("instances before the upgrade %v, after %v: a task was restarted", before, after)
	}

	// The backup, as written (run on m1).
	// (Its inspect line names an example file; the save line's is today's.)
	save, _, _ := strings.Cut(g.block("Backup and restore", "drover operator snapshot save"), "\ndrover operator snapshot inspect")
	save = g.forHost(1, strings.ReplaceAll(save, "/var/backups/", g.root+"/"), true)
	c := exec.Command("bash", "-euo", "pipefail", "-c", save)
	c.Env = append(env, pathEnv)
	out, errOut, err := runTimeout(c, 2*time.Minute)
	if err != nil || !strings.Contains(out, "Saved a snapshot of etcd at https://"+g.net) {
		t.Fatalf("the backup command: %v\n%s%s", err, out, errOut)
	}
	t.Logf("backup:\n%s", out)
	snap := regexp.MustCompile(` to (\S+)\n`).FindStringSubmatch(out)
	if snap == nil {
		t.Fatalf("the backup command names no file:\n%s", out)
	}

	// The restore, as written: servers stopped, etcd stopped, each
	// member's data moved away and restored from the file.
	for _, s := range servers {
		stop(s)
	}
	for _, m := range members {
		stop(m)
	}
	restore := g.block("Backup and restore", "mv /var/lib/etcd/default")
	restore = strings.ReplaceAll(restore, "/var/backups/drover-2026-01-31-0300.snap", snap[1])
	for i := 1; i <= 3; i++ {
		var lines []string
		for _, line := range strings.Split(restore, "\n") {
			if strings.HasPrefix(line, "chown ") {
				continue // root and the etcd user: the member runs as the test's user here
			}
			lines = append(lines, g.forHost(i, line, strings.Contains(line, "--initial-cluster ")))
		}
		c := exec.Command("bash", "-euo", "pipefail", "-c", strings.Join(lines, "\n"))
		c.Env = append(env, pathEnv)
		out, errOut, err := runTimeout(c, time.Minute)
		if err != nil {
			t.Fatalf("the restore commands on m%d: %v\n%s%s", i, err, out, errOut)
		}
		t.Logf("restore on m%d: %s", i, strings.TrimSpace(out))
	}
	for i := 1; i <= 3; i++ { // the same /etc/default/etcd: "needs no change"
		c := exec.Command(etcdBin)
		c.Env = members[i-1].cmd.Env
		members[i-1] = startCmd(t, fmt.Sprintf("etcd m%d (restored)", i), c)
	}
	etcdHealthy()
	for i := 1; i <= 3; i++ {
		servers[i-1], _ = startProc(t, servers[i-1].name+" (after the restore)", bin, serverArgs[i-1], apiLine)
	}
	waitFor(t, 60*time.Second, "m1, m2, m3 ready after the restore", nodesReady)
	if after := pids(); !mapsEqual(before, after) {
		t.Fatalf("instances before the restore %v, after %v", before, after)
	}
}

// startCmd starts c with its output kept, stopped at the end of the test.
func startCmd(t *testing.T, name string, c *exec.Cmd) *proc {
	t.Helper()
	out := &syncBuffer{}
	c.Stdout, c.Stderr = out, out
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{name: name, cmd: c, out: out, done: make(chan error, 1)}
	go func() { p.done <- c.Wait() }()
	t.Cleanup(p.kill)
	return p
}

// clientTLS is a TLS client configuration from a drover tls directory's
// ca.pem, cli.pem and cli-key.pem.
func clientTLS(t *testing.T, dir string) *tls.Config {
	t.Helper()
	ca, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "cli.pem"), filepath.Join(dir, "cli-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
}

// runTimeout runs c, killing it after d, and returns its output: stdout,
// then stderr.
func runTimeout(c *exec.Cmd, d time.Duration) (string, string, error) {
	var stdout, stderr strings.Builder
	c.Stdout, c.Stderr = &stdout, &stderr
	if err := c.Start(); err != nil {
		return "", "", err
	}
	timer := time.AfterFunc(d, func() { c.Process.Kill() })
	defer timer.Stop()
	err := c.Wait()
	return stdout.String(), stderr.String(), err
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
