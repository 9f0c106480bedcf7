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
// with Upgrade: drover-exec (drover exec) or Upgrade: websocket (the web
// UI's terminal, exec_ws.go). It checks the token's exec capability in the
// alloc's namespace, asks the alloc's agent to run the command (the
// drover-exec upgrade, with this server's certificate), and then relays
// between the two connections until either side ends. On a drover-exec
// connection the frames pass as they are; on a WebSocket each message is
// one frame.
func (s *Server) allocExec(w http.ResponseWriter, r *http.Request) error {
	websocket := isWebSocket(r)
	if websocket {
		// Before anything else: a page of another site gets nothing, not
		// even whether the alloc exists.
		if err := checkExecOrigin(r); err != nil {
			return err
		}
	}
	call, err := s.forAgent(r, acl.Exec, "exec")
	if err != nil {
		return err
	}
	if !websocket && r.Header.Get("Upgrade") != execstream.Protocol {
		return httpapi.BadRequest("exec streams over an upgraded connection: send Connection: Upgrade and Upgrade: %s (drover exec does), or open a WebSocket (the web UI does)", execstream.Protocol)
	}
	if len(r.URL.Query()["cmd"]) == 0 {
		return httpapi.BadRequest("no command: give cmd=... once per argument")
	}
	agent, err := s.dialAgentExec(r, call)
	if err != nil {
		return err
	}
	defer agent.Close()
	if websocket {
		return s.relayWebSocket(w, r, call, agent)
	}
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
	s.log.Info("exec", "alloc", call.alloc.Name, "by", s.who(r), "task", r.URL.Query().Get("task"))
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

// dialAgentExec asks the agent of call's alloc to run the request's
// command and returns the upgraded connection to it, which carries
// execstream frames.
func (s *Server) dialAgentExec(r *http.Request, call *agentCall) (io.ReadWriteCloser, error) {
	node := call.node
	req, err := http.NewRequestWithContext(r.Context(), "GET", call.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", execstream.Protocol)
	resp, err := s.agentHTTP.Do(req)
	if err != nil {
		return nil, &httpapi.Error{Status: http.StatusBadGateway, Message: fmt.Sprintf("cannot reach node %s at %s to exec: %v", node.Name, node.Address, err)}
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return nil, &httpapi.Error{Status: resp.StatusCode, Message: fmt.Sprintf("node %s: %s", node.Name, strings.TrimSpace(string(b)))}
	}
	agent, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		resp.Body.Close()
		return nil, &httpapi.Error{Status: http.StatusBadGateway, Message: "the agent's answer is not a stream"}
	}
	return agent, nil
}
