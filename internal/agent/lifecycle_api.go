package agent

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/drover-org/drover/internal/driver"
	"github.com/drover-org/drover/internal/spec"
)

// The operator's lifecycle verbs on one running task, which the server
// proxies after checking the token (drover alloc signal, drover alloc
// restart):
//
//	POST /v1/client/allocations/{id}/signal?task=T&signal=SIGHUP
//	POST /v1/client/allocations/{id}/restart?task=T
//
// Both answer 409 when the task is not running here, and a JSON
// spec.TaskActionResult when done.

// serveSignal sends the task's process the signal through its driver.
func (a *Agent) serveSignal(w http.ResponseWriter, r *http.Request) {
	id, q := r.PathValue("id"), r.URL.Query()
	sig := q.Get("signal")
	if msg := spec.CheckSignal(sig); msg != "" {
		httpError(w, http.StatusBadRequest, msg)
		return
	}
	tr, h, err := a.runningTask(id, q.Get("task"))
	if err != nil {
		httpError(w, http.StatusConflict, err.Error())
		return
	}
	s, ok := h.(driver.Signaler)
	if !ok {
		httpError(w, http.StatusBadRequest, fmt.Sprintf("driver %s cannot signal its tasks", tr.task.Driver))
		return
	}
	if err := s.Signal(unix.SignalNum(sig)); err != nil {
		httpError(w, http.StatusConflict, fmt.Sprintf("sending %s to task %s of %s: %v", sig, tr.task.Name, tr.ar.alloc.Name, err))
		return
	}
	msg := fmt.Sprintf("sent %s on an operator's request", sig)
	tr.ar.taskEvent(tr.task.Name, spec.EventSignaled, msg, nil)
	writeResult(w, &spec.TaskActionResult{Alloc: id, Task: tr.task.Name, Message: msg})
}

// serveRestart stops the task and starts it again at once, in place: not
// counted by its restart policy (as a template's change_mode restart).
// Without ?task, every running task of the alloc is.
func (a *Agent) serveRestart(w http.ResponseWriter, r *http.Request) {
	id, task := r.PathValue("id"), r.URL.Query().Get("task")
	var trs []*taskRunner
	if task != "" {
		tr, _, err := a.runningTask(id, task)
		if err != nil {
			httpError(w, http.StatusConflict, err.Error())
			return
		}
		trs = append(trs, tr)
	} else {
		a.mu.Lock()
		ar := a.runners[id]
		a.mu.Unlock()
		if ar == nil {
			httpError(w, http.StatusConflict, fmt.Sprintf("allocation %s does not run on this node", id))
			return
		}
		ar.mu.Lock()
		for _, tr := range ar.tasks {
			if a.usage.handle(id, tr.task.Name) != nil {
				trs = append(trs, tr)
			}
		}
		ar.mu.Unlock()
		if len(trs) == 0 {
			httpError(w, http.StatusConflict, fmt.Sprintf("no task of %s is running", ar.alloc.Name))
			return
		}
	}
	var names []string
	for _, tr := range trs {
		select {
		case tr.restartReq <- "restart requested by an operator":
			names = append(names, tr.task.Name)
		default: // restarting already
		}
	}
	if len(names) == 0 {
		httpError(w, http.StatusConflict, fmt.Sprintf("allocation %s is restarting already", id))
		return
	}
	writeResult(w, &spec.TaskActionResult{Alloc: id, Task: strings.Join(names, ", "), Message: "restart requested: stopped and started again in place"})
}

func writeResult(w http.ResponseWriter, res *spec.TaskActionResult) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(res)
}

// serveMonitor is GET /v1/client/monitor?log_level=: this agent's log
// records as they are logged (drover monitor --node, through a server).
func (a *Agent) serveMonitor(w http.ResponseWriter, r *http.Request) {
	if a.cfg.Monitor == nil {
		httpError(w, http.StatusNotFound, "this agent keeps no log stream (it was started without one)")
		return
	}
	a.cfg.Monitor.ServeHTTP(w, r)
}
