package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/spf13/pflag"

	"github.com/drover-org/drover/internal/registry"
)

// etcdTLSFlags are the TLS options for an existing etcd cluster
// (--etcd-endpoints https://...).
type etcdTLSFlags struct {
	ca, cert, key string
}

func (f *etcdTLSFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.ca, "etcd-ca", "", "PEM file with the CA that signed the etcd members' certificates (turns on TLS to etcd)")
	fs.StringVar(&f.cert, "etcd-cert", "", "PEM client certificate for etcd, when it checks client certificates (with --etcd-key)")
	fs.StringVar(&f.key, "etcd-key", "", "PEM private key of --etcd-cert")
}

func (f *etcdTLSFlags) set() bool { return f.ca != "" || f.cert != "" || f.key != "" }

// openRegistry connects to the etcd cluster at endpoints, with TLS when any
// of the --etcd-ca/--etcd-cert/--etcd-key flags is set.
func openRegistry(ctx context.Context, endpoints []string, f etcdTLSFlags, log *slog.Logger) (*registry.Registry, error) {
	opts := registry.Options{Endpoints: endpoints}
	if f.set() {
		tlsCfg, err := registry.TLSFromFiles(f.ca, f.cert, f.key)
		if err != nil {
			return nil, err
		}
		opts.TLS = tlsCfg
	}
	reg, err := registry.OpenWithOptions(ctx, opts, log)
	if err != nil {
		return nil, fmt.Errorf("cannot reach etcd at %s: %w", strings.Join(endpoints, ","), err)
	}
	return reg, nil
}
