package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/drover-org/drover/internal/acl"
	"github.com/drover-org/drover/internal/httpapi"
	"github.com/drover-org/drover/internal/spec"
	"github.com/drover-org/drover/internal/state"
)

// event stores one event of an API request; a failure is logged, not
// returned: the change it describes is made.
func (s *Server) event(r *http.Request, e spec.Event) {
	if err := s.reg.AppendEvents(context.WithoutCancel(r.Context()), []spec.Event{e}); err != nil {
		s.log.Warn("cannot store an event", "type", e.Type, "err", err)
	}
}

// who names the request's token for the history: its name, never its
// secret; "anonymous" when ACLs are off.
func (s *Server) who(r *http.Request) string {
	if t := identityOf(r).token; t != nil {
		return fmt.Sprintf("token %q", t.Name)
	}
	return "anonymous"
}

// eventFilter is GET /v1/events's query.
type eventFilter struct {
	after         int64
	resume        bool // ?index was given (0 too): the reader pages by index
	since         time.Time
	topics        map[string]bool
	job, node, ns string
	follow        bool
}

func parseEventFilter(r *http.Request) (eventFilter, error) {
	q := r.URL.Query()
	var f eventFilter
	if v := q.Get("index"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return f, httpapi.BadRequest("index must be a non-negative integer (the last event index seen), got %q", v)
		}
		f.after, f.resume = n, true
	}
	if v := q.Get("since"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return f, httpapi.BadRequest("since must be a positive duration such as 2h or 30m, got %q", v)
		}
		f.since = time.Now().Add(-d)
	}
	known := []string{spec.TopicJob, spec.TopicAlloc, spec.TopicNode, spec.TopicDeployment, spec.TopicLeader}
	for _, t := range q["topic"] {
		for _, t := range strings.Split(t, ",") {
			if !slices.Contains(known, t) {
				return f, httpapi.BadRequest("unknown topic %q; topics are %s", t, strings.Join(known, ", "))
			}
			if f.topics == nil {
				f.topics = map[string]bool{}
			}
			f.topics[t] = true
		}
	}
	f.job, f.node, f.ns = q.Get("job"), q.Get("node"), q.Get("namespace")
	switch v := q.Get("follow"); v {
	case "", "0", "false":
	case "1", "true":
		f.follow = true
	default:
		return f, httpapi.BadRequest("follow must be true or false, got %q", v)
	}
	return f, nil
}

// visibleEvent says whether e passes the filter and the request's token
// may see it: a job's or alloc's event needs read in its namespace, a
// node's node read; leader events any token.
func (s *Server) visibleEvent(r *http.Request, f eventFilter, e spec.Event) bool {
	if e.Index <= f.after || (!f.since.IsZero() && e.Time.Before(f.since)) ||
		(f.topics != nil && !f.topics[e.Topic]) || (f.job != "" && e.Job != f.job) ||
		(f.node != "" && e.Node != f.node) || (f.ns != "" && e.Namespace != f.ns) {
		return false
	}
	id := identityOf(r)
	switch {
	case id.acl == nil:
		return true
	case e.Topic == spec.TopicNode:
		return id.acl.AllowNode(acl.NodeRead)
	case e.Namespace != "":
		return id.acl.Allow(e.Namespace, acl.Read)
	}
	return true
}

// maxEventList bounds one answer of GET /v1/events without follow, and
// maxEventRecords the records read when neither ?index nor ?since bound it.
const (
	maxEventList    = 10_000
	maxEventRecords = 2_000
)

// capEvents bounds an answer to about maxEventList events: the newest, or,
// for a reader resuming after an index, the oldest, so that it resumes
// again after the last index it got and misses none. The cut falls
// between two records (an index's events stay together).
func capEvents(evs []spec.Event, resuming bool) []spec.Event {
	if len(evs) <= maxEventList {
		return evs
	}
	if !resuming {
		i := len(evs) - maxEventList
		for i < len(evs)-1 && evs[i-1].Index == evs[i].Index {
			i++
		}
		return evs[i:]
	}
	i := maxEventList
	for i < len(evs) && evs[i].Index == evs[i-1].Index {
		i++
	}
	return evs[:i]
}

// listEvents is GET /v1/events: the history after ?index (and within
// ?since), filtered by topic, job, node and namespace; with ?follow=true a
// server-sent event stream that goes on with every new event. Both read
// the server's store, which holds the history as etcd does.
func (s *Server) listEvents(w http.ResponseWriter, r *http.Request) error {
	f, err := parseEventFilter(r)
	if err != nil {
		return err
	}
	q := state.EventQuery{After: f.after, Since: f.since}
	if !f.resume && f.since.IsZero() {
		q.MaxRecords = maxEventRecords // a default window: the newest
	}
	snap, err := s.read(r.Context())
	if err != nil {
		return err
	}
	var out []spec.Event
	for _, e := range snap.Events(q) {
		if s.visibleEvent(r, f, e) {
			out = append(out, e)
		}
	}
	if !f.follow {
		out = capEvents(out, f.resume)
		if out == nil {
			out = []spec.Event{}
		}
		return httpapi.WriteJSON(w, snap.Rev, out)
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Drover-Index", strconv.FormatInt(snap.Rev, 10))
	w.WriteHeader(http.StatusOK)
	s.followEvents(w, r, f, out, snap.Rev)
	return nil
}

// eventKeepalive is how long a stream stays silent at most: then it sends
// a comment, which keeps proxies from closing it and finds a client that
// went away.
const eventKeepalive = 15 * time.Second

// followEvents sends evs, then every event the store applies after
// revision rev, until the client goes away. The hub wakes it when the
// store has applied new records; it holds no copy of the store, only the
// revision it has sent up to.
func (s *Server) followEvents(w http.ResponseWriter, r *http.Request, f eventFilter, evs []spec.Event, rev int64) {
	rc := http.NewResponseController(w)
	silent := time.Now()
	for {
		for _, e := range evs {
			b, _ := json.Marshal(e)
			if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", e.Index, e.Topic, b); err != nil {
				return
			}
		}
		if len(evs) > 0 {
			silent = time.Now()
		} else if time.Since(silent) >= eventKeepalive {
			if _, err := fmt.Fprint(w, ": keepalive\n\n"); err != nil {
				return
			}
			silent = time.Now()
		}
		rc.Flush()
		s.hub.wait(r.Context(), rev, eventKeepalive-time.Since(silent), "events")
		if r.Context().Err() != nil {
			return
		}
		snap := s.state.Snapshot() // the hub wakes after the store applied
		evs = evs[:0]
		for _, e := range snap.Events(state.EventQuery{After: rev}) {
			if s.visibleEvent(r, f, e) {
				evs = append(evs, e)
			}
		}
		rev = snap.Rev
	}
}
