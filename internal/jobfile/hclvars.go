package jobfile

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// Options are what an HCL job file's variable blocks take from outside the
// file, as Nomad's CLI gives them. Later sources win: a variable's
// default, then NOMAD_VAR_name, then DROVER_VAR_name, then each var file
// in order, then each -var in order.
type Options struct {
	// Vars are -var arguments, NAME=VALUE.
	Vars []string
	// VarFiles are -var-file paths: HCL files of NAME = value lines, or
	// JSON objects when they end in .json.
	VarFiles []string
	// Environ is the environment, as os.Environ returns it; only its
	// NOMAD_VAR_ and DROVER_VAR_ variables are read.
	Environ []string
	// NoFiles makes the filesystem functions (file, fileset, ...) a
	// problem instead of a read: for a source that came over the network
	// (POST /v1/jobs/parse), whose files are not on the server's disk.
	NoFiles bool
	// NodeHas, when set, says whether some node of the cluster has a node
	// attribute or meta key ("attr.kernel.name", "meta.rack"): drover
	// plan sets it from the current nodes, and the job's constraints,
	// affinities, spreads and interpolations that read one no node has
	// are warned of. Unset, the warnings are of the attributes no drover
	// node publishes (spec.Fingerprinted).
	NodeHas func(name string) bool
}

// given reports whether o sets variables explicitly, which only HCL files
// have; the environment is read only where a file declares them.
func (o Options) given() bool { return len(o.Vars) > 0 || len(o.VarFiles) > 0 }

// sensitive marks the value of a variable declared sensitive = true, and
// every value made from it, so that messages do not print it.
const sensitive = "sensitive"

// variable is one declared input variable.
type variable struct {
	name      string
	at        hcl.Range // its label, or its name in a variables block
	typ       cty.Type  // cty.DynamicPseudoType when it has no type
	defaults  *typeexpr.Defaults
	val       cty.Value // cty.NilVal until it has a value
	sensitive bool
	checks    []check
	// bad says a value it was given was reported as wrong.
	bad bool
}

// check is one validation block of a variable.
type check struct {
	condition, message hcl.Expression
}

var (
	variableSchema = bodySchema{members: map[string]member{
		"type": asAttr, "default": asAttr, "description": asAttr, "sensitive": asAttr, "validation": asBlock | repeated,
	}}
	validationSchema = bodySchema{members: map[string]member{"condition": asAttr, "error_message": asAttr}}
)

func init() {
	labelled["variable"] = labelInfo{"name", `variable "image" { default = "redis:7" }`}
}

// baseContext is what an expression may use before variables have
// values: the functions only, and empty var and local objects.
func baseContext(dir string, noFiles bool) *hcl.EvalContext {
	return &hcl.EvalContext{
		Variables: map[string]cty.Value{"var": cty.EmptyObjectVal, "local": cty.EmptyObjectVal},
		Functions: functions(dir, noFiles),
	}
}

// inputs reads the top-level variable, variables and locals blocks and
// sets d.ctx for the job block: var.NAME and local.NAME, and the functions.
func (d *hclDecoder) inputs(decls, locals []item) {
	vars := map[string]*variable{}
	var order []*variable
	declare := func(v *variable) {
		if prev, dup := vars[v.name]; dup {
			d.errAt(v.at, "variable %q is already declared at %s", v.name, d.where(prev.at))
			return
		}
		vars[v.name] = v
		order = append(order, v)
	}
	for _, it := range decls {
		if it.name == "variables" {
			// variables { name = default }: a shorter way to declare.
			d.noLabels(it.block)
			for _, a := range d.content(it.block.Body, bodySchema{members: anyAttrs(d.items(it.block.Body))}, "in a variables block", "") {
				if a.attr == nil {
					continue
				}
				v := &variable{name: a.name, at: a.attr.NameRange, typ: cty.DynamicPseudoType}
				v.val, _ = d.constant(a.attr.Expr, "variable "+a.name)
				declare(v)
			}
			continue
		}
		if v := d.variableBlock(it.block); v != nil {
			declare(v)
		}
	}
	d.assign(vars)
	values := map[string]cty.Value{}
	for _, v := range order {
		if v.val == cty.NilVal {
			d.inputFailed = true
			values[v.name] = cty.DynamicVal
			if v.bad {
				continue
			}
			d.errAt(v.at, "variable %q has no value: set it with -var %s=VALUE, in a -var-file, or with NOMAD_VAR_%s in the environment; or give it a default", v.name, v.name, v.name)
			continue
		}
		if v.sensitive {
			v.val = v.val.Mark(sensitive)
		}
		values[v.name] = v.val
		d.validate(v)
	}
	d.declared = vars
	d.ctx.Variables["var"] = cty.ObjectVal(values)
	d.locals(locals)
}

// anyAttrs is a schema member for each attribute of a body that takes
// any names (variables, locals), so that content reports only blocks.
func anyAttrs(items []item) map[string]member {
	m := map[string]member{}
	for _, it := range items {
		if it.attr != nil {
			m[it.name] = asAttr
		}
	}
	return m
}

// variableBlock reads variable "name" { type, default, description,
// sensitive, validation { condition, error_message } }.
func (d *hclDecoder) variableBlock(b *hcl.Block) *variable {
	if len(b.Labels) != 1 {
		d.label(b, "")
		return nil
	}
	v := &variable{name: b.Labels[0], at: b.LabelRanges[0], typ: cty.DynamicPseudoType}
	if !hclsyntax.ValidIdentifier(v.name) {
		d.errAt(b.LabelRanges[0], "variable name %q is not a valid name: use letters, digits, '_' and '-', starting with a letter", v.name)
		return nil
	}
	in := fmt.Sprintf("in variable %q", v.name)
	var def *hcl.Attribute
	for _, it := range d.content(b.Body, variableSchema, in, "") {
		switch it.name {
		case "type":
			t, defaults, diags := typeexpr.TypeConstraintWithDefaults(it.attr.Expr)
			if diags.HasErrors() {
				d.diags(diags)
				return nil
			}
			v.typ, v.defaults = t, defaults
		case "default":
			def = it.attr
		case "description":
			d.constant(it.attr.Expr, "description")
		case "sensitive":
			s, ok := d.constant(it.attr.Expr, "sensitive")
			if ok && (s.IsNull() || s.Type() != cty.Bool) {
				d.errAt(it.attr.Expr.Range(), "sensitive must be true or false")
			} else if ok {
				v.sensitive = s.True()
			}
		case "validation":
			d.noLabels(it.block)
			var c check
			for _, a := range d.content(it.block.Body, validationSchema, "in a validation block of variable "+fmt.Sprintf("%q", v.name), "") {
				if a.name == "condition" {
					c.condition = a.attr.Expr
				} else {
					c.message = a.attr.Expr
				}
			}
			if c.condition == nil || c.message == nil {
				d.errAt(it.block.DefRange, "a validation block needs a condition and an error_message: validation { condition = length(var.%s) > 0  error_message = \"...\" }", v.name)
				continue
			}
			v.checks = append(v.checks, c)
		}
	}
	if def != nil {
		if val, ok := d.constant(def.Expr, "default"); !ok {
			v.bad = true
		} else if !val.IsNull() {
			v.val = d.convert(val, v, def.Expr.Range(), "its default")
		}
	}
	return v
}

// constant evaluates an expression that may use functions but no
// variables: a default, a var file's value.
func (d *hclDecoder) constant(expr hcl.Expression, what string) (cty.Value, bool) {
	v, diags := expr.Value(&hcl.EvalContext{Functions: d.ctx.Functions})
	if !diags.HasErrors() {
		return v, true
	}
	for _, tr := range expr.Variables() {
		d.errAt(tr.SourceRange(), "%s cannot refer to %s: write a value", what, traversalText(tr))
		return cty.NilVal, false
	}
	d.diags(diags)
	return cty.NilVal, false
}

// convert converts val to v's type, applying the type's defaults, or
// reports why it cannot at r (a nil r: the problem is not in a file).
func (d *hclDecoder) convert(val cty.Value, v *variable, r hcl.Range, from string) cty.Value {
	if v.defaults != nil {
		val = v.defaults.Apply(val)
	}
	out, err := convert.Convert(val, v.typ)
	if err != nil {
		d.errAt(r, "variable %q must be %s; %s is not: %v", v.name, typeexpr.TypeString(v.typ), from, err)
		v.bad = true
		return cty.NilVal
	}
	return out
}

// assign gives the declared variables their values from the environment,
// the var files and the -var arguments, in that order.
func (d *hclDecoder) assign(vars map[string]*variable) {
	cli := pos{file: "command line"}
	for _, prefix := range []string{"NOMAD_VAR_", "DROVER_VAR_"} {
		for _, kv := range d.opts.Environ {
			name, val, _ := strings.Cut(kv, "=")
			name, ok := strings.CutPrefix(name, prefix)
			if v := vars[name]; ok && v != nil {
				d.setText(v, val, pos{file: "environment"}, prefix+name)
			}
		}
	}
	for _, path := range d.opts.VarFiles {
		d.varFile(path, vars)
	}
	for _, arg := range d.opts.Vars {
		name, val, ok := strings.Cut(arg, "=")
		switch {
		case !ok || name == "":
			d.c.add(cli, "", "-var %q is not NAME=VALUE", arg)
		case vars[name] == nil:
			d.c.add(cli, "", "-var %s: the job file declares no variable %q (%s); declare it with variable %q { type = string } at the top level", arg, name, declaredList(vars), name)
		default:
			d.setText(vars[name], val, cli, "-var "+name)
		}
	}
}

func declaredList(vars map[string]*variable) string {
	if len(vars) == 0 {
		return "it has none"
	}
	var names []string
	for n := range vars {
		names = append(names, n)
	}
	slices.Sort(names)
	return "it has " + strings.Join(names, ", ")
}

// setText sets v from text given outside a file: as it is for a string
// (or a variable of no type), else read as an HCL value ("3", "true",
// ["a", "b"]) and converted to v's type.
func (d *hclDecoder) setText(v *variable, text string, at pos, from string) {
	val := cty.StringVal(text)
	if v.typ != cty.String && v.typ != cty.DynamicPseudoType && !v.typ.IsPrimitiveType() {
		expr, diags := hclsyntax.ParseExpression([]byte(text), from, hcl.InitialPos)
		if !diags.HasErrors() {
			val, diags = expr.Value(&hcl.EvalContext{Functions: d.ctx.Functions})
		}
		if diags.HasErrors() {
			if v.sensitive {
				text = "its value"
			}
			d.c.add(at, "", "%s: variable %q is %s, and %q is not an HCL value of that type", from, v.name, typeexpr.TypeString(v.typ), text)
			v.bad = true
			return
		}
	}
	if v.defaults != nil {
		val = v.defaults.Apply(val)
	}
	out, err := convert.Convert(val, v.typ)
	if err != nil {
		d.c.add(at, "", "%s: variable %q must be %s: %v", from, v.name, typeexpr.TypeString(v.typ), err)
		v.bad = true
		return
	}
	v.val = out
}

// varFile reads a -var-file: NAME = value lines in HCL, or one JSON
// object for a file ending in .json.
func (d *hclDecoder) varFile(path string, vars map[string]*variable) {
	src, err := os.ReadFile(path)
	if err != nil {
		d.c.add(pos{file: "-var-file"}, "", "reading -var-file: %v", err)
		return
	}
	p := hclparse.NewParser()
	var f *hcl.File
	var diags hcl.Diagnostics
	if strings.EqualFold(filepath.Ext(path), ".json") {
		f, diags = p.ParseJSON(src, path)
	} else {
		f, diags = p.ParseHCL(src, path)
	}
	if diags.HasErrors() {
		d.diags(diags)
		return
	}
	attrs, diags := f.Body.JustAttributes()
	if diags.HasErrors() {
		d.diags(diags)
		return
	}
	for name, a := range attrs {
		v := vars[name]
		if v == nil {
			d.errAt(a.NameRange, "the job file declares no variable %q (%s); declare it with variable %q { ... } at its top level, or remove it from this file", name, declaredList(vars), name)
			continue
		}
		if val, ok := d.constant(a.Expr, "a -var-file value"); ok {
			if out := d.convert(val, v, a.Expr.Range(), "the value in "+path); out != cty.NilVal {
				v.val = out
			}
		}
	}
}

// validate reports each validation condition of v that is false.
func (d *hclDecoder) validate(v *variable) {
	ctx := d.ctx.NewChild()
	ctx.Variables = map[string]cty.Value{"var": cty.ObjectVal(map[string]cty.Value{v.name: v.val})}
	for _, c := range v.checks {
		for _, tr := range c.condition.Variables() {
			if tr.RootName() != "var" || len(tr) < 2 || attrName(tr[1]) != v.name {
				d.errAt(tr.SourceRange(), "variable %q's validation may refer only to var.%s, not %s", v.name, v.name, traversalText(tr))
				return
			}
		}
		ok, diags := c.condition.Value(ctx)
		if diags.HasErrors() {
			d.diags(diags)
			continue
		}
		ok, _ = ok.Unmark()
		if ok.IsNull() || ok.Type() != cty.Bool {
			d.errAt(c.condition.Range(), "variable %q's validation condition must be true or false, got %s", v.name, typeName(ok))
			continue
		}
		if ok.True() {
			continue
		}
		msg, diags := c.message.Value(ctx)
		text := "is not valid"
		if !diags.HasErrors() && msg.Type() == cty.String && !msg.IsNull() && !msg.IsMarked() {
			text = msg.AsString()
		}
		d.errAt(v.at, "variable %q: %s (its validation condition at %s is false)", v.name, text, d.where(c.condition.Range()))
	}
}

// locals evaluates the locals blocks, each after the locals it uses.
func (d *hclDecoder) locals(blocks []item) {
	exprs := map[string]*hcl.Attribute{}
	var names []string
	for _, it := range blocks {
		d.noLabels(it.block)
		for _, a := range d.content(it.block.Body, bodySchema{members: anyAttrs(d.items(it.block.Body))}, "in a locals block", "") {
			if prev, dup := exprs[a.name]; dup {
				d.errAt(a.attr.NameRange, "local %q is already defined at %s", a.name, d.where(prev.NameRange))
				continue
			}
			exprs[a.name] = a.attr
			names = append(names, a.name)
		}
	}
	d.localNames = exprs
	values := map[string]cty.Value{}
	done := map[string]bool{}
	for len(done) < len(names) {
		progress := false
		for _, name := range names {
			if done[name] {
				continue
			}
			a := exprs[name]
			ready := true
			for _, tr := range a.Expr.Variables() {
				if tr.RootName() == "local" && len(tr) > 1 && exprs[attrName(tr[1])] != nil && !done[attrName(tr[1])] {
					ready = false
				}
			}
			if !ready {
				continue
			}
			done[name], progress = true, true
			d.ctx.Variables["local"] = cty.ObjectVal(values)
			if v, ok := d.evalExpr(a.Expr, "local."+name); ok {
				values[name] = v
			} else {
				values[name] = cty.DynamicVal
				d.inputFailed = true
			}
		}
		if !progress {
			for _, name := range names {
				if !done[name] {
					d.errAt(exprs[name].NameRange, "local %q refers to itself through other locals; break the cycle", name)
					d.inputFailed = true
					done[name] = true
					values[name] = cty.DynamicVal
				}
			}
		}
	}
	d.ctx.Variables["local"] = cty.ObjectVal(values)
}

// refsOK reports every reference in expr that is not to a declared
// variable or a defined local, saying what to do, and whether there were
// none. The runtime references the agent interpolates
// (${NOMAD_ALLOC_ID}, ${attr.kernel.name}) were made text before
// (keepRuntimeRefs), and a dynamic block's iterator is not among expr's.
func (d *hclDecoder) refsOK(expr hcl.Expression, what string) bool {
	ok := true
	for _, tr := range expr.Variables() {
		root := tr.RootName()
		name := ""
		if len(tr) > 1 {
			name = attrName(tr[1])
		}
		switch {
		case root == "var" && name != "" && d.declared[name] == nil:
			d.errAt(tr.SourceRange(), "%s: var.%s is not declared; add variable %q { type = string } at the top level of the file and set it with -var %s=VALUE, a -var-file or a default", what, name, name, name)
		case root == "local" && name != "" && d.localNames[name] == nil:
			d.errAt(tr.SourceRange(), "%s: local.%s is not defined; add it to a locals { %s = ... } block at the top level of the file", what, name, name)
		case root == "var" || root == "local":
			continue
		default:
			d.errAt(tr.SourceRange(), `%s: unknown name %q; a job file refers to var.NAME (a variable block) and local.NAME (a locals block); the agent interpolates "${NOMAD_*}", "${attr.*}", "${node.*}", "${meta.*}" and "${env.*}" in strings when the task starts; to pass other "${...}" on as text, write "$${...}"`, what, root)
		}
		ok = false
	}
	return ok
}

// attrName is the name a traversal step reads: var.x and var["x"].
func attrName(t hcl.Traverser) string {
	switch t := t.(type) {
	case hcl.TraverseAttr:
		return t.Name
	case hcl.TraverseIndex:
		if t.Key.Type() == cty.String && t.Key.IsKnown() && !t.Key.IsNull() {
			return t.Key.AsString()
		}
	}
	return ""
}

// traversalText writes a reference as the file does: var.image.
func traversalText(tr hcl.Traversal) string {
	var b strings.Builder
	b.WriteString(tr.RootName())
	for _, t := range tr[1:] {
		if n := attrName(t); n != "" {
			b.WriteString("." + n)
		} else {
			b.WriteString("[...]")
		}
	}
	return b.String()
}

// evalExpr evaluates expr with the file's variables, locals and
// functions. When that fails for a reference to something the file does
// not declare, the problem says what to declare (refsOK); else it is
// hcl's. (A reference is not checked before: the type in convert(x,
// string) reads as one.)
func (d *hclDecoder) evalExpr(expr hcl.Expression, what string) (cty.Value, bool) {
	v, diags := expr.Value(d.ctx)
	if !diags.HasErrors() {
		return v, true
	}
	if !d.refsOK(expr, what) {
		return cty.NilVal, false
	}
	for _, dg := range diags {
		if dg.Severity == hcl.DiagError {
			d.c.add(rangePos(dg.Subject), "", "%s: %s", what, diagMessage(d.c, dg))
		}
	}
	return cty.NilVal, false
}
