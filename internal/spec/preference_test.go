package spec

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestValidatePreferences checks every problem the validate functions of
// preference.go report, with its field path, on a job that has each kind
// of mistake once, next to correct entries that must not be reported.
func TestValidatePreferences(t *testing.T) {
	job := &Job{
		Name: "web",
		Affinities: []*Affinity{
			{Attribute: "${attr.arch}", Value: "amd64"}, // fine: "=", weight 50
			{Attribute: "${attr.arch}", Value: "amd64", Weight: 150},
			{Operator: OpDistinctHosts},
			{Operator: OpConflicts, Value: "db"},
			{Attribute: "${meta.rack}", Operator: "~="},
			{Value: "x"},
			{Attribute: "${attr.kernel}", Operator: OpRegexp, Value: "("},
			{Attribute: "${meta.ssd}", Operator: OpIsSet, Weight: -100}, // fine
			nil,
		},
		Spreads: []*Spread{
			{Attribute: "${meta.zone}", Weight: 80, Targets: []SpreadTarget{{Value: "a", Percent: 60}, {Value: "b", Percent: 50}}},
			{Attribute: "${meta.zone}"},
			{},
			{Attribute: "zone", Weight: -1},
			{Attribute: "${node.name}", Targets: []SpreadTarget{{Value: "n1", Percent: 101}, {Percent: 0}, {Value: "n1"}}},
		},
		Groups: []*Group{{
			Name: "api", Count: 1,
			// The same attribute as the job's: the group's wins, no problem.
			Spreads: []*Spread{{Attribute: "${meta.zone}", Targets: []SpreadTarget{{Value: "a", Percent: 100}}}},
			Network: &Network{Ports: []Port{
				{Label: "http", Static: 8080},
				{Label: "http"},
				{Label: "admin", Static: 8080},
				{Label: "9lives"},
				{Label: "my-port"},
				{Label: ""},
				{Label: "big", Static: 70000},
				{Label: "neg", Static: -1},
				{Label: "metrics"}, // fine: dynamic
				{Label: "DB_2", Static: 5432},
			}},
			Tasks: []*Task{{
				Name: "t", Driver: "exec", Config: TaskConfig{Command: "x"},
				Affinities: []*Affinity{{Operator: OpDistinctProperty, Attribute: "${meta.rack}"}},
			}},
		}},
	}
	job.Canonicalize()
	affinityOps := "=, !=, <, <=, >, >=, regexp, version, semver, set_contains, set_contains_any, is_set, is_not_set"
	want := Problems{
		{Field: "affinities[1].weight", Message: "weight 150 is out of range; use -100 to 100"},
		{Field: "affinities[2].operator", Message: "distinct_hosts cannot be an affinity, only a constraint; an affinity uses one of " + affinityOps},
		{Field: "affinities[3].operator", Message: "conflicts cannot be an affinity, only a constraint; an affinity uses one of " + affinityOps},
		{Field: "affinities[4].operator", Message: `unknown affinity operator "~="; use one of ` + affinityOps},
		{Field: "affinities[5].attribute", Message: `an affinity needs an attribute, such as "${meta.rack}"`},
		{Field: "affinities[6].value", Message: "bad regexp \"(\": missing closing ): `(`"},
		{Field: "affinities[8]", Message: "affinity is null"},
		{Field: "spreads[0].targets", Message: "the targets' percents add up to 110; they must not exceed 100"},
		{Field: "spreads[1].attribute", Message: "a spread over ${meta.zone} is already defined at spreads[0]; merge the two"},
		{Field: "spreads[2].attribute", Message: `a spread needs an attribute to spread over, such as "${meta.zone}"`},
		{Field: "spreads[3].attribute", Message: `attribute "zone" is not a node target; use ${node.unique.name}, ${node.unique.id}, ${node.datacenter}, ${node.class}, ${node.pool}, ${attr.<key>} or ${meta.<key>}`},
		{Field: "spreads[3].weight", Message: "weight -1 is out of range; use 1 to 100"},
		{Field: "spreads[4].targets[0].percent", Message: "percent 101 is out of range; use 0 to 100"},
		{Field: "spreads[4].targets[1].value", Message: "a spread target needs a value"},
		{Field: "spreads[4].targets[2].value", Message: `value "n1" is already a target`},
		{Field: "spreads[4].targets", Message: "the targets' percents add up to 101; they must not exceed 100"},
		{Field: "groups[0].network.ports[1].label", Message: `port "http" is already defined`},
		{Field: "groups[0].network.ports[2].static", Message: "static port 8080 is already used by another port of the group"},
		// ports[3], "9lives", is a label: letters, digits and '_' in any order, as Nomad's.
		{Field: "groups[0].network.ports[4].label", Message: `port label "my-port" must be letters, digits and '_' (it becomes DROVER_PORT_<label> and NOMAD_PORT_<label>, names a shell can read); write port "my_port"`},
		{Field: "groups[0].network.ports[5].label", Message: `a port needs a label, such as "http" (it becomes DROVER_PORT_<label>)`},
		{Field: "groups[0].network.ports[6].static", Message: "static port 70000 is out of range; use 1 to 65535, or leave it out for a dynamic port"},
		{Field: "groups[0].network.ports[7].static", Message: "static port -1 is out of range; use 1 to 65535, or leave it out for a dynamic port"},
		{Field: "groups[0].tasks[0].affinities[0].operator", Message: "distinct_property cannot be an affinity, only a constraint; an affinity uses one of " + affinityOps},
	}
	if diff := cmp.Diff(want, job.Validate()); diff != "" {
		t.Errorf("Validate() (-want +got):\n%s", diff)
	}
}

// TestJobRuleConstraints checks colocate, conflicts and replaces: they take
// no attribute and need a job name or a valid glob.
func TestJobRuleConstraints(t *testing.T) {
	job := &Job{
		Name: "web",
		Constraints: []*Constraint{
			{Operator: OpColocate, Value: "cache"},    // fine
			{Operator: OpConflicts, Value: "batch-*"}, // fine
			{Operator: OpReplaces, Value: "old-web"},  // fine
			{Operator: OpColocate, Attribute: "${node.name}", Value: "cache"},
			{Operator: OpConflicts, Value: "["},
			{Operator: OpReplaces, Value: " "},
		},
		Groups: []*Group{{Name: "api", Count: 1, Tasks: []*Task{{Name: "t", Driver: "exec", Config: TaskConfig{Command: "x"}}}}},
	}
	job.Canonicalize()
	want := Problems{
		{Field: "constraints[3].attribute", Message: `colocate takes no attribute, got "${node.name}"; put the job name in value`},
		{Field: "constraints[4].value", Message: `bad glob "[": syntax error in pattern`},
		{Field: "constraints[5].value", Message: "replaces needs a job name in value"},
	}
	if diff := cmp.Diff(want, job.Validate()); diff != "" {
		t.Errorf("Validate() (-want +got):\n%s", diff)
	}
	c := Constraint{Operator: OpConflicts, Value: "batch-*"}
	if !c.MatchJob("batch-nightly") || c.MatchJob("web") {
		t.Errorf("conflicts batch-* matches wrongly")
	}
	if colo := (Constraint{Operator: OpColocate, Value: "cache*"}); colo.MatchJob("cache1") {
		t.Errorf("colocate must match the job name exactly, not as a glob")
	}
}
