package netbridge_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coreos/go-iptables/iptables"
	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/drover-org/drover/internal/netbridge"
	"github.com/drover-org/drover/internal/testkit"
)

// ownNetnsEnv names, in the environment of a test binary started by
// inOwnNetns, the test it runs in a network namespace of its own.
const ownNetnsEnv = "DROVER_NETBRIDGE_OWN_NETNS"

// inOwnNetns runs the calling test again in a child test process that
// lives in a new network namespace, so that the firewall policy, the
// bridge, its nftables table and its iptables chain the test makes never
// touch the machine's own network. It returns true in the parent, whose
// verdict is the child's (a skip included), and false in the child, which
// then runs the test with loopback up.
func inOwnNetns(t *testing.T) bool {
	t.Helper()
	if os.Getenv(ownNetnsEnv) == t.Name() {
		lo, err := netlink.LinkByName("lo")
		if err == nil {
			err = netlink.LinkSetUp(lo)
		}
		if err != nil {
			t.Fatalf("loopback in the test's network namespace: %v", err)
		}
		return false
	}
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI runs as root, but this test runs as uid %d", os.Geteuid())
		}
		t.Skipf("needs root (a network namespace of its own, bridges, nftables, iptables); uid %d", os.Geteuid())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+regexp.QuoteMeta(t.Name())+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), ownNetnsEnv+"="+t.Name())
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	out, err := cmd.CombinedOutput()
	t.Logf("the test in a network namespace of its own:\n%s", out)
	switch {
	case err != nil:
		t.Fatalf("the test in its own network namespace failed: %v", err)
	case strings.Contains(string(out), "--- SKIP: "+t.Name()):
		t.Skip("skipped in its own network namespace (above)")
	case !strings.Contains(string(out), "--- PASS: "+t.Name()):
		t.Fatalf("the test in its own network namespace did not pass")
	}
	return true
}

// dropForward sets the policy of iptables' filter FORWARD chain to DROP,
// as dockerd does, in the test's own namespace.
func dropForward(t *testing.T) *iptables.IPTables {
	t.Helper()
	ipt, err := iptables.New(iptables.Timeout(10))
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI installs iptables, but: %v", err)
		}
		t.Skipf("iptables not available: %v", err)
	}
	if err := ipt.ChangePolicy("filter", "FORWARD", "DROP"); err != nil {
		t.Fatal(err)
	}
	return ipt
}

// newNamespace makes a named network namespace of the test's own (removed
// at the end) and returns its path; the calling thread stays where it is.
func newNamespace(t *testing.T, name string) string {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		ns, err := netns.NewNamed(name)
		if err == nil {
			ns.Close()
		}
		errc <- err
	}()
	if err := <-errc; err != nil {
		t.Fatalf("namespace %s: %v", name, err)
	}
	t.Cleanup(func() { netns.DeleteNamed(name) })
	return netbridge.NamespaceDir + "/" + name
}

// beyond makes a namespace past the node: a veth pair from the node
// (10.214.9.1/30) to it (10.214.9.2/30), an address on no bridge, that
// the node routes to. It serves HTTP on port and returns its address.
func beyond(t *testing.T, name string, port int) netip.Addr {
	t.Helper()
	path := newNamespace(t, name)
	ns, err := netns.GetFromPath(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "drvout0"}, PeerName: "eth0", PeerNamespace: netlink.NsFd(int(ns))}
	if err := netlink.LinkAdd(veth); err != nil {
		t.Fatal(err)
	}
	host, err := netlink.LinkByName("drvout0")
	if err == nil {
		err = netlink.AddrAdd(host, &netlink.Addr{IPNet: &net.IPNet{IP: net.IPv4(10, 214, 9, 1), Mask: net.CIDRMask(30, 32)}})
	}
	if err == nil {
		err = netlink.LinkSetUp(host)
	}
	if err != nil {
		t.Fatal(err)
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for _, n := range []string{"lo", "eth0"} {
		l, err := h.LinkByName(n)
		if err == nil && n == "eth0" {
			err = h.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: net.IPv4(10, 214, 9, 2), Mask: net.CIDRMask(30, 32)}})
		}
		if err == nil {
			err = h.LinkSetUp(l)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	serveIn(t, path, port)
	return netip.MustParseAddr("10.214.9.2")
}

// getFrom GETs http://addr/ from a socket made in the namespace at path,
// as a process there would: the answer's body, or why none came.
func getFrom(path string, addr netip.AddrPort) (string, error) {
	type result struct {
		body string
		err  error
	}
	rc := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		ns, err := netns.GetFromPath(path)
		if err != nil {
			rc <- result{err: err}
			return
		}
		defer ns.Close()
		if err := netns.Set(ns); err != nil {
			rc <- result{err: err}
			return
		}
		c, err := net.DialTimeout("tcp4", addr.String(), 3*time.Second)
		if err != nil {
			rc <- result{err: err}
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(3 * time.Second))
		fmt.Fprintf(c, "GET / HTTP/1.0\r\nHost: %s\r\n\r\n", addr)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			rc <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		rc <- result{string(b), err}
	}()
	r := <-rc
	return r.body, r.err
}

// iptablesRules lists chain of table filter as `iptables -S` does, through
// the library.
func iptablesRules(t *testing.T, ipt *iptables.IPTables, chain string) []string {
	t.Helper()
	rules, err := ipt.List("filter", chain)
	if err != nil {
		t.Fatal(err)
	}
	return rules
}

// count is how many of rules contain s.
func count(rules []string, s string) int {
	n := 0
	for _, r := range rules {
		if strings.Contains(r, s) {
			n++
		}
	}
	return n
}

// Where the host firewall's FORWARD policy drops (as Docker sets it), an
// alloc reaches an address beyond the node through the bridge's own
// iptables chain, jumped to from FORWARD; without the jump it does not.
// A second Open (an agent restart) makes the jump again, once, and adds
// no rule twice.
func TestBridgeForwardPastDropPolicy(t *testing.T) {
	if inOwnNetns(t) {
		return
	}
	ipt := dropForward(t)
	const bridge = "drvtest4"
	m := open(t, bridge, "10.213.4.0/24")
	if err := m.ForwardError(); err != nil {
		t.Fatalf("forward rules: %v", err)
	}
	alloc := "4a000000-0000-0000-0000-000000000001"
	hostPort := testkit.FreePort(t)
	n, err := m.Setup(alloc, netbridge.ModeBridge, []netbridge.Mapping{{HostPort: hostPort, To: 8082}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Teardown(alloc) })
	serveIn(t, n.Namespace, 8082)
	far := netip.AddrPortFrom(beyond(t, "drvtest4-beyond", 8081), 8081)

	body, err := getFrom(n.Namespace, far)
	if err != nil || !strings.HasPrefix(body, "inside drvtest4-beyond") {
		t.Fatalf("GET %s from the alloc = %q, %v; want the server beyond the node", far, body, err)
	}
	// And the other way: from beyond the node to the alloc's host port on
	// the node's address there, a new connection DNATed into the bridge.
	hostAddr := netip.AddrPortFrom(netip.MustParseAddr("10.214.9.1"), uint16(hostPort))
	farPath := netbridge.NamespaceDir + "/drvtest4-beyond"
	if body, err := getFrom(farPath, hostAddr); err != nil || !strings.HasPrefix(body, "inside ") {
		t.Fatalf("GET %s from beyond the node = %q, %v; want the alloc's answer", hostAddr, body, err)
	}

	// Without the jump, the policy drops the alloc's traffic.
	fwd := iptablesRules(t, ipt, "FORWARD")
	jump := "-j " + netbridge.ForwardChain(bridge)
	if count(fwd, jump) != 1 || !strings.Contains(fwd[1], jump) {
		t.Fatalf("FORWARD = %q, want one rule %q, the first", fwd, jump)
	}
	if err := ipt.DeleteById("filter", "FORWARD", 1); err != nil {
		t.Fatal(err)
	}
	if body, err := getFrom(n.Namespace, far); err == nil {
		t.Fatalf("GET %s from the alloc without the jump to %s = %q; want it dropped by the FORWARD policy", far, netbridge.ForwardChain(bridge), body)
	}
	// The next instance set up in mode bridge puts the jump back (a
	// firewall reload flushed it, say).
	other := "4b000000-0000-0000-0000-000000000002"
	if _, err := m.Setup(other, netbridge.ModeBridge, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Teardown(other) })
	if body, err := getFrom(n.Namespace, far); err != nil || !strings.HasPrefix(body, "inside drvtest4-beyond") {
		t.Fatalf("GET %s from the alloc after the next setup = %q, %v; want the jump made again", far, body, err)
	}
	if err := ipt.DeleteById("filter", "FORWARD", 1); err != nil {
		t.Fatal(err)
	}

	// An agent restart makes what is missing, and nothing twice.
	for range 2 {
		m = open(t, bridge, "10.213.4.0/24")
	}
	if body, err := getFrom(n.Namespace, far); err != nil || !strings.HasPrefix(body, "inside drvtest4-beyond") {
		t.Fatalf("GET %s from the alloc after a restart = %q, %v", far, body, err)
	}
	if fwd := iptablesRules(t, ipt, "FORWARD"); count(fwd, jump) != 1 || !strings.Contains(fwd[1], jump) {
		t.Errorf("FORWARD after two opens = %q, want one rule %q, the first", fwd, jump)
	}
	own := iptablesRules(t, ipt, netbridge.ForwardChain(bridge))
	t.Logf("after two opens:\n%s\n%s", strings.Join(iptablesRules(t, ipt, "FORWARD"), "\n"), strings.Join(own, "\n"))
	if len(own) != 5 || count(own, "-j "+netbridge.AdminChain) != 1 || !strings.Contains(own[1], "-j "+netbridge.AdminChain) ||
		count(own, "-i "+bridge+" ") != 1 || count(own, "-o "+bridge+" ") != 2 || count(own, "--ctstate DNAT") != 1 {
		t.Errorf("chain %s after two opens = %q, want its creation and 4 rules: the jump to %s first, in from %s, host ports into it, replies out to it",
			netbridge.ForwardChain(bridge), own, netbridge.AdminChain, bridge)
	}
	// The operator's chain decides first: a REJECT there of the address
	// beyond stops the alloc reaching it.
	if err := ipt.Append("filter", netbridge.AdminChain, "-d", "10.214.9.2", "-j", "REJECT"); err != nil {
		t.Fatal(err)
	}
	if body, err := getFrom(n.Namespace, far); err == nil {
		t.Errorf("GET %s from the alloc with the operator's REJECT in %s = %q; want it refused", far, netbridge.AdminChain, body)
	}
	if err := ipt.ClearChain("filter", netbridge.AdminChain); err != nil {
		t.Fatal(err)
	}

	if err := netbridge.Remove(bridge); err != nil {
		t.Fatal(err)
	}
	if fwd := iptablesRules(t, ipt, "FORWARD"); count(fwd, jump) != 0 {
		t.Errorf("FORWARD after Remove = %q, want no jump to %s", fwd, netbridge.ForwardChain(bridge))
	}
	if ok, err := ipt.ChainExists("filter", netbridge.ForwardChain(bridge)); err != nil || ok {
		t.Errorf("chain %s after Remove: exists %v, %v", netbridge.ForwardChain(bridge), ok, err)
	}
}

// postroutingRules counts the rules of the bridge's postrouting chain
// whose user data is tag, read through nftables.
func postroutingRules(t *testing.T, bridge, tag string) []*nftables.Rule {
	t.Helper()
	c, err := nftables.New()
	if err != nil {
		t.Fatal(err)
	}
	tbl := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: netbridge.TableName(bridge)}
	rules, err := c.GetRules(tbl, &nftables.Chain{Name: "postrouting", Table: tbl})
	if err != nil {
		t.Fatal(err)
	}
	var out []*nftables.Rule
	for _, r := range rules {
		if string(r.UserData) == tag {
			out = append(out, r)
		}
	}
	return out
}

// Hairpin: alloc A reaches alloc B's host port through the node's
// addresses (the bridge's own, and another of the node's, not loopback)
// and gets B's answer, with the FORWARD policy dropping; without the
// masquerade rule it does not. Two opens leave the rule once.
func TestBridgeHairpin(t *testing.T) {
	if inOwnNetns(t) {
		return
	}
	dropForward(t)
	const bridge = "drvtest5"
	open(t, bridge, "10.213.5.0/24") // the first open; the second below
	m := open(t, bridge, "10.213.5.0/24")
	// The node's primary address, on an interface of its own (one end of
	// a veth pair: this kernel may lack the dummy interface).
	primary := netip.MustParseAddr("10.214.8.1")
	nic := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "drvprim0"}, PeerName: "drvprim1"}
	err := netlink.LinkAdd(nic)
	if err == nil {
		err = netlink.AddrAdd(nic, &netlink.Addr{IPNet: &net.IPNet{IP: primary.AsSlice(), Mask: net.CIDRMask(24, 32)}})
	}
	if err == nil {
		err = netlink.LinkSetUp(nic)
	}
	if err != nil {
		t.Fatal(err)
	}
	a, b := "5a000000-0000-0000-0000-000000000001", "5b000000-0000-0000-0000-000000000002"
	hostPort := testkit.FreePort(t)
	na, err := m.Setup(a, netbridge.ModeBridge, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Teardown(a) })
	nb, err := m.Setup(b, netbridge.ModeBridge, []netbridge.Mapping{{HostPort: hostPort, To: 8080}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Teardown(b) })
	serveIn(t, nb.Namespace, 8080)
	gw := m.Config().Subnet.Addr().Next()
	want := "inside " + m.NamespaceName(b)
	hairpin := func(how string) {
		t.Helper()
		for _, node := range []netip.Addr{gw, primary} {
			to := netip.AddrPortFrom(node, uint16(hostPort))
			if body, err := getFrom(na.Namespace, to); err != nil || !strings.HasPrefix(body, want) {
				t.Errorf("%s: GET %s from alloc A = %q, %v; want alloc B's answer %q", how, to, body, err, want)
			}
		}
	}
	// Docker loads br_netfilter, which makes traffic across a bridge pass
	// iptables and conntrack (then B's answer is un-DNATed on the bridge
	// too); a machine without it relies on the masquerade alone.
	const brnf = "/proc/sys/net/bridge/bridge-nf-call-iptables"
	if _, err := os.Stat(brnf); err == nil {
		setSysctl(t, brnf, "1")
		hairpin("with br_netfilter")
		setSysctl(t, brnf, "0")
	}
	hairpin("without br_netfilter")
	rules := postroutingRules(t, bridge, netbridge.MasqueradeHairpin)
	if len(rules) != 1 {
		t.Fatalf("%d hairpin masquerade rules after two opens, want 1", len(rules))
	}

	// Without the masquerade, B answers A straight across the bridge,
	// from an address A did not connect to.
	c, err := nftables.New()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.DelRule(rules[0]); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	to := netip.AddrPortFrom(gw, uint16(hostPort))
	if body, err := getFrom(na.Namespace, to); err == nil {
		t.Errorf("GET %s from alloc A without the hairpin masquerade = %q; want no answer", to, body)
	}
}

// setSysctl writes a sysctl of the test's own network namespace.
func setSysctl(t *testing.T, file, v string) {
	t.Helper()
	if err := os.WriteFile(file, []byte(v), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Without an iptables command, bridge mode is still available and
// ForwardError says why the forward rules are missing.
func TestBridgeWithoutIPTables(t *testing.T) {
	if inOwnNetns(t) {
		return
	}
	t.Setenv("PATH", t.TempDir())
	m := open(t, "drvtest6", "10.213.6.0/24")
	if err := m.ForwardError(); err == nil || !strings.Contains(err.Error(), "iptables") {
		t.Errorf("ForwardError with no iptables on PATH = %v, want one naming iptables", err)
	}
	if got := m.Modes(); len(got) != 2 || got[0] != netbridge.ModeBridge {
		t.Errorf("modes without iptables = %v, want bridge and none", got)
	}
}
