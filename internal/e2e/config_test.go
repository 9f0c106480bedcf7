package e2e

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/spec"
	"github.com/drover-org/drover/internal/testbin"
)

// A server and an agent configured by files alone, as an operator runs
// them (examples/config has the full files): the agent's node carries the
// file's datacenter, class and meta; a flag on the agent's command line
// wins over its file. And drover dev takes --config as well.
func TestConfigFilesStartAServerAndAnAgent(t *testing.T) {
	dir := t.TempDir()
	srvConf := writeJob(t, dir, "server.hcl", `
name             = "s1"
data_dir         = "`+dir+`/server"
http_addr        = "127.0.0.1:0"
etcd_client_addr = "127.0.0.1:0"
etcd_peer_addr   = "127.0.0.1:0"
log_level        = "warn"
`)
	cmd := exec.Command(droverBin, "server", "--config", srvConf)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := serverAPI.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	d := &devProc{t: t, tlsDir: filepath.Join(dir, "server", "tls")}
	select {
	case d.addr = <-addr:
	case <-time.After(60 * time.Second):
		t.Fatal("drover server --config did not print its address within 60s")
	}
	tok, err := d.client().ACLBootstrap(t.Context())
	if err != nil {
		t.Fatalf("acl bootstrap: %v", err)
	}
	d.token = tok.SecretID

	confd := filepath.Join(dir, "agent.d")
	if err := os.Mkdir(confd, 0o755); err != nil {
		t.Fatal(err)
	}
	writeJob(t, confd, "10-base.hcl", `
data_dir         = "`+dir+`/agent"
servers          = ["`+d.addr+`"]
tls_dir          = "`+d.tlsDir+`"
http_addr        = "127.0.0.1:0"
min_dynamic_port = 21000
max_dynamic_port = 21999
log_level        = "warn"
datacenter       = "dc1"
name             = "from-file"
`)
	writeJob(t, confd, "20-place.hcl", `
datacenter = "dc2"
node_class = "web"
meta {
  rack = "r7"
}
`)
	agent := exec.Command(droverBin, "agent", "-config", confd, "-name", "from-flag")
	out := &syncBuffer{}
	agent.Stdout, agent.Stderr = out, out
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		agent.Process.Kill()
		agent.Wait()
		testbin.KillTasks(t, "", dir+"/agent/")
	})
	var node *spec.Node
	waitFor(t, 30*time.Second, "the agent's node registered", func() bool {
		nodes, _, err := d.client().Nodes(t.Context(), nil)
		if err != nil || len(nodes) == 0 || nodes[0].Status != spec.NodeReady {
			return false
		}
		node = nodes[0]
		return true
	})
	if node.Name != "from-flag" || node.Datacenter != "dc2" || node.NodeClass != "web" || node.Meta["rack"] != "r7" {
		t.Fatalf("node from the config files: name %q, datacenter %q, class %q, meta %v\n%s", node.Name, node.Datacenter, node.NodeClass, node.Meta, out)
	}

	// dev: its address and data directory from a file.
	devConf := writeJob(t, dir, "dev.hcl", `
data_dir         = "`+dir+`/dev"
http_addr        = "127.0.0.1:0"
dns_addr         = ""
min_dynamic_port = 21000
max_dynamic_port = 21999
`)
	dev := exec.Command(droverBin, "dev", "--config", devConf)
	devOut := &syncBuffer{}
	dev.Stdout, dev.Stderr = devOut, devOut
	if err := dev.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		dev.Process.Kill()
		dev.Wait()
		testbin.KillTasks(t, "", dir+"/dev/")
	})
	want := regexp.MustCompile(`API at https://127\.0\.0\.1:\d+, data in ` + regexp.QuoteMeta(dir+"/dev") + "\n")
	waitFor(t, 60*time.Second, "drover dev --config printed its address and data directory", func() bool {
		return want.MatchString(devOut.String())
	})
}

// The CLI against a real server, its TLS files given one by one in
// DROVER_CACERT, DROVER_CLIENT_CERT and DROVER_CLIENT_KEY (or the flags),
// and an address without a scheme, which is https; with no CA it says
// none was given.
func TestCLITLSFilesFromTheEnvironment(t *testing.T) {
	dir := t.TempDir()
	d := startServer(t, filepath.Join(dir, "server"))
	hostPort := strings.TrimPrefix(d.addr, "https://")
	home := []string{"XDG_CONFIG_HOME=" + t.TempDir(), "DROVER_TLS_DIR=", "DROVER_TOKEN=" + d.token}
	files := []string{
		"DROVER_CACERT=" + filepath.Join(d.tlsDir, "ca.pem"),
		"DROVER_CLIENT_CERT=" + filepath.Join(d.tlsDir, "cli.pem"),
		"DROVER_CLIENT_KEY=" + filepath.Join(d.tlsDir, "cli-key.pem"),
	}
	if out, errOut, code := d.cliWith(append(home, files...), "", "servers", "--address", hostPort); code != 0 || !strings.Contains(out, "Leader: s1") {
		t.Fatalf("drover servers with DROVER_CACERT, DROVER_CLIENT_CERT, DROVER_CLIENT_KEY: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code := d.cliWith(home, "", "status", "--address", hostPort, "-ca-cert", filepath.Join(d.tlsDir, "ca.pem")); code != 0 || !strings.Contains(out, "No jobs") {
		t.Fatalf("drover status -ca-cert: exit %d\n%s%s", code, out, errOut)
	}
	_, errOut, code := d.cliWith(home, "", "status", "--address", hostPort)
	if code != 1 || !strings.Contains(errOut, "no CA was given") || strings.Contains(errOut, "CA you gave") {
		t.Fatalf("drover status with no CA: exit %d\n%s", code, errOut)
	}
	_, errOut, code = d.cliWith(append(home, files...), "", "status", "--address", hostPort, "--tls-server-name", "agent.drover")
	if code != 1 || !strings.Contains(errOut, `not for "agent.drover"`) {
		t.Fatalf("drover status with the wrong server name: exit %d\n%s", code, errOut)
	}
}
