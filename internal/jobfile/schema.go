package jobfile

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/drover-org/drover/internal/spec"
)

// The job language is declared once, by the spec structs themselves: a
// field's json tag is its key in JSON and YAML, its Go type the shape of
// its value. A reflection pass, at init, turns the structs into schemas,
// from which every decoder checks what it reads. What a struct cannot say
// is in the notes below.

// kind is the shape a field's value has.
type kind int

const (
	kString kind = iota
	kInt
	kUint
	kBool
	kDuration
	kTime
	kStringMap
	kStringList
	kObject
	kObjectList
	kAny
)

// fieldSchema is one field of a spec struct, as job files write it.
type fieldSchema struct {
	json  string // its JSON key
	index int    // its index in the struct
	kind  kind
	obj   *schema // for kObject and kObjectList
	note
}

// note is what a field's Go type and tags cannot say, keyed in notes by
// "Type.json_key".
type note struct {
	// zero, when set, refuses a written 0 with this message: for a field
	// whose 0 means "unset, use the default" (a weight).
	zero string
}

var notes = map[string]note{
	"Affinity.weight": {zero: zeroAffinityWeight},
	"Spread.weight":   {zero: zeroSpreadWeight},
}

// what names a struct in messages ("unknown field "x" in restart policy")
// where its type's name, split into words, would not say it as well.
var what = map[string]string{
	"Command":      "prestart, stop or poststop command",
	"TaskConfig":   "config",
	"CheckRestart": "check_restart",
}

// schema is one spec struct as job files write it.
type schema struct {
	what      string // "restart policy", for messages
	typ       reflect.Type
	fields    []*fieldSchema
	byJSON    map[string]*fieldSchema
	jsonNames []string // sorted, for suggestions
}

var (
	durationType = reflect.TypeFor[spec.Duration]()
	timeType     = reflect.TypeFor[time.Time]()

	// schemas holds every schema made, by struct type, so that a struct
	// used in several places (a restart policy) has one.
	schemas = map[reflect.Type]*schema{}

	jobTree    = schemaOf(reflect.TypeFor[spec.Job]())
	taskTree   = schemaOf(reflect.TypeFor[spec.Task]())
	configTree = schemaOf(reflect.TypeFor[spec.TaskConfig]())
	// statusTree is spec.JobStatus, the wrapper `drover status -o json`
	// prints; only its job is read, so the rest is not checked.
	statusTree = opaque(reflect.TypeFor[spec.JobStatus]())
)

// schemaOf returns the schema of struct type t, making it (and those of
// the structs it holds) on first use.
func schemaOf(t reflect.Type) *schema {
	if s, ok := schemas[t]; ok {
		return s
	}
	s := &schema{what: structWhat(t), typ: t, byJSON: map[string]*fieldSchema{}}
	schemas[t] = s
	for i := range t.NumField() {
		sf := t.Field(i)
		name := jsonName(sf)
		if name == "" {
			continue
		}
		k, obj := kindOf(sf.Type)
		f := &fieldSchema{json: name, index: i, kind: k, obj: obj, note: notes[t.Name()+"."+name]}
		s.fields = append(s.fields, f)
		s.byJSON[name] = f
		s.jsonNames = append(s.jsonNames, name)
	}
	slices.Sort(s.jsonNames)
	return s
}

// opaque is the schema of struct type t whose fields take any value.
func opaque(t reflect.Type) *schema {
	s := &schema{what: structWhat(t), typ: t, byJSON: map[string]*fieldSchema{}}
	for i := range t.NumField() {
		if name := jsonName(t.Field(i)); name != "" {
			f := &fieldSchema{json: name, index: i, kind: kAny}
			s.fields = append(s.fields, f)
			s.byJSON[name] = f
			s.jsonNames = append(s.jsonNames, name)
		}
	}
	slices.Sort(s.jsonNames)
	return s
}

// jsonName is a struct field's JSON key, or "" for a field JSON leaves out.
func jsonName(sf reflect.StructField) string {
	tag := sf.Tag.Get("json")
	if tag == "-" || !sf.IsExported() {
		return ""
	}
	if name, _, _ := strings.Cut(tag, ","); name != "" {
		return name
	}
	return sf.Name
}

// structWhat names a struct type in messages: what's entry, else its name
// in words ("ReschedulePolicy": "reschedule policy").
func structWhat(t reflect.Type) string {
	if w, ok := what[t.Name()]; ok {
		return w
	}
	var b strings.Builder
	for i, r := range t.Name() {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte(' ')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// kindOf is the kind of a field of Go type t, and the schema of the struct
// it holds, if any. A type no job file can write panics: the spec structs
// are fixed at build time, and the tests build every schema.
func kindOf(t reflect.Type) (kind, *schema) {
	switch t {
	case durationType:
		return kDuration, nil
	case timeType:
		return kTime, nil
	}
	switch t.Kind() {
	case reflect.Pointer:
		if t.Elem().Kind() == reflect.Struct {
			return kObject, schemaOf(t.Elem())
		}
		return kindOf(t.Elem())
	case reflect.Struct:
		return kObject, schemaOf(t)
	case reflect.String:
		return kString, nil
	case reflect.Int, reflect.Int64:
		return kInt, nil
	case reflect.Uint64:
		return kUint, nil
	case reflect.Bool:
		return kBool, nil
	case reflect.Map:
		if t.Key().Kind() == reflect.String && t.Elem().Kind() == reflect.String {
			return kStringMap, nil
		}
	case reflect.Slice:
		e := t.Elem()
		if e.Kind() == reflect.String {
			return kStringList, nil
		}
		if e.Kind() == reflect.Pointer {
			e = e.Elem()
		}
		if e.Kind() == reflect.Struct {
			return kObjectList, schemaOf(e)
		}
	}
	panic(fmt.Sprintf("jobfile: no job file can write a %s", t))
}
