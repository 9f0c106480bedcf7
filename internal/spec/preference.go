package spec

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// Scoring is how the scheduler ranks the nodes that can take an instance.
// The formulas are in the scheduler package's documentation; in short, with
// u the used fraction of a resource after the placement:
//
//	binpack       prefer the fullest node: score = mean over cpu, memory of u
//	least_loaded  prefer the emptiest node (fleet's rule): score = 1 - mean u
//	epvm          Cube's and Borg's E-PVM: the node whose marginal cost
//	              sum over r of N^u_r - N^u_r(before) is least, N the node count
type Scoring string

const (
	ScoreBinpack     Scoring = "binpack"
	ScoreLeastLoaded Scoring = "least_loaded"
	ScoreEPVM        Scoring = "epvm"
)

// Scorings lists the scoring methods, default first.
var Scorings = []Scoring{ScoreBinpack, ScoreLeastLoaded, ScoreEPVM}

// Affinity is a soft preference for nodes that match (Weight > 0) or that
// do not (Weight < 0). It reads like a Constraint; Weight is -100..100,
// 0 meaning the default, 50.
type Affinity struct {
	Attribute string `json:"attribute,omitempty"`
	Operator  string `json:"operator,omitempty"`
	Value     string `json:"value,omitempty"`
	Weight    int    `json:"weight,omitempty"`
}

// DefaultAffinityWeight is an affinity's weight when it does not set one.
const DefaultAffinityWeight = 50

// Constraint is the affinity's match as a constraint.
func (a Affinity) Constraint() Constraint {
	return Constraint{Attribute: a.Attribute, Operator: a.Operator, Value: a.Value}
}

// Spread asks the scheduler to spread a group's instances over the values
// of a node attribute: evenly over the values seen, or by Targets, each
// value's share in percent. A value not named in Targets gets what the
// targets leave (100 - their sum) split evenly. Weight (1..100, default 50)
// says how much the spread counts against the other scores.
type Spread struct {
	Attribute string         `json:"attribute"`
	Weight    int            `json:"weight,omitempty"`
	Targets   []SpreadTarget `json:"targets,omitempty" hcl:"target"`
}

// SpreadTarget is one value's share of a spread, in percent.
type SpreadTarget struct {
	Value   string `json:"value" hcl:",label"`
	Percent int    `json:"percent"`
}

// DefaultSpreadWeight is a spread's weight when it does not set one.
const DefaultSpreadWeight = 50

// Network is what a group needs of its node's network: ports, reserved for
// the group's instance on the node's address and shared by its tasks, and
// the network its tasks run in (Mode).
type Network struct {
	// Mode is NetworkHost (""; the node's own network), NetworkBridge (a
	// network namespace of the instance's own with an address on the
	// node's bridge, its ports mapped from the node's) or NetworkNone (a
	// namespace with only loopback). A node runs a mode other than host
	// only when it says it can (NetworkModeAttribute).
	Mode  string `json:"mode,omitempty"`
	Ports []Port `json:"ports,omitempty" hcl:"port"`
	// DNS and Hostname are the resolver and host name of the instance's
	// docker tasks (their own config's dns_* and hostname win); exec and
	// raw_exec tasks share the node's /etc/resolv.conf and host name.
	DNS      *DNSConfig `json:"dns,omitempty"`
	Hostname string     `json:"hostname,omitempty"`
}

// DNSConfig is a group network's dns block, as Nomad's: the resolver's
// servers, search domains and options.
type DNSConfig struct {
	Servers  []string `json:"servers,omitempty"`
	Searches []string `json:"searches,omitempty"`
	Options  []string `json:"options,omitempty"`
}

// The network modes of a group (Network.Mode).
const (
	NetworkHost   = "host"
	NetworkBridge = "bridge"
	NetworkNone   = "none"
)

// NetworkModes are the modes a group's network may name.
var NetworkModes = []string{NetworkHost, NetworkBridge, NetworkNone}

// NetworkModeAttribute is the node attribute an agent sets to "true" when
// it can run groups in mode m: network.bridge, network.none. Host mode
// needs none.
func NetworkModeAttribute(m string) string { return "network." + m }

// NetworkDNS is the group network's dns block, nil when it has none.
func (g *Group) NetworkDNS() *DNSConfig {
	if g.Network == nil {
		return nil
	}
	return g.Network.DNS
}

// NetworkHostname is the group network's hostname, "" when it has none.
func (g *Group) NetworkHostname() string {
	if g.Network == nil {
		return ""
	}
	return g.Network.Hostname
}

// NetworkMode is the group's network mode, NetworkHost when it says none.
func (g *Group) NetworkMode() string {
	if g.Network == nil || g.Network.Mode == "" {
		return NetworkHost
	}
	return g.Network.Mode
}

// SupportsNetworkMode says whether the node can run groups in mode m.
func (n *Node) SupportsNetworkMode(m string) bool {
	return m == "" || m == NetworkHost || n.Attributes[NetworkModeAttribute(m)] == "true"
}

// Port is one port a group needs. Static is a fixed host port; when it is
// 0 the scheduler picks a free port in DynamicPortMin..DynamicPortMax.
// Tasks see it as DROVER_PORT_<Label> and DROVER_ADDR_<Label> (ip:port).
//
// To is the port inside the task's own network namespace that the host port
// maps to (a docker container's port, as Nomad's "to"; in bridge mode, the
// port on the instance's own address); 0 maps to the same number as the
// host port. Tasks that share the node's network (exec and raw_exec in
// host mode) listen on the host port itself, so To means nothing to them.
type Port struct {
	Label  string `json:"label" hcl:",label"`
	Static int    `json:"static,omitempty"`
	To     int    `json:"to,omitempty"`
}

// The range dynamic ports are taken from, as Nomad's default.
const (
	DynamicPortMin = 20000
	DynamicPortMax = 32000
)

// AllocPort is a port reserved for an alloc on its node.
type AllocPort struct {
	Label  string `json:"label"`
	Value  int    `json:"value"`
	HostIP string `json:"host_ip,omitempty"`
	// To is the group port's To, copied so the agent maps the host port
	// into a container without the job at hand.
	To int `json:"to,omitempty"`
}

// Job constraints that look at the other jobs on a node rather than at the
// node: fleet's MachineOf, Conflicts and Replaces. They take no attribute;
// Value is a job name (colocate) or a glob of job names (conflicts,
// replaces), in path.Match syntax.
const (
	// OpColocate places the group only on nodes that run an instance of
	// the named job (fleet's MachineOf).
	OpColocate = "colocate"
	// OpConflicts keeps the group off nodes that run a job whose name
	// matches, and keeps those jobs off nodes that run this one.
	OpConflicts = "conflicts"
	// OpReplaces is OpConflicts that may take the node of a matching job:
	// the matching instances there are evicted and placed elsewhere.
	OpReplaces = "replaces"
)

// JobRule reports whether the constraint is one of the job constraints
// (colocate, conflicts, replaces).
func (c Constraint) JobRule() bool {
	return c.Operator == OpColocate || c.Operator == OpConflicts || c.Operator == OpReplaces
}

// MatchJob reports whether a job constraint's value names job: equal for
// colocate, a glob for conflicts and replaces.
func (c Constraint) MatchJob(job string) bool {
	if c.Operator == OpColocate {
		return c.Value == job
	}
	ok, err := path.Match(c.Value, job)
	return err == nil && ok
}

func compileJobRule(c Constraint) *ConstraintError {
	if c.Attribute != "" {
		return badConstraint("attribute", "%s takes no attribute, got %q; put the job name in value", c.Operator, c.Attribute)
	}
	if strings.TrimSpace(c.Value) == "" {
		return badConstraint("value", "%s needs a job name in value", c.Operator)
	}
	if c.Operator != OpColocate {
		if _, err := path.Match(c.Value, ""); err != nil {
			return badConstraint("value", "bad glob %q: %v", c.Value, err)
		}
	}
	return nil
}

// PreemptOf reports whether j may evict lower-priority instances when it
// does not fit: Preempt when set, else true for system jobs only.
func (j *Job) PreemptOf() bool {
	if j.Preempt != nil {
		return *j.Preempt
	}
	return j.Type == JobSystem // as Nomad: not sysbatch
}

// ScoringOf is the job's scoring method, binpack when unset.
func (j *Job) ScoringOf() Scoring {
	if j.Scoring == "" {
		return ScoreBinpack
	}
	return j.Scoring
}

// AffinitiesOf returns every affinity that applies to g: the job's, the
// group's, then its tasks'.
func (j *Job) AffinitiesOf(g *Group) []Affinity {
	var out []Affinity
	add := func(as []*Affinity) {
		for _, a := range as {
			if a != nil {
				out = append(out, *a)
			}
		}
	}
	add(j.Affinities)
	add(g.Affinities)
	for _, t := range g.Tasks {
		if t != nil {
			add(t.Affinities)
		}
	}
	return out
}

// SpreadsOf returns the spreads that apply to g: the group's, then the
// job's for attributes the group does not spread over itself.
func (j *Job) SpreadsOf(g *Group) []Spread {
	var out []Spread
	seen := map[string]bool{}
	for _, list := range [][]*Spread{g.Spreads, j.Spreads} {
		for _, s := range list {
			if s != nil && !seen[s.Attribute] {
				seen[s.Attribute] = true
				out = append(out, *s)
			}
		}
	}
	return out
}

// Ports returns the group's ports, nil when it has none.
func (g *Group) Ports() []Port {
	if g.Network == nil {
		return nil
	}
	return g.Network.Ports
}

// affinityOperators are the constraint operators an affinity may use: those
// that look at the node alone. Whether a node "matches" distinct_hosts or
// conflicts depends on the other instances, which a score cannot follow.
var affinityOperators = slices.DeleteFunc(slices.Clone(ConstraintOperators), func(op string) bool {
	c := Constraint{Operator: op}
	return c.Distinct() || c.JobRule()
})

func validateAffinities(ps *Problems, p string, as []*Affinity) {
	for i, a := range as {
		ap := fmt.Sprintf("%s[%d]", p, i)
		if a == nil {
			ps.Add(ap, "affinity is null")
			continue
		}
		c := a.Constraint()
		switch {
		case c.Distinct() || c.JobRule():
			ps.Add(ap+".operator", "%s cannot be an affinity, only a constraint; an affinity uses one of %s", c.Operator, strings.Join(affinityOperators, ", "))
		case c.Operator != "" && !slices.Contains(affinityOperators, c.Operator):
			ps.Add(ap+".operator", "unknown affinity operator %q; use one of %s", c.Operator, strings.Join(affinityOperators, ", "))
		case c.Attribute == "":
			ps.Add(ap+".attribute", "an affinity needs an attribute, such as \"${meta.rack}\"")
		default:
			if _, err := compileConstraint(c); err != nil {
				ps.Add(ap+"."+err.Field, "%s", err.Message)
			}
		}
		if a.Weight < -100 || a.Weight > 100 {
			ps.Add(ap+".weight", "weight %d is out of range; use -100 to 100", a.Weight)
		}
	}
}

func validateSpreads(ps *Problems, p string, ss []*Spread) {
	// SpreadsOf keeps one spread per attribute, so a second one at the
	// same level would be silently ignored.
	attrs := map[string]string{}
	for i, s := range ss {
		sp := fmt.Sprintf("%s[%d]", p, i)
		if s == nil {
			ps.Add(sp, "spread is null")
			continue
		}
		if prev, dup := attrs[s.Attribute]; dup && s.Attribute != "" {
			ps.Add(sp+".attribute", "a spread over %s is already defined at %s; merge the two", s.Attribute, prev)
		} else {
			attrs[s.Attribute] = sp
		}
		if s.Attribute == "" {
			ps.Add(sp+".attribute", "a spread needs an attribute to spread over, such as \"${meta.zone}\"")
		} else if _, ok := parseTarget(s.Attribute); !ok {
			ps.Add(sp+".attribute", "attribute %q "+notATarget, s.Attribute)
		}
		if s.Weight < 0 || s.Weight > 100 {
			ps.Add(sp+".weight", "weight %d is out of range; use 1 to 100", s.Weight)
		}
		sum := 0
		seen := map[string]bool{}
		for k, t := range s.Targets {
			tp := fmt.Sprintf("%s.targets[%d]", sp, k)
			if t.Value == "" {
				ps.Add(tp+".value", "a spread target needs a value")
			}
			if seen[t.Value] {
				ps.Add(tp+".value", "value %q is already a target", t.Value)
			}
			seen[t.Value] = true
			if t.Percent < 0 || t.Percent > 100 {
				ps.Add(tp+".percent", "percent %d is out of range; use 0 to 100", t.Percent)
			}
			sum += t.Percent
		}
		if sum > 100 {
			ps.Add(sp+".targets", "the targets' percents add up to %d; they must not exceed 100", sum)
		}
	}
}

func validateNetwork(ps *Problems, p string, n *Network) {
	if n == nil {
		return
	}
	if n.Mode != "" && !slices.Contains(NetworkModes, n.Mode) {
		ps.Add(p+".mode", "network mode %q is not one drover has; use \"host\" (the node's network, the default), \"bridge\" (a namespace of the instance's own, its ports mapped from the node's) or \"none\" (only loopback)", n.Mode)
	}
	validateNames(ps, p, n.Hostname, n.DNS)
	if n.Mode == NetworkNone && len(n.Ports) > 0 {
		ps.Add(p+".mode", "a group in network mode \"none\" has no network to reach its %d port(s) through; remove the ports or use mode \"bridge\"", len(n.Ports))
	}
	labels := map[string]bool{}
	static := map[int]bool{}
	for i, port := range n.Ports {
		pp := fmt.Sprintf("%s.ports[%d]", p, i)
		if port.Label == "" {
			ps.Add(pp+".label", "a port needs a label, such as \"http\" (it becomes DROVER_PORT_<label>)")
		} else if !validPortLabel(port.Label) {
			ps.Add(pp+".label", "port label %q must be letters, digits and '_' (it becomes DROVER_PORT_<label> and NOMAD_PORT_<label>, names a shell can read); write port %q", port.Label, portLabelFix(port.Label))
		}
		if labels[port.Label] {
			ps.Add(pp+".label", "port %q is already defined", port.Label)
		}
		labels[port.Label] = true
		if port.Static < 0 || port.Static > 65535 {
			ps.Add(pp+".static", "static port %d is out of range; use 1 to 65535, or leave it out for a dynamic port", port.Static)
		}
		if port.Static > 0 && static[port.Static] {
			ps.Add(pp+".static", "static port %d is already used by another port of the group", port.Static)
		}
		static[port.Static] = true
	}
}

// validPortLabel: letters, digits and '_', as Nomad documents its port
// labels; one may be all digits (port "8080" {}), which a service's port
// names before it is read as a number (ServicePort).
func validPortLabel(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !portLabelRune(r) {
			return false
		}
	}
	return true
}

func portLabelRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '_' || r >= '0' && r <= '9'
}

// portLabelFix is label with each character a label cannot hold made '_':
// "my-port" -> "my_port".
func portLabelFix(label string) string {
	return strings.Map(func(r rune) rune {
		if portLabelRune(r) {
			return r
		}
		return '_'
	}, label)
}
