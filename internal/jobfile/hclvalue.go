package jobfile

import (
	"fmt"
	"math"
	"math/big"
	"regexp"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/drover-org/drover/internal/spec"
)

// Attribute values are evaluated with the file's variables (var.NAME),
// locals (local.NAME) and functions (hclvars.go, hclfuncs.go). The
// runtime references the agent interpolates are made text first, so that
// they are never taken for HCL variables; a reference to anything else
// the file does not declare is reported with what to declare (refsOK).

// runtimeRef is what the agent interpolates when a task starts
// (spec.TaskRuntime.Interpolate): ${NOMAD_*} and ${DROVER_*} variables,
// ${attr.*}, ${node.*}, ${meta.*} and ${env.*}. Nomad's names may hold
// '-' (attr.unique.network.ip-address), which HCL reads as a subtraction:
// a reference is recognized by its text, not its expression.
var runtimeRef = regexp.MustCompile(`^(?:(?:NOMAD|DROVER)_[A-Za-z0-9_]*|(?:attr|node|meta|env)\.[A-Za-z0-9_.\-]+)$`)

// keepRuntimeRefs turns every interpolation of a runtime reference in
// body's strings into its text ("${NOMAD_ALLOC_ID}" stays as written), for
// the agent to interpolate with the alloc's and the node's values; any
// other interpolation is left for eval to report.
func keepRuntimeRefs(body *hclsyntax.Body, src []byte) {
	literal := func(e hclsyntax.Expression) hclsyntax.Expression {
		r := e.Range()
		if r.Start.Byte < 0 || r.End.Byte > len(src) || r.Start.Byte >= r.End.Byte {
			return e
		}
		text := strings.TrimSpace(string(src[r.Start.Byte:r.End.Byte]))
		if !runtimeRef.MatchString(text) {
			return e
		}
		return &hclsyntax.LiteralValueExpr{Val: cty.StringVal("${" + text + "}"), SrcRange: r}
	}
	hclsyntax.VisitAll(body, func(n hclsyntax.Node) hcl.Diagnostics {
		switch n := n.(type) {
		case *hclsyntax.TemplateExpr:
			for i, p := range n.Parts {
				if _, ok := p.(*hclsyntax.LiteralValueExpr); !ok {
					n.Parts[i] = literal(p)
				}
			}
		case *hclsyntax.TemplateWrapExpr:
			n.Wrapped = literal(n.Wrapped)
		}
		return nil
	})
}

// eval returns the value of a, recording its position as field. On failure
// it reports why and marks field as reported. A value made from a
// sensitive variable comes back unmarked, its field in d.secret.
func (d *hclDecoder) eval(a *hcl.Attribute, field string) (cty.Value, bool) {
	d.mark(field, a.Expr.Range())
	v, ok := d.evalExpr(a.Expr, a.Name)
	if !ok {
		d.c.markReported(field)
		return cty.NilVal, false
	}
	if !v.IsWhollyKnown() {
		if !d.inputFailed { // else it was made from what is reported
			d.errAt(a.Expr.Range(), "%s has no known value; write a literal value", a.Name)
		}
		d.c.markReported(field)
		return cty.NilVal, false
	}
	if v.ContainsMarked() {
		v, _ = v.UnmarkDeep()
		d.secret[field] = true
	}
	return v, true
}

// typeName names v's type as a job file author thinks of it.
func typeName(v cty.Value) string {
	if v.IsNull() {
		return "null"
	}
	t := v.Type()
	switch {
	case t == cty.String:
		return "string"
	case t == cty.Number:
		return "number"
	case t == cty.Bool:
		return "bool"
	case t.IsObjectType() || t.IsMapType():
		return "map"
	case t.IsTupleType() || t.IsListType() || t.IsSetType():
		return "list"
	}
	return t.FriendlyName()
}

func (d *hclDecoder) wrongType(a *hcl.Attribute, field, want string, v cty.Value) {
	got := typeName(v)
	if got == "string" && d.secret[field] {
		got = "a string from a sensitive variable"
	} else if got == "string" {
		got = fmt.Sprintf("string %q", v.AsString())
	}
	d.errAt(a.Expr.Range(), "%s must be %s, got %s", a.Name, want, got)
	d.c.markReported(field)
}

func (d *hclDecoder) str(a *hcl.Attribute, field string) (string, bool) {
	v, ok := d.eval(a, field)
	if !ok {
		return "", false
	}
	return d.strOf(a, field, v)
}

func (d *hclDecoder) strOf(a *hcl.Attribute, field string, v cty.Value) (string, bool) {
	if v.IsNull() || v.Type() != cty.String {
		d.wrongType(a, field, "a string", v)
		return "", false
	}
	return v.AsString(), true
}

// int accepts whole numbers that fit in 32 bits, whatever int's size, so that
// a job file means the same on every platform.
func (d *hclDecoder) int(a *hcl.Attribute, field string) (int, bool) {
	v, ok := d.eval(a, field)
	if !ok {
		return 0, false
	}
	// A quoted number ("3") is a number, as Nomad converts it.
	if n, err := convert.Convert(v, cty.Number); err == nil && !v.IsNull() && v.Type() == cty.String {
		v = n
	}
	if v.IsNull() || v.Type() != cty.Number {
		d.wrongType(a, field, "a number", v)
		return 0, false
	}
	f := v.AsBigFloat()
	if f.IsInf() || !f.IsInt() {
		d.errAt(a.Expr.Range(), "%s must be a whole number, got %s", a.Name, f.Text('g', 10))
		d.c.markReported(field)
		return 0, false
	}
	n, acc := f.Int64()
	if acc != big.Exact || n > math.MaxInt32 || n < math.MinInt32 {
		d.errAt(a.Expr.Range(), "%s %s is too large", a.Name, f.Text('g', 10))
		d.c.markReported(field)
		return 0, false
	}
	return int(n), true
}

func (d *hclDecoder) bool(a *hcl.Attribute, field string) (bool, bool) {
	v, ok := d.eval(a, field)
	if !ok {
		return false, false
	}
	// A quoted bool ("true") is a bool, as Nomad converts it.
	if b, err := convert.Convert(v, cty.Bool); err == nil && !v.IsNull() && v.Type() == cty.String {
		v = b
	}
	if v.IsNull() || v.Type() != cty.Bool {
		d.wrongType(a, field, "true or false", v)
		return false, false
	}
	return v.True(), true
}

func (d *hclDecoder) duration(a *hcl.Attribute, field string) (spec.Duration, bool) {
	v, ok := d.eval(a, field)
	if !ok {
		return 0, false
	}
	if v.IsNull() || v.Type() != cty.String {
		d.wrongType(a, field, `a duration string such as "30s"`, v)
		return 0, false
	}
	dur, err := spec.ParseDuration(v.AsString())
	if err != nil {
		d.errAt(a.Expr.Range(), "%s: %v", a.Name, err)
		d.c.markReported(field)
		return 0, false
	}
	return dur, true
}

func (d *hclDecoder) stringList(a *hcl.Attribute, field string) []string {
	v, ok := d.eval(a, field)
	if !ok {
		return nil
	}
	t := v.Type()
	if v.IsNull() || !(t.IsTupleType() || t.IsListType() || t.IsSetType()) {
		d.wrongType(a, field, "a list of strings", v)
		return nil
	}
	var elems []hclsyntax.Expression
	if tuple, ok := hcl.UnwrapExpression(a.Expr).(*hclsyntax.TupleConsExpr); ok {
		elems = tuple.Exprs
	}
	// Each element written out is where what is said of it points: an
	// argument that interpolates an attribute no node has.
	if v.IsKnown() && v.LengthInt() == len(elems) {
		for i, e := range elems {
			d.mark(fmt.Sprintf("%s[%d]", field, i), e.Range())
		}
	}
	out := []string{}
	bad := false
	for i, e := 0, v.ElementIterator(); e.Next(); i++ {
		_, ev := e.Element()
		if ev.IsNull() || ev.Type() != cty.String {
			r := a.Expr.Range()
			if i < len(elems) {
				r = elems[i].Range()
			}
			d.errAt(r, "%s[%d] must be a string, got %s", a.Name, i, typeName(ev))
			bad = true
			continue
		}
		out = append(out, ev.AsString())
	}
	if bad {
		d.c.markReported(field)
	}
	return out
}

// stringMap decodes meta and env, which Nomad allows both as a block
// (meta { owner = "a" }) and as an attribute (meta = { "team.owner" = "a" }).
// Numbers and bools are taken as their text, as Nomad does.
func (d *hclDecoder) stringMap(it item, field string) map[string]string {
	out := map[string]string{}
	if it.attr != nil {
		v, ok := d.eval(it.attr, field)
		if !ok {
			return nil
		}
		t := v.Type()
		if v.IsNull() || !(t.IsObjectType() || t.IsMapType()) {
			d.wrongType(it.attr, field, fmt.Sprintf("a map such as %s = { key = \"value\" }", it.name), v)
			return nil
		}
		for e := v.ElementIterator(); e.Next(); {
			k, ev := e.Element()
			key := k.AsString()
			if s, ok := mapValue(ev); ok {
				out[key] = s
			} else {
				d.errAt(it.attr.Expr.Range(), "%s.%s must be a string, got %s", it.name, key, typeName(ev))
				d.c.markReported(field)
			}
		}
		return out
	}
	b := it.block
	d.mark(field, b.TypeRange)
	d.noLabels(b)
	for _, in := range d.items(b.Body) {
		if in.block != nil {
			d.errAt(in.block.TypeRange, "%s blocks hold only key = \"value\" lines; found a block %q", it.name, in.block.Type)
			d.c.markReported(field)
			continue
		}
		key, a := in.name, in.attr
		v, ok := d.eval(a, field)
		if !ok {
			continue
		}
		if s, ok := mapValue(v); ok {
			out[key] = s
			d.mark(field+"."+key, a.Expr.Range())
		} else {
			d.errAt(a.Expr.Range(), "%s.%s must be a string, got %s", it.name, key, typeName(v))
			d.c.markReported(field)
		}
	}
	d.mark(field, b.TypeRange)
	return out
}

func mapValue(v cty.Value) (string, bool) {
	if v.IsNull() {
		return "", false
	}
	switch v.Type() {
	case cty.String:
		return v.AsString(), true
	case cty.Number:
		return strings.TrimSuffix(v.AsBigFloat().Text('f', -1), ".0"), true
	case cty.Bool:
		if v.True() {
			return "true", true
		}
		return "false", true
	}
	return "", false
}
