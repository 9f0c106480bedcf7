package client

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-org/drover/internal/pki"
)

// noEnv clears what Resolve reads, and points the dev note's directory at
// an empty one, so that the machine's own settings do not leak in.
func noEnv(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	for _, e := range []string{EnvAddr, EnvTLSDir, EnvCACert, EnvClientCert, EnvClientKey, EnvTLSServerName, EnvToken} {
		t.Setenv(e, "")
	}
}

// tlsServer serves the leader endpoint with mutual TLS from a cluster CA
// made in dir (pki.Init), as a drover server does, and says which role's
// certificate the last request presented.
func tlsServer(t *testing.T, dir string) (*httptest.Server, *string) {
	t.Helper()
	if _, err := pki.Init(dir, pki.InitOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg, err := pki.ServerConfig(pki.DirFiles(dir, pki.RoleServer))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ClientAuth = tls.VerifyClientCertIfGiven // as servers serve operators
	var role string
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		role = pki.PeerRole(r.TLS)
		w.Write([]byte(`{"leader":"s1"}`))
	}))
	s.TLS = cfg
	s.StartTLS()
	t.Cleanup(s.Close)
	return s, &role
}

// The CLI's TLS files come one by one from DROVER_CACERT,
// DROVER_CLIENT_CERT and DROVER_CLIENT_KEY; an address without a scheme
// is https; and each failure says what was and was not given.
func TestTLSFromTheEnvironment(t *testing.T) {
	noEnv(t)
	dir := t.TempDir()
	s, role := tlsServer(t, dir)
	hostPort := strings.TrimPrefix(s.URL, "https://")
	leader := func(c Config) (string, error) {
		t.Helper()
		cl, err := c.Resolve().Client()
		if err != nil {
			return "", err
		}
		return cl.Leader(t.Context())
	}

	t.Setenv(EnvCACert, filepath.Join(dir, "ca.pem"))
	t.Setenv(EnvClientCert, filepath.Join(dir, "cli.pem"))
	t.Setenv(EnvClientKey, filepath.Join(dir, "cli-key.pem"))
	if got, err := leader(Config{Addresses: []string{hostPort}}); err != nil || got != "s1" || *role != pki.RoleCLI {
		t.Fatalf("with DROVER_CACERT, DROVER_CLIENT_CERT, DROVER_CLIENT_KEY: leader %q, role %q, %v", got, *role, err)
	}
	// The CA alone: no client certificate is presented (a token judges).
	t.Setenv(EnvClientCert, "")
	t.Setenv(EnvClientKey, "")
	if got, err := leader(Config{Addresses: []string{hostPort}}); err != nil || got != "s1" || *role != "" {
		t.Fatalf("with DROVER_CACERT alone: leader %q, role %q, %v", got, *role, err)
	}
	// A wrong server name is named, with the variable that sets it.
	t.Setenv(EnvTLSServerName, "other.example")
	if _, err := leader(Config{Addresses: []string{hostPort}}); err == nil || !strings.Contains(err.Error(), `is not for "other.example"`) || !strings.Contains(err.Error(), EnvTLSServerName) {
		t.Fatalf("wrong DROVER_TLS_SERVER_NAME: %v", err)
	}
	t.Setenv(EnvTLSServerName, "")
	// Another cluster's CA: named, by its file.
	other := t.TempDir()
	if _, err := pki.Init(other, pki.InitOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvCACert, filepath.Join(other, "ca.pem"))
	if _, err := leader(Config{Addresses: []string{hostPort}}); err == nil || !strings.Contains(err.Error(), "is not signed by the CA in "+filepath.Join(other, "ca.pem")) {
		t.Fatalf("another cluster's CA: %v", err)
	}
	// No CA at all: said so, not blamed on a CA nobody gave.
	t.Setenv(EnvCACert, "")
	_, err := leader(Config{Addresses: []string{hostPort}})
	if err == nil || !strings.Contains(err.Error(), "no CA was given") || strings.Contains(err.Error(), "CA you gave") || !strings.Contains(err.Error(), EnvCACert) {
		t.Fatalf("no CA: %v", err)
	}
	// A client certificate without a CA is refused before any request.
	t.Setenv(EnvClientCert, filepath.Join(dir, "cli.pem"))
	t.Setenv(EnvClientKey, filepath.Join(dir, "cli-key.pem"))
	if _, err := leader(Config{Addresses: []string{hostPort}}); err == nil || !strings.Contains(err.Error(), "needs the CA") {
		t.Fatalf("client certificate without a CA: %v", err)
	}
	// A missing file is named, with where it came from.
	t.Setenv(EnvCACert, filepath.Join(dir, "missing.pem"))
	if _, err := leader(Config{Addresses: []string{hostPort}}); err == nil || !strings.Contains(err.Error(), "missing.pem is missing") {
		t.Fatalf("missing CA file: %v", err)
	}
}

// With no address the CLI goes where a server listens by default, over
// https, with the certificates a drover dev there left a note of.
func TestDefaultAddressIsHTTPSWithTheDevsCA(t *testing.T) {
	noEnv(t)
	c, err := Config{}.Resolve().Client()
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Address(); got != "https://"+DefaultAddress {
		t.Errorf("default address %q, want https://%s", got, DefaultAddress)
	}
	for in, want := range map[string]string{"10.0.0.1:4646": "https://10.0.0.1:4646", "http://10.0.0.1:4646": "http://10.0.0.1:4646"} {
		c, err := Config{Addresses: []string{in}}.Client()
		if err != nil || c.Address() != want {
			t.Errorf("%s: %q %v, want %s", in, c.Address(), err, want)
		}
	}
	dir := t.TempDir()
	if _, err := pki.Init(dir, pki.InitOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := WriteLocal(Local{Address: "https://" + DefaultAddress, TLSDir: dir}); err != nil {
		t.Fatal(err)
	}
	cfg := Config{}.Resolve()
	if cfg.TLSDir != dir {
		t.Fatalf("the dev's note was not read: TLSDir %q", cfg.TLSDir)
	}
	// A CA named explicitly wins over the note: the two are not mixed.
	t.Setenv(EnvCACert, "/elsewhere/ca.pem")
	if cfg := (Config{}).Resolve(); cfg.TLSDir != "" || cfg.CACert != "/elsewhere/ca.pem" {
		t.Fatalf("DROVER_CACERT and a dev note: %+v", cfg)
	}
}
