package client

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/drover-org/drover/internal/pki"
)

// Config is how the CLI finds and proves itself to a cluster: the server
// addresses, a TLS directory (ca.pem, cli.pem, cli-key.pem as drover tls
// init writes them) or the files one by one, and an ACL token.
type Config struct {
	Addresses []string
	TLSDir    string
	// CACert, ClientCert and ClientKey are PEM files; each one given wins
	// over TLSDir's.
	CACert, ClientCert, ClientKey string
	// ServerName is the name the server's certificate must carry
	// (default pki.ServerName, what drover's server certificates carry).
	ServerName string
	Token      string
}

// Environment variables Resolve reads, as Nomad's CLI has them.
const (
	EnvAddr          = "DROVER_ADDR"
	EnvTLSDir        = "DROVER_TLS_DIR"
	EnvCACert        = "DROVER_CACERT"
	EnvClientCert    = "DROVER_CLIENT_CERT"
	EnvClientKey     = "DROVER_CLIENT_KEY"
	EnvTLSServerName = "DROVER_TLS_SERVER_NAME"
	EnvToken         = "DROVER_TOKEN"
)

// Resolve fills what c leaves empty from the environment (DROVER_ADDR,
// DROVER_TLS_DIR, DROVER_CACERT, DROVER_CLIENT_CERT, DROVER_CLIENT_KEY,
// DROVER_TLS_SERVER_NAME, DROVER_TOKEN), then from the record a drover dev
// on this machine left for its address (WriteLocal): so the CLI works
// against a dev with no setup.
func (c Config) Resolve() Config {
	if len(c.Addresses) == 0 {
		c.Addresses = SplitAddrs(os.Getenv(EnvAddr))
	}
	for _, f := range []struct {
		v   *string
		env string
	}{{&c.TLSDir, EnvTLSDir}, {&c.CACert, EnvCACert}, {&c.ClientCert, EnvClientCert}, {&c.ClientKey, EnvClientKey}, {&c.ServerName, EnvTLSServerName}} {
		if *f.v == "" {
			*f.v = os.Getenv(f.env)
		}
	}
	if c.Token == "" {
		c.Token = strings.TrimSpace(os.Getenv(EnvToken))
	}
	// A dev's certificates only when no TLS file was named at all.
	noTLS := c.TLSDir == "" && c.CACert == "" && c.ClientCert == "" && c.ClientKey == ""
	if noTLS || c.Token == "" {
		first := DefaultAddress
		if len(c.Addresses) > 0 {
			first = c.Addresses[0]
		}
		if l, err := ReadLocal(first); err == nil {
			if noTLS {
				c.TLSDir = l.TLSDir
			}
			if c.Token == "" && l.TokenFile != "" {
				if b, err := os.ReadFile(l.TokenFile); err == nil {
					c.Token = strings.TrimSpace(string(b))
				}
			}
		}
	}
	return c
}

// Client returns a client for c as it is (call Resolve first for the
// environment's defaults). Addresses without a scheme are https, as
// servers serve by default (an http:// address reaches one run with
// --tls=false); with no address, https://DefaultAddress. The client
// verifies servers with the CA (TLSDir's ca.pem, or CACert), else with
// the system's CAs, and presents the client certificate when one is given.
func (c Config) Client() (*Client, error) {
	o := Options{Token: c.Token}
	var f pki.Files
	if c.TLSDir != "" {
		f = pki.DirFiles(c.TLSDir, pki.RoleCLI)
	}
	from := "--tls-dir or " + EnvTLSDir
	for _, x := range []struct {
		to     *string
		v, how string
	}{{&f.CA, c.CACert, "--ca-cert or " + EnvCACert}, {&f.Cert, c.ClientCert, "--client-cert or " + EnvClientCert}, {&f.Key, c.ClientKey, "--client-key or " + EnvClientKey}} {
		if x.v != "" {
			*x.to, from = x.v, x.how
		}
	}
	name := c.ServerName
	if name == "" {
		name = pki.ServerName
	}
	switch {
	case f.CA != "":
		if err := f.Check(); err != nil {
			if c.TLSDir != "" && f.CA == pki.DirFiles(c.TLSDir, pki.RoleCLI).CA {
				return nil, fmt.Errorf("the TLS directory %s (--tls-dir or %s) is not usable: %w", c.TLSDir, EnvTLSDir, err)
			}
			return nil, fmt.Errorf("the TLS files (%s) are not usable: %w", from, err)
		}
		cfg, err := pki.ClientConfig(f, name)
		if err != nil {
			return nil, err
		}
		o.TLS, o.CAFile = cfg, f.CA
	case f.Cert != "" || f.Key != "":
		return nil, fmt.Errorf("a client certificate needs the CA that signed the servers' certificates too: give --ca-cert or %s (the cluster's ca.pem)", EnvCACert)
	case c.ServerName != "":
		o.TLS = &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName}
	}
	addrs := make([]string, 0, max(1, len(c.Addresses)))
	for _, a := range c.Addresses {
		if a = strings.TrimSpace(a); a != "" && !strings.Contains(a, "://") {
			a = "https://" + a
		}
		addrs = append(addrs, a)
	}
	if len(c.Addresses) == 0 {
		addrs = append(addrs, "https://"+DefaultAddress)
	}
	return NewWithOptions(addrs, o)
}

// Local is what a drover dev leaves for the CLI on the same machine: where
// its certificates and its management token are.
type Local struct {
	Address   string `json:"address"`
	TLSDir    string `json:"tls_dir"`
	TokenFile string `json:"token_file"`
}

// localPath is the record's file for addr: one per port, so that several
// devs on one machine do not overwrite each other's.
func localPath(addr string) (string, error) {
	if !strings.Contains(addr, "://") {
		addr = "https://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("invalid address %q", addr)
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		return "", fmt.Errorf("address %q has no port", addr)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return "", errors.New("only loopback addresses have local records")
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "drover", "local", "port-"+port+".json"), nil
}

// WriteLocal records l for the CLI (mode 0600 in a 0700 directory).
func WriteLocal(l Local) error {
	p, err := localPath(l.Address)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(l, "", "  ")
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

// ReadLocal returns the record for addr's port on this machine.
func ReadLocal(addr string) (*Local, error) {
	p, err := localPath(addr)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	var l Local
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return &l, nil
}

// RemoveLocal removes addr's record if it is still l's (another dev may
// have taken the port since).
func RemoveLocal(l Local) {
	cur, err := ReadLocal(l.Address)
	if err != nil || cur.TLSDir != l.TLSDir {
		return
	}
	if p, err := localPath(l.Address); err == nil {
		os.Remove(p)
	}
}
