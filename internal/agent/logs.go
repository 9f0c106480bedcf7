package agent

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"strconv"
	"time"

	"github.com/drover-org/drover/internal/metrics"
	"github.com/drover-org/drover/internal/pki"
	"github.com/drover-org/drover/internal/spec"
)

// Handler serves this node's own endpoints: the logs of its allocs, and
// what its tasks use (usage.go).
//
//	GET /v1/client/allocations/{id}/logs?task=T&type=stdout|stderr&tail=N&follow=true
//	GET /v1/client/usage
//
// The server proxies the public /v1/allocations/{id}/logs here, so a client
// never needs to know which node runs what. Log files are read only from
// inside the alloc's directory, whatever symlinks its tasks make
// (logfiles.go): an escape is a 403.
//
// Under TLS only a server's certificate is served: operators read logs
// through a server, which checks their token; another agent's certificate
// or a CLI's is a 403. GET /livez, /readyz (registered) and /metrics answer
// any certificate of the cluster: a Prometheus scraper holds a CLI's.
func (a *Agent) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/client/allocations/{id}/logs", a.serveLogs)
	mux.HandleFunc("GET /v1/client/usage", a.serveUsage)
	mux.HandleFunc("GET /v1/client/allocations/{id}/exec", a.serveExec)
	mux.HandleFunc("POST /v1/client/allocations/{id}/signal", a.serveSignal)
	mux.HandleFunc("POST /v1/client/allocations/{id}/restart", a.serveRestart)
	mux.HandleFunc("GET /v1/client/monitor", a.serveMonitor)
	health := http.NewServeMux()
	health.HandleFunc("GET /livez", metrics.Livez)
	health.HandleFunc("GET /readyz", metrics.Readyz(func() []metrics.Check {
		return []metrics.Check{{Name: "registered", Run: func(context.Context) error { return a.Ready() }}}
	}))
	health.Handle("GET /metrics", a.serveMetrics())
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/livez", "/readyz", "/metrics":
			health.ServeHTTP(w, r)
			return
		}
		if r.TLS != nil {
			if role := pki.PeerRole(r.TLS); role != pki.RoleServer {
				httpError(w, http.StatusForbidden, "an agent's endpoints answer only servers (a server certificate); read logs through a server: drover logs")
				return
			}
		}
		mux.ServeHTTP(w, r)
	})
}

func (a *Agent) serveLogs(w http.ResponseWriter, r *http.Request) {
	id, task, typ := r.PathValue("id"), r.URL.Query().Get("task"), r.URL.Query().Get("type")
	if typ == "" {
		typ = "stdout"
	}
	if msg := spec.CheckName(id); msg != "" {
		httpError(w, http.StatusBadRequest, "alloc id "+msg)
		return
	}
	if msg := spec.CheckName(task); msg != "" {
		httpError(w, http.StatusBadRequest, "task name "+msg)
		return
	}
	if typ != "stdout" && typ != "stderr" {
		httpError(w, http.StatusBadRequest, "type must be stdout or stderr")
		return
	}
	tail := -1
	if s := r.URL.Query().Get("tail"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			httpError(w, http.StatusBadRequest, "tail must be a number of lines")
			return
		}
		tail = n
	}
	var since time.Time
	if s := r.URL.Query().Get("since"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			httpError(w, http.StatusBadRequest, "since must be a positive duration such as 10m or 2h")
			return
		}
		since = time.Now().Add(-d)
	}
	root, release, err := a.allocRoot(id)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			httpError(w, http.StatusNotFound, "alloc "+id+" has no directory on node "+a.nodeName)
			return
		}
		httpError(w, http.StatusForbidden, "alloc "+id+": "+err.Error())
		return
	}
	defer release()
	name := task + "." + typ
	b, offset, err := tailLog(root, name, tail, since)
	if err != nil {
		httpError(w, http.StatusForbidden, "alloc "+id+": refusing to serve the "+typ+" log of task "+task+": "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Write(b)
	if r.URL.Query().Get("follow") != "true" {
		return
	}
	fw := flushWriter{w: w, rc: http.NewResponseController(w)}
	fw.Flush()
	followLog(r.Context(), root, name, offset, fw)
}

type flushWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func (f flushWriter) Write(p []byte) (int, error) { return f.w.Write(p) }
func (f flushWriter) Flush()                      { f.rc.Flush() }

func httpError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(spec.APIError{Error: msg})
}
