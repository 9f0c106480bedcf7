package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/drover-org/drover/internal/httpapi"
	"github.com/drover-org/drover/internal/spec"
)

// nodeUsageTimeout bounds the request to the agent: usage is a glance (the
// CLI shows "-" for a node that does not answer), so a node that hangs
// must not hold the caller.
const nodeUsageTimeout = 3 * time.Second

// nodeUsage proxies GET /v1/nodes/{id}/usage to the node's agent, which
// measures its tasks (spec.NodeUsage).
func (s *Server) nodeUsage(w http.ResponseWriter, r *http.Request) error {
	id, err := httpapi.PathName(r, "id", "node id")
	if err != nil {
		return err
	}
	node, _, err := s.findNode(r, id)
	if err != nil {
		return err
	}
	if node.Address == "" {
		return &httpapi.Error{Status: http.StatusBadGateway, Message: fmt.Sprintf("node %s has no address to fetch usage from", node.Name)}
	}
	ctx, cancel := context.WithTimeout(r.Context(), nodeUsageTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", strings.TrimRight(node.Address, "/")+"/v1/client/usage", nil)
	if err != nil {
		return err
	}
	resp, err := s.agentHTTP.Do(req)
	if err != nil {
		return &httpapi.Error{Status: http.StatusBadGateway, Message: fmt.Sprintf("cannot reach node %s at %s for usage: %v", node.Name, node.Address, err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		return &httpapi.Error{Status: http.StatusBadGateway, Message: fmt.Sprintf("node %s answered the usage request with %s: %s", node.Name, resp.Status, strings.TrimSpace(string(b)))}
	}
	var nu spec.NodeUsage
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(&nu); err != nil {
		return &httpapi.Error{Status: http.StatusBadGateway, Message: fmt.Sprintf("node %s sent usage that is not spec.NodeUsage: %v", node.Name, err)}
	}
	return httpapi.WriteJSON(w, 0, nu)
}
