package server

import (
	"context"
	"sync"
	"time"

	"github.com/drover-org/drover/internal/registry"
)

// hub turns the registry's change feed into wake-ups for blocking queries
// and for the leader loop. It keeps, per topic, the revision of the last
// change, so a query with index N returns as soon as its topic moves past
// N, and only the waiters of that topic wake: a change to node A's allocs
// wakes node A's agent, not every agent (fleet's mistake).
//
// Topics: "jobs", "allocs", "nodes", "node_usage", "schedules",
// "job/<name>", "node/<id>", "deployments", "deployments/<job>",
// "deployment/<id>", "events" (the event streams).
type hub struct {
	mu      sync.Mutex
	start   int64            // revision the hub started from (or last resync)
	topics  map[string]int64 // topic -> revision of its last change
	waiters map[string]map[*waiter]struct{}
	// kick wakes the leader's loop, coalesced; only changes that can
	// change its decisions do (see decides). seen is the revision of the
	// latest change published: a pass must see at least that much.
	kick chan struct{}
	seen int64
	// dirty are the jobs the changes since the leader last looked concern;
	// dirtyAll says a change may concern any job (a node, a resync).
	dirty    map[string]bool
	dirtyAll bool
}

func newHub(rev int64) *hub {
	return &hub{start: rev, topics: map[string]int64{}, waiters: map[string]map[*waiter]struct{}{}, kick: make(chan struct{}, 1)}
}

// topicRev is the revision of the topic's last change; before any change
// seen, the hub's starting revision (so old indexes return at once).
func (h *hub) topicRev(topic string) int64 {
	if r, ok := h.topics[topic]; ok {
		return r
	}
	return h.start
}

func (h *hub) publish(changes []registry.Change) {
	h.mu.Lock()
	var wake []*waiter
	kick := false
	touch := func(topic string, rev int64) {
		h.topics[topic] = rev
		for w := range h.waiters[topic] {
			wake = w.wake(wake)
		}
		delete(h.waiters, topic)
	}
	for _, c := range changes {
		if decides(c) {
			kick = true
			h.markDirty(c)
		}
		h.seen = max(h.seen, c.Rev)
		switch c.Kind {
		case registry.KindJob:
			touch("jobs", c.Rev)
			touch("job/"+c.ID, c.Rev)
		case registry.KindAlloc:
			touch("allocs", c.Rev)
			touch("jobs", c.Rev) // job list rows carry summaries
			touch("job/"+c.Job, c.Rev)
			touch("node/"+c.NodeID, c.Rev)
		case registry.KindAllocStatus:
			// Not "node/": an agent's own reports must not wake its
			// assignment query; it waits only on what it is told to run.
			touch("allocs", c.Rev)
			touch("jobs", c.Rev)
			touch("job/"+c.Job, c.Rev)
		case registry.KindNode:
			touch("nodes", c.Rev)
		case registry.KindNodeUsage:
			// Its own topic: node listings wait on it, but the service
			// catalog (built again on "nodes") and the agents'
			// assignment queries ("node/<id>") do not.
			touch("node_usage", c.Rev)
		case registry.KindSchedule:
			touch("schedules", c.Rev)
			touch("jobs", c.Rev)
			touch("job/"+c.ID, c.Rev)
		case registry.KindDeployment:
			// What a schedule wakes, and the deployment's own topics
			// (a CLI following a rollout waits on those).
			touch("deployments", c.Rev)
			touch("deployment/"+c.ID, c.Rev)
			touch("jobs", c.Rev)
			if c.Job != "" {
				touch("deployments/"+c.Job, c.Rev)
				touch("job/"+c.Job, c.Rev)
			}
		case registry.KindEvents:
			touch("events", c.Rev)
		case registry.KindResync:
			// Something may have been missed: every topic moved.
			h.start = c.Rev
			for t := range h.topics {
				h.topics[t] = c.Rev
			}
			for t, ws := range h.waiters {
				for w := range ws {
					wake = w.wake(wake)
				}
				delete(h.waiters, t)
			}
		}
	}
	for _, w := range wake {
		if w.fn != nil {
			h.dropLocked(w)
		}
	}
	h.mu.Unlock()
	for _, w := range wake {
		if w.fn == nil {
			close(w.ch)
			continue
		}
		w.timer.Stop()
		w.fn()
	}
	if kick {
		select {
		case h.kick <- struct{}{}:
		default:
		}
	}
}

// decides reports whether a change can change what the leader's next pass
// decides. An agent reporting an instance pending or running cannot (the
// reconciler acts on terminal reports, on health verdicts that a
// deployment or move waits on, and on node liveness), nor can the
// leader's own record of what it could not place, nor a node's usage
// report (every few seconds per node), nor the event history; under
// load those are most of the changes, and a pass reads the whole
// registry. The periodic resync still runs a pass whatever happens. A deployment change does: an
// operator's promote or fail waits on the next pass of its job (the
// leader's own deployment writes cost one more pass of that job, which
// must write nothing when nothing moved).
func decides(c registry.Change) bool {
	switch c.Kind {
	case registry.KindAllocStatus:
		return c.Terminal || c.Deleted || c.Judged
	case registry.KindSchedule, registry.KindNodeUsage, registry.KindEvents:
		return false
	}
	return true
}

// waiter is one blocking query's wake-up, registered under each of its
// topics. woken (under hub.mu) makes it wake once: a query on several
// topics ("nodes" and "node_usage", the catalog's "allocs" and "nodes")
// stays registered under the others until it takes itself out, and two
// batches may touch two of them before it does.
type waiter struct {
	ch    chan struct{}
	woken bool
	// A parked request's (park): fn is called instead of closing ch, and
	// the waiter is taken out of its topics when woken.
	fn     func()
	topics []string
	timer  *time.Timer
}

// wake adds w to the list of waiters to wake, unless it is woken already;
// hub.mu is held.
func (w *waiter) wake(list []*waiter) []*waiter {
	if w.woken {
		return list
	}
	w.woken = true
	return append(list, w)
}

// wait blocks until one of topics changes past index, or d passes, or ctx
// ends. It returns at once when a topic already has.
func (h *hub) wait(ctx context.Context, index int64, d time.Duration, topics ...string) {
	h.mu.Lock()
	for _, t := range topics {
		if h.topicRev(t) > index {
			h.mu.Unlock()
			return
		}
	}
	w := &waiter{ch: make(chan struct{})}
	h.addLocked(w, topics)
	h.mu.Unlock()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-w.ch:
	case <-timer.C:
	case <-ctx.Done():
	}
	h.mu.Lock()
	for _, t := range topics {
		delete(h.waiters[t], w)
		if len(h.waiters[t]) == 0 {
			delete(h.waiters, t)
		}
	}
	h.mu.Unlock()
}

// park is wait for a request that a link parked (link.Park): no goroutine
// waits; wake is called once, on a goroutine of the hub's or a timer's,
// when one of topics changes past index or d passes (at once when a topic
// already has). It returns what takes the wake-up back.
func (h *hub) park(index int64, d time.Duration, wake func(), topics ...string) (stop func()) {
	h.mu.Lock()
	for _, t := range topics {
		if h.topicRev(t) > index {
			h.mu.Unlock()
			wake()
			return func() {}
		}
	}
	w := &waiter{fn: wake, topics: topics}
	h.addLocked(w, topics)
	w.timer = time.AfterFunc(d, func() {
		h.mu.Lock()
		if w.woken {
			h.mu.Unlock()
			return
		}
		w.woken = true
		h.dropLocked(w)
		h.mu.Unlock()
		w.fn()
	})
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		w.woken = true
		h.dropLocked(w)
		h.mu.Unlock()
		w.timer.Stop()
	}
}

// addLocked registers w under each of topics; h.mu is held.
func (h *hub) addLocked(w *waiter, topics []string) {
	for _, t := range topics {
		if h.waiters[t] == nil {
			h.waiters[t] = map[*waiter]struct{}{}
		}
		h.waiters[t][w] = struct{}{}
	}
}

// dropLocked takes a parked waiter out of its topics; h.mu is held.
func (h *hub) dropLocked(w *waiter) {
	for _, t := range w.topics {
		if ws := h.waiters[t]; ws != nil {
			delete(ws, w)
			if len(ws) == 0 {
				delete(h.waiters, t)
			}
		}
	}
}

// seenRev is the revision of the latest change published.
func (h *hub) seenRev() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seen
}

// markDirty notes which jobs a change concerns; h.mu is held.
func (h *hub) markDirty(c registry.Change) {
	if h.dirty == nil {
		h.dirty = map[string]bool{}
	}
	switch c.Kind {
	case registry.KindJob:
		h.dirty[c.ID] = true
	case registry.KindAlloc, registry.KindAllocStatus:
		h.dirty[c.Job] = true
	case registry.KindDeployment:
		// An operator's promote or fail is acted on in the job's pass.
		if c.Job != "" {
			h.dirty[c.Job] = true
		} else {
			h.dirtyAll = true // a deletion whose value is gone
		}
	default: // nodes (system jobs, lost instances, eligibility, drains), resyncs
		h.dirtyAll = true
	}
	// A server that is not leading never takes the set: past a bound, "all"
	// says the same in constant space.
	if len(h.dirty) > maxDirty {
		h.dirty, h.dirtyAll = nil, true
	}
}

// maxDirty bounds the dirty set; a pass over more jobs than this may as
// well look at them all.
const maxDirty = 4096

// takeDirty returns the jobs changes concerned since the last call, or
// all = true when any job may be concerned, and starts afresh.
func (h *hub) takeDirty() (jobs map[string]bool, all bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	jobs, all = h.dirty, h.dirtyAll
	h.dirty, h.dirtyAll = nil, false
	return jobs, all
}
