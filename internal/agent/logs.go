package agent

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"

	"github.com/drover-org/drover/internal/spec"
	"github.com/drover-org/drover/internal/tasklog"
)

// Handler serves this node's own endpoints: the logs of its allocs, and
// what its tasks use (usage.go).
//
//	GET /v1/client/allocations/{id}/logs?task=T&type=stdout|stderr&tail=N&follow=true
//	GET /v1/client/usage
//
// The server proxies the public /v1/allocations/{id}/logs here, so a client
// never needs to know which node runs what.
func (a *Agent) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/client/allocations/{id}/logs", a.serveLogs)
	mux.HandleFunc("GET /v1/client/usage", a.serveUsage)
	return mux
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
	dir := filepath.Join(a.allocsDir, id)
	if _, err := os.Stat(filepath.Join(a.allocsDir, id)); err != nil {
		httpError(w, http.StatusNotFound, "alloc "+id+" has no directory on node "+a.nodeName)
		return
	}
	name := task + "." + typ
	offset := tasklog.Size(dir, name)
	b, err := tasklog.Tail(dir, name, tail)
	if err != nil {
		httpError(w, http.StatusInternalServerError, err.Error())
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
	tasklog.Follow(r.Context(), dir, name, offset, fw)
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
