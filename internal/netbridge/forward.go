package netbridge

import (
	"fmt"

	"github.com/coreos/go-iptables/iptables"
)

// Traffic the node forwards for the allocs (out of the node, or hairpin:
// back into the bridge) passes the forward hook of every firewall on the
// node, and an accept in drover's nftables table does not outvote a drop
// in another: Docker sets the policy of iptables' filter FORWARD chain to
// DROP. So, as Nomad's CNI firewall plugin does, each bridge has an
// iptables chain of its own in table filter, jumped to from the top of
// FORWARD, that accepts what comes in from the bridge and what answers
// it. The chain is made when the bridge is, by the library
// github.com/coreos/go-iptables (which runs the machine's iptables: on
// Debian its nf_tables backend).
const (
	filterTable   = "filter"
	forwardHook   = "FORWARD"
	iptablesWaitS = 10 // seconds iptables waits for the xtables lock
)

// ForwardChain is the iptables chain (table filter) of a bridge's
// forward rules. Chain names have at most 28 bytes; bridges 15.
func ForwardChain(bridge string) string { return "DROVER-FWD-" + bridge }

// AdminChain is the chain every bridge's chain jumps to first: drover
// makes it empty and never changes it, so that an operator's rules there
// (a DROP or REJECT of what allocs may not reach, such as other
// networks of the node) decide before drover's accepts. Like Nomad's
// CNI-ADMIN.
const AdminChain = "DROVER-ADMIN"

// forwardRules are the rules of the bridge's chain, in order: the
// operator's chain; what comes in from the bridge (allocs reaching out
// of the node, or hairpin); new connections to a host port, DNATed into
// the bridge from other machines; the replies to the allocs' own.
func forwardRules(bridge string) [][]string {
	return [][]string{
		{"-m", "comment", "--comment", "drover: the operator chain first", "-j", AdminChain},
		{"-i", bridge, "-m", "comment", "--comment", "drover: from bridge " + bridge, "-j", "ACCEPT"},
		{"-o", bridge, "-m", "conntrack", "--ctstate", "DNAT", "-m", "comment", "--comment", "drover: host ports into bridge " + bridge, "-j", "ACCEPT"},
		{"-o", bridge, "-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-m", "comment", "--comment", "drover: replies to bridge " + bridge, "-j", "ACCEPT"},
	}
}

// forwardJump is the rule of FORWARD that jumps to the bridge's chain.
func forwardJump(bridge string) []string {
	return []string{"-m", "comment", "--comment", "drover: bridge " + bridge, "-j", ForwardChain(bridge)}
}

func newIPTables() (*iptables.IPTables, error) {
	ipt, err := iptables.New(iptables.Timeout(iptablesWaitS))
	if err != nil {
		return nil, fmt.Errorf("iptables: %w", err)
	}
	return ipt, nil
}

// ensureForward makes the bridge's chain and the jump to it, or finds
// them (an earlier agent, or another on the same bridge, made them):
// each rule is added only when it is missing.
func (m *Manager) ensureForward() error {
	ipt, err := newIPTables()
	if err != nil {
		return err
	}
	chain := ForwardChain(m.cfg.Bridge)
	if err := ensureChain(ipt, AdminChain); err != nil {
		return err
	}
	if err := ensureChain(ipt, chain); err != nil {
		return err
	}
	for _, r := range forwardRules(m.cfg.Bridge) {
		if err := ipt.AppendUnique(filterTable, chain, r...); err != nil {
			return fmt.Errorf("iptables: add to chain %s: %w", chain, err)
		}
	}
	if err := ipt.InsertUnique(filterTable, forwardHook, 1, forwardJump(m.cfg.Bridge)...); err != nil {
		return fmt.Errorf("iptables: jump from %s to %s: %w", forwardHook, chain, err)
	}
	return nil
}

// ensureChain makes chain in table filter unless it exists. Another
// agent making it meanwhile is no error.
func ensureChain(ipt *iptables.IPTables, chain string) error {
	ok, err := ipt.ChainExists(filterTable, chain)
	if err != nil {
		return fmt.Errorf("iptables: list chains of table %s: %w", filterTable, err)
	}
	if ok {
		return nil
	}
	if err := ipt.NewChain(filterTable, chain); err != nil {
		if ok, _ := ipt.ChainExists(filterTable, chain); ok {
			return nil
		}
		return fmt.Errorf("iptables: make chain %s: %w", chain, err)
	}
	return nil
}

// recheckForward makes the bridge's forward rules again when the jump to
// them is gone from FORWARD (a firewall reload, iptables -F): run at each
// instance's setup in mode bridge, one check when all is in place. Its
// error is kept for ForwardError.
func (m *Manager) recheckForward() {
	m.fwdMu.Lock()
	defer m.fwdMu.Unlock()
	ipt, err := newIPTables()
	if err != nil {
		m.forwardErr = err
		return
	}
	if ok, err := ipt.Exists(filterTable, forwardHook, forwardJump(m.cfg.Bridge)...); err == nil && ok {
		m.forwardErr = nil
		return
	}
	m.forwardErr = m.ensureForward()
}
