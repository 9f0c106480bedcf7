package spec

import (
	"reflect"
	"testing"
)

// TestNodeAttributeNames reads a new record (Nomad's names) and an old
// one (drover's names) under both names, and the attributes derived from
// the node's drivers and fields.
func TestNodeAttributeNames(t *testing.T) {
	fresh := &Node{ID: "n1", Name: "web-1", Datacenter: "eu-1", NodeClass: "big", NodePool: "gpu",
		Drivers:    []string{"exec", "docker"},
		Attributes: map[string]string{AttrKernelName: "linux", AttrCPUArch: "amd64", NodeIPAttribute: "10.0.0.5"},
		Meta:       map[string]string{"rack": "r1"}}
	old := &Node{ID: "n2", Name: "web-2", Attributes: map[string]string{"os": "linux", "kernel": "5.15.0", "network.ip": "10.0.0.6"}}
	for _, tt := range []struct {
		n      *Node
		name   string
		want   string
		wantOK bool
	}{
		{fresh, "attr.kernel.name", "linux", true},
		{fresh, "attr.os", "linux", true},
		{fresh, "attr.arch", "amd64", true},
		{fresh, "attr.network.ip", "10.0.0.5", true},
		{fresh, "attr.driver.docker", "1", true},
		{fresh, "attr.driver.raw_exec", "", false},
		{fresh, "attr.kernel.version", "", false},
		{fresh, "node.datacenter", "eu-1", true},
		{fresh, "node.class", "big", true},
		{fresh, "node.pool", "gpu", true},
		{fresh, "node.unique.name", "web-1", true},
		{fresh, "node.unique.id", "n1", true},
		{fresh, "meta.rack", "r1", true},
		{fresh, "meta.zone", "", false},
		{fresh, "node.region", "", false}, // not a target
		{old, "attr.kernel.name", "linux", true},
		{old, "attr.kernel.version", "5.15.0", true},
		{old, "attr.unique.network.ip-address", "10.0.0.6", true},
		{old, "node.datacenter", DefaultDatacenter, true},
		{old, "node.pool", DefaultNodePool, true},
		{old, "node.class", "", true},
	} {
		got, ok := tt.n.Value(tt.name)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("%s: Value(%q) = %q, %v; want %q, %v", tt.n.Name, tt.name, got, ok, tt.want, tt.wantOK)
		}
	}
	if ip, _ := old.Attribute(NodeIPAttribute); ip != "10.0.0.6" {
		t.Errorf("an old record's address: %q", ip)
	}
	want := map[string]string{AttrKernelName: "linux", AttrCPUArch: "amd64", NodeIPAttribute: "10.0.0.5", "driver.exec": "1", "driver.docker": "1"}
	if got := fresh.Published(); !reflect.DeepEqual(got, want) {
		t.Errorf("Published() = %v, want %v", got, want)
	}
}

func TestFingerprinted(t *testing.T) {
	for name, want := range map[string]bool{
		"attr.kernel.name": true, "attr.unique.network.ip-address": true, "attr.cpu.totalcompute": true,
		"attr.os": true, "attr.cpu.count": true, // drover's older names
		"attr.driver.docker": true, "attr.driver.exec.isolation": true,
		"attr.driver.podman": false, "attr.consul.version": false, "attr.platform.aws.instance-type": false,
		"meta.anything": true, "node.class": true,
	} {
		if got := Fingerprinted(name); got != want {
			t.Errorf("Fingerprinted(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestGlobMatch(t *testing.T) {
	for _, tt := range []struct {
		pattern, s string
		want       bool
	}{
		{"dc1", "dc1", true}, {"dc1", "dc10", false}, {"*", "", true}, {"*", "anything", true},
		{"us-*", "us-east-1", true}, {"us-*", "eu-west-1", false}, {"*-1", "us-east-1", true},
		{"us-*-1", "us-east-1", true}, {"us-*-1", "us-east-2", false}, {"a*b*c", "abc", true},
		{"a*b*c", "aXbYc", true}, {"a*b*c", "acb", false}, {"ab*ba", "aba", false},
		{"dc?", "dc1", false}, {"dc[12]", "dc1", false}, // only * is special, as Nomad's
	} {
		if got := globMatch(tt.pattern, tt.s); got != tt.want {
			t.Errorf("globMatch(%q, %q) = %v, want %v", tt.pattern, tt.s, got, tt.want)
		}
	}
}

func TestJobNodeTargets(t *testing.T) {
	j := &Job{
		Constraints: []*Constraint{{Attribute: "${attr.kernel.name}", Value: "linux"}, {Operator: OpDistinctHosts}},
		Affinities:  []*Affinity{{Attribute: "${node.class}", Value: "big"}},
		Spreads:     []*Spread{{Attribute: "${meta.zone}"}},
		Groups: []*Group{{
			Constraints: []*Constraint{{Attribute: "${node.datacenter}", Value: "dc1"}},
			Tasks: []*Task{nil, {
				Constraints: []*Constraint{{Attribute: "${attr.consul.version}", Operator: OpIsSet}},
				Affinities:  []*Affinity{{Attribute: "${meta.rack}", Value: "r1"}},
				Env:         map[string]string{"B": "${attr.kernel.name}-${node.class}", "A": "${attr.platform.aws.ami-id} ${attr.platform.aws.ami-id} $${attr.x"},
				Config:      TaskConfig{Command: "/bin/echo", Args: []string{"plain", "${NOMAD_ALLOC_ID}/${meta.owner}"}},
				Services:    []*Service{{Name: "web-${attr.unique.hostname}", Tags: []string{"a", "${attr.gce.zone}"}}},
			}},
		}},
	}
	want := []TargetRef{
		{"constraints[0].attribute", "attr.kernel.name"},
		{"spreads[0].attribute", "meta.zone"},
		{"groups[0].tasks[1].constraints[0].attribute", "attr.consul.version"},
		{"groups[0].tasks[1].affinities[0].attribute", "meta.rack"},
		// Interpolations: each name once per field, env keys in order.
		{"groups[0].tasks[1].env.A", "attr.platform.aws.ami-id"},
		{"groups[0].tasks[1].env.B", "attr.kernel.name"},
		{"groups[0].tasks[1].config.args[1]", "meta.owner"},
		{"groups[0].tasks[1].services[0].name", "attr.unique.hostname"},
		{"groups[0].tasks[1].services[0].tags[1]", "attr.gce.zone"},
	}
	if got := j.NodeTargets(); !reflect.DeepEqual(got, want) {
		t.Errorf("NodeTargets() = %v\nwant %v", got, want)
	}
}

func TestCheckNodeScope(t *testing.T) {
	for _, tt := range []struct{ dc, class, pool, want string }{
		{"dc1", "", "default", ""},
		{"us-east-1", "linux-64bit", "gpu", ""},
		{"us east", "", "default", `datacenter "us east" contains ' '; use only letters, digits, '-', '_', '.' and '@'`},
		{"dc1", "a/b", "default", `node class "a/b" contains '/'; use only letters, digits, '-', '_', '.' and '@'`},
		{"dc1", "", "all", `node pool "all" is the one jobs name to run in every pool; no node is in it: choose another name`},
	} {
		if got := CheckNodeScope(tt.dc, tt.class, tt.pool); got != tt.want {
			t.Errorf("CheckNodeScope(%q, %q, %q) = %q, want %q", tt.dc, tt.class, tt.pool, got, tt.want)
		}
	}
}
