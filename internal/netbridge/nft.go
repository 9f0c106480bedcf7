package netbridge

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// The bridge's nftables table (family ip) holds three chains:
//
//	prerouting  (nat, dstnat)  DNAT of the allocs' host ports, from other machines and namespaces
//	output      (nat, dstnat)  the same for connections the node itself opens (curl 127.0.0.1:PORT)
//	postrouting (nat, srcnat)  masquerade: the node's loopback DNATed to an alloc, allocs going out,
//	                           and hairpin (an alloc's connection DNATed back into the bridge)
//
// The DNAT rules carry their alloc's namespace name as user data; the
// postrouting rules are the bridge's, made anew by each agent that opens
// it, and carry the names below (Masquerade*) as user data.
const (
	chainPrerouting  = "prerouting"
	chainOutput      = "output"
	chainPostrouting = "postrouting"
)

// The user data of the postrouting chain's masquerade rules.
const (
	// MasqueradeLoopback: the node's loopback DNATed to an alloc; the
	// alloc must not answer 127.0.0.1, its own loopback.
	MasqueradeLoopback = "masquerade loopback"
	// MasqueradeOut: allocs reaching beyond the bridge's subnet go out as
	// the node.
	MasqueradeOut = "masquerade out"
	// MasqueradeHairpin: an alloc reaching a host port through one of the
	// node's addresses, DNATed back into the bridge it came from; the
	// other alloc must answer through the node, which undoes the DNAT, not
	// straight across the bridge.
	MasqueradeHairpin = "masquerade hairpin"
)

// ipsDstNAT is the conntrack status bit of a connection whose
// destination was NATed (IPS_DST_NAT, linux/netfilter/nf_conntrack_common.h).
const ipsDstNAT = 1 << 5

func (m *Manager) table() *nftables.Table {
	return &nftables.Table{Family: nftables.TableFamilyIPv4, Name: TableName(m.cfg.Bridge)}
}

func (m *Manager) chains(t *nftables.Table) (pre, out, post *nftables.Chain) {
	pre = &nftables.Chain{Name: chainPrerouting, Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityNATDest}
	out = &nftables.Chain{Name: chainOutput, Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityNATDest}
	post = &nftables.Chain{Name: chainPostrouting, Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource}
	return pre, out, post
}

// ensureTable makes the table and its chains (adding them again is no
// error) and makes the postrouting rules anew.
func (m *Manager) ensureTable() error {
	c, err := nftables.New()
	if err != nil {
		return err
	}
	defer c.CloseLasting()
	t := c.AddTable(m.table())
	pre, out, post := m.chains(t)
	c.AddChain(pre)
	c.AddChain(out)
	c.AddChain(post)
	c.FlushChain(post)
	bridge := ifname(m.cfg.Bridge)
	lo := netip.MustParsePrefix("127.0.0.0/8")
	c.AddRule(&nftables.Rule{Table: t, Chain: post, UserData: []byte(MasqueradeLoopback), Exprs: slices.Concat(
		[]expr.Any{&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: bridge}},
		inPrefix(12, lo, true),
		[]expr.Any{&expr.Masq{}},
	)})
	c.AddRule(&nftables.Rule{Table: t, Chain: post, UserData: []byte(MasqueradeOut), Exprs: slices.Concat(
		inPrefix(12, m.cfg.Subnet, true),
		inPrefix(16, m.cfg.Subnet, false),
		[]expr.Any{&expr.Masq{}},
	)})
	// iifname bridge oifname bridge ct status dnat masquerade
	c.AddRule(&nftables.Rule{Table: t, Chain: post, UserData: []byte(MasqueradeHairpin), Exprs: []expr.Any{
		&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: bridge},
		&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: bridge},
		&expr.Ct{Key: expr.CtKeySTATUS, Register: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(ipsDstNAT), Xor: binaryutil.NativeEndian.PutUint32(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(0)},
		&expr.Masq{},
	}})
	return c.Flush()
}

// forward replaces alloc's DNAT rules with ones for ports, to ip.
func (m *Manager) forward(allocID string, ip netip.Addr, ports []Mapping) error {
	if err := m.deleteRules(func(id string) bool { return id == allocID }); err != nil {
		return err
	}
	if len(ports) == 0 {
		return nil
	}
	c, err := nftables.New()
	if err != nil {
		return err
	}
	defer c.CloseLasting()
	t := m.table()
	pre, out, _ := m.chains(t)
	for _, ch := range []*nftables.Chain{pre, out} {
		for _, p := range ports {
			for _, proto := range []byte{unix.IPPROTO_TCP, unix.IPPROTO_UDP} {
				c.AddRule(&nftables.Rule{Table: t, Chain: ch, UserData: []byte(m.NamespaceName(allocID)), Exprs: dnat(proto, p, ip)})
			}
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables DNAT rules for alloc %s: %w", allocID, err)
	}
	return nil
}

// dnat is: fib daddr type local, l4proto proto, dport p.HostPort: dnat to
// ip:p.To.
func dnat(proto byte, p Mapping, ip netip.Addr) []expr.Any {
	return []expr.Any{
		&expr.Fib{Register: 1, FlagDADDR: true, ResultADDRTYPE: true},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(unix.RTN_LOCAL)},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(uint16(p.HostPort))},
		&expr.Immediate{Register: 1, Data: ip.AsSlice()},
		&expr.Immediate{Register: 2, Data: binaryutil.BigEndian.PutUint16(uint16(p.To))},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1, RegProtoMin: 2, Specified: true},
	}
}

// deleteRules deletes the DNAT rules of the allocs match says yes to.
func (m *Manager) deleteRules(match func(allocID string) bool) error {
	c, err := nftables.New()
	if err != nil {
		return err
	}
	defer c.CloseLasting()
	t := m.table()
	pre, out, _ := m.chains(t)
	n := 0
	for _, ch := range []*nftables.Chain{pre, out} {
		rules, err := c.GetRules(t, ch)
		if err != nil {
			return fmt.Errorf("nftables: list %s %s: %w", t.Name, ch.Name, err)
		}
		for _, r := range rules {
			id, mine := strings.CutPrefix(string(r.UserData), m.prefix())
			if mine && id != "" && match(id) {
				if err := c.DelRule(r); err != nil {
					return err
				}
				n++
			}
		}
	}
	if n == 0 {
		return nil
	}
	return c.Flush()
}

// inPrefix matches the IPv4 address at offset of the network header (12:
// source, 16: destination) in p, or not in p.
func inPrefix(offset uint32, p netip.Prefix, in bool) []expr.Any {
	op := expr.CmpOpEq
	if !in {
		op = expr.CmpOpNeq
	}
	mask := netmask(p.Bits())
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: 4},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: mask, Xor: []byte{0, 0, 0, 0}},
		&expr.Cmp{Op: op, Register: 1, Data: p.Masked().Addr().AsSlice()},
	}
}

func netmask(bits int) []byte {
	m := make([]byte, 4)
	for i := range bits {
		m[i/8] |= 0x80 >> (i % 8)
	}
	return m
}

// ifname is an interface name as nftables compares it: NUL-padded to
// IFNAMSIZ.
func ifname(n string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, n)
	return b
}
