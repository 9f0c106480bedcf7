// Package dns serves the service catalog over DNS, as Consul does, in the
// zone "drover.":
//
//	<name>.service.drover.         A / AAAA  the healthy instances' addresses, once each
//	<name>.service.drover.         SRV       one per healthy instance with a port
//	_<name>._tcp.service.drover.   SRV       the same (RFC 2782 form)
//	<alloc-id>.addr.drover.        A / AAAA  an instance's address: the SRV targets
//
// SRV answers carry their targets' addresses in the additional section.
// A name with no healthy instance, or unknown, is NXDOMAIN; a known name
// asked for another type is an empty NOERROR. Both carry the zone's SOA
// with a minimum TTL of TTL, so resolvers do not cache the absence longer
// than the presence. Names outside the zone are REFUSED: this is not a
// recursive resolver.
//
// TTL is 0 by default: an instance that turns unhealthy must leave every
// answer at once, not when a cache expires. The catalog comes from Source
// at each query; the server's source keeps the catalog in memory and
// builds it again only when the allocations or nodes changed, so a query
// costs no registry round trip in a steady state.
package dns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/drover-org/drover/internal/catalog"
	"github.com/drover-org/drover/internal/spec"
)

// Zone is the domain drover answers for.
const Zone = "drover."

// Source returns the current catalog.
type Source func(ctx context.Context) (*catalog.Catalog, error)

// Config is what a DNS server needs.
type Config struct {
	// Addr is host:port for both UDP and TCP; port 0 picks a free one
	// (the same for both).
	Addr   string
	Source Source
	// TTL of every record, in seconds; 0 (the default) disables caching.
	TTL    uint32
	Logger *slog.Logger
}

// queryTimeout bounds the catalog read of one query; a resolver retries
// after about a second or two anyway.
const queryTimeout = 2 * time.Second

// Server answers DNS queries over UDP and TCP.
type Server struct {
	cfg Config
	log *slog.Logger
	udp net.PacketConn
	tcp net.Listener
}

// Listen binds cfg.Addr for UDP and TCP, so that an address in use is an
// error here and not in the background; Run serves.
func Listen(cfg Config) (*Server, error) {
	if cfg.Source == nil {
		return nil, errors.New("dns: no catalog source")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	udp, err := net.ListenPacket("udp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("dns: listen on udp %s: %w", cfg.Addr, err)
	}
	// TCP on the port UDP got: with port 0 the kernel chose it for UDP only.
	tcp, err := net.Listen("tcp", udp.LocalAddr().String())
	if err != nil {
		udp.Close()
		return nil, fmt.Errorf("dns: listen on tcp %s: %w", udp.LocalAddr(), err)
	}
	return &Server{cfg: cfg, log: cfg.Logger, udp: udp, tcp: tcp}, nil
}

// Addr is the address the server listens on (UDP and TCP).
func (s *Server) Addr() string { return s.udp.LocalAddr().String() }

// Run serves until ctx ends, then closes the listeners.
func (s *Server) Run(ctx context.Context) error {
	h := dns.HandlerFunc(s.serve)
	servers := []*dns.Server{{PacketConn: s.udp, Handler: h}, {Listener: s.tcp, Handler: h}}
	errc := make(chan error, len(servers))
	for _, srv := range servers {
		go func() { errc <- srv.ActivateAndServe() }()
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
		err = fmt.Errorf("dns: serving on %s stopped: %w", s.Addr(), err)
	}
	for _, srv := range servers {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		srv.ShutdownContext(sctx)
		cancel()
	}
	s.udp.Close()
	s.tcp.Close()
	return err
}

func (s *Server) serve(w dns.ResponseWriter, req *dns.Msg) {
	m := s.answer(req)
	if _, udp := w.RemoteAddr().(*net.UDPAddr); udp {
		size := dns.MinMsgSize
		if opt := req.IsEdns0(); opt != nil {
			size = max(int(opt.UDPSize()), dns.MinMsgSize)
		}
		m.Truncate(size) // sets TC: the resolver asks again over TCP
	}
	if err := w.WriteMsg(m); err != nil {
		s.log.Debug("dns: cannot answer", "remote", w.RemoteAddr(), "err", err)
	}
}

// answer builds the reply to req.
func (s *Server) answer(req *dns.Msg) *dns.Msg {
	m := new(dns.Msg)
	m.SetReply(req)
	m.Compress = true
	if req.Opcode != dns.OpcodeQuery || len(req.Question) != 1 {
		m.SetRcode(req, dns.RcodeNotImplemented)
		return m
	}
	q := req.Question[0]
	name := strings.ToLower(q.Name)
	if !dns.IsSubDomain(Zone, name) {
		m.SetRcode(req, dns.RcodeRefused)
		return m
	}
	m.Authoritative = true
	ctx, cancel := context.WithTimeout(context.Background(), queryTimeout)
	defer cancel()
	cat, err := s.cfg.Source(ctx)
	if err != nil {
		s.log.Warn("dns: cannot read the service catalog", "query", q.Name, "err", err)
		m.SetRcode(req, dns.RcodeServerFailure)
		return m
	}
	found := false
	switch {
	case strings.HasSuffix(name, ".service."+Zone):
		found = s.service(m, q, strings.TrimSuffix(name, ".service."+Zone), cat)
	case strings.HasSuffix(name, ".addr."+Zone):
		found = s.addr(m, q, strings.TrimSuffix(name, ".addr."+Zone), cat)
	case name == Zone:
		found = true
		if q.Qtype == dns.TypeSOA || q.Qtype == dns.TypeANY {
			m.Answer = append(m.Answer, s.soa())
		}
	}
	if !found {
		m.Rcode = dns.RcodeNameError
	}
	if len(m.Answer) == 0 {
		m.Ns = append(m.Ns, s.soa())
	}
	return m
}

// service answers for a service name: "<name>" or "_<name>._tcp". It
// reports whether the name has a healthy instance.
func (s *Server) service(m *dns.Msg, q dns.Question, label string, cat *catalog.Catalog) bool {
	srvForm := false
	if rest, ok := strings.CutSuffix(label, "._tcp"); ok && strings.HasPrefix(rest, "_") {
		label, srvForm = rest[1:], true
	}
	healthy, _ := cat.Service(label, false)
	if len(healthy) == 0 {
		return false
	}
	switch {
	case q.Qtype == dns.TypeSRV || q.Qtype == dns.TypeANY:
		s.srv(m, q, healthy)
	case srvForm:
		// "_name._tcp" names only SRV records.
	case q.Qtype == dns.TypeA || q.Qtype == dns.TypeAAAA:
		var seen []string
		for _, in := range healthy {
			if !slices.Contains(seen, in.Address) {
				seen = append(seen, in.Address)
				if rr := s.addrRR(q.Name, in.Address, q.Qtype); rr != nil {
					m.Answer = append(m.Answer, rr)
				}
			}
		}
	}
	return true
}

// srv adds an SRV record per instance with a port (an instance without one
// has no SRV target), and the targets' addresses as extras.
func (s *Server) srv(m *dns.Msg, q dns.Question, healthy []spec.ServiceInstance) {
	var targets []string
	for _, in := range healthy {
		if in.Port == 0 {
			continue
		}
		target := strings.ToLower(in.AllocID) + ".addr." + Zone
		m.Answer = append(m.Answer, &dns.SRV{
			Hdr:      s.hdr(q.Name, dns.TypeSRV),
			Priority: 1, Weight: 1, Port: uint16(in.Port), Target: target,
		})
		if !slices.Contains(targets, target) {
			targets = append(targets, target)
			if rr := s.addrRR(target, in.Address, 0); rr != nil {
				m.Extra = append(m.Extra, rr)
			}
		}
	}
}

// addr answers "<alloc-id>.addr.drover.": the address of that alloc's
// instances, of any health (an SRV target must resolve for as long as a
// resolver holds the SRV answer).
func (s *Server) addr(m *dns.Msg, q dns.Question, id string, cat *catalog.Catalog) bool {
	for _, in := range cat.Instances() {
		if strings.ToLower(in.AllocID) == id {
			if q.Qtype == dns.TypeA || q.Qtype == dns.TypeAAAA || q.Qtype == dns.TypeANY {
				if rr := s.addrRR(q.Name, in.Address, q.Qtype); rr != nil {
					m.Answer = append(m.Answer, rr)
				}
			}
			return true
		}
	}
	return false
}

// addrRR is an A or AAAA record for addr under name, or nil when addr is
// not of type want (0: either).
func (s *Server) addrRR(name, addr string, want uint16) dns.RR {
	ip := net.ParseIP(addr)
	switch {
	case ip == nil:
		return nil
	case ip.To4() != nil && want != dns.TypeAAAA:
		return &dns.A{Hdr: s.hdr(name, dns.TypeA), A: ip.To4()}
	case ip.To4() == nil && want != dns.TypeA:
		return &dns.AAAA{Hdr: s.hdr(name, dns.TypeAAAA), AAAA: ip}
	}
	return nil
}

func (s *Server) hdr(name string, t uint16) dns.RR_Header {
	return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: s.cfg.TTL}
}

// soa is the zone's SOA. Its minimum is the negative-caching TTL (RFC
// 2308): TTL, so an instance that turns healthy is found at once too.
func (s *Server) soa() dns.RR {
	return &dns.SOA{
		Hdr: s.hdr(Zone, dns.TypeSOA),
		Ns:  "ns." + Zone, Mbox: "hostmaster." + Zone,
		Serial: 1, Refresh: 3600, Retry: 600, Expire: 86400, Minttl: s.cfg.TTL,
	}
}
