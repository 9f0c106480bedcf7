package jobfile

import (
	"fmt"
	"iter"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/drover-org/drover/internal/inputlimit"
	"github.com/drover-org/drover/internal/spec"
	"github.com/drover-org/drover/internal/suggest"
)

// member says how a name may appear in an HCL body.
type member uint8

const (
	asAttr member = 1 << iota
	asBlock
	// repeated blocks may be written more than once in one body.
	repeated
)

// bodySchema is what one kind of HCL body may hold.
type bodySchema struct {
	members map[string]member
	// unsupported are Nomad names drover does not implement in this body
	// only; the names unsupported everywhere are in the unsupported map.
	unsupported []string
	// warned are Nomad names this body takes and does nothing with, with
	// the warning that says so (notHereIn).
	warned map[string]string
	// refused are names drover knows that this body does not take, with
	// why and what to do instead (a docker key in an exec task's config).
	refused map[string]string
	// label is the field the block's label sets, if it takes one (a
	// group's name), and labelExample the block written with it.
	label, labelExample string
}

func (s bodySchema) names() []string {
	var out []string
	for n := range s.members {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// topSchema is what a job file holds.
var topSchema = bodySchema{members: map[string]member{
	"job": asBlock | repeated, "variable": asBlock | repeated, "variables": asBlock | repeated, "locals": asBlock | repeated,
}}

// configSchema is what a config block may hold for driver: the keys it
// reads, and the other drivers' keys refused with the reason. With no
// driver (itself reported), every key is taken.
func configSchema(driver string) bodySchema {
	s := bodySchema{members: map[string]member{}, refused: map[string]string{}, warned: configTree.body.warned}
	for name, m := range configTree.body.members {
		if why := spec.ConfigKeyRefusal(driver, name); why != "" {
			s.refused[name] = why
		} else {
			s.members[name] = m
		}
	}
	return s
}

// withArticle puts "a" or "an" before a block name: "an update".
func withArticle(name string) string {
	if name != "" && strings.ContainsRune("aeiou", rune(name[0])) {
		return "an " + name
	}
	return "a " + name
}

func insteadHint(name string) string {
	if s := instead[name]; s != "" {
		return "; " + s
	}
	return ""
}

// looksLikeHCL reports whether src parses as HCL far enough to show a job
// block; it is how a file without an extension is sniffed. A file too
// large or too deep to parse is taken for HCL, whose decoder says so.
func looksLikeHCL(name string, src []byte) bool {
	if inputlimit.HCL(src) != nil {
		return true
	}
	f, _ := hclsyntax.ParseConfig(src, name, hcl.InitialPos)
	if f == nil {
		return false
	}
	body, ok := f.Body.(*hclsyntax.Body)
	if !ok {
		return false
	}
	for _, b := range body.Blocks {
		if b.Type == "job" {
			return true
		}
	}
	return false
}

// decodeHCL decodes an HCL job file; its variables take their values
// from o, and its filesystem functions read paths relative to dir.
// What the file asks that drover does otherwise is returned as warnings,
// valid file or not.
func decodeHCL(name string, src []byte, o Options, dir string) (*spec.Job, spec.Problems, error) {
	c := newCollector(name, o.NodeHas)
	job, err := decodeHCLInto(c, src, o, dir)
	return job, c.warningsResult(), err
}

func decodeHCLInto(c *collector, src []byte, o Options, dir string) (*spec.Job, error) {
	name := c.file
	if err := inputlimit.HCL(src); err != nil {
		addLimit(c, err, true)
		return nil, failed(c)
	}
	f, diags := hclsyntax.ParseConfig(src, name, hcl.InitialPos)
	fatal := f == nil
	for _, dg := range diags {
		if dg.Severity != hcl.DiagError {
			continue
		}
		c.add(rangePos(dg.Subject), "", "%s", diagMessage(c, dg))
		// A redefined attribute leaves the rest of the file intact, so
		// keep going and report the rest too; after a real syntax error
		// the parser's guess at the structure would only add noise.
		if dg.Summary != "Attribute redefined" {
			fatal = true
		}
	}
	if fatal {
		return nil, failed(c)
	}
	body, ok := f.Body.(*hclsyntax.Body)
	if !ok {
		c.add(pos{}, "", "internal error: unexpected HCL body type %T", f.Body)
		return nil, failed(c)
	}
	keepRuntimeRefs(body, src)
	wrapJobTasks(body)
	d := &hclDecoder{c: c, at: positions{}, opts: o, ctx: baseContext(dir, o.NoFiles), bodies: map[int]*hclsyntax.Body{}, secret: map[string]bool{}}
	d.liftTaskNetworks(body)
	d.mountsAsBlocks(body)
	hclsyntax.VisitAll(body, func(n hclsyntax.Node) hcl.Diagnostics {
		if b, ok := n.(*hclsyntax.Body); ok {
			d.bodies[b.MissingItemRange().Start.Byte] = b
		}
		return nil
	})
	job := d.file(body)
	if job == nil {
		return nil, failed(c)
	}
	return finish(job, c, d.at)
}

// wrapJobTasks puts each task block written directly in a job block, as
// Nomad's older files do, into a group block of its own named after the
// task, where Nomad puts it too: `job "j" { task "t" { ... } }` reads as
// `job "j" { group "t" { task "t" { ... } } }`.
func wrapJobTasks(body *hclsyntax.Body) {
	for _, job := range blocksOf(body, "job") {
		for i, b := range blocksOf(job.Body, "task") {
			if len(b.Labels) != 1 {
				continue
			}
			r := b.Range()
			job.Body.Blocks[i] = &hclsyntax.Block{
				Type: "group", Labels: b.Labels,
				Body:            &hclsyntax.Body{Blocks: hclsyntax.Blocks{b}, SrcRange: r, EndRange: hcl.Range{Filename: r.Filename, Start: r.End, End: r.End}},
				TypeRange:       b.TypeRange,
				LabelRanges:     b.LabelRanges,
				OpenBraceRange:  b.OpenBraceRange,
				CloseBraceRange: b.CloseBraceRange,
			}
		}
	}
}

// liftTaskNetworks moves a network block written in a task's resources
// block, Nomad's older form, to the task's group, with a warning, where
// the group has no network block and that task is its only one with such
// a block; otherwise it stays where it is, and is refused there with
// where it belongs.
func (d *hclDecoder) liftTaskNetworks(body *hclsyntax.Body) {
	for _, job := range blocksOf(body, "job") {
		for _, g := range blocksOf(job.Body, "group") {
			if slices.ContainsFunc(g.Body.Blocks, func(b *hclsyntax.Block) bool { return b.Type == "network" }) {
				continue
			}
			type found struct {
				task, res *hclsyntax.Block
				at        int
			}
			var nets []found
			for _, t := range blocksOf(g.Body, "task") {
				for _, r := range blocksOf(t.Body, "resources") {
					for i := range blocksOf(r.Body, "network") {
						nets = append(nets, found{t, r, i})
					}
				}
			}
			if len(nets) != 1 {
				continue
			}
			f := nets[0]
			n := f.res.Body.Blocks[f.at]
			f.res.Body.Blocks = slices.Delete(f.res.Body.Blocks, f.at, f.at+1)
			g.Body.Blocks = append(g.Body.Blocks, n)
			d.c.warn(rangePos(&n.TypeRange), "network in the resources block of task %q is read as its group's network, where Nomad has moved it; write it in the group block", strings.Join(f.task.Labels, ""))
		}
	}
}

// mountsAsBlocks reads the docker driver's older `mounts = [{ ... }]`, a
// list of objects in a task's config block, as the mount blocks Nomad
// has since written, one a list item, with a warning; a list it cannot
// read so (an item not an object of plain keys) is left as written, and
// refused as an unknown attribute.
func (d *hclDecoder) mountsAsBlocks(body *hclsyntax.Body) {
	for _, job := range blocksOf(body, "job") {
		for _, g := range blocksOf(job.Body, "group") {
			for _, t := range blocksOf(g.Body, "task") {
				for _, c := range blocksOf(t.Body, "config") {
					if a := c.Body.Attributes["mounts"]; a != nil {
						if blocks, ok := mountBlocks(a); ok {
							delete(c.Body.Attributes, "mounts")
							c.Body.Blocks = append(c.Body.Blocks, blocks...)
							d.c.warn(rangePos(&a.NameRange), "mounts = [...] in task %q is Nomad's older form of mount blocks, read as %d mount block(s); write mount { ... } blocks instead", strings.Join(t.Labels, ""), len(blocks))
						}
					}
				}
			}
		}
	}
}

// blocksOf yields the blocks of type typ directly in b, with their index
// among b's blocks.
func blocksOf(b *hclsyntax.Body, typ string) iter.Seq2[int, *hclsyntax.Block] {
	return func(yield func(int, *hclsyntax.Block) bool) {
		for i, blk := range b.Blocks {
			if blk.Type == typ && !yield(i, blk) {
				return
			}
		}
	}
}

// mountBlocks turns mounts = [{ k = v, ... }, ...] into mount blocks.
func mountBlocks(a *hclsyntax.Attribute) (hclsyntax.Blocks, bool) {
	list, ok := a.Expr.(*hclsyntax.TupleConsExpr)
	if !ok {
		return nil, false
	}
	var out hclsyntax.Blocks
	for _, e := range list.Exprs {
		obj, ok := e.(*hclsyntax.ObjectConsExpr)
		if !ok {
			return nil, false
		}
		b := &hclsyntax.Body{Attributes: hclsyntax.Attributes{}, SrcRange: obj.SrcRange, EndRange: hcl.Range{Filename: obj.SrcRange.Filename, Start: obj.SrcRange.End, End: obj.SrcRange.End}}
		for _, it := range obj.Items {
			key := hcl.ExprAsKeyword(it.KeyExpr)
			if key == "" || b.Attributes[key] != nil {
				return nil, false
			}
			b.Attributes[key] = &hclsyntax.Attribute{Name: key, Expr: it.ValueExpr, SrcRange: hcl.RangeBetween(it.KeyExpr.Range(), it.ValueExpr.Range()), NameRange: it.KeyExpr.Range()}
		}
		out = append(out, &hclsyntax.Block{Type: "mount", Body: b, TypeRange: obj.OpenRange, OpenBraceRange: obj.OpenRange, CloseBraceRange: hcl.Range{Filename: obj.SrcRange.Filename, Start: obj.SrcRange.End, End: obj.SrcRange.End}})
	}
	return out, len(out) > 0
}

// failed returns the collected problems as an error, never a nil one.
func failed(c *collector) error {
	if ps := c.result(); ps != nil {
		return ps
	}
	return spec.Problems{{Pos: c.file, Message: "the job file could not be decoded"}}
}

func rangePos(r *hcl.Range) pos {
	if r == nil {
		return pos{}
	}
	return pos{line: r.Start.Line, col: r.Start.Column, file: r.Filename}
}

// redefined reads the attribute name and first position out of HCL's
// "Attribute redefined" detail, which has its own position format.
var redefined = regexp.MustCompile(`^The argument "([^"]+)" was already set at .*:(\d+),(\d+)-`)

// diagMessage renders an HCL diagnostic on one line.
func diagMessage(c *collector, dg *hcl.Diagnostic) string {
	if m := redefined.FindStringSubmatch(dg.Detail); m != nil && dg.Summary == "Attribute redefined" {
		line, _ := strconv.Atoi(m[2])
		col, _ := strconv.Atoi(m[3])
		return fmt.Sprintf("%s is already set at %s; set it once", m[1], c.render(pos{line: line, col: col}))
	}
	msg := dg.Summary
	if dg.Detail != "" {
		msg += ": " + strings.TrimSuffix(dg.Detail, ".")
	}
	return strings.Join(strings.Fields(msg), " ")
}

// hclDecoder walks an HCL job file into a spec.Job, reporting every problem
// and remembering where each field was written.
type hclDecoder struct {
	c    *collector
	at   positions
	opts Options
	// ctx is what expressions are evaluated with: var, local and the
	// functions.
	ctx *hcl.EvalContext
	// declared are the file's variables, localNames its locals.
	declared   map[string]*variable
	localNames map[string]*hcl.Attribute
	// bodies are the file's bodies by where each starts (syntaxOf).
	bodies map[int]*hclsyntax.Body
	// secret holds the fields whose value came from a sensitive variable.
	secret map[string]bool
	// inputFailed says a variable or local has no value, which was
	// reported: what is made from one has no known value.
	inputFailed bool
}

func (d *hclDecoder) errAt(r hcl.Range, format string, args ...any) {
	d.c.add(rangePos(&r), "", format, args...)
}

func (d *hclDecoder) mark(field string, r hcl.Range) {
	d.at[field] = rangePos(&r)
}

func (d *hclDecoder) where(r hcl.Range) string {
	return d.c.render(rangePos(&r))
}

// item is one attribute or block of a body.
type item struct {
	name  string
	attr  *hcl.Attribute
	block *hcl.Block
}

func (it item) nameRange() hcl.Range {
	if it.attr != nil {
		return it.attr.NameRange
	}
	return it.block.TypeRange
}

// content returns the attributes and blocks of body that s allows, in file
// order, after reporting every other one. in names the body for messages:
// `in task "server"`, `at the top level`; path is its field path. A name
// that is written the wrong way (a block as an attribute) or is a likely
// typo of an allowed one marks that field as reported, so that validation
// does not add "needs a driver" to `did you mean "driver"?`. A name s allows once but that is
// written twice is reported and dropped, except repeated blocks (a
// group's tasks, a job's constraints).
func (d *hclDecoder) content(body hcl.Body, s bodySchema, in, path string) []item {
	all := d.items(body)

	var out []item
	first := map[string]item{}
	for _, it := range all {
		m := s.members[it.name]
		isBlock := it.block != nil
		switch {
		case isBlock && m&asBlock != 0, !isBlock && m&asAttr != 0:
			if prev, dup := first[it.name]; dup && m&repeated == 0 {
				if isBlock && prev.block != nil {
					d.errAt(it.nameRange(), "only one %s block is allowed %s; the first is at %s", it.name, in, d.where(prev.nameRange()))
				} else {
					d.errAt(it.nameRange(), "%s is already set %s at %s", it.name, in, d.where(prev.nameRange()))
				}
				continue
			}
			first[it.name] = it
			out = append(out, it)
		case isBlock && m != 0:
			d.errAt(it.nameRange(), "%s is an attribute; write %s = ... instead of a block", it.name, it.name)
			d.c.markReported(join(path, it.name))
		case m != 0 && labelled[it.name].example != "":
			d.errAt(it.nameRange(), "%s is a block; write %s without '='", it.name, labelled[it.name].example)
		case m != 0:
			d.errAt(it.nameRange(), "%s is a block; write %s { ... } without '='", it.name, it.name)
			d.c.markReported(join(path, it.name))
		case notHere[it.name] != "" && isBlock:
			d.c.warn(rangePos(it.nameRange().Ptr()), "%s block %s: %s", it.name, in, notHere[it.name])
		case s.warned[it.name] != "":
			d.c.warn(rangePos(it.nameRange().Ptr()), "%s %s: %s", it.name, in, s.warned[it.name])
		case s.refused[it.name] != "":
			d.errAt(it.nameRange(), "%s", s.refused[it.name])
			d.c.markReported(join(path, it.name))
		case (unsupported[it.name] || slices.Contains(s.unsupported, it.name)) && isBlock:
			d.errAt(it.nameRange(), "%s blocks are not supported yet%s", it.name, insteadHint(it.name))
		case unsupported[it.name] || slices.Contains(s.unsupported, it.name):
			d.errAt(it.nameRange(), "%s is not supported yet %s%s", it.name, in, insteadHint(it.name))
		case topSchema.members[it.name] != 0:
			d.errAt(it.nameRange(), "%s blocks belong at the top level of the file, not %s", it.name, in)
		case it.name == s.label:
			d.errAt(it.nameRange(), "%s is this block's label: write %s", it.name, s.labelExample)
		case homeOf(it.name, isBlock) != "":
			d.errAt(it.nameRange(), "%s belongs in %s block, not %s", it.name, withArticle(homeOf(it.name, isBlock)), in)
		default:
			kind := "attribute"
			if isBlock {
				kind = "block"
			}
			d.errAt(it.nameRange(), "unknown %s %q %s; %s", kind, it.name, in, suggest.Hint(it.name, s.names()))
			if sug := suggest.Closest(it.name, s.names()); sug != "" && labelled[sug].example == "" {
				d.c.markReported(join(path, sug))
			}
		}
	}
	return out
}

// label returns the label of a labelled block (a job's name, a port's
// label), recording its position as field.
func (d *hclDecoder) label(b *hcl.Block, field string) string {
	l := labelled[b.Type]
	if len(b.Labels) == 0 {
		d.errAt(b.TypeRange, "%s block needs a %s: %s", b.Type, l.what, l.example)
		d.mark(field, b.TypeRange)
		d.c.markReported(field)
		return ""
	}
	if len(b.Labels) > 1 {
		its := ", its " + l.what
		if l.what == "label" {
			its = ""
		}
		d.errAt(b.LabelRanges[1], "%s block takes one label%s; found %d", b.Type, its, len(b.Labels))
	}
	d.mark(field, b.LabelRanges[0])
	return b.Labels[0]
}

// noLabels reports labels on a block that takes none.
func (d *hclDecoder) noLabels(b *hcl.Block) {
	if len(b.Labels) > 0 {
		d.errAt(b.LabelRanges[0], "%s blocks take no labels; write %s { ... }", b.Type, b.Type)
	}
}

func (d *hclDecoder) file(body *hclsyntax.Body) *spec.Job {
	if len(body.Attributes) == 0 && len(body.Blocks) == 0 {
		d.errAt(body.SrcRange, "the job file is empty; it needs a job \"name\" { ... } block")
		return nil
	}
	before := len(d.c.problems)
	var jobs, decls, locals []item
	for _, it := range d.content(body, topSchema, "at the top level", "") {
		switch it.name {
		case "job":
			jobs = append(jobs, it)
		case "locals":
			locals = append(locals, it)
		default:
			decls = append(decls, it)
		}
	}
	d.inputs(decls, locals)
	var job *spec.Job
	var first hcl.Range
	for _, it := range jobs {
		if job != nil {
			d.errAt(it.block.TypeRange, "only one job block is allowed per file; the first is at %s", d.where(first))
			continue
		}
		first = it.block.TypeRange
		job = &spec.Job{}
		d.block(it.block, jobTree, reflect.ValueOf(job).Elem(), "", owner{}, false)
	}
	if job == nil && len(d.c.problems) == before {
		d.errAt(body.SrcRange, "no job block; a job file needs a job \"name\" { ... } block")
	}
	return job
}

// targetText reads a string that may interpolate node targets, such as
// "${attr.cpu.count}" (keepRuntimeRefs keeps them as written). A number
// is read as its text (value = 3), as Nomad does.
func (d *hclDecoder) targetText(a *hcl.Attribute, field string) (string, bool) {
	v, ok := d.eval(a, field)
	if !ok {
		return "", false
	}
	if !v.IsNull() && v.Type() == cty.Number {
		return v.AsBigFloat().Text('f', -1), true
	}
	return d.strOf(a, field, v)
}
