package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-org/drover/internal/pki"
)

// runTLS runs drover tls with args and returns what it printed.
func runTLS(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newTLSCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func TestTLSInitAndCert(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")

	out, err := runTLS(t, "init", "--dir", dir, "--host", "10.0.0.5,node1.example.com", "--host", "10.0.0.6")
	if err != nil {
		t.Fatalf("tls init: %v\n%s", err, out)
	}
	for _, name := range []string{"ca.pem", "ca-key.pem", "server.pem", "server-key.pem", "agent.pem", "agent-key.pem", "cli.pem", "cli-key.pem"} {
		if !strings.Contains(out, "Created "+filepath.Join(dir, name)+"\n") {
			t.Errorf("tls init output does not list %s:\n%s", name, out)
		}
	}
	for _, want := range []string{"drover server --tls-dir", "drover agent --tls-dir", "DROVER_TLS_DIR", "offline"} {
		if !strings.Contains(out, want) {
			t.Errorf("tls init output lacks %q:\n%s", want, out)
		}
	}
	for _, role := range []string{pki.RoleServer, pki.RoleAgent, pki.RoleCLI} {
		if err := pki.DirFiles(dir, role).Check(); err != nil {
			t.Errorf("%s: %v", role, err)
		}
	}

	out, err = runTLS(t, "init", "--dir", dir)
	if err != nil || !strings.Contains(out, "nothing to do: "+dir+" already has a CA and all certificates") {
		t.Errorf("second tls init: %v\n%s", err, out)
	}

	out, err = runTLS(t, "cert", "server", "--dir", dir, "--host", "10.0.0.7")
	if err != nil {
		t.Fatalf("tls cert server: %v\n%s", err, out)
	}
	server := pki.DirFiles(dir, pki.RoleServer)
	if !strings.Contains(out, "Wrote "+server.Cert) || !strings.Contains(out, "10.0.0.7") || strings.Contains(out, "10.0.0.5") {
		t.Errorf("tls cert server output:\n%s", out)
	}
	if err := server.Check(); err != nil {
		t.Errorf("rotated server certificate: %v", err)
	}

	_, err = runTLS(t, "cert", "admin", "--dir", dir)
	if err == nil || !strings.Contains(err.Error(), "server, agent, cli") {
		t.Errorf("tls cert admin = %v, want an error listing the roles", err)
	}
	_, err = runTLS(t, "cert", "cli", "--dir", dir, "--host", "10.0.0.7")
	if err == nil {
		t.Error("tls cert cli --host was accepted")
	}
}
