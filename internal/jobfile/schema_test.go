package jobfile

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

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
				k := &jchecker{c: newCollector("f.json"), at: positions{}, src: []byte(src)}
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
