package client

import (
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
// init writes them) and an ACL token.
type Config struct {
	Addresses []string
	TLSDir    string
	Token     string
}

// Resolve fills what c leaves empty from the environment (DROVER_ADDR,
// DROVER_TLS_DIR, DROVER_TOKEN), then from the record a drover dev on
// this machine left for its address (WriteLocal): so the CLI works against
// a dev with no setup.
func (c Config) Resolve() Config {
	if len(c.Addresses) == 0 {
		c.Addresses = SplitAddrs(os.Getenv("DROVER_ADDR"))
	}
	if c.TLSDir == "" {
		c.TLSDir = os.Getenv("DROVER_TLS_DIR")
	}
	if c.Token == "" {
		c.Token = strings.TrimSpace(os.Getenv("DROVER_TOKEN"))
	}
	if c.TLSDir == "" || c.Token == "" {
		first := DefaultAddress
		if len(c.Addresses) > 0 {
			first = c.Addresses[0]
		}
		if l, err := ReadLocal(first); err == nil {
			if c.TLSDir == "" {
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
// environment's defaults). With a TLS directory, addresses without a
// scheme are https and the client presents cli.pem.
func (c Config) Client() (*Client, error) {
	var o Options
	o.Token = c.Token
	if c.TLSDir != "" {
		f := pki.DirFiles(c.TLSDir, pki.RoleCLI)
		if err := f.Check(); err != nil {
			return nil, fmt.Errorf("the TLS directory %s (--tls-dir or DROVER_TLS_DIR) is not usable: %w", c.TLSDir, err)
		}
		cfg, err := pki.ClientConfig(f, pki.ServerName)
		if err != nil {
			return nil, err
		}
		o.TLS = cfg
	}
	return NewWithOptions(c.Addresses, o)
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
