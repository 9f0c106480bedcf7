package server

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/drover-org/drover/internal/execstream"
	"github.com/drover-org/drover/internal/httpapi"
)

// The web UI's terminal opens GET /v1/allocations/{id}/exec as a
// WebSocket, since a browser cannot send Upgrade: drover-exec. Each binary
// message is one execstream frame without its length (WebSocket messages
// have their own): the frame's type byte, then its payload. The browser
// sends Stdin, Resize and CloseStdin; it gets Stdout, Stderr, then Exit or
// Error, and then a close. The ACL check and the relay to the agent are
// drover exec's (allocExec); the page must be this server's own
// (checkExecOrigin), and the UI's session cookie is accepted for it
// (uiSessionSecret).

const (
	// wsHandshakeTimeout bounds writing the handshake's answer (reading
	// the request is bounded by the HTTP server's ReadHeaderTimeout).
	wsHandshakeTimeout = 10 * time.Second
	// wsPingEvery is how often the server pings the browser, and wsPongWait
	// how long it waits for a pong or a message before it takes the
	// browser for gone and ends the command's session.
	wsPingEvery = 20 * time.Second
	wsPongWait  = 60 * time.Second
	// wsWriteWait bounds each message to the browser: one that does not
	// take it in that long ends the session.
	wsWriteWait = 10 * time.Second
)

// isWebSocket reports whether r asks for a WebSocket.
func isWebSocket(r *http.Request) bool { return websocket.IsWebSocketUpgrade(r) }

// checkExecOrigin refuses a WebSocket opened by a page that is not this
// server's own: a browser opens one from any site, with the site's Origin
// and the user's cookies (SameSite=Strict keeps the session's cookie from
// other sites' pages, but not from another page of the same site on
// another port). A request without Origin comes from no browser page:
// drover exec's, or a program's with its token (uiSessionSecret refuses
// one with only the session cookie).
func checkExecOrigin(r *http.Request) error {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return forbidden("an exec WebSocket must be opened by the web UI's own page; this one came from a %s page (Sec-Fetch-Site)", site)
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return nil
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	u, err := url.Parse(origin)
	if err != nil || u.Scheme != scheme || !strings.EqualFold(u.Host, r.Host) {
		return forbidden("an exec WebSocket must be opened by the web UI's own page (%s://%s/ui/); this one came from %q", scheme, r.Host, origin)
	}
	return nil
}

// hijackWriter lets the WebSocket library take over the connection of a
// response writer that the API's handlers wrap (it asks for an
// http.Hijacker; http.ResponseController reaches through the wrappers).
type hijackWriter struct{ http.ResponseWriter }

func (h hijackWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(h.ResponseWriter).Hijack()
}

// relayWebSocket answers r with a WebSocket and relays between it and the
// agent's connection until the command ends (its exit code or error is
// sent, then a close), the browser closes or goes silent, the agent goes
// away, or the request's context ends (the server stops, the token is
// deleted).
func (s *Server) relayWebSocket(w http.ResponseWriter, r *http.Request, call *agentCall, agent io.ReadWriter) error {
	up := websocket.Upgrader{
		HandshakeTimeout: wsHandshakeTimeout,
		CheckOrigin:      func(r *http.Request) bool { return checkExecOrigin(r) == nil },
	}
	ws, err := up.Upgrade(hijackWriter{w}, r, nil)
	if err != nil {
		return httpapi.ErrHijacked // the library has answered the client
	}
	defer ws.Close()
	ws.NetConn().SetDeadline(time.Time{}) // the API's own deadlines are for requests, not sessions
	ws.SetReadLimit(1 + execstream.MaxFrame)
	alive := func() { ws.SetReadDeadline(time.Now().Add(wsPongWait)) }
	alive()
	ws.SetPongHandler(func(string) error { alive(); return nil })
	s.log.Info("exec", "alloc", call.alloc.Name, "by", s.who(r), "task", r.URL.Query().Get("task"), "via", "websocket")

	var (
		once   sync.Once
		done   = make(chan struct{})
		code   = websocket.CloseNormalClosure
		reason = ""
	)
	end := func(c int, why string) {
		once.Do(func() { code, reason = c, why; close(done) })
	}
	toAgent := execstream.NewWriter(agent)
	go func() { // browser -> agent
		for {
			typ, msg, err := ws.ReadMessage()
			if err != nil {
				end(websocket.CloseNormalClosure, "")
				return
			}
			alive()
			if typ != websocket.BinaryMessage || len(msg) == 0 {
				end(websocket.CloseUnsupportedData, "exec messages are binary: a frame type byte, then its payload")
				return
			}
			switch msg[0] {
			case execstream.Stdin, execstream.Resize, execstream.CloseStdin:
			default:
				end(websocket.ClosePolicyViolation, "a browser sends only stdin, resize and close-stdin frames")
				return
			}
			if err := toAgent.Frame(msg[0], msg[1:]); err != nil {
				end(websocket.CloseInternalServerErr, "the agent's connection failed")
				return
			}
		}
	}()
	go func() { // agent -> browser
		for {
			typ, p, err := execstream.Read(agent)
			if err != nil {
				end(websocket.CloseInternalServerErr, "the command's stream ended without an exit code (the agent went away)")
				return
			}
			ws.SetWriteDeadline(time.Now().Add(wsWriteWait))
			if err := ws.WriteMessage(websocket.BinaryMessage, append([]byte{typ}, p...)); err != nil {
				end(websocket.CloseNormalClosure, "")
				return
			}
			if typ == execstream.Exit || typ == execstream.Error {
				end(websocket.CloseNormalClosure, "the command ended")
				return
			}
		}
	}()
	ping := time.NewTicker(wsPingEvery)
	defer ping.Stop()
	for {
		select {
		case <-done:
			ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(time.Second))
			return httpapi.ErrHijacked
		case <-r.Context().Done(): // shutting down, or the token was deleted
			ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseGoingAway, "the server ended the session"), time.Now().Add(time.Second))
			return httpapi.ErrHijacked
		case <-ping.C:
			if err := ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(wsWriteWait)); err != nil {
				return httpapi.ErrHijacked
			}
		}
	}
}
