package netbridge_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/drover-org/drover/internal/netbridge"
	"github.com/drover-org/drover/internal/testkit"
)

// open opens a manager on a bridge of the test's own (name and subnet),
// or skips when the machine does not allow bridges (fails under CI=true,
// which runs as root with nftables). The bridge and its table are removed
// at the end.
func open(t *testing.T, name, subnet string) *netbridge.Manager {
	t.Helper()
	cfg, err := netbridge.ParseConfig(name, subnet)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Owner = "node1"
	m, err := netbridge.Open(cfg)
	if err == nil {
		err = m.BridgeError()
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI runs as root with nftables, but bridge mode is not available: %v", err)
		}
		t.Skipf("bridge mode not available here: %v", err)
	}
	t.Cleanup(func() {
		if err := netbridge.Remove(name); err != nil {
			t.Errorf("remove bridge %s: %v", name, err)
		}
	})
	return m
}

// serveIn serves HTTP on port of every address of the namespace at path:
// the listening socket is made on a thread inside the namespace, and
// stays in it.
func serveIn(t *testing.T, path string, port int) {
	t.Helper()
	errc := make(chan error, 1)
	var ln net.Listener
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		ns, err := netns.GetFromPath(path)
		if err != nil {
			errc <- err
			return
		}
		defer ns.Close()
		if err := netns.Set(ns); err != nil {
			errc <- err
			return
		}
		ln, err = net.Listen("tcp4", fmt.Sprintf(":%d", port))
		errc <- err
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "inside %s %s", filepath.Base(path), r.Host)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
}

// dnatRules counts the rules of the table's prerouting and output chains
// tagged with alloc, read through nftables.
func dnatRules(t *testing.T, m *netbridge.Manager, alloc string) int {
	t.Helper()
	c, err := nftables.New()
	if err != nil {
		t.Fatal(err)
	}
	tbl := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: netbridge.TableName(m.Config().Bridge)}
	n := 0
	for _, ch := range []string{"prerouting", "output"} {
		rules, err := c.GetRules(tbl, &nftables.Chain{Name: ch, Table: tbl})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rules {
			if string(r.UserData) == m.NamespaceName(alloc) {
				n++
			}
		}
	}
	return n
}

func get(url string) (string, error) {
	c := &http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// A bridge-mode alloc's port is reached through the node's host port on
// 127.0.0.1, and once torn down, nothing of it is left: namespace, veth,
// DNAT rules.
func TestBridgePortMapping(t *testing.T) {
	const bridge = "drvtest0"
	m := open(t, bridge, "10.213.0.0/24")
	alloc := "0b1dfa00-1111-2222-3333-444455556666"
	host := testkit.FreePort(t)
	n, err := m.Setup(alloc, netbridge.ModeBridge, []netbridge.Mapping{{HostPort: host, To: 8080}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Teardown(alloc) })
	if n.IP.String() != "10.213.0.2" {
		t.Errorf("first alloc's address %s, want 10.213.0.2 (after the bridge's .1)", n.IP)
	}
	if _, err := os.Stat(n.Namespace); err != nil {
		t.Fatalf("namespace: %v", err)
	}
	if _, err := netlink.LinkByName(netbridge.HostVeth(alloc)); err != nil {
		t.Fatalf("host veth: %v", err)
	}
	if got := dnatRules(t, m, alloc); got != 4 {
		t.Errorf("%d DNAT rules for the alloc, want 4 (tcp and udp, prerouting and output)", got)
	}
	serveIn(t, n.Namespace, 8080)
	body, err := get(fmt.Sprintf("http://127.0.0.1:%d/", host))
	if err != nil || !strings.HasPrefix(body, "inside ") {
		t.Fatalf("GET 127.0.0.1:%d = %q, %v; want the server in the namespace", host, body, err)
	}

	// Setup again (an agent restart) keeps the address and the rules.
	again, err := m.Setup(alloc, netbridge.ModeBridge, []netbridge.Mapping{{HostPort: host, To: 8080}})
	if err != nil || again.IP != n.IP {
		t.Fatalf("setup again: %v, %v; want the same address %s", again.IP, err, n.IP)
	}
	if got := dnatRules(t, m, alloc); got != 4 {
		t.Errorf("%d DNAT rules after a second setup, want 4", got)
	}

	if err := m.Teardown(alloc); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(n.Namespace); !os.IsNotExist(err) {
		t.Errorf("namespace %s left: %v", n.Namespace, err)
	}
	if _, err := netlink.LinkByName(netbridge.HostVeth(alloc)); err == nil {
		t.Errorf("veth %s left", netbridge.HostVeth(alloc))
	}
	if got := dnatRules(t, m, alloc); got != 0 {
		t.Errorf("%d DNAT rules left", got)
	}
}

// An earlier agent's namespaces are found again by a new manager: their
// addresses are not given twice, and Cleanup removes those of allocs gone.
func TestBridgeRecoverAndCleanup(t *testing.T) {
	const bridge = "drvtest1"
	m := open(t, bridge, "10.213.1.0/24")
	kept, gone := "1a000000-0000-0000-0000-000000000001", "1b000000-0000-0000-0000-000000000002"
	for _, id := range []string{kept, gone} {
		if _, err := m.Setup(id, netbridge.ModeBridge, []netbridge.Mapping{{HostPort: testkit.FreePort(t), To: 80}}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Teardown(id) })
	}
	before := m.UsedAddrs()

	m2 := open(t, bridge, "10.213.1.0/24")
	if got := m2.UsedAddrs(); len(got) != 2 || got[kept] != before[kept] || got[gone] != before[gone] {
		t.Fatalf("a new manager found %v, want %v", got, before)
	}
	if err := m2.Cleanup(func(id string) bool { return id == kept }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(m2.NamespacePath(gone)); !os.IsNotExist(err) {
		t.Errorf("gone alloc's namespace left: %v", err)
	}
	if dnatRules(t, m2, gone) != 0 || dnatRules(t, m2, kept) != 4 {
		t.Errorf("rules after cleanup: gone %d (want 0), kept %d (want 4)", dnatRules(t, m2, gone), dnatRules(t, m2, kept))
	}
	third, err := m2.Setup("1c000000-0000-0000-0000-000000000003", netbridge.ModeBridge, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m2.Teardown("1c000000-0000-0000-0000-000000000003") })
	if third.IP == before[kept] {
		t.Errorf("new alloc given %s, which the kept alloc holds", third.IP)
	}
}

// Mode none: a namespace with only loopback, up.
func TestNoneOnlyLoopback(t *testing.T) {
	m := open(t, "drvtest2", "10.213.2.0/24")
	alloc := "2a000000-0000-0000-0000-000000000001"
	n, err := m.Setup(alloc, netbridge.ModeNone, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Teardown(alloc) })
	ns, err := netns.GetFromPath(n.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	links, err := h.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range links {
		names = append(names, l.Attrs().Name)
	}
	if len(links) != 1 || names[0] != "lo" || links[0].Attrs().Flags&net.FlagUp == 0 {
		t.Errorf("links in a mode none namespace: %v, want only lo, up", names)
	}
	if n.IP.IsValid() {
		t.Errorf("mode none got an address %s", n.IP)
	}
}

func TestParseConfig(t *testing.T) {
	for _, tc := range []struct{ name, subnet, err string }{
		{"", "", ""},
		{"a-very-long-bridge-name", "", "not an interface name"},
		{"br0", "10.0.0.0", "not an IPv4 subnet"},
		{"br0", "fd00::/64", "not an IPv4 subnet"},
		{"br0", "10.0.0.0/31", "not an IPv4 subnet"},
	} {
		cfg, err := netbridge.ParseConfig(tc.name, tc.subnet)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%q %q: %v", tc.name, tc.subnet, err)
		case tc.err == "" && (cfg.Bridge != netbridge.DefaultBridge || cfg.Subnet.String() != netbridge.DefaultSubnet):
			t.Errorf("defaults: %+v", cfg)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q %q: error %v, want one saying %q", tc.name, tc.subnet, err, tc.err)
		}
	}
}

// Two agents on one bridge: neither takes an address the other's
// namespaces hold, and one's cleanup leaves the other's namespaces alone.
func TestBridgeSharedByTwoAgents(t *testing.T) {
	const bridge = "drvtest3"
	a := open(t, bridge, "10.213.3.0/24")
	cfg := a.Config()
	cfg.Owner = "node2"
	b, err := netbridge.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ida, idb := "3a000000-0000-0000-0000-000000000001", "3b000000-0000-0000-0000-000000000002"
	na, err := a.Setup(ida, netbridge.ModeBridge, []netbridge.Mapping{{HostPort: testkit.FreePort(t), To: 80}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Teardown(ida) })
	nb, err := b.Setup(idb, netbridge.ModeBridge, []netbridge.Mapping{{HostPort: testkit.FreePort(t), To: 80}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Teardown(idb) })
	if na.IP == nb.IP {
		t.Fatalf("both agents gave %s", na.IP)
	}
	if err := b.Cleanup(func(string) bool { return false }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(na.Namespace); err != nil {
		t.Errorf("the other agent's cleanup removed %s: %v", na.Namespace, err)
	}
	if dnatRules(t, a, ida) != 4 {
		t.Errorf("the other agent's cleanup removed rules: %d left, want 4", dnatRules(t, a, ida))
	}
	if _, err := os.Stat(nb.Namespace); !os.IsNotExist(err) {
		t.Errorf("own namespace %s left by cleanup: %v", nb.Namespace, err)
	}
}
