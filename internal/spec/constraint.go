package spec

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Constraint is a hard requirement on the node an instance is placed on.
// Constraints written on a job, a group or a task all apply to the placement
// of the group: a task runs where its group runs.
//
// Attribute names what to read from the node, Operator how to compare it
// with Value:
//
//	${node.unique.name} ${node.unique.id}   the node's name and ID (also ${node.name}, ${node.id})
//	${node.datacenter} ${node.class} ${node.pool}   the agent's --datacenter, --node-class, --node-pool
//	${attr.<key>}   detected attributes, with Nomad's names (attribute.go): kernel.name, cpu.arch, ...
//	${meta.<key>}   operator-given meta (drover agent --meta k=v)
//
// A target that the node lacks is "not set": the node then meets only !=
// and is_not_set. distinct_hosts and distinct_property count the group's
// other instances (see ConstraintCheck.Match).
type Constraint struct {
	Attribute string `json:"attribute,omitempty"`
	Operator  string `json:"operator,omitempty"`
	Value     string `json:"value,omitempty"`
}

// Constraint operators.
const (
	OpEqual            = "="
	OpNotEqual         = "!="
	OpLess             = "<"
	OpLessEqual        = "<="
	OpGreater          = ">"
	OpGreaterEqual     = ">="
	OpRegexp           = "regexp"
	OpVersion          = "version"
	OpSemver           = "semver"
	OpSetContains      = "set_contains"
	OpSetContainsAny   = "set_contains_any"
	OpIsSet            = "is_set"
	OpIsNotSet         = "is_not_set"
	OpDistinctHosts    = "distinct_hosts"
	OpDistinctProperty = "distinct_property"
)

// ConstraintOperators lists every operator, in the order messages name them.
var ConstraintOperators = []string{
	OpEqual, OpNotEqual, OpLess, OpLessEqual, OpGreater, OpGreaterEqual, OpRegexp, OpVersion, OpSemver,
	OpSetContains, OpSetContainsAny, OpIsSet, OpIsNotSet, OpDistinctHosts, OpDistinctProperty,
	OpColocate, OpConflicts, OpReplaces,
}

// String is how the constraint reads in a placement failure:
// "${meta.rack} set_contains_any r1,r2", "distinct_hosts".
func (c Constraint) String() string {
	op := c.Operator
	if op == "" {
		op = OpEqual
	}
	var parts []string
	for _, s := range []string{c.Attribute, op, c.Value} {
		if s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, " ")
}

// Distinct reports whether the constraint limits how many instances of a
// group share a node (distinct_hosts) or a value of an attribute
// (distinct_property). Such a constraint depends on where the other
// instances are, not on the node alone, so Match cannot decide it.
func (c Constraint) Distinct() bool {
	return c.Operator == OpDistinctHosts || c.Operator == OpDistinctProperty
}

// DistinctLimit is how many instances of a group one value of a
// distinct_property attribute may hold: Value, 1 when empty. It is 0 when
// Value is not a positive integer (Validate refuses that).
func (c Constraint) DistinctLimit() int {
	if c.Value == "" {
		return 1
	}
	n, err := strconv.Atoi(strings.TrimSpace(c.Value))
	if err != nil || n < 1 {
		return 0
	}
	return n
}

// ConstraintsOf returns every constraint that applies to the placement of g:
// the job's, then the group's, then each task's, in order, without
// repeats. A nil entry is skipped.
func (j *Job) ConstraintsOf(g *Group) []Constraint {
	var out []Constraint
	add := func(cs []*Constraint) {
		for _, c := range cs {
			if c == nil {
				continue
			}
			cc := *c
			if cc.Operator == "" {
				cc.Operator = OpEqual
			}
			dup := false
			for _, o := range out {
				dup = dup || o == cc
			}
			if !dup {
				out = append(out, cc)
			}
		}
	}
	add(j.Constraints)
	add(g.Constraints)
	for _, t := range g.Tasks {
		if t != nil {
			add(t.Constraints)
		}
	}
	return out
}

// targetKind says which part of a node an attribute reads.
type targetKind uint8

const (
	targetNone targetKind = iota
	targetNodeName
	targetNodeID
	targetNodeDatacenter
	targetNodeClass
	targetNodePool
	targetAttr
	targetMeta
)

// nodeFields are the node's own fields a target may name, Nomad's
// names and drover's older ones.
var nodeFields = map[string]targetKind{
	"node.unique.name": targetNodeName, "node.name": targetNodeName,
	"node.unique.id": targetNodeID, "node.id": targetNodeID,
	"node.datacenter": targetNodeDatacenter, "node.class": targetNodeClass, "node.pool": targetNodePool,
}

// target is a parsed attribute: "${meta.rack}" is {targetMeta, "rack"}.
// alias is the other name of a renamed attribute (attributeAlias).
type target struct {
	kind  targetKind
	key   string
	alias string
}

// notATarget is the end of the message for an attribute parseTarget
// does not read.
const notATarget = "is not a node target; use ${node.unique.name}, ${node.unique.id}, ${node.datacenter}, ${node.class}, ${node.pool}, ${attr.<key>} or ${meta.<key>}"

// parseTarget reads "${node.unique.name}", "${attr.<key>}",
// "${meta.<key>}" and the other names parseName knows.
func parseTarget(s string) (target, bool) {
	inner, ok := strings.CutPrefix(strings.TrimSpace(s), "${")
	if !ok {
		return target{}, false
	}
	inner, ok = strings.CutSuffix(inner, "}")
	if !ok {
		return target{}, false
	}
	return parseName(inner)
}

// parseName reads a target without its ${ }.
func parseName(name string) (target, bool) {
	if kind, ok := nodeFields[name]; ok {
		return target{kind: kind}, true
	}
	if k, ok := strings.CutPrefix(name, "attr."); ok && k != "" {
		return target{kind: targetAttr, key: k, alias: attributeAlias(k)}, true
	}
	if k, ok := strings.CutPrefix(name, "meta."); ok && k != "" {
		return target{kind: targetMeta, key: k}, true
	}
	return target{}, false
}

// name is how a warning names an attr or meta target: "attr.kernel.name".
func (t target) name() string {
	if t.kind == targetMeta {
		return "meta." + t.key
	}
	return "attr." + t.key
}

// resolve reads t from n; ok is false when n does not have it. The
// node's class is always set, if empty, as on Nomad.
func (t target) resolve(n *Node) (string, bool) {
	switch t.kind {
	case targetNodeName:
		return n.Name, true
	case targetNodeID:
		return n.ID, true
	case targetNodeDatacenter:
		return n.DatacenterOf(), true
	case targetNodeClass:
		return n.NodeClass, true
	case targetNodePool:
		return n.PoolOf(), true
	case targetAttr:
		return n.attribute(t.key, t.alias)
	case targetMeta:
		v, ok := n.Meta[t.key]
		return v, ok
	}
	return "", false
}

// ConstraintCheck is a constraint made ready to test many nodes: its
// target parsed, its regexp, version constraint, set or number compiled
// once. Build one per constraint per scheduling pass with
// CompileConstraint.
type ConstraintCheck struct {
	Constraint
	target  target
	re      *regexp.Regexp
	version versionConstraint
	set     []string
	anySet  map[string]bool
	num     float64
	numOK   bool
	limit   int
}

// CompileConstraint prepares c for Match, or says what is wrong with it.
// An empty operator means "=".
func CompileConstraint(c Constraint) (*ConstraintCheck, error) {
	k, err := compileConstraint(c)
	if err != nil {
		return nil, err
	}
	return k, nil
}

// ConstraintError is what is wrong with a constraint, and in which of its
// fields: "attribute", "operator" or "value".
type ConstraintError struct {
	Field   string
	Message string
}

func (e *ConstraintError) Error() string { return e.Message }

func badConstraint(field, format string, args ...any) *ConstraintError {
	return &ConstraintError{Field: field, Message: fmt.Sprintf(format, args...)}
}

func compileConstraint(c Constraint) (*ConstraintCheck, *ConstraintError) {
	if c.Operator == "" {
		c.Operator = OpEqual
	}
	k := &ConstraintCheck{Constraint: c}
	if c.Operator == OpDistinctHosts {
		if c.Attribute != "" {
			return nil, badConstraint("attribute", "distinct_hosts takes no attribute, got %q", c.Attribute)
		}
		switch c.Value {
		case "", "true", "false":
		default:
			return nil, badConstraint("value", "distinct_hosts value must be empty, \"true\" or \"false\", got %q", c.Value)
		}
		return k, nil
	}
	if c.JobRule() {
		if err := compileJobRule(c); err != nil {
			return nil, err
		}
		return k, nil
	}
	known := false
	for _, op := range ConstraintOperators {
		known = known || op == c.Operator
	}
	if !known {
		return nil, badConstraint("operator", "unknown constraint operator %q; use one of %s", c.Operator, strings.Join(ConstraintOperators, ", "))
	}
	if c.Attribute == "" {
		return nil, badConstraint("attribute", "a %s constraint needs an attribute, such as \"${meta.rack}\"", c.Operator)
	}
	t, ok := parseTarget(c.Attribute)
	if !ok {
		return nil, badConstraint("attribute", "attribute %q "+notATarget, c.Attribute)
	}
	k.target = t
	switch c.Operator {
	case OpLess, OpLessEqual, OpGreater, OpGreaterEqual:
		k.num, k.numOK = parseNumber(c.Value)
	case OpRegexp:
		re, err := regexp.Compile(c.Value)
		if err != nil {
			return nil, badConstraint("value", "bad regexp %q: %v", c.Value, strings.TrimPrefix(err.Error(), "error parsing regexp: "))
		}
		k.re = re
	case OpVersion, OpSemver:
		vc, err := parseVersionConstraint(c.Value)
		if err != nil {
			return nil, badConstraint("value", "bad %s constraint %q: %v", c.Operator, c.Value, err)
		}
		k.version = vc
	case OpSetContains, OpSetContainsAny:
		k.anySet = map[string]bool{}
		for item := range strings.SplitSeq(c.Value, ",") {
			if item = strings.TrimSpace(item); item != "" && !k.anySet[item] {
				k.set = append(k.set, item)
				k.anySet[item] = true
			}
		}
		if len(k.set) == 0 {
			return nil, badConstraint("value", "%s needs a comma-separated list of values", c.Operator)
		}
	case OpDistinctProperty:
		if k.limit = c.DistinctLimit(); k.limit == 0 {
			return nil, badConstraint("value", "distinct_property value %q must be a positive integer (how many instances may share a value; default 1)", c.Value)
		}
	}
	return k, nil
}

// Property returns the value of the constraint's attribute on n, and
// whether n has it. It is what distinct_property counts instances by.
func (k *ConstraintCheck) Property(n *Node) (string, bool) { return k.target.resolve(n) }

// Limit is distinct_property's limit per value; 0 for other operators.
func (k *ConstraintCheck) Limit() int { return k.limit }

// Off reports whether the constraint asks for nothing: distinct_hosts
// with value "false".
func (k *ConstraintCheck) Off() bool {
	return k.Operator == OpDistinctHosts && k.Value == "false"
}

// Match reports whether node n meets the constraint. Distinct constraints
// depend on the other instances; Match only checks that a distinct_property
// node has the attribute, and the caller counts.
func (k *ConstraintCheck) Match(n *Node) bool {
	if k.Operator == OpDistinctHosts || k.JobRule() {
		return true
	}
	v, ok := k.target.resolve(n)
	switch k.Operator {
	case OpIsSet:
		return ok
	case OpIsNotSet:
		return !ok
	case OpNotEqual:
		return !ok || v != k.Value
	}
	if !ok {
		return false
	}
	switch k.Operator {
	case OpEqual:
		return v == k.Value
	case OpLess, OpLessEqual, OpGreater, OpGreaterEqual:
		var c int
		if f, isNum := parseNumber(v); isNum && k.numOK {
			c = compareFloat(f, k.num)
		} else {
			c = strings.Compare(v, k.Value)
		}
		switch k.Operator {
		case OpLess:
			return c < 0
		case OpLessEqual:
			return c <= 0
		case OpGreater:
			return c > 0
		}
		return c >= 0
	case OpRegexp:
		return k.re.MatchString(v)
	case OpVersion, OpSemver:
		ver, ok := parseVersion(v, k.Operator == OpSemver)
		return ok && k.version.check(ver, k.Operator == OpVersion)
	case OpSetContains:
		for _, want := range k.set {
			if !inList(v, want) {
				return false
			}
		}
		return true
	case OpSetContainsAny:
		for item := range strings.SplitSeq(v, ",") {
			if k.anySet[strings.TrimSpace(item)] {
				return true
			}
		}
		return false
	case OpDistinctProperty:
		return true
	}
	return false
}

// inList reports whether the comma-separated list holds item.
func inList(list, item string) bool {
	for x := range strings.SplitSeq(list, ",") {
		if strings.TrimSpace(x) == item {
			return true
		}
	}
	return false
}

func parseNumber(s string) (float64, bool) {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	return f, err == nil
}

func compareFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (c *Constraint) validate(ps *Problems, path string) {
	if _, err := compileConstraint(*c); err != nil {
		ps.Add(path+"."+err.Field, "%s", err.Message)
	}
}

func validateConstraints(ps *Problems, path string, cs []*Constraint) {
	for i, c := range cs {
		p := fmt.Sprintf("%s[%d]", path, i)
		if c == nil {
			ps.Add(p, "constraint is null")
			continue
		}
		c.validate(ps, p)
	}
}
