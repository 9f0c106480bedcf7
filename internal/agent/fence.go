package agent

import (
	"context"
	"fmt"
	"time"

	"github.com/drover-org/drover/internal/spec"
)

// Self-fencing for singletons (group disconnect { stop_after }). A node cut
// off from every server cannot be told its work was placed elsewhere; for
// an alloc whose job asked for it, the agent stops the alloc itself once it
// has heard nothing from any server for stop_after. The leader, on its
// side, waits longer than that (plus kill_timeout and a margin, counted
// from when the node was declared down, a node TTL after its last
// heartbeat) before placing a replacement, so the two copies never overlap.

// contact records a successful exchange with a server.
func (a *Agent) contact() { a.lastContact.Store(time.Now().UnixNano()) }

// sinceContact is how long since the last successful exchange.
func (a *Agent) sinceContact() time.Duration {
	return time.Since(time.Unix(0, a.lastContact.Load()))
}

// fenceCheck is how often the watchdog looks: small against any useful
// stop_after (1 s at least), and cheap.
const fenceCheck = 250 * time.Millisecond

// fenceLoop stops the singleton allocs that have been cut off too long.
func (a *Agent) fenceLoop(ctx context.Context) {
	t := time.NewTicker(fenceCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		since := a.sinceContact()
		a.mu.Lock()
		for _, ar := range a.runners {
			d := ar.alloc.Disconnect
			if d == nil || d.StopAfter <= 0 || since < d.StopAfter.Std() || ar.stopRequested() {
				continue
			}
			reason := fmt.Sprintf("no contact with any server for %s (disconnect.stop_after = %s)", since.Round(100*time.Millisecond), d.StopAfter)
			ar.log.Warn("stopping a singleton cut off from the servers", "reason", reason)
			for _, tk := range ar.alloc.Tasks {
				ar.taskEvent(tk.Name, spec.EventKilling, reason, nil)
			}
			ar.stop(reason)
		}
		a.mu.Unlock()
	}
}
