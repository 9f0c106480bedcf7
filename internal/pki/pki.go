// Package pki makes and uses the certificates of a drover cluster's mutual
// TLS. A cluster CA signs certificates whose role is server, agent or cli.
// Clients verify a server by the DNS name ServerName whatever address they
// dialed, so an agent's certificate (which carries AgentName) can never act as
// a server; servers read the role of a verified client certificate (PeerRole)
// to decide what it may do.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The roles a certificate can have, in its Subject.OrganizationalUnit.
const (
	RoleServer = "server"
	RoleAgent  = "agent"
	RoleCLI    = "cli"
)

// roles in the order Init makes them.
var roles = []string{RoleServer, RoleAgent, RoleCLI}

// ServerName and AgentName are the DNS names clients verify: a server's
// certificate carries ServerName, an agent's AgentName.
const (
	ServerName = "server.drover"
	AgentName  = "agent.drover"
)

// File names inside a TLS directory.
const (
	CAFile    = "ca.pem"
	CAKeyFile = "ca-key.pem"
)

// CertFile is the name of role's certificate file in a TLS directory.
func CertFile(role string) string { return role + ".pem" }

// KeyFile is the name of role's private key file in a TLS directory.
func KeyFile(role string) string { return role + "-key.pem" }

const (
	caValidity   = 10 * 365 * 24 * time.Hour
	leafValidity = 5 * 365 * 24 * time.Hour

	// backdate covers clocks a little behind the one that made a certificate.
	backdate = time.Minute

	certMode = 0o644
	keyMode  = 0o600
)

// InitOptions say what goes in the certificates Init and Issue make.
type InitOptions struct {
	// Hosts are extra DNS names and IP addresses (parsed with net.ParseIP) put
	// in the server and agent certificates besides their role name,
	// "localhost", 127.0.0.1 and ::1.
	Hosts []string
	// ServerAlsoAgent adds AgentName to the server certificate: drover dev
	// serves the server's and the agent's API on one listener with one
	// certificate.
	ServerAlsoAgent bool
	// Validity of the leaf certificates (default 5 years); the CA gets 10 years.
	Validity time.Duration
}

// sans are the subject alternative names Hosts asks for.
type sans struct {
	dns []string
	ips []net.IP
}

// parse checks o and splits Hosts into DNS names and IP addresses.
func (o InitOptions) parse() (sans, error) {
	var s sans
	if o.Validity < 0 {
		return s, fmt.Errorf("certificate validity %v is negative; give a positive duration, or 0 for the default of 5 years", o.Validity)
	}
	for _, h := range o.Hosts {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		if ip := net.ParseIP(h); ip != nil {
			s.ips = append(s.ips, ip)
			continue
		}
		if !validDNSName(h) {
			return s, fmt.Errorf("host %q is neither an IP address nor a DNS name; give a bare name or address, without scheme or port", h)
		}
		s.dns = append(s.dns, strings.ToLower(h))
	}
	return s, nil
}

// validDNSName accepts names like "node-1.example.com" and "*.example.com".
func validDNSName(name string) bool {
	name = strings.TrimPrefix(name, "*.")
	if name == "" || len(name) > 253 {
		return false
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, r := range label {
			ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_'
			if !ok {
				return false
			}
		}
	}
	return true
}

func validRole(role string) error {
	for _, r := range roles {
		if role == r {
			return nil
		}
	}
	return fmt.Errorf("unknown certificate role %q: want %s, %s or %s", role, RoleServer, RoleAgent, RoleCLI)
}

// Init makes dir (0700) hold a CA and a server, agent and cli certificate. It
// creates only what is missing: an existing CA is kept and signs the missing
// certificates; existing certificates are never overwritten. It returns the
// files it created. A missing CA with existing leaf certificates is an error
// (they would not match).
func Init(dir string, o InitOptions) (created []string, err error) {
	names, err := o.parse()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("make TLS directory: %w", err)
	}

	// Look at everything before writing anything, so that an error leaves dir
	// as it was.
	var missing []string // roles without a certificate and key
	var existingLeaf string
	for _, role := range roles {
		cert, key := filepath.Join(dir, CertFile(role)), filepath.Join(dir, KeyFile(role))
		hasCert, err := exists(cert)
		if err != nil {
			return nil, err
		}
		hasKey, err := exists(key)
		if err != nil {
			return nil, err
		}
		switch {
		case hasCert && hasKey:
			existingLeaf = cert
		case hasCert || hasKey:
			// Half a pair: making the other half would not match it.
			have, lack := cert, key
			if hasKey {
				have, lack = key, cert
			}
			return nil, fmt.Errorf("%s exists but %s does not; restore %s, or delete %s to have a new pair made", have, lack, lack, have)
		default:
			missing = append(missing, role)
		}
	}
	caCert, caKey := filepath.Join(dir, CAFile), filepath.Join(dir, CAKeyFile)
	hasCA, err := exists(caCert)
	if err != nil {
		return nil, err
	}
	hasCAKey, err := exists(caKey)
	if err != nil {
		return nil, err
	}

	var ca *authority
	switch {
	case !hasCA && hasCAKey:
		return nil, fmt.Errorf("%s exists but %s does not; restore %s, or delete %s (and every certificate in %s) to start a new CA", caKey, caCert, caCert, caKey, dir)
	case !hasCA && existingLeaf != "":
		return nil, fmt.Errorf("%s has no CA (%s) but has certificates such as %s, which a new CA would not have signed; restore %s and %s, or delete the certificates to start over", dir, CAFile, existingLeaf, CAFile, CAKeyFile)
	case !hasCA:
		now := time.Now()
		var certPEM, keyPEM []byte
		ca, certPEM, keyPEM, err = newCA(now)
		if err != nil {
			return nil, err
		}
		if err := writeNew(caCert, certPEM, certMode); err != nil {
			return nil, err
		}
		created = append(created, caCert)
		if err := writeNew(caKey, keyPEM, keyMode); err != nil {
			return created, err
		}
		created = append(created, caKey)
	case len(missing) == 0:
		return nil, nil // nothing to do
	case !hasCAKey:
		return nil, fmt.Errorf("%s is missing, and it is needed to sign %s; run drover tls init where ca-key.pem is kept, then copy the certificates here", caKey, strings.Join(missing, ", "))
	default:
		if ca, err = loadCA(dir); err != nil {
			return nil, err
		}
	}

	for _, role := range missing {
		certPEM, keyPEM, err := newLeaf(ca, role, names, o, time.Now())
		if err != nil {
			return created, err
		}
		cert, key := filepath.Join(dir, CertFile(role)), filepath.Join(dir, KeyFile(role))
		// Key first: a crash in between leaves a lone key, which the next Init
		// reports, rather than a certificate nobody can use.
		if err := writeNew(key, keyPEM, keyMode); err != nil {
			return created, err
		}
		if err := writeNew(cert, certPEM, certMode); err != nil {
			return append(created, key), err
		}
		created = append(created, cert, key)
	}
	return created, nil
}

// Issue writes a new certificate and key for role signed by dir's CA,
// replacing the role's files atomically (write temp + rename): certificate
// rotation. Needs ca-key.pem.
func Issue(dir, role string, o InitOptions) error {
	if err := validRole(role); err != nil {
		return err
	}
	names, err := o.parse()
	if err != nil {
		return err
	}
	ca, err := loadCA(dir)
	if err != nil {
		return err
	}
	certPEM, keyPEM, err := newLeaf(ca, role, names, o, time.Now())
	if err != nil {
		return err
	}
	// The key goes first. Between the two renames the pair does not match;
	// ServerConfig and ClientConfig keep the old pair until both are in place.
	if err := writeReplace(filepath.Join(dir, KeyFile(role)), keyPEM, keyMode); err != nil {
		return err
	}
	return writeReplace(filepath.Join(dir, CertFile(role)), certPEM, certMode)
}

// authority is a CA that can sign.
type authority struct {
	cert *x509.Certificate
	key  crypto.Signer
}

func loadCA(dir string) (*authority, error) {
	certFile, keyFile := filepath.Join(dir, CAFile), filepath.Join(dir, CAKeyFile)
	for _, f := range []string{certFile, keyFile} {
		ok, err := exists(f)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("%s is missing: signing certificates needs the CA's certificate and key; run this where drover tls init made them (or run drover tls init --dir %s to start a new CA)", f, dir)
		}
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("load the CA from %s and %s: %w; restore both files from the same drover tls init", certFile, keyFile, err)
	}
	key, ok := pair.PrivateKey.(crypto.Signer)
	if !ok || pair.Leaf == nil || !pair.Leaf.IsCA {
		return nil, fmt.Errorf("%s is not a CA certificate; restore the ca.pem that drover tls init made", certFile)
	}
	return &authority{cert: pair.Leaf, key: key}, nil
}

// newCA makes a self-signed CA. It returns it with its certificate and key in PEM.
func newCA(now time.Time) (ca *authority, certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("generate CA key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "drover CA"},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(caValidity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLen:            0,
		MaxPathLenZero:        true, // signs leaves only, never other CAs
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("make CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, err
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, nil, err
	}
	return &authority{cert: cert, key: key}, encodeCert(der), keyPEM, nil
}

// newLeaf makes a certificate and key for role signed by ca, in PEM.
func newLeaf(ca *authority, role string, names sans, o InitOptions, now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate %s key: %w", role, err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, nil, err
	}
	validity := o.Validity
	if validity == 0 {
		validity = leafValidity
	}
	notAfter := now.Add(validity)
	if notAfter.After(ca.cert.NotAfter) {
		// A leaf cannot be verified past its CA's end anyway; say so in the leaf.
		notAfter = ca.cert.NotAfter
	}
	name := role + ".drover"
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name, OrganizationalUnit: []string{role}},
		NotBefore:    now.Add(-backdate),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		DNSNames:     []string{name},
	}
	switch role {
	case RoleServer, RoleAgent:
		// Servers dial agents (for logs) and agents dial servers, so both
		// serve and act as clients.
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		if role == RoleServer && o.ServerAlsoAgent {
			tmpl.DNSNames = append(tmpl.DNSNames, AgentName)
		}
		tmpl.DNSNames = appendNew(tmpl.DNSNames, append([]string{"localhost"}, names.dns...)...)
		tmpl.IPAddresses = append([]net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, names.ips...)
	case RoleCLI:
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("sign %s certificate: %w", role, err)
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return encodeCert(der), keyPEM, nil
}

// appendNew appends the names not already in list.
func appendNew(list []string, names ...string) []string {
	for _, n := range names {
		dup := false
		for _, have := range list {
			dup = dup || have == n
		}
		if !dup {
			list = append(list, n)
		}
	}
	return list
}

// randomSerial is a random, positive 128-bit serial number.
func randomSerial() (*big.Int, error) {
	limit := new(big.Int).Lsh(big.NewInt(1), 128)
	for {
		n, err := rand.Int(rand.Reader, limit)
		if err != nil {
			return nil, fmt.Errorf("make certificate serial number: %w", err)
		}
		if n.Sign() > 0 { // zero is not a valid serial
			return n, nil
		}
	}
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func exists(path string) (bool, error) {
	_, err := os.Stat(path)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, os.ErrNotExist):
		return false, nil
	default:
		return false, fmt.Errorf("cannot tell whether %s exists: %w", path, err)
	}
}

// writeNew writes a file that must not exist yet.
func writeNew(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if err := finish(f, data, mode); err != nil {
		os.Remove(path)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// writeReplace replaces path with data atomically: readers see the old file
// or the new one, never a part.
func writeReplace(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := finish(f, data, mode); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("replace %s: %w", path, err)
	}
	return nil
}

// finish sets f's mode (which the umask may have narrowed), writes data to
// disk and closes f.
func finish(f *os.File, data []byte, mode os.FileMode) error {
	err := f.Chmod(mode)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
