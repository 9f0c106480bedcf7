package server

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/drover-org/drover/internal/httpapi"
)

// monitor answers GET /v1/agent/monitor?log_level=debug[&node=NODE]: this
// server's log records at that level as text lines, as they are logged,
// until the client goes away (drover monitor); with node, the node's
// agent's, proxied. Management tokens only: a process's log names every
// namespace's jobs. A reader that falls behind loses the oldest lines, and
// is told how many (logstream).
func (s *Server) monitor(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	node := q.Get("node")
	if node == "" {
		if s.cfg.Monitor == nil {
			return httpapi.NotFound("this server keeps no log stream (it was started without one)")
		}
		s.cfg.Monitor.ServeHTTP(w, r)
		return nil
	}
	n, _, err := s.findNode(r, node)
	if err != nil {
		return err
	}
	if n.Address == "" {
		return &httpapi.Error{Status: http.StatusBadGateway, Message: fmt.Sprintf("node %s has no address to reach its agent at", n.Name)}
	}
	u := strings.TrimRight(n.Address, "/") + "/v1/client/monitor?" + url.Values{"log_level": {q.Get("log_level")}}.Encode()
	req, err := http.NewRequestWithContext(r.Context(), "GET", u, nil)
	if err != nil {
		return err
	}
	resp, err := s.agentHTTP.Do(req)
	if err != nil {
		return &httpapi.Error{Status: http.StatusBadGateway, Message: fmt.Sprintf("cannot reach node %s at %s to monitor it: %v", n.Name, n.Address, err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return &httpapi.Error{Status: resp.StatusCode, Message: fmt.Sprintf("node %s: %s", n.Name, strings.TrimSpace(string(b)))}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	rc.SetWriteDeadline(time.Time{})
	rc.Flush()
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return nil
			}
			rc.Flush()
		}
		if err != nil {
			return nil
		}
	}
}
