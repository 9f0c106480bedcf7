package agent

import (
	"cmp"
	"fmt"

	"github.com/drover-org/drover/internal/netbridge"
	"github.com/drover-org/drover/internal/spec"
)

// openNetwork prepares the network modes other than host (netbridge): the
// node says it runs those it can (fingerprint), and logs why not.
func (a *Agent) openNetwork() {
	cfg := a.cfg.Bridge
	if cfg.Bridge == "" || !cfg.Subnet.IsValid() {
		def, _ := netbridge.ParseConfig(cfg.Bridge, "")
		cfg.Bridge = def.Bridge
		if !cfg.Subnet.IsValid() {
			cfg.Subnet = def.Subnet
		}
	}
	cfg.Owner = a.nodeID[:min(8, len(a.nodeID))]
	m, err := netbridge.Open(cfg)
	if err != nil {
		a.log.Info("network modes bridge and none not available on this node; groups in those modes are placed elsewhere", "why", err)
		return
	}
	if err := m.BridgeError(); err != nil {
		a.log.Info("network mode bridge not available on this node; groups in it are placed elsewhere", "why", err)
	} else if err := m.ForwardError(); err != nil {
		a.log.Warn("no iptables forward rules for the bridge: where the host firewall's FORWARD policy drops (Docker sets it so), bridge-mode instances reach nothing beyond this node, nor host ports through its addresses", "bridge", cfg.Bridge, "why", err)
	}
	a.net = m
}

// cleanupNetworks removes the namespaces and port rules of allocs that
// no longer run here: those an earlier agent left for allocs that ended
// or were forgotten while no agent ran. Called with a.mu held, once the
// first assignments made the runners.
func (a *Agent) cleanupNetworks() {
	if a.net == nil {
		return
	}
	live := map[string]bool{}
	for id, ar := range a.runners {
		select {
		case <-ar.done:
		default:
			live[id] = true
		}
	}
	if err := a.net.Cleanup(func(id string) bool { return live[id] }); err != nil {
		a.log.Warn("cannot remove the network namespaces of allocs gone", "err", err)
	}
}

// network makes the alloc's namespace in its network mode, once it
// succeeds (a task's next start retries a failure), or finds the one an
// earlier agent made. Host mode has none.
func (ar *allocRunner) network() (netbridge.Net, error) {
	mode := ar.alloc.NetworkModeOf()
	if mode == spec.NetworkHost {
		return netbridge.Net{}, nil
	}
	ar.netMu.Lock()
	defer ar.netMu.Unlock()
	if ar.netDone {
		return ar.net, nil
	}
	m := ar.agent.net
	if m == nil {
		return netbridge.Net{}, fmt.Errorf("network mode %s: this node cannot make network namespaces (the agent's log says why)", mode)
	}
	// A port a docker task maps is docker's to forward, to its container.
	docker := map[string]bool{}
	for _, t := range ar.alloc.Tasks {
		if d := ar.agent.drivers[t.Driver]; d != nil && d.Info().OwnNetwork {
			for _, l := range t.Config.Ports {
				docker[l] = true
			}
		}
	}
	var ports []netbridge.Mapping
	for _, p := range ar.alloc.Ports {
		if !docker[p.Label] {
			ports = append(ports, netbridge.Mapping{HostPort: p.Value, To: cmp.Or(p.To, p.Value)})
		}
	}
	n, err := m.Setup(ar.alloc.ID, mode, ports)
	if err != nil {
		return netbridge.Net{}, fmt.Errorf("network mode %s: %w", mode, err)
	}
	ar.net, ar.netDone = n, true
	return n, nil
}

// allocIP is the alloc's address on the bridge, "" outside bridge mode or
// before its namespace is made.
func (ar *allocRunner) allocIP() string {
	ar.netMu.Lock()
	defer ar.netMu.Unlock()
	if !ar.net.IP.IsValid() {
		return ""
	}
	return ar.net.IP.String()
}

// teardownNetwork removes the alloc's namespace and port rules, when its
// tasks have all ended.
func (ar *allocRunner) teardownNetwork() {
	if ar.alloc.NetworkModeOf() == spec.NetworkHost || ar.agent.net == nil {
		return
	}
	ar.netMu.Lock()
	defer ar.netMu.Unlock()
	if err := ar.agent.net.Teardown(ar.alloc.ID); err != nil {
		ar.log.Warn("cannot remove the alloc's network namespace", "err", err)
	}
	ar.net, ar.netDone = netbridge.Net{}, false
}

// netNS is the namespace the task's processes start in: its alloc's,
// unless its driver gives it a network of its own (docker).
func (tr *taskRunner) netNS() string {
	if tr.drv.Info().OwnNetwork {
		return ""
	}
	tr.ar.netMu.Lock()
	defer tr.ar.netMu.Unlock()
	return tr.ar.net.Namespace
}
