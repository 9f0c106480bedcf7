package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/drover-org/drover/internal/spec"
)

// freeLoopbackPort is a loopback port that was free for TCP and UDP.
func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if pc, err := net.ListenPacket("udp", l.Addr().String()); err == nil {
			pc.Close()
			return port
		}
	}
	t.Fatal("no free loopback port")
	return 0
}

// TestNomadServiceNumericPort: a group service whose port is written as a
// number (port = "P", Nomad's literal port), with no port in the group's
// network, registers its instance at that port. A real HTTP server
// (internal/testapp) listens on P; the service's http check, which has no
// port of its own, probes P and passes (the server answers), and the
// catalog serves the instance at P through the API and as DNS's SRV record.
func TestNomadServiceNumericPort(t *testing.T) {
	dir := t.TempDir()
	app := buildTestapp(t, dir)
	port, dnsPort := freeLoopbackPort(t), freeLoopbackPort(t)
	dnsAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(dnsPort))
	d := startDevFlags(t, dir+"/data", []string{"--dns-addr", dnsAddr})
	out, errOut, code := d.cli("", "run", writeJob(t, dir, "numport.nomad", fmt.Sprintf(`
job "numport" {
  group "g" {
    service {
      name = "numport"
      port = "%[2]d"
      check {
        type     = "http"
        path     = "/health"
        interval = "500ms"
        timeout  = "400ms"
      }
    }
    task "server" {
      driver = "raw_exec"
      config {
        command = %[1]q
        args    = ["-listen", "127.0.0.1:%[2]d"]
      }
      resources {
        cpu    = 20
        memory = 32
      }
    }
  }
}
`, app, port)))
	if code != 0 {
		t.Fatalf("drover run: exit %d\n%s\n%s", code, out, errOut)
	}

	// The task itself serves at the port, evidence from outside drover.
	httpc := &http.Client{Timeout: 5 * time.Second}
	resp, err := httpc.Get(fmt.Sprintf("http://127.0.0.1:%d/", port))
	if err != nil {
		t.Fatalf("the task does not serve at its service's port %d: %v", port, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.HasPrefix(string(body), "ok ") {
		t.Fatalf("GET / at port %d = %q, want testapp's ok", port, body)
	}

	// The API: one healthy instance at the port, its check passing on it.
	var ins []spec.ServiceInstance
	waitFor(t, 30*time.Second, "numport healthy in the catalog", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ins, _, err = d.client().Service(ctx, "numport", false, nil)
		return err == nil && len(ins) == 1
	})
	in := ins[0]
	if in.Port != port || in.Address != "127.0.0.1" || in.Health != spec.HealthHealthy {
		t.Errorf("catalog instance at %s:%d (%s), want 127.0.0.1:%d healthy", in.Address, in.Port, in.Health, port)
	}
	if len(in.Checks) != 1 || in.Checks[0].Status != spec.CheckPassing || in.Checks[0].Output != "HTTP 200" {
		t.Errorf("checks %+v, want one passing with HTTP 200", in.Checks)
	}

	// DNS: the SRV record names the port.
	m := new(dns.Msg)
	m.SetQuestion("numport.service.drover.", dns.TypeSRV)
	r, _, err := (&dns.Client{Net: "udp", Timeout: 5 * time.Second}).Exchange(m, dnsAddr)
	if err != nil {
		t.Fatalf("DNS at %s: %v", dnsAddr, err)
	}
	var srvs []string
	for _, rr := range r.Answer {
		if srv, ok := rr.(*dns.SRV); ok {
			srvs = append(srvs, strconv.Itoa(int(srv.Port)))
		}
	}
	if len(srvs) != 1 || srvs[0] != strconv.Itoa(port) {
		t.Errorf("SRV answer ports %v, want [%d]\n%v", srvs, port, r)
	}
}
