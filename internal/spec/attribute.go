package spec

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// The attributes an agent publishes about its machine (Node.Attributes),
// under Nomad's names and with Nomad's values, so that a Nomad job's
// ${attr.kernel.name} reads here what it reads on a Nomad client.
const (
	AttrKernelName    = "kernel.name"    // "linux"
	AttrKernelVersion = "kernel.version" // the kernel's release: "6.8.0-45-generic"
	AttrOSName        = "os.name"        // /etc/os-release's ID: "ubuntu"
	AttrOSVersion     = "os.version"     // its VERSION_ID: "24.04"
	AttrCPUArch       = "cpu.arch"       // Go's name for it: "amd64", "arm64"
	AttrCPUNumCores   = "cpu.numcores"
	AttrCPUFrequency  = "cpu.frequency" // MHz of one core
	// AttrCPUFrequencySource says where AttrCPUFrequency comes from:
	// "/proc/cpuinfo", or "assumed" (1000 MHz) when it has no clock.
	AttrCPUFrequencySource = "cpu.mhz_source"
	AttrCPUTotalCompute    = "cpu.totalcompute" // cores x MHz: the node's CPU capacity
	AttrMemoryTotalBytes   = "memory.totalbytes"
	AttrHostname           = "unique.hostname"
	// NodeIPAttribute holds the address the node's ports are reserved on;
	// 127.0.0.1 when a node does not say.
	NodeIPAttribute = "unique.network.ip-address"
	// AttrExecIsolation is what isolates exec tasks on the node:
	// cgroup-v1, cgroup-v2 or none.
	AttrExecIsolation = "driver.exec.isolation"
)

// fingerprinted is every attribute an agent publishes, besides
// driver.<name> (Node.Attribute); validate warns about the others.
var fingerprinted = []string{
	AttrKernelName, AttrKernelVersion, AttrOSName, AttrOSVersion, AttrCPUArch, AttrCPUNumCores,
	AttrCPUFrequency, AttrCPUFrequencySource, AttrCPUTotalCompute, AttrMemoryTotalBytes,
	AttrHostname, NodeIPAttribute, AttrExecIsolation,
	// "true" where the agent can run the network mode (NetworkModeAttribute).
	"network." + NetworkBridge, "network." + NetworkNone,
}

// legacyAttributes are the names drover published before it took Nomad's,
// each with the attribute that now holds the same fact. Node.Attribute
// answers either name: jobs that use the old names keep their meaning,
// and so do the records of agents that published them.
var legacyAttributes = map[string]string{
	"os":         AttrKernelName,
	"arch":       AttrCPUArch,
	"kernel":     AttrKernelVersion,
	"cpu.count":  AttrCPUNumCores,
	"cpu.mhz":    AttrCPUFrequency,
	"hostname":   AttrHostname,
	"network.ip": NodeIPAttribute,
}

// attributeAlias is the other name of a renamed attribute, or "".
func attributeAlias(key string) string {
	if k, ok := legacyAttributes[key]; ok {
		return k
	}
	for old, k := range legacyAttributes {
		if k == key {
			return old
		}
	}
	return ""
}

// Attribute returns the node's attribute key, under either name of a
// renamed one (legacyAttributes). driver.<name> is "1" for each driver
// the node has, as on a Nomad client; the drivers are Drivers, not
// stored twice.
func (n *Node) Attribute(key string) (string, bool) {
	return n.attribute(key, attributeAlias(key))
}

func (n *Node) attribute(key, alias string) (string, bool) {
	if v, ok := n.Attributes[key]; ok {
		return v, true
	}
	if v, ok := n.Attributes[alias]; ok && alias != "" {
		return v, true
	}
	if d, ok := strings.CutPrefix(key, "driver."); ok && n.HasDriver(d) {
		return "1", true
	}
	return "", false
}

// Published is every attribute of the node: the stored ones and
// driver.<name> for each of its drivers.
func (n *Node) Published() map[string]string {
	out := make(map[string]string, len(n.Attributes)+len(n.Drivers))
	for k, v := range n.Attributes {
		out[k] = v
	}
	for _, d := range n.Drivers {
		out["driver."+d] = "1"
	}
	return out
}

// Fingerprinted reports whether a node target ("attr.kernel.name",
// "meta.rack", "node.class") names something drover nodes can have:
// meta keys and the node's own fields always, attributes when an agent
// publishes them.
func Fingerprinted(name string) bool {
	k, ok := strings.CutPrefix(name, "attr.")
	if !ok {
		return true
	}
	if d, ok := strings.CutPrefix(k, "driver."); ok && slices.Contains(KnownDrivers, d) {
		return true
	}
	_, legacy := legacyAttributes[k]
	return legacy || slices.Contains(fingerprinted, k)
}

// Value reads a node target, written without its ${ }: "attr.kernel.name",
// "meta.rack", "node.datacenter". ok is false when the node does not have
// it, or name is not a node target.
func (n *Node) Value(name string) (string, bool) {
	t, ok := parseName(name)
	if !ok {
		return "", false
	}
	return t.resolve(n)
}

// TargetRef is a node attribute or meta key that a job reads: Name is
// "attr.<key>" or "meta.<key>", Field the path of the attribute field
// that names it ("groups[0].constraints[1].attribute").
type TargetRef struct {
	Field string
	Name  string
}

// NodeTargets lists the node attributes and meta keys the job's
// constraints, affinities and spreads read, in the order Validate walks
// them, then those its tasks interpolate (${attr.<key>}, ${meta.<key>} in
// env, config, and service names and tags: TaskRuntime.Interpolate). A
// node may lack these (the node's own fields it always has), so validate
// and plan warn about the ones no node has.
func (j *Job) NodeTargets() []TargetRef {
	out := j.placementTargets()
	for gi, g := range j.Groups {
		if g == nil {
			continue
		}
		for ti, t := range g.Tasks {
			if t != nil {
				out = append(out, t.interpolatedTargets(fmt.Sprintf("groups[%d].tasks[%d].", gi, ti))...)
			}
		}
	}
	return out
}

// interpolatedTargets are the node attributes and meta keys that t's env,
// config and services interpolate, each once per field, with the field's
// path under prefix ("groups[0].tasks[0]."): "env.WHERE",
// "config.args[1]", "services[0].tags[2]".
func (t *Task) interpolatedTargets(prefix string) []TargetRef {
	var out []TargetRef
	add := func(field, s string) {
		if !strings.Contains(s, "${") {
			return
		}
		seen := map[string]bool{}
		for _, m := range interpolation.FindAllStringSubmatch(s, -1) {
			tg, ok := parseName(m[1])
			if !ok || (tg.kind != targetAttr && tg.kind != targetMeta) || seen[tg.name()] {
				continue
			}
			seen[tg.name()] = true
			out = append(out, TargetRef{Field: prefix + field, Name: tg.name()})
		}
	}
	for _, k := range slices.Sorted(maps.Keys(t.Env)) {
		add("env."+k, t.Env[k])
	}
	// The config is walked as it is interpolated: every string in it, at
	// any depth, by its JSON names (the job file's).
	if b, err := json.Marshal(t.Config); err == nil {
		var v any
		if json.Unmarshal(b, &v) == nil {
			walkStrings("config", v, add)
		}
	}
	for si, svc := range t.Services {
		if svc == nil {
			continue
		}
		add(fmt.Sprintf("services[%d].name", si), svc.Name)
		for i, tag := range svc.Tags {
			add(fmt.Sprintf("services[%d].tags[%d]", si, i), tag)
		}
	}
	return out
}

// walkStrings calls f with each string in v (decoded JSON) and its path
// under path, map keys in order.
func walkStrings(path string, v any, f func(path, s string)) {
	switch v := v.(type) {
	case string:
		f(path, v)
	case []any:
		for i, e := range v {
			walkStrings(fmt.Sprintf("%s[%d]", path, i), e, f)
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			walkStrings(path+"."+k, v[k], f)
		}
	}
}

// placementTargets are NodeTargets' constraints, affinities and spreads.
func (j *Job) placementTargets() []TargetRef {
	var out []TargetRef
	add := func(path, attr string) {
		t, ok := parseTarget(attr)
		if ok && (t.kind == targetAttr || t.kind == targetMeta) {
			out = append(out, TargetRef{Field: path + ".attribute", Name: t.name()})
		}
	}
	walk := func(path string, cs []*Constraint, as []*Affinity, ss []*Spread) {
		for i, c := range cs {
			if c != nil {
				add(fmt.Sprintf("%s%s[%d]", path, "constraints", i), c.Attribute)
			}
		}
		for i, a := range as {
			if a != nil {
				add(fmt.Sprintf("%s%s[%d]", path, "affinities", i), a.Attribute)
			}
		}
		for i, s := range ss {
			if s != nil {
				add(fmt.Sprintf("%s%s[%d]", path, "spreads", i), s.Attribute)
			}
		}
	}
	walk("", j.Constraints, j.Affinities, j.Spreads)
	for gi, g := range j.Groups {
		if g == nil {
			continue
		}
		gp := fmt.Sprintf("groups[%d].", gi)
		walk(gp, g.Constraints, g.Affinities, g.Spreads)
		for ti, t := range g.Tasks {
			if t != nil {
				walk(fmt.Sprintf("%stasks[%d].", gp, ti), t.Constraints, t.Affinities, nil)
			}
		}
	}
	return out
}
