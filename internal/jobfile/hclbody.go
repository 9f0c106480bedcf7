package jobfile

import (
	"fmt"
	"reflect"
	"slices"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/dynblock"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/drover-org/drover/internal/spec"
)

// One decoder, driven by the schemas, fills in every block of an HCL job
// file: each attribute is read as its field's kind says and set into the
// field, each block decoded into its struct, each label set. The only
// block it treats apart is a task's config, whose keys depend on the
// task's driver.

// owner is the block a block is named by in messages: `task "server"`.
type owner struct{ typ, name string }

// block decodes b into v, a struct whose schema is s, at field path path,
// recording where each field was written. of is the block around b that
// names it, and many says whether b may repeat there.
func (d *hclDecoder) block(b *hcl.Block, s *schema, v reflect.Value, path string, of owner, many bool) {
	d.mark(path, b.TypeRange)
	var in string
	if s.label != nil {
		label := d.label(b, join(path, s.label.json))
		v.Field(s.label.index).SetString(label)
		in = fmt.Sprintf("in %s %q", b.Type, label)
	} else {
		d.noLabels(b)
		the := "the " + b.Type
		if many {
			the = withArticle(b.Type)
		}
		in = fmt.Sprintf("in %s block of %s %q", the, of.typ, of.name)
	}
	d.fill(d.content(b.Body, s.body, in, path), s, v, path, b.Type, of)
}

// named is how the blocks inside one of schema s, held in v and written
// as a block of type typ, name it in messages: by its label (`task
// "server"`), or by its name when it has one (`service "web"`), else as
// the blocks around it are.
func named(s *schema, v reflect.Value, typ string, of owner) owner {
	f := s.label
	if f == nil {
		f = s.byJSON["name"]
		if f == nil || f.kind != kString || v.Field(f.index).String() == "" {
			return of
		}
	}
	return owner{typ, v.Field(f.index).String()}
}

// fill sets the fields of v, a struct whose schema is s, from items, the
// content of its block of type typ.
func (d *hclDecoder) fill(items []item, s *schema, v reflect.Value, path, typ string, of owner) {
	var config item
	for _, it := range items {
		f := s.byHCL[it.name]
		fp := join(path, f.json)
		fv := v.Field(f.index)
		switch f.kind {
		case kObject:
			if f.obj == configTree {
				// What config may hold depends on the driver, which
				// may come after it.
				config = it
				continue
			}
			d.block(it.block, f.obj, settable(fv), fp, named(s, v, typ, of), false)
		case kObjectList:
			if fv.Len() == 0 {
				// Problems with the list as a whole (a spread's
				// targets' sum) are shown at its first block.
				d.mark(fp, it.block.TypeRange)
			}
			ep := fmt.Sprintf("%s[%d]", fp, fv.Len())
			e := reflect.New(fv.Type().Elem()).Elem()
			d.block(it.block, f.obj, settable(e), ep, named(s, v, typ, of), true)
			fv.Set(reflect.Append(fv, e))
		case kStringMap:
			fv.Set(reflect.ValueOf(d.stringMap(it, fp)))
		case kStringList:
			// An empty list is no list, as in JSON: no datacenters is
			// every datacenter.
			if l := d.stringList(it.attr, fp); len(l) > 0 {
				fv.Set(reflect.ValueOf(l))
			}
		default:
			d.scalar(it.attr, f, fp, fv)
		}
	}
	if config.block != nil {
		f := s.byHCL[config.name]
		driver := v.Field(s.byJSON["driver"].index).String()
		d.config(config.block, join(path, f.json), driver, named(s, v, typ, of), v.Field(f.index))
	}
}

// scalar reads an attribute of one value as f's kind says into fv, a
// string, int, bool or duration field or a pointer to one.
func (d *hclDecoder) scalar(a *hcl.Attribute, f *fieldSchema, field string, fv reflect.Value) {
	set := func() reflect.Value {
		if fv.Kind() == reflect.Pointer {
			fv.Set(reflect.New(fv.Type().Elem()))
			return fv.Elem()
		}
		return fv
	}
	switch {
	case f.text:
		if s, ok := d.targetText(a, field); ok {
			set().SetString(s)
		}
	case f.kind == kString:
		if s, ok := d.str(a, field); ok {
			set().SetString(s)
		}
	case f.kind == kBool:
		if b, ok := d.bool(a, field); ok {
			set().SetBool(b)
		}
	case f.kind == kDuration:
		if v, ok := d.duration(a, field); ok {
			set().SetInt(int64(v))
		}
	default:
		n, ok := d.int(a, field)
		if !ok {
			return
		}
		if n == 0 && f.zero != "" {
			d.errAt(a.Expr.Range(), "%s", f.zero)
			d.c.markReported(field)
		}
		set().SetInt(int64(n))
	}
}

// settable returns the struct fv holds, making it first for a nil pointer;
// a new struct starts from its fresh value.
func settable(fv reflect.Value) reflect.Value {
	if fv.Kind() == reflect.Pointer {
		fv.Set(reflect.New(fv.Type().Elem()))
		fv = fv.Elem()
	}
	if x, ok := fresh[fv.Type()]; ok {
		fv.Set(x)
	}
	return fv
}

// config decodes a task's config block into v. For the drivers drover has,
// only their keys are allowed (configSchema); when the driver is missing,
// any key of any of them. For a driver it does not have, the keys are not
// checked (they depend on the driver, and the driver itself is already
// reported), but command and args are still read.
func (d *hclDecoder) config(b *hcl.Block, path, driver string, task owner, v reflect.Value) {
	d.mark(path, b.TypeRange)
	d.noLabels(b)
	var items []item
	switch {
	case slices.Contains(spec.KnownDrivers, driver):
		items = d.content(b.Body, configSchema(driver), fmt.Sprintf("in the config block for the %s driver", driver), path)
	case driver == "":
		items = d.content(b.Body, configSchema(driver), "in the config block", path)
	default:
		for _, it := range d.items(b.Body) {
			if it.attr != nil && (it.name == "command" || it.name == "args") {
				items = append(items, it)
			}
		}
	}
	d.fill(items, configTree, v, path, "config", task)
}

// items returns every attribute and block of body in file order, with its
// dynamic blocks expanded (hcl's dynblock) into the blocks they make. A
// body under a dynamic block is one of dynblock's, which hands out its
// content only for a schema; the schema asked for is every name its
// syntax holds (syntaxOf), so that names the job language does not have
// still reach content to be reported.
func (d *hclDecoder) items(body hcl.Body) []item {
	syn := d.syntaxOf(body)
	if syn == nil {
		d.c.add(rangePos(body.MissingItemRange().Ptr()), "", "internal error: no syntax for an HCL body of type %T", body)
		return nil
	}
	var out []item
	sb, plain := body.(*hclsyntax.Body)
	dynamic := slices.ContainsFunc(syn.Blocks, func(b *hclsyntax.Block) bool { return b.Type == "dynamic" })
	if plain && !dynamic {
		for _, a := range sb.Attributes {
			out = append(out, item{name: a.Name, attr: a.AsHCLAttribute()})
		}
		for _, b := range sb.Blocks {
			out = append(out, item{name: b.Type, block: b.AsHCLBlock()})
		}
	} else {
		if plain {
			body = dynblock.Expand(sb, d.ctx)
		}
		content, _, diags := body.PartialContent(contentSchema(syn))
		if !d.inputFailed {
			// else a for_each or label may be unknown for a variable
			// already reported; the rest shows once it has a value
			d.diags(diags)
		}
		for _, a := range content.Attributes {
			out = append(out, item{name: a.Name, attr: a})
		}
		for _, b := range content.Blocks {
			out = append(out, item{name: b.Type, block: b})
		}
	}
	slices.SortStableFunc(out, func(a, b item) int { return a.nameRange().Start.Byte - b.nameRange().Start.Byte })
	return out
}

// contentSchema asks for every attribute and block syn holds, a dynamic
// block by the type of the blocks it makes. A block type takes as many
// labels as its first block written out has, else as the job language's
// block of that type takes.
func contentSchema(syn *hclsyntax.Body) *hcl.BodySchema {
	s := &hcl.BodySchema{}
	for name := range syn.Attributes {
		s.Attributes = append(s.Attributes, hcl.AttributeSchema{Name: name})
	}
	seen := map[string]bool{}
	add := func(typ string, labels int) {
		if !seen[typ] {
			seen[typ] = true
			s.Blocks = append(s.Blocks, hcl.BlockHeaderSchema{Type: typ, LabelNames: make([]string, labels)})
		}
	}
	for _, b := range syn.Blocks {
		if b.Type != "dynamic" {
			add(b.Type, len(b.Labels))
		}
	}
	for _, b := range syn.Blocks {
		if b.Type == "dynamic" && len(b.Labels) > 0 { // hcl reports one without
			n := 0
			if labelled[b.Labels[0]].what != "" {
				n = 1
			}
			add(b.Labels[0], n)
		}
	}
	return s
}

// syntaxOf is the syntax of body: itself, or for one of dynblock's bodies
// the syntax body it wraps (a block a dynamic block makes has the dynamic
// block's content for its body), found by where that body starts.
func (d *hclDecoder) syntaxOf(body hcl.Body) *hclsyntax.Body {
	if sb, ok := body.(*hclsyntax.Body); ok {
		return sb
	}
	return d.bodies[body.MissingItemRange().Start.Byte]
}

// diags reports hcl's error diagnostics as problems.
func (d *hclDecoder) diags(diags hcl.Diagnostics) {
	for _, dg := range diags {
		if dg.Severity == hcl.DiagError {
			d.c.add(rangePos(dg.Subject), "", "%s", diagMessage(d.c, dg))
		}
	}
}
