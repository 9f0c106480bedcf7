package dns

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"

	"github.com/drover-org/drover/internal/catalog"
	"github.com/drover-org/drover/internal/spec"
)

const (
	idA = "aaaaaaaa-0000-0000-0000-000000000001"
	idB = "bbbbbbbb-0000-0000-0000-000000000002"
	idC = "cccccccc-0000-0000-0000-000000000003"
	idD = "dddddddd-0000-0000-0000-000000000004"
)

// alloc runs task "t" with service "web" on port label "http" (port) and
// service "bare" with no port; check is the web check's status.
func alloc(id string, index int, ip string, port int, check spec.CheckStatus) *spec.Alloc {
	web := &spec.Service{Name: "web", PortLabel: "http", Checks: []*spec.Check{{Name: "alive", Type: spec.CheckHTTP}}}
	return &spec.Alloc{
		ID: id, Name: spec.AllocName("j", "g", index), Job: "j", NodeID: "n1", DesiredStatus: spec.DesiredRun,
		Ports: []spec.AllocPort{{Label: "http", Value: port, HostIP: ip}},
		Tasks: []*spec.Task{{Name: "t", Services: []*spec.Service{web, {Name: "bare"}}}},
		Status: &spec.AllocStatus{ClientStatus: spec.ClientRunning, Tasks: map[string]*spec.TaskState{
			"t": {State: spec.TaskRunning, Checks: []spec.CheckState{{Service: "web", Check: "alive", Status: check}}},
		}},
	}
}

// start serves allocs' catalog; set replaces it.
func start(t *testing.T, allocs ...*spec.Alloc) (addr string, set func(...*spec.Alloc), fail *atomic.Bool) {
	t.Helper()
	var cur atomic.Pointer[catalog.Catalog]
	cur.Store(catalog.Build(allocs, nil))
	fail = new(atomic.Bool)
	s, err := Listen(Config{Addr: "127.0.0.1:0", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Source: func(context.Context) (*catalog.Catalog, error) {
			if fail.Load() {
				return nil, errors.New("registry unavailable")
			}
			return cur.Load(), nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return s.Addr(), func(a ...*spec.Alloc) { cur.Store(catalog.Build(a, nil)) }, fail
}

// query asks over net ("udp" or "tcp") and renders the answer as lines:
// the rcode, then each section's records, tab-separated.
func query(t *testing.T, network, addr, name string, qtype uint16) []string {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	c := &dns.Client{Net: network}
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatalf("%s %s %s: %v", network, name, dns.TypeToString[qtype], err)
	}
	out := []string{dns.RcodeToString[r.Rcode]}
	if !r.Authoritative && r.Rcode != dns.RcodeRefused {
		out = append(out, "not authoritative")
	}
	for _, sec := range []struct {
		name string
		rrs  []dns.RR
	}{{"an", r.Answer}, {"ns", r.Ns}, {"ex", r.Extra}} {
		var lines []string
		for _, rr := range sec.rrs {
			lines = append(lines, sec.name+" "+strings.Join(strings.Fields(rr.String()), " "))
		}
		slices.Sort(lines)
		out = append(out, lines...)
	}
	return out
}

const soa = "ns drover. 0 IN SOA ns.drover. hostmaster.drover. 1 3600 600 86400 0"

func TestAnswers(t *testing.T) {
	addr, _, _ := start(t,
		alloc(idA, 0, "10.0.0.1", 8080, spec.CheckPassing),
		alloc(idB, 1, "10.0.0.1", 8081, spec.CheckPassing), // same address: one A record
		alloc(idC, 2, "10.0.0.3", 8082, spec.CheckFailing), // unhealthy: not served
		alloc(idD, 3, "fd00::4", 8083, spec.CheckPassing),
	)
	cases := []struct {
		name  string
		qtype uint16
		want  []string
	}{
		{"web.service.drover.", dns.TypeA, []string{"NOERROR", "an web.service.drover. 0 IN A 10.0.0.1"}},
		{"WEB.Service.Drover.", dns.TypeA, []string{"NOERROR", "an WEB.Service.Drover. 0 IN A 10.0.0.1"}},
		{"web.service.drover.", dns.TypeAAAA, []string{"NOERROR", "an web.service.drover. 0 IN AAAA fd00::4"}},
		{"web.service.drover.", dns.TypeSRV, []string{"NOERROR",
			"an web.service.drover. 0 IN SRV 1 1 8080 " + idA + ".addr.drover.",
			"an web.service.drover. 0 IN SRV 1 1 8081 " + idB + ".addr.drover.",
			"an web.service.drover. 0 IN SRV 1 1 8083 " + idD + ".addr.drover.",
			"ex " + idA + ".addr.drover. 0 IN A 10.0.0.1",
			"ex " + idB + ".addr.drover. 0 IN A 10.0.0.1",
			"ex " + idD + ".addr.drover. 0 IN AAAA fd00::4",
		}},
		{"_web._tcp.service.drover.", dns.TypeSRV, []string{"NOERROR",
			"an _web._tcp.service.drover. 0 IN SRV 1 1 8080 " + idA + ".addr.drover.",
			"an _web._tcp.service.drover. 0 IN SRV 1 1 8081 " + idB + ".addr.drover.",
			"an _web._tcp.service.drover. 0 IN SRV 1 1 8083 " + idD + ".addr.drover.",
			"ex " + idA + ".addr.drover. 0 IN A 10.0.0.1",
			"ex " + idB + ".addr.drover. 0 IN A 10.0.0.1",
			"ex " + idD + ".addr.drover. 0 IN AAAA fd00::4",
		}},
		{"_web._tcp.service.drover.", dns.TypeA, []string{"NOERROR", soa}},
		{"web.service.drover.", dns.TypeTXT, []string{"NOERROR", soa}},
		// No port: an address and no SRV record; no checks: healthy while
		// running (idC's failing check is web's).
		{"bare.service.drover.", dns.TypeA, []string{"NOERROR", "an bare.service.drover. 0 IN A 10.0.0.1", "an bare.service.drover. 0 IN A 10.0.0.3"}},
		{"bare.service.drover.", dns.TypeSRV, []string{"NOERROR", soa}},
		{idC + ".addr.drover.", dns.TypeA, []string{"NOERROR", "an " + idC + ".addr.drover. 0 IN A 10.0.0.3"}},
		{"nope.service.drover.", dns.TypeA, []string{"NXDOMAIN", soa}},
		{"nope." + idA + ".addr.drover.", dns.TypeA, []string{"NXDOMAIN", soa}},
		{"x.drover.", dns.TypeA, []string{"NXDOMAIN", soa}},
		{"drover.", dns.TypeSOA, []string{"NOERROR", "an drover. 0 IN SOA ns.drover. hostmaster.drover. 1 3600 600 86400 0"}},
		{"example.com.", dns.TypeA, []string{"REFUSED"}},
	}
	for _, c := range cases {
		for _, network := range []string{"udp", "tcp"} {
			got := query(t, network, addr, c.name, c.qtype)
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("%s %s %s (-want +got):\n%s", network, c.name, dns.TypeToString[c.qtype], diff)
			}
		}
	}
}

// Health changes show in the next answer: the TTL is 0 and nothing is
// cached here.
func TestHealthChangesShowAtOnce(t *testing.T) {
	addr, set, fail := start(t, alloc(idA, 0, "10.0.0.1", 8080, spec.CheckPassing), alloc(idC, 2, "10.0.0.3", 8082, spec.CheckPassing))
	a := func() []string { return query(t, "udp", addr, "web.service.drover.", dns.TypeA) }
	if diff := cmp.Diff([]string{"NOERROR", "an web.service.drover. 0 IN A 10.0.0.1", "an web.service.drover. 0 IN A 10.0.0.3"}, a()); diff != "" {
		t.Fatalf("both healthy (-want +got):\n%s", diff)
	}
	set(alloc(idA, 0, "10.0.0.1", 8080, spec.CheckPassing), alloc(idC, 2, "10.0.0.3", 8082, spec.CheckFailing))
	if diff := cmp.Diff([]string{"NOERROR", "an web.service.drover. 0 IN A 10.0.0.1"}, a()); diff != "" {
		t.Fatalf("one failing (-want +got):\n%s", diff)
	}
	set(alloc(idA, 0, "10.0.0.1", 8080, spec.CheckPending))
	if diff := cmp.Diff([]string{"NXDOMAIN", soa}, a()); diff != "" {
		t.Fatalf("none healthy (-want +got):\n%s", diff)
	}
	fail.Store(true)
	if diff := cmp.Diff([]string{"SERVFAIL"}, a()); diff != "" {
		t.Fatalf("catalog unavailable (-want +got):\n%s", diff)
	}
}

// A large answer over UDP is truncated, and complete over TCP.
func TestTruncatedOverUDP(t *testing.T) {
	var allocs []*spec.Alloc
	for i := range 60 {
		id := strings.Repeat("e", 8) + "-0000-0000-0000-" + strings.Repeat("0", 10) + string(rune('a'+i/26)) + string(rune('a'+i%26))
		allocs = append(allocs, alloc(id, i, net.IPv4(10, 1, 0, byte(i)).String(), 9000+i, spec.CheckPassing))
	}
	addr, _, _ := start(t, allocs...)
	m := new(dns.Msg)
	m.SetQuestion("web.service.drover.", dns.TypeSRV)
	r, _, err := (&dns.Client{Net: "udp"}).Exchange(m, addr)
	if err != nil {
		t.Fatal(err)
	}
	r.Compress = true // as sent
	if !r.Truncated || r.Len() > dns.MinMsgSize {
		t.Errorf("udp: truncated %v, %d bytes; want truncated to %d", r.Truncated, r.Len(), dns.MinMsgSize)
	}
	r, _, err = (&dns.Client{Net: "tcp"}).Exchange(m, addr)
	if err != nil {
		t.Fatal(err)
	}
	if r.Truncated || len(r.Answer) != 60 || len(r.Extra) != 60 {
		t.Errorf("tcp: truncated %v, %d answers, %d extras; want 60 and 60", r.Truncated, len(r.Answer), len(r.Extra))
	}
}

func TestListenOnATakenPortFails(t *testing.T) {
	addr, _, _ := start(t)
	_, err := Listen(Config{Addr: addr, Source: func(context.Context) (*catalog.Catalog, error) { return catalog.Build(nil, nil), nil }})
	if err == nil || !strings.Contains(err.Error(), "dns: listen on udp "+addr) {
		t.Fatalf("listen on a taken port: %v", err)
	}
}
