package spec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// The changes between two versions of a job, as `drover plan` and
// `drover history` show them: one line per field, named by its path in
// the job's JSON, with groups, tasks and other named lists by name
// (groups[api].tasks[server].env.VERSION).

// Change is one field that differs between two versions of a job.
type Change struct {
	// Op is '+' (only the newer version has the field), '-' (only the
	// older one), or '~' (both, with different values).
	Op       byte
	Path     string
	From, To string // the values as JSON; "" where the field is absent
}

func (c Change) String() string {
	switch c.Op {
	case '+':
		return fmt.Sprintf("+ %s: %s", c.Path, c.To)
	case '-':
		return fmt.Sprintf("- %s: %s", c.Path, c.From)
	}
	return fmt.Sprintf("~ %s: %s -> %s", c.Path, c.From, c.To)
}

// Changes lists, sorted by path, the fields of the operator-written
// part of a job (SpecOnly) that differ from version from to version to.
// Both are flattened to path -> value (flattenJSON), so that a field is
// compared by its path, not by its position: a group inserted before
// another shows as that group's fields, not as every later group changed.
func Changes(from, to *Job) []Change {
	a, b := flattenJob(from), flattenJob(to)
	var out []Change
	for p, x := range a {
		y, ok := b[p]
		switch {
		case !ok:
			out = append(out, Change{Op: '-', Path: p, From: x})
		case x != y:
			out = append(out, Change{Op: '~', Path: p, From: x, To: y})
		}
	}
	for p, y := range b {
		if _, ok := a[p]; !ok {
			out = append(out, Change{Op: '+', Path: p, To: y})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

func flattenJob(j *Job) map[string]string {
	out := map[string]string{}
	if j == nil {
		return out
	}
	raw, err := json.Marshal(j.SpecOnly())
	if err != nil {
		panic("spec: a job does not marshal: " + err.Error())
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // 10000000000 stays itself, not 1e+10
	var v any
	if err := dec.Decode(&v); err != nil {
		panic("spec: a job's JSON does not decode: " + err.Error())
	}
	flattenJSON("", v, out)
	return out
}

// flattenJSON records every leaf of v under its path: object keys joined
// by dots (env.VERSION; a key that is not a plain word is quoted:
// meta["a.b"]), lists of objects that all have distinct names by name
// (groups[api].tasks[server]), other lists of objects by index
// (constraints[0]), and lists of plain values, empty objects and empty
// lists whole, as JSON.
func flattenJSON(path string, v any, out map[string]string) {
	switch x := v.(type) {
	case map[string]any:
		if len(x) > 0 {
			for k, e := range x {
				flattenJSON(joinKey(path, k), e, out)
			}
			return
		}
	case []any:
		if keys, ok := listKeys(x); ok && len(x) > 0 {
			for i, e := range x {
				flattenJSON(path+"["+keys[i]+"]", e, out)
			}
			return
		}
	}
	out[path] = showJSON(v)
}

var plainKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

func joinKey(path, k string) string {
	if !plainKey.MatchString(k) {
		return path + "[" + strconv.Quote(k) + "]"
	}
	if path == "" {
		return k
	}
	return path + "." + k
}

// listKeys names the items of a list of objects: by their "name" when
// every item has a distinct one, else by index. ok is false when some
// item is not an object: such a list is one value.
func listKeys(l []any) (keys []string, ok bool) {
	byName := true
	seen := map[string]bool{}
	for _, e := range l {
		m, isObj := e.(map[string]any)
		if !isObj {
			return nil, false
		}
		name, _ := m["name"].(string)
		if name == "" || seen[name] {
			byName = false
		}
		seen[name] = true
	}
	for i, e := range l {
		k := strconv.Itoa(i)
		if byName {
			k = e.(map[string]any)["name"].(string)
			if !plainKey.MatchString(k) {
				k = strconv.Quote(k)
			}
		}
		keys = append(keys, k)
	}
	return keys, true
}

// maxValue bounds one side of a change line; the job file has the rest.
const maxValue = 120

func showJSON(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // show "a<b" as written, not "a\u003cb"
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	s := strings.TrimSuffix(b.String(), "\n")
	if r := []rune(s); len(r) > maxValue {
		return string(r[:maxValue]) + "..."
	}
	return s
}
