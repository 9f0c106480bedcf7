package server

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/drover-org/drover/internal/catalog"
	"github.com/drover-org/drover/internal/dns"
	"github.com/drover-org/drover/internal/httpapi"
	"github.com/drover-org/drover/internal/planner"
)

// The service catalog is derived from the allocs (their tasks' services,
// ports and reported checks) and the nodes' liveness, so it changes only
// when one of these topics does.
var catalogTopics = []string{"allocs", "nodes"}

// catalogView is the catalog as of one read, with the revisions at which
// what it serves last changed, for blocking queries: a watcher of one
// service wakes when that service changes, not on every alloc report.
// A view is never modified once built.
type catalogView struct {
	cat *catalog.Catalog
	// rev is the hub's revision of catalogTopics the view is current for.
	rev int64
	// changed: a service's (lower-case name) last change, including to
	// none; summaries: the list's.
	changed   map[string]int64
	summaries int64
}

// catalogCache keeps the last view, so that the API and DNS read the
// catalog from memory until the registry's watch publishes a change to
// the allocs or nodes; then the next reader builds it again (one registry
// read shared by the readers waiting on mu). Every server's watch feeds
// its hub, so this works on followers as on the leader.
type catalogCache struct {
	mu   sync.Mutex
	view *catalogView
}

// catalogRev is the hub's latest revision of catalogTopics.
func (s *Server) catalogRev() int64 {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	var rev int64
	for _, t := range catalogTopics {
		rev = max(rev, s.hub.topicRev(t))
	}
	return rev
}

// catalogView returns the current view: the cached one when no change was
// published since it was built.
func (s *Server) catalogView(ctx context.Context) (*catalogView, error) {
	s.catalog.mu.Lock()
	defer s.catalog.mu.Unlock()
	// Before Run's watch feeds the hub, changes are not seen: read afresh.
	ready := s.ready.Load()
	rev := s.catalogRev()
	old := s.catalog.view
	if ready && old != nil && old.rev == rev {
		return old, nil
	}
	// Read after taking rev: what is read is at least as new as rev, so a
	// later change moves the hub past rev and the view is built again.
	ss, err := s.read(ctx)
	if err != nil {
		return nil, err
	}
	allocs := ss.Allocs()
	planner.MarkNodeDown(allocs, ss.Nodes())
	if !ready {
		rev = ss.Rev
	}
	v := &catalogView{cat: catalog.Build(allocs, ss.Node), rev: rev, changed: map[string]int64{}, summaries: rev}
	if old == nil {
		for _, name := range v.cat.Names() {
			v.changed[strings.ToLower(name)] = rev
		}
	} else {
		if reflect.DeepEqual(old.cat.Summaries(), v.cat.Summaries()) {
			v.summaries = old.summaries
		}
		for name, r := range old.changed {
			v.changed[name] = r
		}
		for _, name := range append(old.cat.Names(), v.cat.Names()...) {
			was, _ := old.cat.Service(name, true)
			is, _ := v.cat.Service(name, true)
			if !reflect.DeepEqual(was, is) {
				v.changed[strings.ToLower(name)] = rev
			}
		}
	}
	if ready {
		s.catalog.view = v
	}
	return v, nil
}

// Catalog returns the current service catalog; the DNS server reads it.
func (s *Server) Catalog(ctx context.Context) (*catalog.Catalog, error) {
	v, err := s.catalogView(ctx)
	if err != nil {
		return nil, err
	}
	return v.cat, nil
}

// blockingCatalog is blockingQuery for the catalog: with ?index=N it waits
// until changedOf(view) passes N (or the wait ends), looking again at
// each change of the allocs or nodes, then answers from the view.
func (s *Server) blockingCatalog(r *http.Request, changedOf func(*catalogView) int64, answer func(*catalogView) error) error {
	index, wait, err := httpapi.QueryOptions(r)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(wait)
	after := index
	for {
		if index > 0 {
			s.hub.wait(r.Context(), after, time.Until(deadline), catalogTopics...)
		}
		v, err := s.catalogView(r.Context())
		if err != nil {
			return err
		}
		if index == 0 || changedOf(v) > index || !time.Now().Before(deadline) || r.Context().Err() != nil {
			return answer(v)
		}
		after = v.rev
	}
}

// listServices is GET /v1/services: one summary per service.
func (s *Server) listServices(w http.ResponseWriter, r *http.Request) error {
	return s.blockingCatalog(r,
		func(v *catalogView) int64 { return v.summaries },
		func(v *catalogView) error { return httpapi.WriteJSON(w, v.summaries, s.visible(r, v.cat).Summaries()) })
}

// getService is GET /v1/services/{name}: the healthy instances, or with
// ?all=1 every one with its checks. A name with no instance of any health
// is a 404 (after the wait, for a blocking query: the service may appear).
func (s *Server) getService(w http.ResponseWriter, r *http.Request) error {
	name, err := httpapi.PathName(r, "name", "service name")
	if err != nil {
		return err
	}
	all := false
	switch v := r.URL.Query().Get("all"); v {
	case "", "0", "false":
	case "1", "true":
		all = true
	default:
		return httpapi.BadRequest("all must be 1 or true (every instance, of any health) or 0 or false (the healthy ones), got %q", v)
	}
	key := strings.ToLower(name)
	return s.blockingCatalog(r,
		func(v *catalogView) int64 { return v.changed[key] },
		func(v *catalogView) error {
			cat := s.visible(r, v.cat)
			ins, ok := cat.Service(name, all)
			if !ok {
				// The index still, so that a watcher waits for the
				// service to appear rather than asking again at once.
				w.Header().Set("X-Drover-Index", strconv.FormatInt(max(v.changed[key], 1), 10))
				known := cat.Names()
				if len(known) == 0 {
					return httpapi.NotFound("no service %q: no service is registered (a task registers one with a service block)", name)
				}
				return httpapi.NotFound("no service %q; known services: %s", name, strings.Join(known, ", "))
			}
			return httpapi.WriteJSON(w, max(v.changed[key], 1), ins)
		})
}

// ListenDNS binds Config.DNSAddr now, so that a command fails on a bad
// address before it starts anything else; Run serves it. Run binds it
// itself when ListenDNS was not called. With DNSOptional, an address that
// cannot be bound is only logged, and Run serves no DNS.
func (s *Server) ListenDNS() error {
	if s.dnsTried || s.cfg.DNSAddr == "" {
		return nil
	}
	s.dnsTried = true
	d, err := dns.Listen(dns.Config{Addr: s.cfg.DNSAddr, Source: s.Catalog, Logger: s.log})
	switch {
	case err != nil && s.cfg.DNSOptional:
		s.log.Warn("not serving DNS: its address cannot be bound; give another with --dns-addr", "addr", s.cfg.DNSAddr, "err", err)
		return nil
	case err != nil:
		return fmt.Errorf("%w (give another address with --dns-addr)", err)
	}
	s.dns = d
	return nil
}

// startDNS serves DNS, when configured, until ctx ends; the channel closes
// when it has stopped.
func (s *Server) startDNS(ctx context.Context) (<-chan struct{}, error) {
	done := make(chan struct{})
	if err := s.ListenDNS(); err != nil || s.dns == nil {
		close(done)
		return done, err
	}
	s.log.Info("serving the service catalog over DNS", "addr", s.dns.Addr())
	go func() {
		defer close(done)
		if err := s.dns.Run(ctx); err != nil {
			s.log.Error("DNS server stopped", "err", err)
		}
	}()
	return done, nil
}

// visible is the part of the catalog the request's token may read.
func (s *Server) visible(r *http.Request, c *catalog.Catalog) *catalog.Catalog {
	if id := identityOf(r); id.acl == nil || id.acl.IsManagement() {
		return c
	}
	return c.Visible(func(ns string) bool { return s.canRead(r, ns) })
}
