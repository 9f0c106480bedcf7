package spec

import (
	"reflect"
	"testing"
)

func TestValidateConstraints(t *testing.T) {
	job := &Job{
		Name: "web",
		Constraints: []*Constraint{
			{Attribute: "${attr.os}", Operator: "~=", Value: "linux"},
			{Attribute: "${attr.os}", Value: "linux"}, // fine: "=" by default
			nil,
		},
		Groups: []*Group{{
			Name: "api", Count: 1,
			Constraints: []*Constraint{
				{Operator: "regexp", Value: "x"},
				{Attribute: "${os}", Operator: "="},
				{Attribute: "${meta.rack}", Operator: "distinct_property", Value: "0"},
				{Attribute: "${meta.rack}", Operator: "distinct_property", Value: "3"},
				{Attribute: "${meta.rack}", Operator: "distinct_hosts"},
				{Operator: "distinct_hosts", Value: "yes"},
				{Operator: "distinct_hosts"},
			},
			Tasks: []*Task{{
				Name: "t", Driver: "exec", Config: TaskConfig{Command: "x"},
				Constraints: []*Constraint{
					{Attribute: "${attr.kernel}", Operator: "regexp", Value: "("},
					{Attribute: "${attr.kernel}", Operator: "version", Value: ">= 1.x"},
					{Attribute: "${attr.kernel}", Operator: "semver", Value: ""},
					{Attribute: "${meta.tags}", Operator: "set_contains", Value: " , "},
					{Attribute: "${node.id}", Operator: "is_set"},
				},
			}},
		}},
	}
	job.Canonicalize()
	want := Problems{
		{Field: "constraints[0].operator", Message: `unknown constraint operator "~="; use one of =, !=, <, <=, >, >=, regexp, version, semver, set_contains, set_contains_any, is_set, is_not_set, distinct_hosts, distinct_property, colocate, conflicts, replaces`},
		{Field: "constraints[2]", Message: "constraint is null"},
		{Field: "groups[0].constraints[0].attribute", Message: `a regexp constraint needs an attribute, such as "${meta.rack}"`},
		{Field: "groups[0].constraints[1].attribute", Message: `attribute "${os}" is not a node target; use ${node.unique.name}, ${node.unique.id}, ${node.datacenter}, ${node.class}, ${node.pool}, ${attr.<key>} or ${meta.<key>}`},
		{Field: "groups[0].constraints[2].value", Message: `distinct_property value "0" must be a positive integer (how many instances may share a value; default 1)`},
		{Field: "groups[0].constraints[4].attribute", Message: `distinct_hosts takes no attribute, got "${meta.rack}"`},
		{Field: "groups[0].constraints[5].value", Message: `distinct_hosts value must be empty, "true" or "false", got "yes"`},
		{Field: "groups[0].tasks[0].constraints[0].value", Message: "bad regexp \"(\": missing closing ): `(`"},
		{Field: "groups[0].tasks[0].constraints[1].value", Message: `bad version constraint ">= 1.x": "1.x" is not a version (dotted numbers such as 1.2.3)`},
		{Field: "groups[0].tasks[0].constraints[2].value", Message: `bad semver constraint "": empty; write terms such as ">= 1.2, < 2"`},
		{Field: "groups[0].tasks[0].constraints[3].value", Message: "set_contains needs a comma-separated list of values"},
	}
	if got := job.Validate(); !reflect.DeepEqual(got, want) {
		t.Errorf("Validate():\n got %v\nwant %v", got, want)
	}
	if job.Constraints[1].Operator != OpEqual {
		t.Errorf("Canonicalize left operator %q", job.Constraints[1].Operator)
	}
}

func TestVersions(t *testing.T) {
	for _, tt := range []struct {
		v, c   string
		strict bool // semver
		want   bool
	}{
		{"1.2.3", ">= 1.2, < 2", false, true},
		{"v1.2.3", "= 1.2.3", false, true},
		{"1.2", "= 1.2.0", false, true},
		{"1.10.0", "> 1.9", false, true},
		{"2.0.0", ">= 1.2, < 2", false, false},
		{"1.2.3+build.7", "= 1.2.3", false, true},
		{"1.4.0", "~> 1.2", false, true},
		{"2.0.0", "~> 1.2", false, false},
		{"1.2.9", "~> 1.2.3", false, true},
		{"1.3.0", "~> 1.2.3", false, false},
		{"1.2.3", "!= 1.2.3", false, false},
		{"1.2.3", "1.2.3", false, true},
		{"2.0.0-rc.1", "< 2", false, false},          // version: prereleases meet only prerelease terms
		{"2.0.0-rc.1", ">= 2.0.0-beta", false, true}, // of the same numbers
		{"2.0.0-rc.1", ">= 1.0.0-beta", false, false},
		{"2.0.0-rc.1", "< 2.0.0", true, true}, // semver: plain SemVer order
		{"2.0.0-rc.2", "> 2.0.0-rc.1", true, true},
		{"2.0.0-rc.10", "> 2.0.0-rc.9", true, true},
		{"2.0.0-alpha", "< 2.0.0-alpha.1", true, true},
		{"2.0.0-1", "< 2.0.0-alpha", true, true},
		{"1.2", ">= 1.0.0", true, false},    // semver wants three numbers
		{"01.2.3", ">= 1.0.0", true, false}, // and no leading zeros
		{"linux", ">= 1", false, false},
		{"1..2", ">= 1", false, false},
		{"1.2.3-", ">= 1", false, false},
	} {
		vc, err := parseVersionConstraint(tt.c)
		if err != nil {
			t.Fatalf("%q: %v", tt.c, err)
		}
		v, ok := parseVersion(tt.v, tt.strict)
		if got := ok && vc.check(v, !tt.strict); got != tt.want {
			t.Errorf("%q against %q (semver %v) = %v, want %v", tt.v, tt.c, tt.strict, got, tt.want)
		}
	}
}
