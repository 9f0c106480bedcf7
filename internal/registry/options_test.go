package registry

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// writeSelfSigned writes a self-signed ECDSA certificate and its key as
// PEM files in dir and returns their paths.
func writeSelfSigned(t *testing.T, dir, name string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
	return certFile, keyFile
}

func TestTLSFromFiles(t *testing.T) {
	dir := t.TempDir()
	ca, caKey := writeSelfSigned(t, dir, "ca")
	cert, key := writeSelfSigned(t, dir, "client")
	garbage := filepath.Join(dir, "garbage.pem")
	os.WriteFile(garbage, []byte("not a certificate\n"), 0o600)
	missing := filepath.Join(dir, "missing.pem")

	cfg, err := TLSFromFiles(ca, cert, key)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RootCAs == nil || len(cfg.Certificates) != 1 {
		t.Fatalf("want a CA pool and one client certificate, got %+v", cfg)
	}
	if cfg, err := TLSFromFiles(ca, "", ""); err != nil || len(cfg.Certificates) != 0 {
		t.Fatalf("CA only: %v, %+v", err, cfg)
	}

	for _, tc := range []struct {
		name          string
		ca, cert, key string
		want          []string // every one must be in the error
	}{
		{"missing CA", missing, "", "", []string{"etcd CA file", missing}},
		{"garbage CA", garbage, "", "", []string{"etcd CA file", garbage, "no PEM certificate"}},
		{"cert without key", ca, cert, "", []string{cert, "--etcd-key"}},
		{"key without cert", ca, "", key, []string{key, "--etcd-cert"}},
		{"missing cert", ca, missing, key, []string{"etcd client certificate", missing}},
		{"garbage key", ca, cert, garbage, []string{"etcd client key", garbage}},
		{"key of another cert", ca, cert, caKey, []string{cert, caKey}},
	} {
		_, err := TLSFromFiles(tc.ca, tc.cert, tc.key)
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not mention %q", tc.name, err, w)
			}
		}
	}
}

func TestOpenWithOptionsTLSNeedsHTTPS(t *testing.T) {
	dir := t.TempDir()
	ca, _ := writeSelfSigned(t, dir, "ca")
	cfg, err := TLSFromFiles(ca, "", "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = OpenWithOptions(t.Context(), Options{Endpoints: []string{"http://127.0.0.1:1"}, TLS: cfg}, testLogger(t))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "https://") {
		t.Fatalf("want ErrInvalid asking for https://, got %v", err)
	}
}

// fakeKV fails the first fails transactions with "leader changed".
type fakeKV struct {
	clientv3.KV
	fails, calls int
}

func (f *fakeKV) Txn(ctx context.Context) clientv3.Txn { return &fakeTxn{f: f} }

type fakeTxn struct {
	clientv3.Txn
	f *fakeKV
}

func (t *fakeTxn) If(...clientv3.Cmp) clientv3.Txn  { return t }
func (t *fakeTxn) Then(...clientv3.Op) clientv3.Txn { return t }
func (t *fakeTxn) Else(...clientv3.Op) clientv3.Txn { return t }
func (t *fakeTxn) Commit() (*clientv3.TxnResponse, error) {
	t.f.calls++
	if t.f.calls <= t.f.fails {
		return nil, rpctypes.Error(rpctypes.ErrGRPCLeaderChanged)
	}
	return &clientv3.TxnResponse{Succeeded: true}, nil
}

func TestReadTxnRetry(t *testing.T) {
	// A read-only transaction is retried through an etcd leader change.
	f := &fakeKV{fails: 3}
	kv := readTxnRetryKV{f}
	resp, err := kv.Txn(t.Context()).Then(clientv3.OpGet("a"), clientv3.OpGet("b", clientv3.WithPrefix())).Commit()
	if err != nil || !resp.Succeeded || f.calls != 4 {
		t.Fatalf("read-only txn: resp %+v, err %v after %d calls; want success after 4", resp, err, f.calls)
	}

	// One that writes is not: whether it was applied is unknown.
	f = &fakeKV{fails: 3}
	kv = readTxnRetryKV{f}
	_, err = kv.Txn(t.Context()).If(clientv3.Compare(clientv3.Version("a"), "=", 0)).Then(clientv3.OpPut("a", "1")).Else(clientv3.OpGet("a")).Commit()
	if !errors.Is(err, rpctypes.ErrLeaderChanged) || f.calls != 1 {
		t.Fatalf("write txn: err %v after %d calls; want leader changed after 1", err, f.calls)
	}

	// The retries end with the context's deadline.
	f = &fakeKV{fails: 1 << 30}
	kv = readTxnRetryKV{f}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = kv.Txn(ctx).Then(clientv3.OpGet("a")).Commit()
	if !errors.Is(err, rpctypes.ErrLeaderChanged) || time.Since(start) > time.Second {
		t.Fatalf("want leader changed within the deadline, got %v after %s", err, time.Since(start))
	}
}
