package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/drover-org/drover/internal/pki"
)

// tlsFlags are the transport settings of server, agent and dev: mutual TLS
// unless --tls=false.
type tlsFlags struct {
	on  bool
	dir string
}

func (f *tlsFlags) add(fs *pflag.FlagSet, dirHelp string) {
	fs.BoolVar(&f.on, "tls", true, "speak mutual TLS (--tls=false serves plain HTTP: anyone who reaches the port is trusted as whatever it claims)")
	fs.StringVar(&f.dir, "tls-dir", "", dirHelp)
}

// scheme is the URL scheme this process serves.
func (f *tlsFlags) scheme() string {
	if f.on {
		return "https://"
	}
	return "http://"
}

// dirOr is --tls-dir, or def.
func (f *tlsFlags) dirOr(def string) string {
	if f.dir != "" {
		return f.dir
	}
	return def
}

// serverTLS is a server's TLS: its serving configuration and the one it
// dials agents with. With no CA in dir yet, it makes the cluster's CA and
// every role's certificate there first (the first server's bootstrap), and
// says what it made.
func serverTLS(dir, httpAddr string, alsoAgent bool, say func(string)) (serve, agents *tls.Config, err error) {
	if _, err := os.Stat(filepath.Join(dir, pki.CAFile)); errors.Is(err, fs.ErrNotExist) {
		created, err := pki.Init(dir, pki.InitOptions{Hosts: hostsOf(httpAddr), ServerAlsoAgent: alsoAgent})
		if err != nil {
			return nil, nil, fmt.Errorf("making the cluster's certificates in %s: %w", dir, err)
		}
		if len(created) > 0 {
			say(fmt.Sprintf("made a cluster CA and certificates in %s (agents need ca.pem, agent.pem and agent-key.pem from it; the CLI ca.pem, cli.pem and cli-key.pem)", dir))
		}
	}
	f := pki.DirFiles(dir, pki.RoleServer)
	if err := f.Check(); err != nil {
		return nil, nil, fmt.Errorf("the server's TLS files in %s: %w (make them with drover tls init --dir %s)", dir, err, dir)
	}
	if serve, err = pki.ServerConfig(f); err != nil {
		return nil, nil, err
	}
	// A browser (the web UI) has no certificate of the cluster: a server
	// verifies one when given, and then an operator's request is judged by
	// its token. Agents' requests, the ACL bootstrap and /metrics still
	// need a certificate (internal/server/auth.go).
	serve.ClientAuth = tls.VerifyClientCertIfGiven
	if agents, err = pki.ClientConfig(f, pki.AgentName); err != nil {
		return nil, nil, err
	}
	return serve, agents, nil
}

// agentTLS is an agent's TLS: what it serves its own endpoints with and
// what it dials servers with, both from its agent certificate.
func agentTLS(dir string) (serve, servers *tls.Config, err error) {
	f := pki.DirFiles(dir, pki.RoleAgent)
	if err := f.Check(); err != nil {
		return nil, nil, fmt.Errorf("the agent's TLS files in %s: %w\n(copy ca.pem, agent.pem and agent-key.pem there from the cluster's TLS directory, made by drover tls init or by the first server, or give --tls-dir)", dir, err)
	}
	if serve, err = pki.ServerConfig(f); err != nil {
		return nil, nil, err
	}
	if servers, err = pki.ClientConfig(f, pki.ServerName); err != nil {
		return nil, nil, err
	}
	return serve, servers, nil
}

// hostsOf is the host of a listen address, for the certificate, unless it
// is a wildcard or already in every certificate.
func hostsOf(addr string) []string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" || host == "0.0.0.0" || host == "::" || host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return []string{strings.Trim(host, "[]")}
}
