package server

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/drover-org/drover/internal/acl"
	"github.com/drover-org/drover/internal/execstream"
	"github.com/drover-org/drover/internal/httpapi"
)

// allocExec is GET /v1/allocations/{id}/exec?task=T&tty=1&cmd=A&cmd=B
// with Upgrade: drover-exec. It checks the token's exec capability in the
// alloc's namespace, asks the alloc's agent to run the command (the same
// upgrade, with this server's certificate), and then copies the two
// connections into each other until either side ends. The frames are
// execstream's; this server reads none of them.
func (s *Server) allocExec(w http.ResponseWriter, r *http.Request) error {
	call, err := s.forAgent(r, acl.Exec, "exec")
	if err != nil {
		return err
	}
	if r.Header.Get("Upgrade") != execstream.Protocol {
		return httpapi.BadRequest("exec streams over an upgraded connection: send Connection: Upgrade and Upgrade: %s (drover exec does)", execstream.Protocol)
	}
	if len(r.URL.Query()["cmd"]) == 0 {
		return httpapi.BadRequest("no command: give cmd=... once per argument")
	}
	a, node := call.alloc, call.node
	req, err := http.NewRequestWithContext(r.Context(), "GET", call.url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", execstream.Protocol)
	resp, err := s.agentHTTP.Do(req)
	if err != nil {
		return &httpapi.Error{Status: http.StatusBadGateway, Message: fmt.Sprintf("cannot reach node %s at %s to exec: %v", node.Name, node.Address, err)}
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return &httpapi.Error{Status: resp.StatusCode, Message: fmt.Sprintf("node %s: %s", node.Name, strings.TrimSpace(string(b)))}
	}
	agent, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		resp.Body.Close()
		return &httpapi.Error{Status: http.StatusBadGateway, Message: "the agent's answer is not a stream"}
	}
	defer agent.Close()
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Time{})
	fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: %s\r\nConnection: Upgrade\r\n\r\n", execstream.Protocol)
	if err := brw.Flush(); err != nil {
		return httpapi.ErrHijacked
	}
	s.log.Info("exec", "alloc", a.Name, "by", s.who(r), "task", r.URL.Query().Get("task"))
	var once sync.Once
	done := make(chan struct{})
	end := func() { once.Do(func() { close(done) }) }
	go func() { io.Copy(agent, brw.Reader); end() }()
	go func() { io.Copy(conn, agent); end() }()
	select {
	case <-done:
	case <-r.Context().Done(): // shutting down, or the token was deleted
	}
	return httpapi.ErrHijacked
}
