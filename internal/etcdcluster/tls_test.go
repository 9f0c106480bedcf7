package etcdcluster

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TLS to an existing etcd: members serve https on their client URLs and
// require a client certificate signed by the cluster's CA. drover server
// with --etcd-ca/--etcd-cert/--etcd-key schedules and runs work; without a
// client certificate, with one from another CA, or without the CA (the
// system's roots), it exits with an error that says what TLS refused.
func TestEtcdTLS(t *testing.T) {
	t.Parallel()
	etcdBinary(t)
	dir := t.TempDir()
	certs := makeCerts(t, dir)
	ec := startEtcd(t, 3, certs)
	eps := strings.Join(ec.endpoints(), ",")

	// The right CA and client certificate: a cluster that works.
	dc := startDrover(t, ec.endpoints(), 1, 1,
		"--etcd-ca", certs.CA, "--etcd-cert", certs.ClientCert, "--etcd-key", certs.ClientKey)
	job := jobName("tls")
	dc.run(job, serviceJob(job, 2))
	if n := len(taskProcs(job)); n != 2 {
		t.Fatalf("want 2 task processes, found %d", n)
	}

	// A client certificate from another CA.
	other := makeCerts(t, filepath.Join(dir, "other"))

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no client certificate", []string{"--etcd-ca", certs.CA}, "remote error: tls:"},
		{"certificate from another CA", []string{"--etcd-ca", certs.CA, "--etcd-cert", other.ClientCert, "--etcd-key", other.ClientKey}, "remote error: tls:"},
		{"no TLS options", nil, "certificate signed by unknown authority"},
		{"CA file missing", []string{"--etcd-ca", filepath.Join(dir, "nope.pem"), "--etcd-cert", certs.ClientCert, "--etcd-key", certs.ClientKey}, filepath.Join(dir, "nope.pem")},
		{"key without certificate", []string{"--etcd-ca", certs.CA, "--etcd-key", certs.ClientKey}, "--etcd-cert"},
		{"TLS options with http://", []string{"--etcd-ca", certs.CA, "--etcd-endpoints-override", "http://127.0.0.1:1"}, "https://"},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			t.Parallel()
			endpoints := eps
			var args []string
			for i := 0; i < len(tc.args); i++ {
				if tc.args[i] == "--etcd-endpoints-override" {
					endpoints = tc.args[i+1]
					i++
					continue
				}
				args = append(args, tc.args[i])
			}
			args = append([]string{"server", "--etcd-endpoints", endpoints, "--http-addr", "127.0.0.1:0", "--name", "bad",
				"--tls-dir", dc.tlsDir}, args...) // drover's own API TLS is fine: only etcd's is wrong
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			start := time.Now()
			cmd := exec.CommandContext(ctx, dc.bin, args...)
			cmd.Env = cleanEnv()
			out, err := cmd.CombinedOutput()
			took := time.Since(start).Round(time.Millisecond)
			if ctx.Err() != nil {
				t.Fatalf("drover server still running after %s\n%s", took, out)
			}
			if err == nil {
				t.Fatalf("drover server exited 0\n%s", out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Fatalf("drover server: %v after %s; output does not mention %q:\n%s", err, took, tc.want, out)
			}
			t.Logf("refused after %s: %s", took, lastLine(string(out)))
		})
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// makeCerts writes, in dir, a CA, a certificate for the etcd members
// (127.0.0.1 and localhost; server and client use, as etcd's gateway dials
// its own gRPC server with it) and a client certificate for drover, all
// ECDSA P-256.
func makeCerts(t *testing.T, dir string) *certFiles {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caKey := newKey(t)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "drover test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	issue := func(serial int64, cn string, usage []x509.ExtKeyUsage, ips []net.IP, dns []string) ([]byte, *ecdsa.PrivateKey) {
		key := newKey(t)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: usage,
			IPAddresses: ips, DNSNames: dns,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der, key
	}
	srvDER, srvKey := issue(2, "etcd", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		[]net.IP{net.IPv4(127, 0, 0, 1)}, []string{"localhost"})
	cliDER, cliKey := issue(3, "drover", []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, nil, nil)

	c := &certFiles{
		CA:         writePEM(t, dir, "ca.pem", "CERTIFICATE", caDER),
		ServerCert: writePEM(t, dir, "etcd.pem", "CERTIFICATE", srvDER),
		ServerKey:  writePEM(t, dir, "etcd-key.pem", "EC PRIVATE KEY", marshalKey(t, srvKey)),
		ClientCert: writePEM(t, dir, "drover.pem", "CERTIFICATE", cliDER),
		ClientKey:  writePEM(t, dir, "drover-key.pem", "EC PRIVATE KEY", marshalKey(t, cliKey)),
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	c.clientTLS = &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{{
		Certificate: [][]byte{cliDER}, PrivateKey: cliKey,
	}}}
	return c
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func marshalKey(t *testing.T, k *ecdsa.PrivateKey) []byte {
	t.Helper()
	b, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writePEM(t *testing.T, dir, name, typ string, der []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
