package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"

	"github.com/drover-org/drover/internal/client"
	"github.com/drover-org/drover/internal/registry"
	"github.com/drover-org/drover/internal/spec"
)

// dnsServer is testServer with DNS served at dnsAddr.
func dnsServer(t *testing.T, dnsAddr string, optional bool) (hs *httptest.Server, reg *registry.Registry) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	emb, err := registry.StartEmbedded(ctx, registry.EmbeddedConfig{DataDir: t.TempDir(), ClientAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	reg, err = registry.Open(ctx, emb.Endpoints(), log)
	if err != nil {
		t.Fatal(err)
	}
	srv := New(Config{Registry: reg, ID: "test", Logger: log, DNSAddr: dnsAddr, DNSOptional: optional})
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	hs = httptest.NewServer(srv.Handler(nil))
	t.Cleanup(func() {
		hs.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		reg.Close()
		emb.Close()
	})
	for deadline := time.Now().Add(10 * time.Second); !srv.loop.IsLeader(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the server did not become leader within 10s")
		}
	}
	return hs, reg
}

// freeDNSAddr is a loopback address whose UDP and TCP port was free.
func freeDNSAddr(t *testing.T) string {
	for range 20 {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		a := pc.LocalAddr().String()
		pc.Close()
		if l, err := net.Listen("tcp", a); err == nil {
			l.Close()
			return a
		}
	}
	t.Fatal("no free port for DNS")
	return ""
}

// registerNode registers a node whose ports are on ip, keeps it alive until
// the test ends, and returns its secret.
func registerNode(t *testing.T, hs, id, ip string) string {
	t.Helper()
	body := fmt.Sprintf(`{"id":%q,"name":%q,"attributes":{%q:%q},"resources":{"cpu":1000,"memory":1000},"drivers":["exec"]}`, id, id+"-name", spec.NodeIPAttribute, ip)
	var reg spec.NodeRegistration
	if status, msg := call(t, "POST", hs+"/v1/nodes", body, &reg); status != 200 {
		t.Fatalf("register %s: %d %s", id, status, msg)
	}
	ctx := t.Context()
	go func() {
		for tick := time.NewTicker(reg.HeartbeatInterval.Std()); ; {
			select {
			case <-ctx.Done():
				tick.Stop()
				return
			case <-tick.C:
			}
			req, _ := http.NewRequestWithContext(ctx, "PUT", hs+"/v1/nodes/"+id+"/heartbeat", nil)
			req.Header.Set(client.NodeSecretHeader, reg.Secret)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}
	}()
	return reg.Secret
}

// report sends the agent's statuses of allocs (by ID).
func report(t *testing.T, hs, node, secret string, statuses map[string]*spec.AllocStatus) {
	t.Helper()
	var rep spec.NodeStatusReport
	for id, st := range statuses {
		rep.Allocs = append(rep.Allocs, spec.AllocStatusEntry{ID: id, Status: st})
	}
	b, _ := json.Marshal(rep)
	req, _ := http.NewRequest("PUT", hs+"/v1/nodes/"+node+"/allocations/status", strings.NewReader(string(b)))
	req.Header.Set(client.NodeSecretHeader, secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var res spec.NodeStatusResult
	json.Unmarshal(body, &res)
	if resp.StatusCode != 200 || len(res.Refused) > 0 {
		t.Fatalf("report: %d %s", resp.StatusCode, body)
	}
}

func runningWith(checks ...spec.CheckState) *spec.AllocStatus {
	return &spec.AllocStatus{ClientStatus: spec.ClientRunning, Tasks: map[string]*spec.TaskState{
		"t": {State: spec.TaskRunning, Checks: checks},
	}}
}

// getJSON GETs u into out and returns the X-Drover-Index.
func getJSON(t *testing.T, u string, out any) int64 {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", u, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("GET %s: %v: %s", u, err, b)
	}
	idx, _ := strconv.ParseInt(resp.Header.Get("X-Drover-Index"), 10, 64)
	return idx
}

const shopJob = `{"name":"shop","groups":[{"name":"g","count":2,"network":{"ports":[{"label":"http"}]},
 "tasks":[{"name":"t","driver":"exec","config":{"command":"/bin/true"},"resources":{"cpu":10,"memory":10},
  "services":[{"name":"web","port":"http","tags":["v1"],"checks":[{"name":"alive","type":"http","path":"/health"}]},{"name":"bare"}]}]}]}`

func TestServicesAPIAndDNS(t *testing.T) {
	dnsAddr := freeDNSAddr(t)
	hs, _ := dnsServer(t, dnsAddr, false)
	secret := registerNode(t, hs.URL, "n1", "127.0.0.7")
	if status, msg := call(t, "POST", hs.URL+"/v1/jobs", shopJob, nil); status != 200 {
		t.Fatalf("submit: %d %s", status, msg)
	}
	allocs := placed(t, hs.URL, "shop", 2)
	a0, a1 := allocs["shop.g[0]"], allocs["shop.g[1]"]
	instance := func(a *spec.Alloc, health spec.Health, checks ...spec.CheckState) spec.ServiceInstance {
		return spec.ServiceInstance{Service: "web", Tags: []string{"v1"}, Address: "127.0.0.7", Port: a.Ports[0].Value,
			Health: health, AllocID: a.ID, AllocName: a.Name, Job: "shop", Namespace: "default", Task: "t", NodeID: "n1", NodeName: "n1-name", Checks: checks}
	}

	// Placed, no report yet: registered, pending, not served.
	var sums []spec.ServiceSummary
	getJSON(t, hs.URL+"/v1/services", &sums)
	want := []spec.ServiceSummary{{Name: "bare", Instances: 2}, {Name: "web", Tags: []string{"v1"}, Instances: 2}}
	if diff := cmp.Diff(want, sums); diff != "" {
		t.Fatalf("summaries before reports (-want +got):\n%s", diff)
	}
	var ins []spec.ServiceInstance
	index := getJSON(t, hs.URL+"/v1/services/web", &ins)
	if len(ins) != 0 || index == 0 {
		t.Fatalf("healthy web instances before reports: index %d, %+v", index, ins)
	}
	getJSON(t, hs.URL+"/v1/services/web?all=1", &ins)
	if diff := cmp.Diff([]spec.ServiceInstance{instance(a0, spec.HealthPending), instance(a1, spec.HealthPending)}, ins); diff != "" {
		t.Fatalf("all web instances before reports (-want +got):\n%s", diff)
	}

	// A blocking query wakes when the service changes.
	type result struct {
		ins   []spec.ServiceInstance
		index int64
	}
	woke := make(chan result, 1)
	go func() {
		var ins []spec.ServiceInstance
		idx := getJSON(t, fmt.Sprintf("%s/v1/services/web?index=%d&wait=20s", hs.URL, index), &ins)
		woke <- result{ins, idx}
	}()
	time.Sleep(100 * time.Millisecond) // let it block
	pass := spec.CheckState{Service: "web", Check: "alive", Status: spec.CheckPassing, Output: "HTTP 200"}
	fail := spec.CheckState{Service: "web", Check: "alive", Status: spec.CheckFailing, Output: "HTTP 500", Failures: 1}
	report(t, hs.URL, "n1", secret, map[string]*spec.AllocStatus{a0.ID: runningWith(pass), a1.ID: runningWith(fail)})
	var got result
	select {
	case got = <-woke:
	case <-time.After(10 * time.Second):
		t.Fatal("the blocking query did not wake within 10s of the report")
	}
	if diff := cmp.Diff([]spec.ServiceInstance{instance(a0, spec.HealthHealthy, pass)}, got.ins); diff != "" {
		t.Fatalf("healthy web instances after the reports (-want +got):\n%s", diff)
	}
	if got.index <= index {
		t.Fatalf("index did not move: %d -> %d", index, got.index)
	}
	getJSON(t, hs.URL+"/v1/services", &sums)
	want = []spec.ServiceSummary{{Name: "bare", Healthy: 2, Instances: 2}, {Name: "web", Tags: []string{"v1"}, Healthy: 1, Instances: 2}}
	if diff := cmp.Diff(want, sums); diff != "" {
		t.Fatalf("summaries after reports (-want +got):\n%s", diff)
	}

	// A change that is not web's does not wake web's watcher.
	st := runningWith(fail)
	st.Description = "still failing"
	start := time.Now()
	report(t, hs.URL, "n1", secret, map[string]*spec.AllocStatus{a1.ID: st})
	idx := getJSON(t, fmt.Sprintf("%s/v1/services/web?index=%d&wait=400ms", hs.URL, got.index), &ins)
	if waited := time.Since(start); waited < 400*time.Millisecond || idx != got.index {
		t.Fatalf("an unrelated change woke the watcher after %s (index %d -> %d)", waited, got.index, idx)
	}

	// DNS serves the healthy instance only.
	m := new(dns.Msg)
	m.SetQuestion("web.service.drover.", dns.TypeSRV)
	r, _, err := (&dns.Client{Net: "udp"}).Exchange(m, dnsAddr)
	if err != nil {
		t.Fatal(err)
	}
	var rrs []string
	for _, rr := range slices.Concat(r.Answer, r.Extra) {
		rrs = append(rrs, strings.Join(strings.Fields(rr.String()), " "))
	}
	wantRRs := []string{
		fmt.Sprintf("web.service.drover. 0 IN SRV 1 1 %d %s.addr.drover.", a0.Ports[0].Value, a0.ID),
		a0.ID + ".addr.drover. 0 IN A 127.0.0.7",
	}
	if diff := cmp.Diff(wantRRs, rrs); diff != "" {
		t.Fatalf("DNS SRV answer (-want +got):\n%s", diff)
	}

	// The instance fails: gone from DNS with the next query after the
	// report is in.
	report(t, hs.URL, "n1", secret, map[string]*spec.AllocStatus{a0.ID: runningWith(fail)})
	deadline := time.Now().Add(5 * time.Second)
	for {
		m.SetQuestion("web.service.drover.", dns.TypeA)
		r, _, err := (&dns.Client{Net: "udp"}).Exchange(m, dnsAddr)
		if err != nil {
			t.Fatal(err)
		}
		if r.Rcode == dns.RcodeNameError && len(r.Answer) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("web still in DNS 5s after it failed: %v", r)
		}
		time.Sleep(10 * time.Millisecond)
	}

	// Unknown names.
	status, msg := call(t, "GET", hs.URL+"/v1/services/nope", "", nil)
	if status != 404 || !strings.Contains(msg, `no service \"nope\"; known services: bare, web`) {
		t.Fatalf("unknown service: %d %s", status, msg)
	}
	if status, msg := call(t, "GET", hs.URL+"/v1/services/web?all=maybe", "", nil); status != 400 || !strings.Contains(msg, `all must be 1 or true`) {
		t.Fatalf("bad ?all: %d %s", status, msg)
	}
}

func TestServicesNoneRegistered(t *testing.T) {
	hs, _ := testServer(t)
	var sums []spec.ServiceSummary
	getJSON(t, hs.URL+"/v1/services", &sums)
	if sums == nil || len(sums) != 0 {
		t.Fatalf("summaries: %#v, want an empty list", sums)
	}
	status, msg := call(t, "GET", hs.URL+"/v1/services/web", "", nil)
	if status != 404 || !strings.Contains(msg, "no service \\\"web\\\": no service is registered") {
		t.Fatalf("unknown service: %d %s", status, msg)
	}
	// A 404 carries an index, so that a watcher's next query (a template
	// waiting for the service) blocks instead of asking again at once.
	resp, err := http.Get(hs.URL + "/v1/services/web")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if idx, _ := strconv.ParseInt(resp.Header.Get("X-Drover-Index"), 10, 64); resp.StatusCode != 404 || idx < 1 {
		t.Fatalf("unknown service: %d with index %q, want 404 with an index >= 1", resp.StatusCode, resp.Header.Get("X-Drover-Index"))
	}
}

// An address that cannot be bound fails Run at once, before it touches the
// registry; with DNSOptional the server runs without DNS.
func TestDNSAddrTaken(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	taken := pc.LocalAddr().String()
	srv := New(Config{DNSAddr: taken, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := srv.ListenDNS(); err == nil || !strings.Contains(err.Error(), "dns: listen on udp "+taken) {
		t.Fatalf("ListenDNS on a taken address: %v", err)
	}
	err = New(Config{DNSAddr: taken, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}).Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "dns: listen on udp "+taken) || !strings.Contains(err.Error(), "--dns-addr") {
		t.Fatalf("Run with a taken DNS address: %v", err)
	}
	hs, _ := dnsServer(t, taken, true) // leads, or it fails
	var sums []spec.ServiceSummary
	getJSON(t, hs.URL+"/v1/services", &sums)
}
