package jobfile

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/drover-org/drover/internal/spec"
)

// specStructs returns every struct type a job holds, found by walking the
// spec types themselves, apart from the schemas.
func specStructs() []reflect.Type {
	var out []reflect.Type
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || t == reflect.TypeFor[time.Time]() || seen[t] {
			return
		}
		seen[t] = true
		out = append(out, t)
		for f := range t.Fields() {
			walk(f.Type)
		}
	}
	walk(reflect.TypeFor[spec.Job]())
	return out
}

// sample is a value of Go type t written in JSON, and one of another type
// that a field of t must refuse.
func sample(t reflect.Type) (good, bad string) {
	switch t {
	case reflect.TypeFor[spec.Duration]():
		return `"90s"`, `"soon"`
	case reflect.TypeFor[time.Time]():
		return `"2006-01-02T15:04:05Z"`, `"yesterday"`
	}
	switch t.Kind() {
	case reflect.Pointer:
		if t.Elem().Kind() == reflect.Struct {
			return `{}`, `[]`
		}
		return sample(t.Elem())
	case reflect.Struct:
		return `{}`, `[]`
	case reflect.String:
		return `"x"`, `1`
	case reflect.Int, reflect.Int64:
		return `-3`, `"3"`
	case reflect.Uint64:
		return `3`, `-3`
	case reflect.Bool:
		return `true`, `"true"`
	case reflect.Map:
		return `{"a":"b"}`, `["a"]`
	case reflect.Slice:
		if t.Elem().Kind() == reflect.String {
			return `["a"]`, `{"a":"b"}`
		}
		if t.Elem().Kind() == reflect.Uint8 {
			return `"YQ=="`, `3` // []byte: base64 text
		}
		return `[{}]`, `{}`
	}
	panic("no sample for " + t.String())
}

// TestEverySpecFieldInJSON: each field of each spec struct a job holds is
// accepted in JSON under its json tag, with a value of its Go type that
// then decodes into the struct, and refused with a value of another type.
// A field the schemas dropped or gave the wrong kind fails here.
func TestEverySpecFieldInJSON(t *testing.T) {
	n := 0
	for _, typ := range specStructs() {
		s := schemaOf(typ)
		for f := range typ.Fields() {
			key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			good, bad := sample(f.Type)
			for _, c := range []struct {
				value string
				ok    bool
			}{{good, true}, {bad, false}} {
				src := `{"` + key + `":` + c.value + `}`
				root, err := parseJSON([]byte(src))
				if err != nil {
					t.Fatal(err)
				}
				k := &jchecker{c: newCollector("f.json", nil), at: positions{}, src: []byte(src)}
				k.object(root, s, "")
				ps := k.c.result()
				switch {
				case c.ok && ps != nil:
					t.Errorf("%s: %s refused: %v", typ.Name(), src, ps)
				case !c.ok && (len(ps) != 1 || ps[0].Field != key):
					t.Errorf("%s: %s: want one problem with %s, got %v", typ.Name(), src, key, ps)
				case c.ok:
					dec := json.NewDecoder(bytes.NewReader(root.appendJSON(nil)))
					dec.DisallowUnknownFields()
					if err := dec.Decode(reflect.New(typ).Interface()); err != nil {
						t.Errorf("%s: %s checked, then refused by encoding/json: %v", typ.Name(), src, err)
					}
				}
			}
			n++
		}
	}
	if n < 100 {
		t.Errorf("only %d fields checked", n)
	}
}

// TestStatusWrapperKeys: the JobStatus wrapper takes each of its own keys.
func TestStatusWrapperKeys(t *testing.T) {
	var keys []string
	for f := range reflect.TypeFor[spec.JobStatus]().Fields() {
		key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		keys = append(keys, key)
	}
	if len(keys) != len(statusTree.byJSON) {
		t.Errorf("JobStatus has keys %v, the schema %v", keys, statusTree.jsonNames)
	}
	for _, key := range keys {
		if statusTree.byJSON[key] == nil {
			t.Errorf("JobStatus key %q not in the schema", key)
		}
	}
}

// hclForm is how HCL writes a field of Go type t, by the test's own reading
// of the spec's hcl tags: as an attribute, as a block (one per element for
// a list), or either (a map).
func hclForm(t reflect.Type) (attr, block, many bool) {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == reflect.TypeFor[spec.Duration]() || t == reflect.TypeFor[time.Time]():
		return true, false, false
	case t.Kind() == reflect.Struct:
		return false, true, false
	case t.Kind() == reflect.Map:
		return true, true, false
	case t.Kind() == reflect.Slice && t.Elem().Kind() != reflect.String:
		return false, true, true
	}
	return true, false, false
}

// blockLabel is ` "x"` when the struct a block of Go type t decodes into
// takes a label.
func blockLabel(t reflect.Type) string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return ""
	}
	for f := range t.Fields() {
		if strings.HasSuffix(f.Tag.Get("hcl"), ",label") {
			return ` "x"`
		}
	}
	return ""
}

// TestEverySpecFieldInHCL: each field of each spec struct a job holds is
// taken in its struct's HCL block under its HCL name (its hcl tag, else its
// json key), written as its Go type says (a block for a struct, once per
// element for a list of them), and refused written the other way; the
// server-owned fields (hcl:"-") are not taken at all.
func TestEverySpecFieldInHCL(t *testing.T) {
	n := 0
	for _, typ := range specStructs() {
		s := schemaOf(typ)
		for f := range typ.Fields() {
			key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			tag, _ := f.Tag.Lookup("hcl")
			name, opt, _ := strings.Cut(tag, ",")
			if name == "" || name == "-" {
				name = key
			}
			content := func(src string) ([]item, spec.Problems) {
				file, diags := hclsyntax.ParseConfig([]byte(src), "f.hcl", hcl.InitialPos)
				if diags.HasErrors() {
					t.Fatalf("%s: %v", src, diags)
				}
				d := &hclDecoder{c: newCollector("f.hcl", nil), at: positions{}}
				items := d.content(file.Body.(*hclsyntax.Body), s.body, "in x", "")
				return items, d.c.result()
			}
			switch {
			case opt == "label":
				if s.label == nil || s.label.json != key {
					t.Errorf("%s: %s is not its block's label", typ.Name(), f.Name)
				}
				continue
			case tag == "-":
				if items, ps := content(name + " = 1\n"); len(items) != 0 || ps == nil {
					t.Errorf("%s: server-owned %s taken in HCL", typ.Name(), name)
				}
				continue
			}
			attr, block, many := hclForm(f.Type)
			asAttr, asBlock := name+" = 1\n", name+blockLabel(f.Type)+" {\n}\n"
			want := 1
			if many {
				asBlock += asBlock
				want = 2
			}
			for _, c := range []struct {
				src string
				ok  bool
			}{{asAttr, attr}, {asBlock, block}} {
				items, ps := content(c.src)
				switch {
				case c.ok && (ps != nil || len(items) != want && c.src == asBlock || len(items) != 1 && c.src == asAttr):
					t.Errorf("%s: %q: %d items, problems %v", typ.Name(), c.src, len(items), ps)
				case !c.ok && ps == nil:
					t.Errorf("%s: %q taken", typ.Name(), c.src)
				}
			}
			n++
		}
	}
	if n < 90 {
		t.Errorf("only %d fields checked", n)
	}
}

// TestNomadNamesTable: each struct the table of Nomad's names names is one
// a job holds, and none of the names it lists for a block is one the block
// takes (drover would have learnt it, and the table not been told).
func TestNomadNamesTable(t *testing.T) {
	byName := map[string]*schema{}
	for _, typ := range specStructs() {
		byName[typ.Name()] = schemaOf(typ)
	}
	for in, names := range unsupportedIn {
		s := byName[in]
		if s == nil {
			t.Errorf("unsupportedIn names %s, which no job holds", in)
			continue
		}
		for _, n := range names {
			if s.body.members[n] != 0 {
				t.Errorf("%s takes %s, which unsupportedIn says it does not", in, n)
			}
		}
	}
	walk(jobTree, func(f *fieldSchema) {
		if unsupported[f.hcl] {
			t.Errorf("%s is a block drover takes, and in unsupported", f.hcl)
		}
		for n := range f.obj.body.members {
			if unsupported[n] {
				t.Errorf("%s takes %s, which unsupported says no block does", f.hcl, n)
			}
		}
	})
}

// hclSample is sample's good value as HCL writes it.
func hclSample(t reflect.Type) string {
	if t.Kind() == reflect.Map {
		return `{ a = "b" }`
	}
	good, _ := sample(t)
	return good
}

// TestEverySpecFieldDecodesFromHCL: each attribute of each spec struct a
// job holds, written in HCL, lands in its field with the value the same
// written in JSON gives; each block makes its field (or one element per
// block). A field the HCL decoder dropped, misplaced or set with the wrong
// kind fails here.
func TestEverySpecFieldDecodesFromHCL(t *testing.T) {
	n := 0
	for _, typ := range specStructs() {
		s := schemaOf(typ)
		for f := range typ.Fields() {
			tag, _ := f.Tag.Lookup("hcl")
			if tag == "-" || strings.HasSuffix(tag, ",label") {
				continue
			}
			key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			name, _, _ := strings.Cut(tag, ",")
			if name == "" {
				name = key
			}
			attr, _, many := hclForm(f.Type)
			src := name + " = " + hclSample(f.Type) + "\n"
			if !attr {
				src = name + blockLabel(f.Type) + " {\n}\n"
				if many {
					src += src
				}
			}
			file, diags := hclsyntax.ParseConfig([]byte(src), "f.hcl", hcl.InitialPos)
			if diags.HasErrors() {
				t.Fatalf("%s: %v", src, diags)
			}
			d := &hclDecoder{c: newCollector("f.hcl", nil), at: positions{}}
			got := reflect.New(typ).Elem()
			d.fill(d.content(file.Body.(*hclsyntax.Body), s.body, "in x", ""), s, got, "", "x", owner{"x", "x"})
			if ps := d.c.result(); ps != nil {
				t.Errorf("%s: %q: %v", typ.Name(), src, ps)
				continue
			}
			field := got.FieldByIndex(f.Index)
			switch {
			case attr:
				good, _ := sample(f.Type)
				want := reflect.New(typ)
				if err := json.Unmarshal([]byte(`{"`+key+`":`+good+`}`), want.Interface()); err != nil {
					t.Fatal(err)
				}
				if w := want.Elem().FieldByIndex(f.Index); !reflect.DeepEqual(field.Interface(), w.Interface()) {
					t.Errorf("%s: %q set %s to %v, JSON to %v", typ.Name(), src, f.Name, field, w)
				}
			case many && field.Len() != 2, field.IsZero() && field.Kind() == reflect.Pointer:
				t.Errorf("%s: %q left %s %v", typ.Name(), src, f.Name, field)
			}
			if d.at[key] == (pos{}) {
				t.Errorf("%s: %q: no position recorded for %s", typ.Name(), src, key)
			}
			n++
		}
	}
	if n < 90 {
		t.Errorf("only %d fields checked", n)
	}
}
