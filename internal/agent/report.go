package agent

import (
	"context"
	"net/http"
	"time"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/spec"
)

// reportCoalesce is how long the reporter waits after a change before
// sending, so that one report carries a burst. 50 ms is well under what a
// person notices and cuts a 100-task start from dozens of reports to a few.
const reportCoalesce = 50 * time.Millisecond

// reportSoon makes the next report go without waiting for a burst to
// gather: for changes that others wait on, such as a check's verdict.
func (a *Agent) reportSoon() { a.repUrgent.Store(true) }

// markDirty queues an alloc's status for the next report.
func (a *Agent) markDirty(ar *allocRunner) {
	a.repMu.Lock()
	a.repDirty[ar.alloc.ID] = ar
	a.repMu.Unlock()
	select {
	case a.repKick <- struct{}{}:
	default:
	}
}

// takeDirty removes and returns up to n queued allocs.
func (a *Agent) takeDirty(n int) []*allocRunner {
	a.repMu.Lock()
	defer a.repMu.Unlock()
	out := make([]*allocRunner, 0, min(n, len(a.repDirty)))
	for id, ar := range a.repDirty {
		if len(out) == n {
			break
		}
		out = append(out, ar)
		delete(a.repDirty, id)
	}
	return out
}

// requeue puts back allocs whose report did not go through, unless a newer
// change already queued them.
func (a *Agent) requeue(ars []*allocRunner) {
	a.repMu.Lock()
	for _, ar := range ars {
		if _, ok := a.repDirty[ar.alloc.ID]; !ok {
			a.repDirty[ar.alloc.ID] = ar
		}
	}
	a.repMu.Unlock()
}

// reportLoop sends this node's status changes to the server, many allocs
// per request: while one report is in flight, the next changes gather, so a
// burst (a hundred tasks starting) costs a few requests and a few registry
// transactions, not hundreds. It retries while the server is unreachable;
// tasks keep running meanwhile, since losing the server never stops work.
func (a *Agent) reportLoop(ctx context.Context) {
	backoff := time.Duration(0)
	for {
		select {
		case <-a.repKick:
		case <-ctx.Done():
			return
		}
		// Let a burst gather: a task's "received" and "started" come
		// within a millisecond, and a hundred tasks start within ~100 ms.
		if !a.repUrgent.Swap(false) {
			sleep(ctx, reportCoalesce)
		}
		for ctx.Err() == nil {
			batch := a.takeDirty(spec.MaxStatusBatch)
			if len(batch) == 0 {
				break
			}
			rep := &spec.NodeStatusReport{Allocs: make([]spec.AllocStatusEntry, len(batch))}
			for i, ar := range batch {
				rep.Allocs[i] = spec.AllocStatusEntry{ID: ar.alloc.ID, Status: ar.snapshot()}
			}
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			res, err := a.client.ReportAllocStatuses(rctx, a.nodeID, rep)
			cancel()
			if err != nil && !client.IsStatus(err, http.StatusBadRequest) {
				if ctx.Err() != nil {
					return
				}
				a.requeue(batch)
				backoff = min(max(2*backoff, 250*time.Millisecond), 10*time.Second)
				a.log.Warn("cannot report task status; tasks keep running; will retry", "err", err, "in", backoff)
				sleep(ctx, backoff)
				continue
			}
			backoff = 0
			if err != nil {
				a.log.Error("server rejected a status report", "err", err)
				continue
			}
			for _, r := range res.Refused {
				a.log.Info("server refused a status report", "alloc", r.ID, "status", r.Status, "err", r.Error)
			}
		}
	}
}
