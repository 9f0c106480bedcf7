package registry

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
)

// Options says how to reach an existing etcd cluster.
type Options struct {
	// Endpoints are etcd client URLs (http://host:port or https://host:port).
	// Required.
	Endpoints []string
	// TLS, when set, is used for every connection to etcd: give it the
	// cluster's CA in RootCAs and, when etcd checks client certificates
	// (--client-cert-auth), a client certificate. See TLSFromFiles.
	TLS *tls.Config
	// DialTimeout bounds connecting and the first request; default 5s.
	DialTimeout time.Duration
}

// OpenWithOptions connects to etcd as opts says and checks that it answers;
// when it does not, the error wraps ErrUnavailable.
func OpenWithOptions(ctx context.Context, opts Options, log *slog.Logger) (*Registry, error) {
	if log == nil {
		log = slog.Default()
	}
	if len(opts.Endpoints) == 0 {
		return nil, fmt.Errorf("registry: no etcd endpoints: %w", ErrInvalid)
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = dialTimeout
	}
	if opts.TLS == nil && slices.ContainsFunc(opts.Endpoints, func(ep string) bool { return strings.HasPrefix(ep, "https://") }) {
		// As etcdctl does: https:// without a CA trusts the system's roots.
		opts.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if opts.TLS != nil {
		for _, ep := range opts.Endpoints {
			if strings.HasPrefix(ep, "http://") {
				return nil, fmt.Errorf("registry: etcd endpoint %s is plain http but TLS options were given; use https://: %w", ep, ErrInvalid)
			}
		}
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   opts.Endpoints,
		DialTimeout: opts.DialTimeout,
		TLS:         opts.TLS,
		Logger:      zapToSlog(log.With("component", "etcd-client"), zapcore.ErrorLevel, nil),
		Context:     context.WithoutCancel(ctx),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(timeRequests)},
	})
	if err != nil {
		return nil, fmt.Errorf("registry: connect to etcd %v: %w: %w", opts.Endpoints, ErrUnavailable, err)
	}
	written := new(atomic.Int64)
	cli.KV = timedKV{KV: readTxnRetryKV{cli.KV}, endpoints: opts.Endpoints, written: written} // see retrykv.go and errors.go
	r := newRegistry(cli, log)
	r.written = written
	r.ownCli = true
	cctx, cancel := context.WithTimeout(ctx, opts.DialTimeout)
	defer cancel()
	if _, err := r.Revision(cctx); err != nil {
		cli.Close()
		if opts.TLS != nil {
			// The etcd client reports a refused handshake as a timeout;
			// say what TLS itself said.
			if why := probeTLS(opts.Endpoints, opts.TLS); why != "" {
				return nil, fmt.Errorf("registry: etcd %v does not answer (%s): %w: %w", opts.Endpoints, why, ErrUnavailable, err)
			}
		}
		if errors.Is(err, ErrUnavailable) {
			return nil, err // an UnavailableError: it names the etcd and what to check
		}
		return nil, fmt.Errorf("registry: etcd %v does not answer: %w: %w", opts.Endpoints, ErrUnavailable, err)
	}
	if err := r.checkVersion(cctx, opts.Endpoints); err != nil {
		cli.Close()
		return nil, err
	}
	return r, nil
}

// MinEtcdVersion is the oldest etcd drover runs on: the v3 API with
// leases, elections, watch revisions and progress requests as drover uses
// them. Older versions are refused at start.
const MinEtcdVersion = "3.4.0"

// checkVersion logs the version of each etcd member that answers and
// refuses a member older than MinEtcdVersion. A member that does not
// answer is left to the client's failover.
func (r *Registry) checkVersion(ctx context.Context, endpoints []string) error {
	answered := false
	for _, ep := range endpoints {
		sctx, cancel := context.WithTimeout(ctx, time.Second) // a member down must not hold the start long
		st, err := r.cli.Status(sctx, ep)
		cancel()
		if err != nil {
			r.log.Debug("etcd member did not give its status", "endpoint", ep, "err", err)
			continue
		}
		answered = true
		r.log.Info("etcd", "endpoint", ep, "version", st.Version)
		if olderVersion(st.Version, MinEtcdVersion) {
			return fmt.Errorf("registry: etcd at %s is version %s; drover needs etcd %s or newer: upgrade that member: %w",
				ep, st.Version, MinEtcdVersion, ErrInvalid)
		}
	}
	if !answered {
		r.log.Warn("no etcd member gave its version", "endpoints", endpoints)
	}
	return nil
}

// olderVersion reports whether dotted version v is older than min
// (numeric fields compared in order; a suffix like "-rc.1" is ignored).
// A version that cannot be read is not older: etcd answered, and a
// refusal must name what is wrong.
func olderVersion(v, min string) bool {
	a, b := strings.Split(v, "."), strings.Split(min, ".")
	for i := range b {
		if i >= len(a) {
			return false
		}
		digits, _, _ := strings.Cut(a[i], "-")
		x, err := strconv.Atoi(digits)
		if err != nil {
			return false
		}
		y, _ := strconv.Atoi(b[i])
		if x != y {
			return x < y
		}
	}
	return false
}

// TLSFromFiles builds the TLS configuration for etcd from PEM files: caFile
// holds the CA certificate(s) that signed etcd's serving certificates
// (empty: the system's roots), and certFile with keyFile a client
// certificate (both or neither). Errors name the file at fault.
func TLSFromFiles(caFile, certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("etcd CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("etcd CA file %s: no PEM certificate found in it: %w", caFile, ErrInvalid)
		}
		cfg.RootCAs = pool
	}
	switch {
	case certFile == "" && keyFile == "":
	case certFile == "":
		return nil, fmt.Errorf("etcd client key %s given without a client certificate (--etcd-cert): %w", keyFile, ErrInvalid)
	case keyFile == "":
		return nil, fmt.Errorf("etcd client certificate %s given without its key (--etcd-key): %w", certFile, ErrInvalid)
	default:
		certPEM, err := readPEM("etcd client certificate", certFile, "CERTIFICATE")
		if err != nil {
			return nil, err
		}
		keyPEM, err := readPEM("etcd client key", keyFile, "PRIVATE KEY")
		if err != nil {
			return nil, err
		}
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("etcd client certificate %s with key %s: %w: %w", certFile, keyFile, ErrInvalid, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// readPEM reads file and checks that it holds a PEM block whose type ends
// in kind ("CERTIFICATE", "PRIVATE KEY").
func readPEM(what, file, kind string) ([]byte, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	for rest := b; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			return nil, fmt.Errorf("%s %s: no PEM %s block in it: %w", what, file, kind, ErrInvalid)
		}
		if strings.HasSuffix(blk.Type, kind) {
			return b, nil
		}
	}
}

// probeTLS makes a TLS connection to each https endpoint and returns what
// went wrong with the first that fails ("TLS to https://h:p: remote error:
// tls: certificate required"), or "" when none does. A server that refuses
// the client's certificate says so only after the handshake (TLS 1.3), so
// it also reads briefly: a timeout there means the handshake was accepted.
func probeTLS(endpoints []string, cfg *tls.Config) string {
	for _, ep := range endpoints {
		u, err := url.Parse(ep)
		if err != nil || u.Scheme != "https" || u.Host == "" {
			continue
		}
		d := &net.Dialer{Timeout: 2 * time.Second}
		conn, err := tls.DialWithDialer(d, "tcp", u.Host, cfg.Clone())
		if err != nil {
			if _, ok := err.(net.Error); ok && !strings.Contains(err.Error(), "tls") && !strings.Contains(err.Error(), "x509") {
				continue // not listening: another endpoint may say more
			}
			return "TLS to " + ep + ": " + err.Error()
		}
		conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		_, err = conn.Read(make([]byte, 1))
		conn.Close()
		if ne, ok := err.(net.Error); err != nil && !(ok && ne.Timeout()) {
			return "TLS to " + ep + ": " + err.Error()
		}
	}
	return ""
}
