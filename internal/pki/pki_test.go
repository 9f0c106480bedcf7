package pki

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// allFiles are the 8 files Init makes, in the order it reports them.
func allFiles(dir string) []string {
	var files []string
	for _, name := range []string{CAFile, CAKeyFile, "server.pem", "server-key.pem", "agent.pem", "agent-key.pem", "cli.pem", "cli-key.pem"} {
		files = append(files, filepath.Join(dir, name))
	}
	return files
}

func newDir(t *testing.T, o InitOptions) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tls")
	if _, err := Init(dir, o); err != nil {
		t.Fatalf("Init: %v", err)
	}
	return dir
}

func readAll(t *testing.T, files []string) map[string][]byte {
	t.Helper()
	m := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		m[f] = b
	}
	return m
}

func certAt(t *testing.T, file string) *x509.Certificate {
	t.Helper()
	c, err := readCert(file)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestInitCreatesOnlyWhatIsMissing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	created, err := Init(dir, InitOptions{})
	if err != nil {
		t.Fatalf("Init: %v", err)
	}
	if want := allFiles(dir); !slices.Equal(created, want) {
		t.Fatalf("Init created\n%q\nwant\n%q", created, want)
	}
	st, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Mode().Perm(); got != 0o700 {
		t.Errorf("dir mode %v, want 0700", got)
	}
	for _, f := range created {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		want := os.FileMode(0o644)
		if strings.HasSuffix(f, "-key.pem") {
			want = 0o600
		}
		if got := st.Mode().Perm(); got != want {
			t.Errorf("%s mode %v, want %v", f, got, want)
		}
	}

	before := readAll(t, allFiles(dir))
	created, err = Init(dir, InitOptions{})
	if err != nil || len(created) != 0 {
		t.Fatalf("second Init = %q, %v; want nothing created", created, err)
	}
	for f, b := range readAll(t, allFiles(dir)) {
		if !bytes.Equal(b, before[f]) {
			t.Errorf("second Init changed %s", f)
		}
	}

	agent := DirFiles(dir, RoleAgent)
	oldSerial := certAt(t, agent.Cert).SerialNumber
	for _, f := range []string{agent.Cert, agent.Key} {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	created, err = Init(dir, InitOptions{})
	if err != nil {
		t.Fatalf("Init after deleting the agent pair: %v", err)
	}
	if want := []string{agent.Cert, agent.Key}; !slices.Equal(created, want) {
		t.Fatalf("Init created %q, want %q", created, want)
	}
	for f, b := range readAll(t, allFiles(dir)) {
		if f != agent.Cert && f != agent.Key && !bytes.Equal(b, before[f]) {
			t.Errorf("Init changed %s", f)
		}
	}
	if err := agent.Check(); err != nil {
		t.Errorf("new agent certificate is not signed by the kept CA: %v", err)
	}
	if certAt(t, agent.Cert).SerialNumber.Cmp(oldSerial) == 0 {
		t.Error("the agent certificate has its old serial: not made anew")
	}
}

func TestInitRefuses(t *testing.T) {
	t.Run("leaves without CA", func(t *testing.T) {
		dir := newDir(t, InitOptions{})
		os.Remove(filepath.Join(dir, CAFile))
		os.Remove(filepath.Join(dir, CAKeyFile))
		os.Remove(filepath.Join(dir, "cli.pem"))
		os.Remove(filepath.Join(dir, "cli-key.pem"))
		_, err := Init(dir, InitOptions{})
		if err == nil || !strings.Contains(err.Error(), "no CA") {
			t.Fatalf("Init = %v, want an error about the missing CA", err)
		}
		if _, err := os.Stat(filepath.Join(dir, CAFile)); err == nil {
			t.Error("Init made a CA though it refused")
		}
	})
	t.Run("lone key", func(t *testing.T) {
		dir := newDir(t, InitOptions{})
		cert := filepath.Join(dir, "server.pem")
		os.Remove(cert)
		_, err := Init(dir, InitOptions{})
		if err == nil || !strings.Contains(err.Error(), cert) {
			t.Fatalf("Init = %v, want an error naming %s", err, cert)
		}
	})
	t.Run("no CA key to sign with", func(t *testing.T) {
		dir := newDir(t, InitOptions{})
		caKey := filepath.Join(dir, CAKeyFile)
		os.Remove(caKey)
		if created, err := Init(dir, InitOptions{}); err != nil || len(created) != 0 {
			t.Fatalf("Init with everything but ca-key.pem = %q, %v; want nothing to do", created, err)
		}
		os.Remove(filepath.Join(dir, "cli.pem"))
		os.Remove(filepath.Join(dir, "cli-key.pem"))
		_, err := Init(dir, InitOptions{})
		if err == nil || !strings.Contains(err.Error(), caKey) {
			t.Fatalf("Init = %v, want an error naming %s", err, caKey)
		}
	})
	t.Run("bad host", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "tls")
		_, err := Init(dir, InitOptions{Hosts: []string{"10.0.0.1:4646"}})
		if err == nil || !strings.Contains(err.Error(), "10.0.0.1:4646") {
			t.Fatalf("Init = %v, want an error naming the bad host", err)
		}
	})
}

func TestCertificateContents(t *testing.T) {
	dir := newDir(t, InitOptions{Hosts: []string{"10.1.2.3"}})

	ca := certAt(t, filepath.Join(dir, CAFile))
	if ca.Subject.CommonName != "drover CA" || !ca.IsCA || ca.MaxPathLen != 0 || !ca.MaxPathLenZero ||
		ca.KeyUsage != x509.KeyUsageCertSign|x509.KeyUsageCRLSign {
		t.Errorf("CA: CN %q IsCA %v MaxPathLen %d/%v KeyUsage %v", ca.Subject.CommonName, ca.IsCA, ca.MaxPathLen, ca.MaxPathLenZero, ca.KeyUsage)
	}
	if d := ca.NotAfter.Sub(ca.NotBefore); d < 9*365*24*time.Hour {
		t.Errorf("CA valid for %v, want 10 years", d)
	}

	both := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	for _, tc := range []struct {
		role string
		ips  int
		eku  []x509.ExtKeyUsage
	}{
		{RoleServer, 3, both},
		{RoleAgent, 3, both},
		{RoleCLI, 0, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}},
	} {
		c := certAt(t, filepath.Join(dir, CertFile(tc.role)))
		if c.Subject.CommonName != tc.role+".drover" || !slices.Equal(c.Subject.OrganizationalUnit, []string{tc.role}) {
			t.Errorf("%s: subject %v", tc.role, c.Subject)
		}
		if len(c.IPAddresses) != tc.ips || !slices.Equal(c.ExtKeyUsage, tc.eku) || c.IsCA {
			t.Errorf("%s: IPs %v ExtKeyUsage %v IsCA %v", tc.role, c.IPAddresses, c.ExtKeyUsage, c.IsCA)
		}
		if c.SerialNumber.BitLen() > 128 || c.SerialNumber.Sign() <= 0 {
			t.Errorf("%s: serial %v is not a positive 128-bit number", tc.role, c.SerialNumber)
		}
		if pub, ok := c.PublicKey.(*ecdsa.PublicKey); !ok || pub.Curve != elliptic.P256() {
			t.Errorf("%s: public key %T, want ECDSA P-256", tc.role, c.PublicKey)
		}
		if age := time.Since(c.NotBefore); age < 50*time.Second || age > 2*time.Minute {
			t.Errorf("%s: NotBefore %v ago, want about a minute", tc.role, age)
		}
		if d := c.NotAfter.Sub(c.NotBefore); d < 4*365*24*time.Hour || d > 6*365*24*time.Hour {
			t.Errorf("%s: valid for %v, want 5 years", tc.role, d)
		}
		b, _ := os.ReadFile(filepath.Join(dir, KeyFile(tc.role)))
		if block, _ := pem.Decode(b); block == nil || block.Type != "PRIVATE KEY" {
			t.Errorf("%s: key file is not a PKCS#8 PEM", tc.role)
		}
	}
}

func TestHostsInCertificates(t *testing.T) {
	dir := newDir(t, InitOptions{Hosts: []string{"10.1.2.3", "node1.example.com", " "}, ServerAlsoAgent: true})
	for role, want := range map[string][]string{
		RoleServer: {"server.drover", "agent.drover", "localhost", "node1.example.com"},
		RoleAgent:  {"agent.drover", "localhost", "node1.example.com"},
		RoleCLI:    {"cli.drover"},
	} {
		c := certAt(t, filepath.Join(dir, CertFile(role)))
		if !slices.Equal(c.DNSNames, want) {
			t.Errorf("%s DNS names %q, want %q", role, c.DNSNames, want)
		}
		var ips []string
		for _, ip := range c.IPAddresses {
			ips = append(ips, ip.String())
		}
		wantIPs := []string{"127.0.0.1", "::1", "10.1.2.3"}
		if role == RoleCLI {
			wantIPs = nil
		}
		if !slices.Equal(ips, wantIPs) {
			t.Errorf("%s IPs %q, want %q", role, ips, wantIPs)
		}
	}
}

// side is one end of a handshake.
type side struct {
	state tls.ConnectionState
	err   error
}

// handshake connects a client with cc to a server with sc over 127.0.0.1 and
// returns what each side saw.
func handshake(t *testing.T, sc, cc *tls.Config) (server, client side) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan side, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- side{err: err}
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		tc := tls.Server(c, sc)
		err = tc.Handshake()
		if err == nil {
			_, err = tc.Write([]byte("k"))
		}
		done <- side{tc.ConnectionState(), err}
	}()

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	tc := tls.Client(c, cc)
	err = tc.Handshake()
	if err == nil {
		// In TLS 1.3 the client's handshake ends before the server has judged
		// the client's certificate: a refusal shows on the first read.
		_, err = io.ReadFull(tc, make([]byte, 1))
	}
	client = side{tc.ConnectionState(), err}
	tc.Close()
	return <-done, client
}

func serverConfig(t *testing.T, f Files) *tls.Config {
	t.Helper()
	cfg, err := ServerConfig(f)
	if err != nil {
		t.Fatalf("ServerConfig: %v", err)
	}
	return cfg
}

func clientConfig(t *testing.T, f Files, name string) *tls.Config {
	t.Helper()
	cfg, err := ClientConfig(f, name)
	if err != nil {
		t.Fatalf("ClientConfig: %v", err)
	}
	return cfg
}

func TestPeerRole(t *testing.T) {
	dir := newDir(t, InitOptions{})
	sc := serverConfig(t, DirFiles(dir, RoleServer))
	for _, role := range []string{RoleCLI, RoleAgent, RoleServer} {
		srv, cli := handshake(t, sc, clientConfig(t, DirFiles(dir, role), ServerName))
		if srv.err != nil || cli.err != nil {
			t.Fatalf("%s client: server error %v, client error %v", role, srv.err, cli.err)
		}
		if got := PeerRole(&srv.state); got != role {
			t.Errorf("server sees PeerRole %q, want %q", got, role)
		}
		if got := PeerRole(&cli.state); got != RoleServer {
			t.Errorf("%s client sees PeerRole %q, want %q", role, got, RoleServer)
		}
	}
	if got := PeerRole(nil); got != "" {
		t.Errorf("PeerRole(nil) = %q", got)
	}
	unverified := &tls.ConnectionState{PeerCertificates: []*x509.Certificate{certAt(t, filepath.Join(dir, "cli.pem"))}}
	if got := PeerRole(unverified); got != "" {
		t.Errorf("PeerRole of an unverified certificate = %q, want \"\"", got)
	}
}

func TestAgentCannotActAsServer(t *testing.T) {
	dir := newDir(t, InitOptions{})
	sc := serverConfig(t, DirFiles(dir, RoleAgent))
	cli := DirFiles(dir, RoleCLI)

	// As an agent it is fine, so the refusal below is about the name alone.
	if srv, c := handshake(t, sc, clientConfig(t, cli, AgentName)); srv.err != nil || c.err != nil {
		t.Fatalf("dialing the agent as %s: server error %v, client error %v", AgentName, srv.err, c.err)
	}
	_, c := handshake(t, sc, clientConfig(t, cli, ServerName))
	if c.err == nil || !strings.Contains(c.err.Error(), ServerName) {
		t.Fatalf("client accepted an agent certificate as a server (error %v), want an error about %s", c.err, ServerName)
	}
}

func TestClientWithoutCertificateRefused(t *testing.T) {
	dir := newDir(t, InitOptions{})
	sc := serverConfig(t, DirFiles(dir, RoleServer))
	srv, c := handshake(t, sc, clientConfig(t, Files{CA: filepath.Join(dir, CAFile)}, ServerName))
	if srv.err == nil || c.err == nil {
		t.Fatalf("server error %v, client error %v; want the server to refuse a client without a certificate", srv.err, c.err)
	}
}

func TestOtherCARefused(t *testing.T) {
	dir, other := newDir(t, InitOptions{}), newDir(t, InitOptions{})
	sc := serverConfig(t, DirFiles(dir, RoleServer))

	// A client certificate of another CA, though the client trusts the server.
	f := DirFiles(other, RoleCLI)
	f.CA = filepath.Join(dir, CAFile)
	cc, err := ClientConfig(Files{CA: f.CA}, ServerName)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(f.Cert, f.Key) // Check would refuse f
	if err != nil {
		t.Fatal(err)
	}
	cc.Certificates = []tls.Certificate{pair}
	if srv, _ := handshake(t, sc, cc); srv.err == nil {
		t.Error("server accepted a client certificate of another CA")
	}

	// A server of another CA.
	_, c := handshake(t, sc, clientConfig(t, DirFiles(other, RoleCLI), ServerName))
	if c.err == nil {
		t.Error("client accepted a server certificate of another CA")
	}
}

func TestRotationWithoutRestart(t *testing.T) {
	dir := newDir(t, InitOptions{})
	sc := serverConfig(t, DirFiles(dir, RoleServer))
	cc := clientConfig(t, DirFiles(dir, RoleCLI), ServerName)
	serials := func() (server, client string) {
		t.Helper()
		srv, c := handshake(t, sc, cc)
		if srv.err != nil || c.err != nil {
			t.Fatalf("server error %v, client error %v", srv.err, c.err)
		}
		return c.state.PeerCertificates[0].SerialNumber.String(), srv.state.PeerCertificates[0].SerialNumber.String()
	}
	onDisk := func(role string) string {
		return certAt(t, filepath.Join(dir, CertFile(role))).SerialNumber.String()
	}

	oldServer, oldClient := serials()
	if oldServer != onDisk(RoleServer) || oldClient != onDisk(RoleCLI) {
		t.Fatal("the certificates in use are not the ones on disk")
	}
	for _, role := range []string{RoleServer, RoleCLI} {
		if err := Issue(dir, role, InitOptions{}); err != nil {
			t.Fatalf("Issue %s: %v", role, err)
		}
	}
	newServer, newClient := onDisk(RoleServer), onDisk(RoleCLI)
	if newServer == oldServer || newClient == oldClient {
		t.Fatal("Issue did not replace the certificates")
	}
	time.Sleep(reloadInterval + 100*time.Millisecond)
	if s, c := serials(); s != newServer || c != newClient {
		t.Fatalf("after rotation: server presents %s, client %s; want the new %s and %s", s, c, newServer, newClient)
	}

	// A replacement that does not load keeps the current pair.
	if err := os.WriteFile(filepath.Join(dir, "server.pem"), []byte("half written"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(reloadInterval + 100*time.Millisecond)
	if s, _ := serials(); s != newServer {
		t.Fatalf("after a broken replacement the server presents %s, want the last good %s", s, newServer)
	}
}

func TestIssueErrors(t *testing.T) {
	dir := newDir(t, InitOptions{})
	if err := Issue(dir, "admin", InitOptions{}); err == nil || !strings.Contains(err.Error(), "server, agent or cli") {
		t.Errorf("Issue with an unknown role = %v, want an error listing the roles", err)
	}
	caKey := filepath.Join(dir, CAKeyFile)
	os.Remove(caKey)
	if err := Issue(dir, RoleServer, InitOptions{}); err == nil || !strings.Contains(err.Error(), caKey) {
		t.Errorf("Issue without the CA key = %v, want an error naming %s", err, caKey)
	}
}

func TestCheck(t *testing.T) {
	dir, other := newDir(t, InitOptions{}), newDir(t, InitOptions{})
	for _, role := range roles {
		if err := DirFiles(dir, role).Check(); err != nil {
			t.Errorf("%s: %v", role, err)
		}
	}

	// An expired certificate of the right CA.
	ca, err := loadCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := newLeaf(ca, RoleCLI, sans{}, InitOptions{Validity: time.Hour}, time.Now().Add(-2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	expired := Files{CA: filepath.Join(dir, CAFile), Cert: filepath.Join(t.TempDir(), "old.pem"), Key: filepath.Join(t.TempDir(), "old-key.pem")}
	os.WriteFile(expired.Cert, certPEM, 0o644)
	os.WriteFile(expired.Key, keyPEM, 0o600)

	damaged := DirFiles(t.TempDir(), RoleCLI)
	damaged.CA = filepath.Join(dir, CAFile)
	os.WriteFile(damaged.Cert, []byte("not PEM"), 0o644)
	damaged.Key = filepath.Join(dir, "cli-key.pem")

	cli := DirFiles(dir, RoleCLI)
	for _, tc := range []struct {
		name string
		f    Files
		file string // the error must name it
		says string
	}{
		{"missing CA", Files{CA: filepath.Join(dir, "nope.pem"), Cert: cli.Cert, Key: cli.Key}, filepath.Join(dir, "nope.pem"), "missing"},
		{"missing cert", Files{CA: cli.CA, Cert: filepath.Join(dir, "nope.pem"), Key: cli.Key}, filepath.Join(dir, "nope.pem"), "missing"},
		{"key of another cert", Files{CA: cli.CA, Cert: cli.Cert, Key: filepath.Join(dir, "agent-key.pem")}, filepath.Join(dir, "agent-key.pem"), "not the key"},
		{"cert of another CA", Files{CA: cli.CA, Cert: filepath.Join(other, "cli.pem"), Key: filepath.Join(other, "cli-key.pem")}, filepath.Join(other, "cli.pem"), "not signed by the CA"},
		{"expired", expired, expired.Cert, "expired"},
		{"damaged", damaged, damaged.Cert, "no PEM certificate"},
		{"cert without key", Files{CA: cli.CA, Cert: cli.Cert}, cli.Cert, "without its key"},
	} {
		err := tc.f.Check()
		if err == nil || !strings.Contains(err.Error(), tc.file) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: Check() = %v, want an error naming %s and saying %q", tc.name, err, tc.file, tc.says)
		}
	}
	if _, err := ServerConfig(Files{CA: cli.CA, Cert: cli.Cert, Key: filepath.Join(dir, "agent-key.pem")}); err == nil {
		t.Error("ServerConfig accepted a key of another certificate")
	}
}
