package pki

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Files are a certificate, its key and the CA that verifies peers.
type Files struct{ CA, Cert, Key string }

// DirFiles are the paths in dir for role.
func DirFiles(dir, role string) Files {
	return Files{
		CA:   filepath.Join(dir, CAFile),
		Cert: filepath.Join(dir, CertFile(role)),
		Key:  filepath.Join(dir, KeyFile(role)),
	}
}

// Check says what is wrong with f in one error naming the file and the fix
// (missing file, unreadable PEM, key does not match certificate, certificate
// not signed by CA, expired). Cert and Key may both be empty: then only the CA
// is checked.
func (f Files) Check() error {
	_, err := f.check(time.Now())
	return err
}

// reissue is the fix for a bad certificate or key.
const reissue = "make a new pair with drover tls cert ROLE, where ca-key.pem is kept"

// check is Check at a given time. It returns the pool of f.CA.
func (f Files) check(now time.Time) (*x509.CertPool, error) {
	if f.CA == "" {
		return nil, errors.New("no CA file given; give the ca.pem that drover tls init made")
	}
	roots, err := readCAs(f.CA)
	if err != nil {
		return nil, err
	}
	switch {
	case f.Cert == "" && f.Key == "":
		return roots, nil
	case f.Cert == "":
		return nil, fmt.Errorf("key %s is given without its certificate; give both or neither", f.Key)
	case f.Key == "":
		return nil, fmt.Errorf("certificate %s is given without its key; give both or neither", f.Cert)
	}

	cert, err := readCert(f.Cert)
	if err != nil {
		return nil, err
	}
	key, err := readKey(f.Key)
	if err != nil {
		return nil, err
	}
	pub, ok := cert.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(key.Public()) {
		return nil, fmt.Errorf("%s is not the key of certificate %s; put the matching key there, or %s", f.Key, f.Cert, reissue)
	}
	if now.After(cert.NotAfter) {
		return nil, fmt.Errorf("%s expired on %s; %s", f.Cert, cert.NotAfter.Format(time.DateOnly), reissue)
	}
	if now.Before(cert.NotBefore) {
		return nil, fmt.Errorf("%s is valid only from %s (is this machine's clock right?)", f.Cert, cert.NotBefore.Format(time.RFC3339))
	}
	_, err = cert.Verify(x509.VerifyOptions{
		Roots:       roots,
		CurrentTime: now,
		KeyUsages:   []x509.ExtKeyUsage{x509.ExtKeyUsageAny}, // the role decides the use, not Check
	})
	var unknown x509.UnknownAuthorityError
	switch {
	case errors.As(err, &unknown):
		return nil, fmt.Errorf("%s is not signed by the CA in %s; copy the certificate made with that CA, or %s", f.Cert, f.CA, reissue)
	case err != nil:
		return nil, fmt.Errorf("%s does not verify with the CA in %s: %w", f.Cert, f.CA, err)
	}
	return roots, nil
}

// readCAs reads the CA certificates in file.
func readCAs(file string) (*x509.CertPool, error) {
	data, err := readFile(file, "copy ca.pem from where drover tls init ran")
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("%s holds no PEM certificate; copy ca.pem again from where drover tls init ran", file)
	}
	return pool, nil
}

// readCert reads the first certificate in file.
func readCert(file string) (*x509.Certificate, error) {
	data, err := readFile(file, reissue)
	if err != nil {
		return nil, err
	}
	for block, rest := pem.Decode(data); block != nil; block, rest = pem.Decode(rest) {
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: damaged certificate (%v); %s", file, err, reissue)
		}
		return cert, nil
	}
	return nil, fmt.Errorf("%s holds no PEM certificate; %s", file, reissue)
}

// readKey reads the private key in file: PKCS#8, or SEC 1 "EC PRIVATE KEY"
// as other tools write.
func readKey(file string) (crypto.Signer, error) {
	data, err := readFile(file, reissue)
	if err != nil {
		return nil, err
	}
	for block, rest := pem.Decode(data); block != nil; block, rest = pem.Decode(rest) {
		var key any
		switch block.Type {
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(block.Bytes)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: damaged private key (%v); %s", file, err, reissue)
		}
		signer, ok := key.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("%s: unsupported private key type %T; %s", file, key, reissue)
		}
		return signer, nil
	}
	return nil, fmt.Errorf("%s holds no PEM private key; %s", file, reissue)
}

func readFile(file, fix string) ([]byte, error) {
	data, err := os.ReadFile(file)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("%s is missing; %s", file, fix)
	case err != nil:
		return nil, fmt.Errorf("cannot read %s: %w", file, err)
	}
	return data, nil
}

// ServerConfig is a tls.Config for serving with f: MinVersion TLS 1.2, it
// requires and verifies a client certificate signed by f.CA. The serving
// certificate is read again from disk when its file changes (checked at most
// once per second), so replacing the certificate and key files rotates it with
// no restart; a replacement that fails to load keeps the old one.
func ServerConfig(f Files) (*tls.Config, error) {
	if f.Cert == "" || f.Key == "" {
		return nil, errors.New("serving TLS needs a certificate and its key; give a TLS directory made by drover tls init")
	}
	roots, err := f.check(time.Now())
	if err != nil {
		return nil, err
	}
	r, err := newReloader(f.Cert, f.Key)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		ClientAuth: tls.RequireAndVerifyClientCert,
		ClientCAs:  roots,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return r.get(), nil
		},
	}, nil
}

// ClientConfig is a tls.Config for dialing a server whose certificate must
// carry serverName (ServerName or AgentName), whatever address is dialed,
// presenting f.Cert (reloaded from disk on change like ServerConfig).
// f.Cert and f.Key may be empty: then no client certificate.
func ClientConfig(f Files, serverName string) (*tls.Config, error) {
	if serverName == "" {
		return nil, fmt.Errorf("no server name to verify; want %s or %s", ServerName, AgentName)
	}
	roots, err := f.check(time.Now())
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		RootCAs:    roots,
		// Set, ServerName is what the certificate is verified against, not
		// the dialed host: addresses change, the role name does not.
		ServerName: serverName,
	}
	if f.Cert != "" {
		r, err := newReloader(f.Cert, f.Key)
		if err != nil {
			return nil, err
		}
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return r.get(), nil
		}
	}
	return cfg, nil
}

// PeerRole returns the role of the verified peer certificate of a connection,
// "" when the connection is not TLS or presented no verified certificate. The
// role is the certificate's Subject.OrganizationalUnit[0] when it is one of
// the three roles.
func PeerRole(cs *tls.ConnectionState) string {
	// VerifiedChains, not PeerCertificates: only a verified chain says the
	// CA vouches for the role.
	if cs == nil || len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return ""
	}
	ou := cs.VerifiedChains[0][0].Subject.OrganizationalUnit
	if len(ou) == 0 || validRole(ou[0]) != nil {
		return ""
	}
	return ou[0]
}

// reloadInterval is how often a reloader looks at its files at most.
const reloadInterval = time.Second

// reloader holds a certificate and key pair and loads it again when its files
// change on disk.
type reloader struct {
	certFile, keyFile string

	mu                sync.Mutex
	pair              *tls.Certificate
	certStat, keyStat os.FileInfo // of the files pair was loaded from
	checked           time.Time
}

func newReloader(certFile, keyFile string) (*reloader, error) {
	r := &reloader{certFile: certFile, keyFile: keyFile, checked: time.Now()}
	if err := r.load(); err != nil {
		return nil, fmt.Errorf("load the certificate %s and key %s: %w", certFile, keyFile, err)
	}
	return r, nil
}

// get returns the current pair, loading it again first when reloadInterval has
// passed since the last look and the files changed.
func (r *reloader) get() *tls.Certificate {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := time.Now(); now.Sub(r.checked) >= reloadInterval {
		r.checked = now
		// On failure, such as in the middle of a rotation that has replaced
		// only the key, keep serving the old pair; the next look tries again.
		_ = r.load()
	}
	return r.pair
}

// load loads the pair if either file differs from the ones last loaded.
// On error it changes nothing.
func (r *reloader) load() error {
	cs, err := os.Stat(r.certFile)
	if err != nil {
		return err
	}
	ks, err := os.Stat(r.keyFile)
	if err != nil {
		return err
	}
	if r.pair != nil && same(cs, r.certStat) && same(ks, r.keyStat) {
		return nil
	}
	pair, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return err
	}
	r.pair, r.certStat, r.keyStat = &pair, cs, ks
	return nil
}

// same says whether a and b are the same, unchanged file. A rename onto the
// path is a new file even within the file system's clock granularity.
func same(a, b os.FileInfo) bool {
	return os.SameFile(a, b) && a.ModTime().Equal(b.ModTime()) && a.Size() == b.Size()
}
