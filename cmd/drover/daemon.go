package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/drover-org/drover/internal/driver"
	"github.com/drover-org/drover/internal/driver/dockerdriver"
	"github.com/drover-org/drover/internal/driver/execdriver"
	"github.com/drover-org/drover/internal/httpapi"
	"github.com/drover-org/drover/internal/logstream"
	"github.com/drover-org/drover/internal/spec"
)

// monitorHub is this process's log stream (drover monitor): every logger
// newLogger makes copies its records to it.
var monitorHub = logstream.NewHub()

// newLogger returns the daemons' logger: text on stderr at level, and
// every record at the level a drover monitor asks to monitorHub.
func newLogger(level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("unknown log level %q: use debug, info, warn or error", level)
	}
	return slog.New(monitorHub.Handler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l}))), nil
}

// signalContext ends on SIGINT or SIGTERM. After the first signal the
// default handling is back, so a second Ctrl-C exits at once.
func signalContext(parent context.Context) context.Context {
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	return ctx
}

// listen opens the HTTP listener with an error that says what to do.
func listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("cannot listen on %s: the port is in use (another drover?); pass --http-addr 127.0.0.1:0 for any free port", addr)
		}
		return nil, fmt.Errorf("cannot listen on %s: %w", addr, err)
	}
	return ln, nil
}

// serveHTTP serves h on ln within the HTTP limits (httpapi.Limits:
// header, body and write timeouts, idle keep-alives, header size, open
// connections); zero fields of lim take the defaults.
func serveHTTP(ln net.Listener, h http.Handler, lim httpapi.Limits, log *slog.Logger) *httpapi.Server {
	return httpapi.Serve(ln, h, lim, log)
}

// shutdownTimeout bounds a daemon's HTTP shutdown.
const shutdownTimeout = 2 * time.Second

// shutdownHTTP stops accepting connections and drains the open ones
// within shutdownTimeout: requests running finish and are answered, an
// agent's parked blocking query over its link answers what is there now,
// and new requests on a link are refused, so that its agent sends them to
// another server (httpapi.Server.Shutdown). What is still open then is
// cut (a long poll over HTTP, a handler that does not return).
func shutdownHTTP(s *httpapi.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if s.Shutdown(ctx) != nil {
		s.Close()
	}
}

// servePprof serves Go's profiles for performance work (hidden flag).
func servePprof(addr string, log *slog.Logger) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Warn("not serving profiles", "addr", addr, "err", err)
		return
	}
	serveHTTP(ln, mux, httpapi.Limits{}, log)
}

// drivers returns the task drivers this node offers: those named, and
// docker besides when its daemon answers (named, it must answer).
func drivers(names []string, docker dockerdriver.Config, log *slog.Logger) ([]driver.Driver, error) {
	var out []driver.Driver
	wantDocker := false
	for _, n := range names {
		switch n {
		case "exec", "raw_exec":
			out = append(out, execdriver.New(n))
		case "docker":
			wantDocker = true
		default:
			return nil, fmt.Errorf("unknown driver %q: this build has exec, raw_exec and docker", n)
		}
	}
	d, err := dockerdriver.New(docker)
	if err == nil {
		// Short: a node without docker should not wait to start.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err = d.Ping(ctx)
		cancel()
	}
	switch {
	case err == nil:
		log.Info("docker driver enabled")
		out = append(out, d)
	case wantDocker:
		return nil, fmt.Errorf("--drivers docker: %w", err)
	default:
		log.Info("docker not available: " + err.Error())
	}
	return out, nil
}

// closeDrivers closes the drivers that hold something (exec's pooled
// cgroups, docker's client) once the agent has stopped.
func closeDrivers(drv []driver.Driver, log *slog.Logger) {
	for _, d := range drv {
		if c, ok := d.(io.Closer); ok {
			if err := c.Close(); err != nil {
				log.Warn("closing a driver", "driver", d.Name(), "err", err)
			}
		}
	}
}

// dockerFlags adds the flags that let containers reach past themselves.
func dockerFlags(fs *pflag.FlagSet, c *dockerdriver.Config) {
	fs.BoolVar(&c.AllowPrivileged, "docker-allow-privileged", false, "let docker tasks run privileged (privileged = true)")
	fs.BoolVar(&c.AllowHostNetwork, "docker-allow-host-network", false, `let docker tasks use the host's network (network_mode = "host")`)
	fs.BoolVar(&c.AllowHostPID, "docker-allow-host-pid", false, `let docker tasks see the host's processes (pid_mode = "host")`)
	fs.BoolVar(&c.AllowVolumes, "docker-allow-volumes", false, "let docker tasks bind-mount host paths (volumes)")
}

// nodeName turns the hostname into a valid node name.
func nodeName() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "node"
	}
	b := []byte(h)
	for i, c := range b {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
		if !ok {
			b[i] = '-'
		}
	}
	s := strings.Trim(string(b), "-_.")
	if spec.CheckName(s) != "" {
		return "node"
	}
	return s
}
