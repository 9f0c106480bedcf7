// Command testapp is the small static program drover's tests run as a task:
// directly by the exec drivers, and as the only file of a FROM scratch
// image for the docker driver (no registry is reachable from the test
// machines, so tests build their image from this). It serves HTTP, prints
// to stdout and stderr, can be made unhealthy, can use memory, and says
// when it is asked to stop.
//
//	GET  /          "ok <hostname>"
//	GET  /health    200, or 503 while unhealthy
//	POST /fail      make /health answer 503
//	POST /recover   make /health answer 200 again
//	GET  /failed-at the Unix time in ns at which /health first answered 503
//	                after the last POST /fail (0 if it has not yet), so that
//	                a benchmark can time from the probe that saw the failure
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	listen := flag.String("listen", "", "address to serve HTTP on; default :$DROVER_PORT_http, else :8080")
	allocMB := flag.Int("alloc-mb", 0, "touch this many MB of memory at start and keep them")
	exit := flag.Int("exit", -1, "print a line and exit at once with this code")
	unhealthyFile := flag.String("unhealthy-file", "", "/health answers 503 while this file exists")
	report := flag.Bool("report", false, "print the environment (\"env K=V\" lines) and, for each directory of -dirs, whether a file can be made in it (\"dir D: ok\")")
	dirs := flag.String("dirs", "", "comma-separated directories for -report")
	files := flag.String("files", "", "comma-separated files whose lines -report prints (\"file F: line\"), such as /proc/self/limits")
	flag.Parse()

	host, _ := os.Hostname()
	fmt.Printf("testapp started on %s\n", host)
	fmt.Fprintf(os.Stderr, "testapp stderr line\n")
	if *report {
		// What a task sees, for tests of its environment in an image
		// with no shell.
		env := os.Environ()
		sort.Strings(env)
		for _, kv := range env {
			fmt.Printf("env %s\n", kv)
		}
		for d := range strings.SplitSeq(*dirs, ",") {
			if d == "" {
				continue
			}
			res := "ok"
			if err := os.WriteFile(filepath.Join(d, "probe"), nil, 0o644); err != nil {
				res = err.Error()
			}
			fmt.Printf("dir %s: %s\n", d, res)
		}
		for f := range strings.SplitSeq(*files, ",") {
			if f == "" {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				fmt.Printf("file %s: %v\n", f, err)
			}
			for line := range strings.Lines(string(b)) {
				fmt.Printf("file %s: %s\n", f, strings.TrimRight(line, "\n"))
			}
		}
	}
	if *exit >= 0 {
		os.Exit(*exit)
	}
	if *allocMB > 0 {
		keep := make([][]byte, 0, *allocMB)
		for range *allocMB {
			b := make([]byte, 1<<20)
			for i := range b {
				b[i] = 1
			}
			keep = append(keep, b)
		}
		fmt.Printf("testapp holds %d MB\n", len(keep))
		defer func() { _ = keep }()
	}
	addr := *listen
	if addr == "" {
		addr = ":8080"
		if p := os.Getenv("DROVER_PORT_http"); p != "" {
			addr = ":" + p
		}
	}

	var failing atomic.Bool
	var failedAt atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "ok %s\n", host) })
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			failedAt.CompareAndSwap(0, time.Now().UnixNano())
			http.Error(w, "failing", http.StatusServiceUnavailable)
			return
		}
		if *unhealthyFile != "" {
			if _, err := os.Stat(*unhealthyFile); err == nil {
				http.Error(w, "failing: "+*unhealthyFile+" exists", http.StatusServiceUnavailable)
				return
			}
		}
		fmt.Fprintln(w, "healthy")
	})
	mux.HandleFunc("POST /fail", func(w http.ResponseWriter, r *http.Request) {
		failedAt.Store(0)
		failing.Store(true)
	})
	mux.HandleFunc("GET /failed-at", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, failedAt.Load()) })
	mux.HandleFunc("POST /recover", func(w http.ResponseWriter, r *http.Request) { failing.Store(false) })
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		s := <-sig
		fmt.Printf("testapp got %s, stopping\n", s)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}()
	fmt.Printf("testapp listening on %s\n", addr)
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		fmt.Fprintln(os.Stderr, "testapp:", err)
		os.Exit(1)
	}
}
