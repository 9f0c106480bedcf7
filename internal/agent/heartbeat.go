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
	failed := 0
	for {
		every := time.Duration(a.heartbeatEvery.Load())
		if every <= 0 {
			every = defaultHeartbeat
		}
		if failed == 0 {
			sleep(ctx, every)
		} else {
			sleep(ctx, every/4) // not a spin when servers refuse at once
		}
		if ctx.Err() != nil {
			return
		}
		// A heartbeat gives up after one interval, and a failed one is
		// retried a quarter interval later: two failures and a move to the
		// next server fit well inside the node TTL (5 intervals), so a stuck
		// server never costs this node its liveness.
		hctx, cancel := context.WithTimeout(ctx, every)
		beat, err := a.client.Heartbeat(hctx, a.nodeID)
		cancel()
		if iv := beat.HeartbeatInterval.Std(); err == nil && iv > 0 {
			a.heartbeatEvery.Store(int64(iv)) // more nodes, longer
		}
		if err != nil && !client.IsStatus(err, http.StatusNotFound) {
			failed++
		} else {
			failed = 0
		}
		quiet := failed > 1 && failed%20 != 0 // log a long outage now and then
		// Two heartbeats in a row without an answer: the server may be
		// alive but stuck (a stopped process still accepts connections), so
		// move to the next one, assignment query included.
		if failed >= 2 && failed%2 == 0 && len(a.client.Addresses()) > 1 {
			to := a.client.Rotate()
			if !quiet || failed == 2 {
				a.log.Warn("server not answering heartbeats; moving to the next one", "server", to)
			}
			a.cancelQuery()
		}
		switch {
		case err == nil:
			a.contact()
		case client.IsStatus(err, http.StatusNotFound):
			a.log.Warn("server says this node is not alive; registering again")
			if err := a.register(ctx); err != nil && ctx.Err() == nil {
				a.log.Error("registering again failed", "err", err)
			}
		case ctx.Err() == nil && !quiet:
			a.log.Warn("heartbeat failed; tasks keep running; will retry", "err", err, "failures", failed)
		}
	}
}

// queryContext bounds one assignment query and remembers how to cancel it,
// so that the heartbeat loop can move a stuck query to another server.
func (a *Agent) queryContext(ctx context.Context) (context.Context, context.CancelFunc) {
	qctx, cancel := context.WithTimeout(ctx, assignmentWait+30*time.Second)
	a.queryMu.Lock()
	a.queryCancel = cancel
	a.queryMu.Unlock()
	return qctx, cancel
}

func (a *Agent) cancelQuery() {
	a.queryMu.Lock()
	defer a.queryMu.Unlock()
	if a.queryCancel != nil {
		a.queryCancel()
	}
}
