// Package flagfile reads the config files of drover server, agent and
// dev: HCL files whose keys are the command's own flags.
//
// The flags are the schema. A flag --data-dir is the key data_dir, with
// the value its type takes: a string, a number, true or false, a duration
// as a string ("90s"), a list of strings for a flag that may be repeated
// or takes a comma-separated list, and an object of strings (or a block of
// the same name) for a map flag such as --meta, and labelled blocks for a
// list flag that makes its elements from them (BlockListValue:
// host_volume "data" { path = "/srv/data" }). So a new flag is a new key
// with nothing else to change, and the flag's help is the key's.
//
// A flag given on the command line wins over every file. Several files
// (or a directory, whose *.hcl files are read in lexical order) are
// merged, a later file's key replacing an earlier one's. An unknown key,
// a value of the wrong type or one the flag refuses is an error at its
// file:line:col, with a did-you-mean for a mistyped key; every problem of
// every file is reported at once, and the command does not run.
package flagfile

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/spf13/pflag"
	"github.com/zclconf/go-cty/cty"

	"github.com/drover-org/drover/internal/inputlimit"
	"github.com/drover-org/drover/internal/spec"
	"github.com/drover-org/drover/internal/suggest"
)

// Key is a flag's key in a config file: its name with "-" as "_".
func Key(flagName string) string { return strings.ReplaceAll(flagName, "-", "_") }

// MapValue is a flag whose value is a map (--meta k=v, repeatable): a
// config file sets it from an HCL object, replacing what it held.
type MapValue interface {
	pflag.Value
	ReplaceMap(map[string]string)
}

// BlockListValue is a list flag a config file may also write as labelled
// blocks, one element each, as Nomad's client configuration writes
// host_volume "data" { path = "/srv/data" }: the flag makes the element
// from the block's label and its attributes (strings, numbers and bools
// as their text), so the flag stays the one declaration of what the
// block may hold.
type BlockListValue interface {
	pflag.SliceValue
	BlockElement(label string, attrs map[string]string) (string, error)
}

// Keys are the flags of fs a config file may set, by key: every flag but
// the hidden ones and those skip names (the config flag itself, help).
func Keys(fs *pflag.FlagSet, skip ...string) map[string]*pflag.Flag {
	keys := map[string]*pflag.Flag{}
	fs.VisitAll(func(f *pflag.Flag) {
		if !f.Hidden && !slices.Contains(skip, f.Name) {
			keys[Key(f.Name)] = f
		}
	})
	return keys
}

// Files expands the config paths: a file is itself, a directory its *.hcl
// files in lexical order. A path that does not exist, or a directory
// without a .hcl file, is an error.
func Files(paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("config file %s does not exist", p)
			}
			return nil, fmt.Errorf("config file %s: %w", p, err)
		}
		if !st.IsDir() {
			out = append(out, p)
			continue
		}
		m, err := filepath.Glob(filepath.Join(p, "*.hcl"))
		if err != nil {
			return nil, err
		}
		if len(m) == 0 {
			return nil, fmt.Errorf("config directory %s has no .hcl file", p)
		}
		slices.Sort(m)
		out = append(out, m...)
	}
	return out, nil
}

// setting is one key's value from one file, ready for its flag.
type setting struct {
	flag *pflag.Flag
	pos  string
	// One of: a scalar's text for Set, a list, or a map.
	text   string
	list   []string
	dict   map[string]string
	isList bool
	isMap  bool
	// fromBlocks: a list written as labelled blocks (BlockListValue).
	fromBlocks bool
}

// Load reads the config paths (Files) and sets each key's flag, unless
// the command line set it. keys are the flags a file may set (Keys).
func Load(keys map[string]*pflag.Flag, paths []string) error {
	files, err := Files(paths)
	if err != nil {
		return err
	}
	var problems spec.Problems
	merged := map[string]*setting{}
	for _, file := range files {
		settings, ps := read(file, keys)
		problems = append(problems, ps...)
		for k, s := range settings {
			merged[k] = s
		}
	}
	if len(problems) > 0 {
		return problems
	}
	// Apply in a fixed order, so that the first failure is always the same.
	names := make([]string, 0, len(merged))
	for k := range merged {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		s := merged[k]
		if s.flag.Changed {
			continue // the command line wins
		}
		if err := apply(s); err != nil {
			problems = append(problems, spec.Problem{Pos: s.pos, Message: fmt.Sprintf("%s: %v", k, err)})
			continue
		}
		// As if given: commands that ask whether a flag was set see it.
		s.flag.Changed = true
	}
	if len(problems) > 0 {
		return problems
	}
	return nil
}

func apply(s *setting) error {
	switch {
	case s.isMap:
		m, ok := s.flag.Value.(MapValue)
		if !ok {
			return fmt.Errorf("is not a map flag")
		}
		m.ReplaceMap(s.dict)
		return nil
	case s.isList:
		return s.flag.Value.(pflag.SliceValue).Replace(s.list)
	}
	return s.flag.Value.Set(s.text)
}

// read parses one file into its settings, or says what is wrong with it.
func read(file string, keys map[string]*pflag.Flag) (map[string]*setting, spec.Problems) {
	src, err := os.ReadFile(file)
	if err != nil {
		return nil, spec.Problems{{Pos: file, Message: fmt.Sprintf("cannot read the config file: %v", err)}}
	}
	if err := inputlimit.HCL(src); err != nil {
		return nil, spec.Problems{{Pos: file, Message: "the config file " + err.Error()}}
	}
	f, diags := hclsyntax.ParseConfig(src, file, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, sorted(diagProblems(file, diags))
	}
	body := f.Body.(*hclsyntax.Body)
	var problems []located
	out := map[string]*setting{}
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	flagOf := func(name string, r hcl.Range) *pflag.Flag {
		if fl := keys[name]; fl != nil {
			return fl
		}
		problems = append(problems, problem(r, "unknown key %q; %s", name, suggest.Hint(name, names)))
		return nil
	}
	for _, a := range body.Attributes {
		fl := flagOf(a.Name, a.NameRange)
		if fl == nil {
			continue
		}
		v, diags := a.Expr.Value(nil)
		if diags.HasErrors() {
			problems = append(problems, diagProblems(file, diags)...)
			continue
		}
		s, msg := convert(fl, v)
		if msg != "" {
			problems = append(problems, problem(a.Expr.Range(), "%s: %s", a.Name, msg))
			continue
		}
		s.pos = pos(a.Expr.Range())
		out[a.Name] = s
	}
	// A map flag may be written as a block, as Nomad writes meta { ... },
	// and a BlockListValue as labelled blocks.
	for _, b := range body.Blocks {
		fl := flagOf(b.Type, b.TypeRange)
		if fl == nil {
			continue
		}
		if bl, ok := fl.Value.(BlockListValue); ok {
			problems = append(problems, readListBlock(file, b, fl, bl, out)...)
			continue
		}
		if _, ok := fl.Value.(MapValue); !ok || len(b.Labels) > 0 || len(b.Body.Blocks) > 0 {
			problems = append(problems, problem(b.TypeRange, "%s is not a block: write %s = %s", b.Type, b.Type, example(fl)))
			continue
		}
		if prev, ok := out[b.Type]; ok {
			problems = append(problems, problem(b.TypeRange, "%s is set twice in this file (also at %s)", b.Type, prev.pos))
			continue
		}
		s := &setting{flag: fl, isMap: true, dict: map[string]string{}, pos: pos(b.TypeRange)}
		for _, a := range b.Body.Attributes {
			v, diags := a.Expr.Value(nil)
			if diags.HasErrors() {
				problems = append(problems, diagProblems(file, diags)...)
				continue
			}
			str, ok := stringOf(v)
			if !ok {
				problems = append(problems, problem(a.Expr.Range(), "%s.%s: want a string, got %s", b.Type, a.Name, typeName(v)))
				continue
			}
			s.dict[a.Name] = str
		}
		out[b.Type] = s
	}
	return out, sorted(problems)
}

// readListBlock adds block b, one element of list flag fl, to out.
func readListBlock(file string, b *hclsyntax.Block, fl *pflag.Flag, bl BlockListValue, out map[string]*setting) []located {
	prev, ok := out[b.Type]
	switch {
	case len(b.Labels) != 1 || len(b.Body.Blocks) > 0:
		return []located{problem(b.TypeRange, "%s takes one label and attributes: write %s \"name\" { ... }, or %s = %s", b.Type, b.Type, b.Type, example(fl))}
	case ok && !prev.fromBlocks:
		return []located{problem(b.TypeRange, "%s is set twice in this file (also at %s); write it as a list or as blocks, not both", b.Type, prev.pos)}
	case !ok:
		prev = &setting{flag: fl, isList: true, list: []string{}, pos: pos(b.TypeRange), fromBlocks: true}
		out[b.Type] = prev
	}
	var problems []located
	attrs := map[string]string{}
	for _, a := range b.Body.Attributes {
		v, diags := a.Expr.Value(nil)
		if diags.HasErrors() {
			problems = append(problems, diagProblems(file, diags)...)
			continue
		}
		var text string
		switch {
		case v.IsNull() || !v.IsKnown():
			problems = append(problems, problem(a.Expr.Range(), "%s.%s: want a value, got null", b.Type, a.Name))
			continue
		case v.Type() == cty.Bool:
			text = strconv.FormatBool(v.True())
		case v.Type() == cty.Number:
			text = v.AsBigFloat().Text('g', -1)
		case v.Type() == cty.String:
			text = v.AsString()
		default:
			problems = append(problems, problem(a.Expr.Range(), "%s.%s: want a string, number or bool, got %s", b.Type, a.Name, typeName(v)))
			continue
		}
		attrs[a.Name] = text
	}
	if len(problems) > 0 {
		return problems
	}
	elem, err := bl.BlockElement(b.Labels[0], attrs)
	if err != nil {
		return []located{problem(b.TypeRange, "%s %q: %v", b.Type, b.Labels[0], err)}
	}
	prev.list = append(prev.list, elem)
	return nil
}

// convert checks v against the flag's type: it returns the setting, or
// what the flag wants instead.
func convert(fl *pflag.Flag, v cty.Value) (*setting, string) {
	if v.IsNull() {
		return nil, "want " + want(fl) + ", got null"
	}
	if _, ok := fl.Value.(MapValue); ok {
		if !v.Type().IsObjectType() && !v.Type().IsMapType() {
			return nil, fmt.Sprintf("want %s, got %s", want(fl), typeName(v))
		}
		m := map[string]string{}
		for it := v.ElementIterator(); it.Next(); {
			k, e := it.Element()
			str, ok := stringOf(e)
			if !ok {
				return nil, fmt.Sprintf("want %s; %q is %s", want(fl), k.AsString(), typeName(e))
			}
			m[k.AsString()] = str
		}
		return &setting{flag: fl, isMap: true, dict: m}, ""
	}
	if _, ok := fl.Value.(pflag.SliceValue); ok {
		if !v.Type().IsTupleType() && !v.Type().IsListType() {
			return nil, fmt.Sprintf("want %s, got %s", want(fl), typeName(v))
		}
		list := []string{}
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			str, ok := scalarText(fl, e)
			if !ok {
				return nil, fmt.Sprintf("want %s; an element is %s", want(fl), typeName(e))
			}
			list = append(list, str)
		}
		return &setting{flag: fl, isList: true, list: list}, ""
	}
	str, ok := scalarText(fl, v)
	if !ok {
		return nil, fmt.Sprintf("want %s, got %s", want(fl), typeName(v))
	}
	return &setting{flag: fl, text: str}, ""
}

// scalarText is v as the text the flag's Set takes, if v has the type the
// flag's values have: a bool for bool flags, a whole number for integer
// flags, a number for float flags, else a string.
func scalarText(fl *pflag.Flag, v cty.Value) (string, bool) {
	if v.IsNull() || !v.IsKnown() {
		return "", false
	}
	switch elemKind(fl) {
	case "bool":
		if v.Type() != cty.Bool {
			return "", false
		}
		return strconv.FormatBool(v.True()), true
	case "int":
		if v.Type() != cty.Number {
			return "", false
		}
		bf := v.AsBigFloat()
		if !bf.IsInt() {
			return "", false
		}
		i, _ := bf.Int(nil)
		return i.String(), true
	case "float":
		if v.Type() != cty.Number {
			return "", false
		}
		return v.AsBigFloat().Text('g', -1), true
	}
	return stringOf(v)
}

func stringOf(v cty.Value) (string, bool) {
	if v.IsNull() || !v.IsKnown() || v.Type() != cty.String {
		return "", false
	}
	return v.AsString(), true
}

// elemKind is the kind of the flag's values (of each element, for a list
// flag): bool, int, float or string (which durations, IPs and the rest
// are written as).
func elemKind(fl *pflag.Flag) string {
	t := strings.TrimSuffix(strings.TrimSuffix(fl.Value.Type(), "Slice"), "Array")
	switch {
	case t == "bool":
		return "bool"
	case strings.HasPrefix(t, "int") || strings.HasPrefix(t, "uint") || t == "count":
		return "int"
	case strings.HasPrefix(t, "float"):
		return "float"
	}
	return "string"
}

// want says in words what a flag's key takes.
func want(fl *pflag.Flag) string {
	one := map[string]string{"bool": "true or false", "int": "a whole number", "float": "a number", "string": "a string"}[elemKind(fl)]
	if fl.Value.Type() == "duration" {
		one = `a duration as a string, such as "90s" or "5m"`
	}
	switch fl.Value.(type) {
	case MapValue:
		return "an object of strings, such as " + example(fl)
	case pflag.SliceValue:
		return "a list of " + strings.TrimPrefix(strings.TrimPrefix(one, "a "), "an ") + "s, such as " + example(fl)
	}
	return one
}

// example is a value of the flag's shape, for messages.
func example(fl *pflag.Flag) string {
	switch fl.Value.(type) {
	case MapValue:
		return `{ key = "value" }`
	case pflag.SliceValue:
		if elemKind(fl) == "int" {
			return "[1, 2]"
		}
		return `["a", "b"]`
	}
	return `"value"`
}

func typeName(v cty.Value) string {
	t := v.Type()
	switch {
	case v.IsNull():
		return "null"
	case t == cty.String:
		return "a string"
	case t == cty.Number:
		return "a number"
	case t == cty.Bool:
		return "a bool"
	case t.IsTupleType() || t.IsListType() || t.IsSetType():
		return "a list"
	case t.IsObjectType() || t.IsMapType():
		return "an object"
	}
	return t.FriendlyName()
}

func pos(r hcl.Range) string {
	return fmt.Sprintf("%s:%d:%d", r.Filename, r.Start.Line, r.Start.Column)
}

// located is a problem at a place in a file.
type located struct {
	r   hcl.Range
	msg string
}

func problem(r hcl.Range, format string, args ...any) located {
	return located{r, fmt.Sprintf(format, args...)}
}

func diagProblems(file string, diags hcl.Diagnostics) []located {
	var ps []located
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		msg := d.Summary
		if d.Detail != "" {
			msg += ": " + d.Detail
		}
		r := hcl.Range{Filename: file, Start: hcl.InitialPos}
		if d.Subject != nil {
			r = *d.Subject
		}
		ps = append(ps, located{r, msg})
	}
	return ps
}

// sorted is the problems of one file by place.
func sorted(ps []located) spec.Problems {
	slices.SortStableFunc(ps, func(a, b located) int { return cmp.Compare(a.r.Start.Byte, b.r.Start.Byte) })
	out := make(spec.Problems, len(ps))
	for i, p := range ps {
		out[i] = spec.Problem{Pos: pos(p.r), Message: p.msg}
	}
	return out
}
