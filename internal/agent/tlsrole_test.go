package agent

import (
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/httpapi"
	"github.com/drover-org/drover/internal/pki"
)

// TestAgentEndpointsAnswerOnlyServers: under mutual TLS the agent's own
// endpoints (logs, usage) answer a server's certificate and refuse a
// CLI's or another agent's: operators read logs through a server, which
// checks their token.
func TestAgentEndpointsAnswerOnlyServers(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	if _, err := pki.Init(dir, pki.InitOptions{}); err != nil {
		t.Fatal(err)
	}
	a := newTestAgent(t, Config{})
	serve, err := pki.ServerConfig(pki.DirFiles(dir, pki.RoleAgent))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := httpapi.Serve(ln, a.Handler(), httpapi.Limits{TLS: serve}, nil)
	t.Cleanup(func() { hs.Close() })

	getPath := func(role, path string) (int, string) {
		cfg, err := pki.ClientConfig(pki.DirFiles(dir, role), pki.AgentName)
		if err != nil {
			t.Fatal(err)
		}
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 10 * time.Second}
		resp, err := hc.Get("https://" + ln.Addr().String() + path)
		if err != nil {
			t.Fatalf("as %s: %v", role, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	get := func(role string) (int, string) { return getPath(role, "/v1/client/usage") }
	if st, body := get(pki.RoleServer); st != http.StatusOK {
		t.Errorf("a server's certificate: %d %s, want 200", st, body)
	}
	for _, role := range []string{pki.RoleCLI, pki.RoleAgent} {
		if st, body := get(role); st != http.StatusForbidden {
			t.Errorf("a %s certificate: %d %s, want 403", role, st, body)
		}
	}
	// Health and metrics answer any certificate of the cluster (a
	// scraper's): this agent never registered, so it is live, not ready.
	if st, body := getPath(pki.RoleCLI, "/livez"); st != http.StatusOK {
		t.Errorf("/livez: %d %s", st, body)
	}
	if st, body := getPath(pki.RoleCLI, "/readyz"); st != http.StatusServiceUnavailable || !strings.Contains(body, "[-]registered failed") {
		t.Errorf("/readyz of an unregistered agent: %d %s", st, body)
	}
	if st, body := getPath(pki.RoleCLI, "/metrics"); st != http.StatusOK || !strings.Contains(body, "drover_agent_registered 0") || !strings.Contains(body, "go_goroutines") {
		t.Errorf("/metrics: %d %.500s", st, body)
	}
}
