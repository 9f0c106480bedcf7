package agent

import (
	"context"
	"net/http"
	"time"

	"github.com/drover-org/drover/internal/client"
)

// defaultHeartbeat is used until a server says otherwise.
const defaultHeartbeat = time.Second

// heartbeatLoop keeps this node up: a node whose heartbeats stop for the
// server's node TTL is down and its work is placed elsewhere. When the
// server says the node is not alive (404: its liveness ran out, for example
// across a control-plane outage), the agent registers again. Failing to
// reach any server changes nothing here: tasks keep running.
func (a *Agent) heartbeatLoop(ctx context.Context) {
	for {
		every := time.Duration(a.heartbeatEvery.Load())
		if every <= 0 {
			every = defaultHeartbeat
		}
		sleep(ctx, every)
		if ctx.Err() != nil {
			return
		}
		hctx, cancel := context.WithTimeout(ctx, every*3)
		err := a.client.Heartbeat(hctx, a.nodeID)
		cancel()
		switch {
		case err == nil:
		case client.IsStatus(err, http.StatusNotFound):
			a.log.Warn("server says this node is not alive; registering again")
			if err := a.register(ctx); err != nil && ctx.Err() == nil {
				a.log.Error("registering again failed", "err", err)
			}
		case ctx.Err() == nil:
			a.log.Warn("heartbeat failed; tasks keep running; will retry", "err", err)
		}
	}
}
