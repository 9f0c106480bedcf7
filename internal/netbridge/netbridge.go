// Package netbridge gives an allocation a network of its own: a network
// namespace per allocation, named after it, with only loopback (mode
// "none") or with a veth pair to a Linux bridge on the node, an address
// from the bridge's subnet, a default route through the bridge, and the
// allocation's host ports forwarded to its address by nftables DNAT rules
// (mode "bridge"). It is the one package that talks netlink, nftables and
// iptables (vishvananda/netlink and netns, google/nftables,
// coreos/go-iptables); the agent calls it and the exec driver joins the
// namespaces it makes.
//
// Everything it makes is named after the bridge and the node (Owner), so
// that what one agent made is found again by the next (a restart) and
// never confused with what another agent made, on the same bridge or
// another: namespace /run/netns/<bridge>-<owner>-<alloc ID>, host-side
// veth "dv" + the first 12 hex digits of the alloc ID, nftables table
// "drover_<bridge>", each DNAT rule tagged with its namespace's name,
// iptables chain DROVER-FWD-<bridge> (forward.go).
package netbridge

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Defaults of Config, as Nomad's client: bridge "drover0" (Nomad's is
// "nomad"), subnet 172.26.64.0/20.
const (
	DefaultBridge = "drover0"
	DefaultSubnet = "172.26.64.0/20"
)

// NamespaceDir is where the namespaces are bound, as `ip netns` does.
const NamespaceDir = "/run/netns"

// The network modes this package makes (spec.NetworkBridge, spec.NetworkNone).
const (
	ModeBridge = "bridge"
	ModeNone   = "none"
)

// Config says which bridge and subnet the agent uses, and whose the
// namespaces are (Owner: the node's ID, a short one). Agents on one
// machine may share a bridge: each takes addresses no namespace on it
// holds; a bridge and a subnet each keeps them apart for sure.
type Config struct {
	Bridge string
	Subnet netip.Prefix
	Owner  string
}

// ParseConfig checks a bridge name and a subnet as an operator writes
// them (`drover agent --bridge-network-name`, `--bridge-network-subnet`);
// "" takes the default.
func ParseConfig(bridge, subnet string) (Config, error) {
	if bridge == "" {
		bridge = DefaultBridge
	}
	if subnet == "" {
		subnet = DefaultSubnet
	}
	// "dv" + 12 hex digits and the bridge's name are interface names: at
	// most 15 bytes; namespaces add "-" and an alloc ID to it.
	if len(bridge) > 15 || strings.ContainsAny(bridge, "/ \t\n") || bridge == "." || bridge == ".." {
		return Config{}, fmt.Errorf("bridge network name %q is not an interface name: use at most 15 letters, digits, '-' or '_', such as %q", bridge, DefaultBridge)
	}
	p, err := netip.ParsePrefix(subnet)
	if err != nil || !p.Addr().Is4() || p.Bits() > 30 || p.Bits() < 8 {
		return Config{}, fmt.Errorf("bridge network subnet %q is not an IPv4 subnet of /8 to /30 in CIDR form, such as %q", subnet, DefaultSubnet)
	}
	return Config{Bridge: bridge, Subnet: p.Masked()}, nil
}

// Manager makes and removes the allocations' namespaces on one bridge.
type Manager struct {
	cfg Config
	gw  netip.Addr // the bridge's own address: the subnet's first
	// bridgeErr says why mode bridge is not available (nil: it is); mode
	// none needs only namespaces, which Open checked.
	bridgeErr error
	// forwardErr says why the iptables forward rules (ensureForward) are
	// not there (nil: they are).
	forwardErr error
	fwdMu      sync.Mutex // forwardErr, and remaking the rules

	mu   sync.Mutex
	used map[netip.Addr]string // address -> alloc ID
}

// Net is what Setup made for an alloc: the namespace to join, and in
// bridge mode the alloc's address.
type Net struct {
	Namespace string     // the namespace's path, /run/netns/<bridge>-<alloc ID>
	IP        netip.Addr // zero in mode none
}

// Mapping is one host port forwarded to the alloc's address: TCP and UDP
// to HostPort on any of the node's addresses go to the alloc's To.
type Mapping struct {
	HostPort, To int
}

// Open checks what this machine allows and prepares the bridge and its
// nftables table. It fails when the agent cannot make network namespaces
// (not root, or not allowed): then no mode but host is available. When
// namespaces work but the bridge or nftables do not, mode none is
// available and Modes leaves bridge out; BridgeError says why.
func Open(cfg Config) (*Manager, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("network namespaces need root: the agent runs as uid " + fmt.Sprint(os.Geteuid()))
	}
	if err := probeNamespace(); err != nil {
		return nil, fmt.Errorf("cannot make a network namespace: %w", err)
	}
	m := &Manager{cfg: cfg, gw: cfg.Subnet.Addr().Next(), used: map[netip.Addr]string{}}
	if err := m.ensureBridge(); err != nil {
		m.bridgeErr = fmt.Errorf("bridge %s: %w", cfg.Bridge, err)
	} else if err := m.ensureTable(); err != nil {
		m.bridgeErr = fmt.Errorf("nftables: %w", err)
	} else if err := m.ensureForward(); err != nil {
		m.forwardErr = err
	}
	m.recover()
	return m, nil
}

// Modes are the network modes the machine allows, besides host.
func (m *Manager) Modes() []string {
	if m.bridgeErr != nil {
		return []string{ModeNone}
	}
	return []string{ModeBridge, ModeNone}
}

// BridgeError says why mode bridge is not available, nil when it is.
func (m *Manager) BridgeError() error { return m.bridgeErr }

// ForwardError says why the bridge's iptables forward rules could not be
// made (iptables is missing, for one), nil when they were or when mode
// bridge is not available. Without them, where the host firewall's
// FORWARD policy drops (Docker sets it so), allocs reach nothing beyond
// the node, nor each other's host ports through the node's addresses.
func (m *Manager) ForwardError() error {
	m.fwdMu.Lock()
	defer m.fwdMu.Unlock()
	return m.forwardErr
}

// NamespaceName is the name of alloc's namespace in NamespaceDir.
func (m *Manager) NamespaceName(allocID string) string { return m.prefix() + allocID }

// prefix starts the names of this manager's namespaces.
func (m *Manager) prefix() string {
	if m.cfg.Owner == "" {
		return m.cfg.Bridge + "-"
	}
	return m.cfg.Bridge + "-" + m.cfg.Owner + "-"
}

// NamespacePath is the path of alloc's namespace.
func (m *Manager) NamespacePath(allocID string) string {
	return filepath.Join(NamespaceDir, m.NamespaceName(allocID))
}

// HostVeth is the name of the host side of alloc's veth pair.
func HostVeth(allocID string) string {
	hex := strings.ReplaceAll(allocID, "-", "")
	return "dv" + hex[:min(12, len(hex))]
}

// TableName is the nftables table (family ip) of a bridge's rules.
func TableName(bridge string) string { return "drover_" + bridge }

// Setup makes alloc's namespace for mode (ModeBridge or ModeNone), or
// finds the one an earlier agent made, and (bridge) forwards ports to it.
// It can be called again for the same alloc: what exists is kept, the
// port rules are made anew.
func (m *Manager) Setup(allocID, mode string, ports []Mapping) (Net, error) {
	if allocID == "" || strings.ContainsAny(allocID, "/\x00") || len(m.NamespaceName(allocID)) > 255 {
		return Net{}, fmt.Errorf("alloc ID %q cannot name a namespace", allocID)
	}
	if mode == ModeBridge && m.bridgeErr != nil {
		return Net{}, fmt.Errorf("network mode bridge is not available on this node: %w", m.bridgeErr)
	}
	if mode != ModeBridge && mode != ModeNone {
		return Net{}, fmt.Errorf("network mode %q: netbridge makes only %q and %q", mode, ModeBridge, ModeNone)
	}
	ns, err := m.namespace(allocID)
	if err != nil {
		return Net{}, err
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return Net{}, fmt.Errorf("netlink in namespace %s: %w", m.NamespaceName(allocID), err)
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err == nil {
		err = h.LinkSetUp(lo)
	}
	if err != nil {
		return Net{}, fmt.Errorf("loopback in namespace %s: %w", m.NamespaceName(allocID), err)
	}
	n := Net{Namespace: m.NamespacePath(allocID)}
	if mode == ModeNone {
		return n, nil
	}
	m.recheckForward()
	ip, err := m.plug(allocID, ns, h)
	if err != nil {
		return Net{}, err
	}
	n.IP = ip
	if err := m.forward(allocID, ip, ports); err != nil {
		return Net{}, err
	}
	return n, nil
}

// Teardown removes alloc's port rules, veth pair and namespace, and frees
// its address. What is already gone is no error.
func (m *Manager) Teardown(allocID string) error {
	var errs []error
	if m.bridgeErr == nil {
		if err := m.deleteRules(func(id string) bool { return id == allocID }); err != nil {
			errs = append(errs, err)
		}
	}
	if l, err := netlink.LinkByName(HostVeth(allocID)); err == nil {
		if err := netlink.LinkDel(l); err != nil {
			errs = append(errs, fmt.Errorf("delete veth %s: %w", HostVeth(allocID), err))
		}
	}
	if err := netns.DeleteNamed(m.NamespaceName(allocID)); err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		errs = append(errs, fmt.Errorf("delete namespace %s: %w", m.NamespaceName(allocID), err))
	}
	m.mu.Lock()
	for a, id := range m.used {
		if id == allocID {
			delete(m.used, a)
		}
	}
	m.mu.Unlock()
	return errors.Join(errs...)
}

// Allocs are the alloc IDs that have a namespace on this bridge.
func (m *Manager) Allocs() []string {
	ents, _ := os.ReadDir(NamespaceDir)
	var out []string
	for _, e := range ents {
		if id, ok := strings.CutPrefix(e.Name(), m.prefix()); ok && id != "" {
			out = append(out, id)
		}
	}
	return out
}

// Cleanup tears down the namespaces and port rules of the allocs keep
// says no to: those of allocs gone while no agent ran.
func (m *Manager) Cleanup(keep func(allocID string) bool) error {
	var errs []error
	for _, id := range m.Allocs() {
		if !keep(id) {
			errs = append(errs, m.Teardown(id))
		}
	}
	if m.bridgeErr == nil {
		// Rules whose namespace is already gone.
		errs = append(errs, m.deleteRules(func(id string) bool { return !keep(id) }))
	}
	return errors.Join(errs...)
}

// probeNamespace makes a namespace and goes back, to learn whether this
// process may. The probe's namespace goes with its last reference.
func probeNamespace() error {
	return onNewThread(func() error {
		orig, err := netns.Get()
		if err != nil {
			return err
		}
		defer orig.Close()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return err
		}
		if err := netns.Set(orig); err != nil {
			return fmt.Errorf("%w: %w", errStayLocked, err)
		}
		return nil
	})
}

// errStayLocked tells onNewThread that its thread must end with its
// goroutine: it is in a namespace that is not the agent's.
var errStayLocked = errors.New("thread left in another namespace")

// onNewThread runs f on a locked thread of its own. When f returns an
// error wrapping errStayLocked, the thread is not given back to the
// runtime (which then ends it, or parks it for good if it is the main
// thread) and that error is returned.
func onNewThread(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		err := f()
		if errors.Is(err, errStayLocked) {
			errc <- err
			return // locked: the runtime ends the thread with this goroutine
		}
		runtime.UnlockOSThread()
		errc <- err
	}()
	return <-errc
}

// namespace opens alloc's namespace, making it when it does not exist.
func (m *Manager) namespace(allocID string) (netns.NsHandle, error) {
	name := m.NamespaceName(allocID)
	if ns, err := netns.GetFromName(name); err == nil {
		return ns, nil
	}
	var made netns.NsHandle
	err := onNewThread(func() error {
		orig, err := netns.Get()
		if err != nil {
			return err
		}
		defer orig.Close()
		made, err = netns.NewNamed(name)
		if err != nil {
			if serr := netns.Set(orig); serr != nil {
				return errors.Join(err, errStayLocked)
			}
			return err
		}
		if err := netns.Set(orig); err != nil {
			made.Close()
			made = netns.None()
			return fmt.Errorf("%w: %w", errStayLocked, err)
		}
		return nil
	})
	if err == nil && !made.IsOpen() {
		err = errors.New("the thread could not return to the agent's namespace")
	}
	if err != nil {
		// A file without its mount, from a failed attempt.
		os.Remove(filepath.Join(NamespaceDir, name))
		return netns.None(), fmt.Errorf("make namespace %s: %w", name, err)
	}
	return made, nil
}

// ensureBridge makes the bridge when it is missing, gives it the subnet's
// first address and brings it up. Traffic from the node's loopback that
// DNAT sends to an alloc leaves through it, which route_localnet allows.
func (m *Manager) ensureBridge() error {
	l, err := netlink.LinkByName(m.cfg.Bridge)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if !errors.As(err, &nf) {
			return err
		}
		br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: m.cfg.Bridge}}
		if err := netlink.LinkAdd(br); err != nil {
			return fmt.Errorf("create: %w", err)
		}
		if l, err = netlink.LinkByName(m.cfg.Bridge); err != nil {
			return err
		}
	}
	if l.Type() != "bridge" {
		return fmt.Errorf("%s exists and is a %s, not a bridge: pick another name with --bridge-network-name", m.cfg.Bridge, l.Type())
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: m.gw.AsSlice(), Mask: net.CIDRMask(m.cfg.Subnet.Bits(), 32)}}
	if err := netlink.AddrReplace(l, addr); err != nil {
		return fmt.Errorf("address %s: %w", addr.IPNet, err)
	}
	if err := netlink.LinkSetUp(l); err != nil {
		return fmt.Errorf("up: %w", err)
	}
	for file, v := range map[string]string{
		"/proc/sys/net/ipv4/conf/" + m.cfg.Bridge + "/route_localnet": "1",
		"/proc/sys/net/ipv4/ip_forward":                               "1",
	} {
		if err := writeSysctl(file, v); err != nil {
			return err
		}
	}
	return nil
}

func writeSysctl(file, v string) error {
	if b, err := os.ReadFile(file); err == nil && strings.TrimSpace(string(b)) == v {
		return nil
	}
	if err := os.WriteFile(file, []byte(v), 0o644); err != nil {
		return fmt.Errorf("sysctl %s: %w", file, err)
	}
	return nil
}

// plug gives the alloc's namespace its veth pair to the bridge, an
// address and a default route, or finds the ones it has.
func (m *Manager) plug(allocID string, ns netns.NsHandle, h *netlink.Handle) (netip.Addr, error) {
	if ip, ok := nsAddr(h); ok {
		m.mu.Lock()
		m.used[ip] = allocID
		m.mu.Unlock()
		if _, err := netlink.LinkByName(HostVeth(allocID)); err == nil {
			return ip, nil
		}
		// Half made: start over.
		if l, err := h.LinkByName(peerName); err == nil {
			h.LinkDel(l)
		}
	}
	br, err := netlink.LinkByName(m.cfg.Bridge)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("bridge %s: %w", m.cfg.Bridge, err)
	}
	ip, err := m.take(allocID)
	if err != nil {
		return netip.Addr{}, err
	}
	fail := func(what string, err error) (netip.Addr, error) {
		if l, lerr := netlink.LinkByName(HostVeth(allocID)); lerr == nil {
			netlink.LinkDel(l)
		}
		m.mu.Lock()
		delete(m.used, ip)
		m.mu.Unlock()
		return netip.Addr{}, fmt.Errorf("alloc %s: %s: %w", allocID, what, err)
	}
	if l, err := netlink.LinkByName(HostVeth(allocID)); err == nil {
		netlink.LinkDel(l) // left by an attempt that failed
	}
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: HostVeth(allocID), MasterIndex: br.Attrs().Index},
		PeerName:      peerName,
		PeerNamespace: netlink.NsFd(int(ns)),
	}
	if err := netlink.LinkAdd(veth); err != nil {
		return fail("create veth "+HostVeth(allocID), err)
	}
	host, err := netlink.LinkByName(HostVeth(allocID))
	if err == nil {
		err = netlink.LinkSetUp(host)
	}
	if err != nil {
		return fail("veth up", err)
	}
	peer, err := h.LinkByName(peerName)
	if err != nil {
		return fail("veth in namespace", err)
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: ip.AsSlice(), Mask: net.CIDRMask(m.cfg.Subnet.Bits(), 32)}}
	if err := h.AddrAdd(peer, addr); err != nil {
		return fail("address "+addr.IPNet.String(), err)
	}
	if err := h.LinkSetUp(peer); err != nil {
		return fail("veth up in namespace", err)
	}
	if err := h.RouteAdd(&netlink.Route{LinkIndex: peer.Attrs().Index, Gw: m.gw.AsSlice()}); err != nil {
		return fail("default route via "+m.gw.String(), err)
	}
	return ip, nil
}

// peerName is the alloc's side of its veth pair, in its namespace.
const peerName = "eth0"

// nsAddr is the IPv4 address of the namespace's eth0, if it has one.
func nsAddr(h *netlink.Handle) (netip.Addr, bool) {
	l, err := h.LinkByName(peerName)
	if err != nil {
		return netip.Addr{}, false
	}
	addrs, err := h.AddrList(l, netlink.FAMILY_V4)
	if err != nil || len(addrs) == 0 {
		return netip.Addr{}, false
	}
	ip, ok := netip.AddrFromSlice(addrs[0].IP.To4())
	return ip, ok
}

// take reserves a free address of the subnet for alloc: the first after
// the bridge's that no namespace holds.
func (m *Manager) take(allocID string) (netip.Addr, error) {
	others := m.othersAddrs()
	m.mu.Lock()
	defer m.mu.Unlock()
	for a := m.gw.Next(); m.cfg.Subnet.Contains(a); a = a.Next() {
		if !m.cfg.Subnet.Contains(a.Next()) {
			break // the broadcast address
		}
		if _, ok := m.used[a]; !ok && !others[a] {
			m.used[a] = allocID
			return a, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("bridge subnet %s is full (%d allocs): give the agent a larger --bridge-network-subnet", m.cfg.Subnet, len(m.used))
}

// recover learns the addresses of the namespaces an earlier agent made.
func (m *Manager) recover() {
	for _, id := range m.Allocs() {
		if ip, ok := addrOf(m.NamespaceName(id)); ok {
			m.used[ip] = id
		}
	}
}

// othersAddrs are the addresses held by the namespaces of other agents on
// the same bridge.
func (m *Manager) othersAddrs() map[netip.Addr]bool {
	out := map[netip.Addr]bool{}
	ents, _ := os.ReadDir(NamespaceDir)
	for _, e := range ents {
		if n := e.Name(); strings.HasPrefix(n, m.cfg.Bridge+"-") && !strings.HasPrefix(n, m.prefix()) {
			if ip, ok := addrOf(n); ok {
				out[ip] = true
			}
		}
	}
	return out
}

// addrOf is the address of eth0 in the namespace named name.
func addrOf(name string) (netip.Addr, bool) {
	ns, err := netns.GetFromName(name)
	if err != nil {
		return netip.Addr{}, false
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return netip.Addr{}, false
	}
	defer h.Close()
	return nsAddr(h)
}
