package netbridge

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
)

// What the tests read of a Manager, and their cleanup of a bridge.

// Config is the manager's configuration.
func (m *Manager) Config() Config { return m.cfg }

// UsedAddrs are the addresses held, by alloc ID.
func (m *Manager) UsedAddrs() map[string]netip.Addr {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]netip.Addr{}
	for a, id := range m.used {
		out[id] = a
	}
	return out
}

// Remove deletes what Open makes for a bridge and leaves in place when
// the agent stops: the bridge, its nftables table, its iptables chain
// and the jump to it. Call it once no agent uses the bridge and every
// alloc on it is torn down. What is already gone is no error.
func Remove(bridge string) error {
	var errs []error
	if l, err := netlink.LinkByName(bridge); err == nil {
		if err := netlink.LinkDel(l); err != nil {
			errs = append(errs, fmt.Errorf("delete bridge %s: %w", bridge, err))
		}
	}
	if c, err := nftables.New(); err != nil {
		errs = append(errs, fmt.Errorf("nftables: %w", err))
	} else {
		t := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: TableName(bridge)}
		if tables, err := c.ListTablesOfFamily(nftables.TableFamilyIPv4); err != nil {
			errs = append(errs, fmt.Errorf("nftables: list tables: %w", err))
		} else {
			for _, have := range tables {
				if have.Name == t.Name {
					c.DelTable(t)
					if err := c.Flush(); err != nil {
						errs = append(errs, fmt.Errorf("nftables: delete table %s: %w", t.Name, err))
					}
				}
			}
		}
	}
	if ipt, err := newIPTables(); err == nil {
		// No chain, no jump: iptables refuses a jump to a missing chain.
		if ok, err := ipt.ChainExists(filterTable, ForwardChain(bridge)); err != nil || !ok {
			return errors.Join(append(errs, err)...)
		}
		if err := ipt.DeleteIfExists(filterTable, forwardHook, forwardJump(bridge)...); err != nil {
			errs = append(errs, fmt.Errorf("iptables: delete the jump to %s: %w", ForwardChain(bridge), err))
		}
		if err := ipt.ClearAndDeleteChain(filterTable, ForwardChain(bridge)); err != nil {
			errs = append(errs, fmt.Errorf("iptables: delete chain %s: %w", ForwardChain(bridge), err))
		}
		// The operator's chain, when no other bridge's jumps to it.
		ipt.DeleteChain(filterTable, AdminChain)
	}
	return errors.Join(errs...)
}
