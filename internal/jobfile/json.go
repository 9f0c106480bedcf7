package jobfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/drover-org/drover/internal/inputlimit"
	"github.com/drover-org/drover/internal/spec"
	"github.com/drover-org/drover/internal/suggest"
)

// JSON is read in two passes. The first builds a tree that remembers where
// each value starts and checks it against the spec structs' JSON shape,
// reporting every unknown field and wrong type with its path and position
// (encoding/json stops at the first). Bad values are cut from the tree; the
// second pass hands what is left to encoding/json, strictly, so that the
// job means exactly what the API's own unmarshalling makes of it, and so
// validation can still run and report the rest.

// jnode is one JSON value and where it starts.
type jnode struct {
	kind  byte // 'o' object, 'a' array, 's' string, 'n' number, 'b' bool, 'z' null
	off   int
	text  string // string value, or number literal
	truth bool
	keys  []string
	koffs []int    // where each key starts
	vals  []*jnode // object values (parallel to keys) or array elements
}

// jsonSyntaxError is a syntax error at a byte offset.
type jsonSyntaxError struct {
	off int
	msg string
}

func (e *jsonSyntaxError) Error() string { return e.msg }

type jparser struct {
	src     []byte
	dec     *json.Decoder
	started bool // a token has been read
}

// parseJSON builds the tree for src, which must hold exactly one value.
func parseJSON(src []byte) (*jnode, error) {
	p := &jparser{src: src, dec: json.NewDecoder(bytes.NewReader(src))}
	p.dec.UseNumber()
	n, err := p.value()
	if err != nil {
		return nil, err
	}
	off := p.start()
	if _, err := p.dec.Token(); err != io.EOF {
		return nil, &jsonSyntaxError{off: off, msg: "unexpected text after the end of the top-level value"}
	}
	return n, nil
}

// start is the offset of the next value: the decoder's offset is just past
// the previous token, before any separator.
func (p *jparser) start() int {
	off := int(p.dec.InputOffset())
	for off < len(p.src) {
		switch p.src[off] {
		case ' ', '\t', '\r', '\n', ',', ':':
			off++
			continue
		}
		break
	}
	return off
}

func (p *jparser) token() (json.Token, int, error) {
	off := p.start()
	tok, err := p.dec.Token()
	first := !p.started
	p.started = true
	if err == nil {
		return tok, off, nil
	}
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		// Offset is just past the offending byte.
		return nil, 0, &jsonSyntaxError{off: max(int(se.Offset)-1, 0), msg: se.Error()}
	case err == io.EOF && first:
		return nil, 0, &jsonSyntaxError{off: 0, msg: "the job file is empty"}
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		return nil, 0, &jsonSyntaxError{off: len(p.src), msg: "unexpected end of JSON input"}
	}
	return nil, 0, &jsonSyntaxError{off: off, msg: err.Error()}
}

func (p *jparser) value() (*jnode, error) {
	tok, off, err := p.token()
	if err != nil {
		return nil, err
	}
	n := &jnode{off: off}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			n.kind = 'o'
			for p.dec.More() {
				ktok, koff, err := p.token()
				if err != nil {
					return nil, err
				}
				key, _ := ktok.(string)
				v, err := p.value()
				if err != nil {
					return nil, err
				}
				n.keys = append(n.keys, key)
				n.koffs = append(n.koffs, koff)
				n.vals = append(n.vals, v)
			}
		case '[':
			n.kind = 'a'
			for p.dec.More() {
				v, err := p.value()
				if err != nil {
					return nil, err
				}
				n.vals = append(n.vals, v)
			}
		default:
			return nil, &jsonSyntaxError{off: off, msg: fmt.Sprintf("unexpected %q", rune(t))}
		}
		if _, _, err := p.token(); err != nil { // the closing delimiter
			return nil, err
		}
	case string:
		n.kind, n.text = 's', t
	case json.Number:
		n.kind, n.text = 'n', string(t)
	case bool:
		n.kind, n.truth = 'b', t
	case nil:
		n.kind = 'z'
	}
	return n, nil
}

func (n *jnode) typeName() string {
	switch n.kind {
	case 'o':
		return "object"
	case 'a':
		return "array"
	case 's':
		return fmt.Sprintf("string %q", n.text)
	case 'n':
		return "number " + n.text
	case 'b':
		return "bool"
	}
	return "null"
}

// appendJSON writes n back out as JSON.
func (n *jnode) appendJSON(b []byte) []byte {
	switch n.kind {
	case 'o':
		b = append(b, '{')
		for i, k := range n.keys {
			if i > 0 {
				b = append(b, ',')
			}
			// encoding/json's quoting, not Go's: strconv writes a DEL or
			// an invalid byte as \x7f, which is not JSON.
			q, _ := json.Marshal(k)
			b = append(b, q...)
			b = append(b, ':')
			b = n.vals[i].appendJSON(b)
		}
		return append(b, '}')
	case 'a':
		b = append(b, '[')
		for i, v := range n.vals {
			if i > 0 {
				b = append(b, ',')
			}
			b = v.appendJSON(b)
		}
		return append(b, ']')
	case 's':
		q, _ := json.Marshal(n.text)
		return append(b, q...)
	case 'n':
		return append(b, n.text...)
	case 'b':
		return strconv.AppendBool(b, n.truth)
	}
	return append(b, "null"...)
}

// jchecker checks a tree against a schema.
type jchecker struct {
	c   *collector
	src []byte // nil for JSON made from YAML: its positions are in ypos
	// ypos, for JSON made from YAML, is where its nodes were in the YAML:
	// a node's off (and a key's) is an index in it, 0 when not known
	// (yamlPositions).
	ypos []pos
	at   positions
	// last is the position pos last returned, at offset lastOff. The
	// checker asks in increasing order of offset, so each position is
	// counted on from the one before rather than from the start: counting
	// from the start made a one-line body of 100,000 values take seconds.
	last    pos
	lastOff int
}

func (k *jchecker) pos(n *jnode) pos {
	if k.src == nil {
		if n.off > 0 && n.off < len(k.ypos) {
			return k.ypos[n.off]
		}
		return pos{}
	}
	off := min(max(n.off, 0), len(k.src))
	if k.last.line == 0 || off < k.lastOff {
		k.last, k.lastOff = lineCol(k.src, off), off
		return k.last
	}
	seg := k.src[k.lastOff:off]
	if nl := bytes.LastIndexByte(seg, '\n'); nl >= 0 {
		k.last.line += bytes.Count(seg, []byte("\n"))
		k.last.col = 1 + utf8.RuneCount(seg[nl+1:])
	} else {
		k.last.col += utf8.RuneCount(seg)
	}
	k.lastOff = off
	return k.last
}

func (k *jchecker) fail(n *jnode, field, format string, args ...any) {
	k.c.add(k.pos(n), field, format, args...)
	k.c.markReported(field)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// object checks n against s and cuts out every key that is unknown or has a
// bad value. In a task, the driver decides what its config may hold.
func (k *jchecker) object(n *jnode, s *schema, path string) {
	k.at[path] = k.pos(n)
	seen := map[string]pos{} // key -> where it was first set
	var keys []string
	var koffs []int
	var vals []*jnode
	driver := ""
	if s == taskTree {
		for i, key := range n.keys {
			if key == "driver" && n.vals[i].kind == 's' {
				driver = n.vals[i].text
			}
		}
	}
	for i, key := range n.keys {
		v := n.vals[i]
		field := join(path, key)
		f, ok := s.byJSON[key]
		keyNode := &jnode{off: n.koffs[i]}
		first, dup := seen[key]
		switch {
		case !ok && notHere[key] != "" && v.kind == 'o':
			k.c.warn(k.pos(keyNode), "%s in %s: %s", key, s.what, notHere[key])
			continue
		case !ok && s.body.warned[key] != "":
			k.c.warn(k.pos(keyNode), "%s in %s: %s", key, s.what, s.body.warned[key])
			continue
		case !ok:
			k.fail(keyNode, field, "unknown field %q in %s; %s", key, s.what, suggest.Hint(key, s.jsonNames))
			// A likely typo of a field stands in for it: "needs a
			// driver" would only repeat `did you mean "driver"?`.
			if sug := suggest.Closest(key, s.jsonNames); sug != "" {
				k.c.markReported(join(path, sug))
			}
			continue
		case dup:
			k.fail(keyNode, field, "%s is already set at %s", key, k.c.render(first))
			continue
		}
		seen[key] = k.pos(keyNode)
		if k.value(v, f, field, driver) {
			keys, koffs, vals = append(keys, key), append(koffs, n.koffs[i]), append(vals, v)
		}
	}
	n.keys, n.koffs, n.vals = keys, koffs, vals
}

// value checks v against f and reports whether to keep it.
func (k *jchecker) value(v *jnode, f *fieldSchema, field, driver string) bool {
	k.at[field] = k.pos(v)
	name := field
	if v.kind == 'z' {
		return true // encoding/json leaves the field as it is
	}
	want := func(what string) bool {
		k.fail(v, field, "%s must be %s, got %s", lastSegment(name), what, v.typeName())
		return false
	}
	switch f.kind {
	case kAny:
		return true
	case kString:
		if v.kind != 's' {
			return want("a string")
		}
	case kBool:
		if v.kind != 'b' {
			return want("true or false")
		}
	case kInt, kUint:
		if v.kind != 'n' {
			return want("a number")
		}
		var err error
		var n int64
		if f.kind == kUint {
			_, err = strconv.ParseUint(v.text, 10, 64)
		} else {
			n, err = strconv.ParseInt(v.text, 10, 32)
		}
		if err != nil {
			if _, ferr := strconv.ParseFloat(v.text, 64); ferr == nil && !isWhole(v.text) {
				return want("a whole number")
			}
			k.fail(v, field, "%s %s is out of range", lastSegment(name), v.text)
			return false
		}
		if f.zero != "" && n == 0 {
			k.fail(v, field, "%s", f.zero)
			return false
		}
	case kDuration:
		if v.kind != 's' {
			return want(`a duration string such as "30s"`)
		}
		if _, err := spec.ParseDuration(v.text); err != nil {
			k.fail(v, field, "%s: %v", lastSegment(name), err)
			return false
		}
	case kTime:
		var t time.Time
		if v.kind != 's' || t.UnmarshalJSON(v.appendJSON(nil)) != nil {
			return want("a time such as \"2006-01-02T15:04:05Z\"")
		}
	case kStringMap:
		if v.kind != 'o' {
			return want("an object of strings")
		}
		ok := true
		for i, key := range v.keys {
			k.at[field+"."+key] = k.pos(v.vals[i])
			if ev := v.vals[i]; ev.kind != 's' {
				k.fail(ev, field+"."+key, "%s must be a string, got %s", key, ev.typeName())
				ok = false
			}
		}
		return ok
	case kStringList:
		if v.kind != 'a' {
			return want("an array of strings")
		}
		ok := true
		for i, ev := range v.vals {
			k.at[fmt.Sprintf("%s[%d]", field, i)] = k.pos(ev)
			if ev.kind != 's' {
				k.fail(ev, fmt.Sprintf("%s[%d]", field, i), "%s[%d] must be a string, got %s", lastSegment(name), i, ev.typeName())
				ok = false
			}
		}
		return ok
	case kObject:
		if v.kind != 'o' {
			return want("an object")
		}
		if f.obj == configTree {
			k.configObject(v, field, driver)
		} else {
			k.object(v, f.obj, field)
		}
	case kObjectList:
		if v.kind != 'a' {
			return want("an array of objects")
		}
		for i, ev := range v.vals {
			ep := fmt.Sprintf("%s[%d]", field, i)
			switch ev.kind {
			case 'o':
				k.object(ev, f.obj, ep)
			case 'z':
				k.at[ep] = k.pos(ev)
			default:
				k.fail(ev, ep, "%s must be an object, got %s", lastSegment(ep), ev.typeName())
				v.vals[i] = &jnode{kind: 'z', off: ev.off}
			}
		}
	}
	return true
}

// configObject checks a task's config, whose keys depend on the driver:
// a key of another known driver is refused with spec.ConfigKeyRefusal's
// reason.
func (k *jchecker) configObject(v *jnode, field, driver string) {
	k.at[field] = k.pos(v)
	var names []string
	for _, n := range configTree.jsonNames {
		if spec.ConfigKeyRefusal(driver, n) == "" {
			names = append(names, n)
		}
	}
	var keys []string
	var koffs []int
	var vals []*jnode
	for i, key := range v.keys {
		ev := v.vals[i]
		kf := field + "." + key
		f, ok := configTree.byJSON[key]
		switch {
		case !ok && driver != "" && !slices.Contains(spec.KnownDrivers, driver):
			continue
		case !ok && configTree.body.warned[key] != "":
			k.c.warn(k.pos(&jnode{off: v.koffs[i]}), "%s in the config: %s", key, configTree.body.warned[key])
			continue
		case !ok:
			forDriver := ""
			if driver != "" {
				forDriver = " for the " + driver + " driver"
			}
			k.fail(&jnode{off: v.koffs[i]}, kf, "unknown config key %q%s; %s", key, forDriver, suggest.Hint(key, names))
			if sug := suggest.Closest(key, names); sug != "" {
				k.c.markReported(join(field, sug))
			}
			continue
		case spec.ConfigKeyRefusal(driver, key) != "":
			k.fail(&jnode{off: v.koffs[i]}, kf, "%s", spec.ConfigKeyRefusal(driver, key))
			continue
		}
		if k.value(ev, f, kf, "") {
			keys, koffs, vals = append(keys, key), append(koffs, v.koffs[i]), append(vals, ev)
		}
	}
	v.keys, v.koffs, v.vals = keys, koffs, vals
}

func isWhole(lit string) bool {
	f, err := strconv.ParseFloat(lit, 64)
	return err == nil && f == float64(int64(f))
}

// lastSegment is the name a field goes by in a message: "tasks[1]" for
// "groups[0].tasks[1]", "args" for "groups[0].tasks[0].config.args".
func lastSegment(field string) string {
	return field[strings.LastIndex(field, ".")+1:]
}

// decodeJSON decodes src as a Job or JobStatus in JSON. withPos says whether
// byte offsets in src mean anything to the user.
func decodeJSON(name string, src []byte, withPos bool) (*spec.Job, error) {
	job, _, err := decodeJSONWarn(name, src, withPos, nil)
	return job, err
}

// decodeJSONWarn is decodeJSON that also returns the warnings.
func decodeJSONWarn(name string, src []byte, withPos bool, nodeHas func(string) bool) (*spec.Job, spec.Problems, error) {
	c := newCollector(name, nodeHas)
	job, err := decodeJSONInto(c, src, withPos)
	return job, c.warningsResult(), err
}

func decodeJSONInto(c *collector, src []byte, withPos bool) (*spec.Job, error) {
	if err := inputlimit.JSON(src); err != nil {
		addLimit(c, err, withPos)
		return nil, failed(c)
	}
	root, err := parseJSON(src)
	if err != nil {
		var se *jsonSyntaxError
		errors.As(err, &se)
		at := pos{}
		if withPos {
			at = lineCol(src, se.off)
		}
		c.add(at, "", "%s", jsonMessage(se.msg))
		return nil, failed(c)
	}
	k := &jchecker{c: c, at: positions{}}
	if withPos {
		k.src = src
	}
	return decodeTree(root, k)
}

// decodeTree checks a parsed JSON tree, decodes what is left of it and
// validates the job.
func decodeTree(root *jnode, k *jchecker) (*spec.Job, error) {
	c := k.c
	if root.kind != 'o' {
		c.add(k.pos(root), "", "a job file must hold an object, got %s", root.typeName())
		return nil, failed(c)
	}
	jobNode := root
	if isNomadAPI(root) {
		if jobNode = k.fromNomadAPI(root); jobNode == nil {
			return nil, failed(c)
		}
	} else if slices.Contains(root.keys, "job") {
		// A JobStatus: check its own keys, then use only the job, with
		// paths relative to it as validation's are.
		k.object(root, statusTree, "")
		for i, key := range root.keys {
			if key == "job" {
				jobNode = root.vals[i]
			}
		}
		if jobNode.kind != 'o' {
			k.fail(jobNode, "job", "job must be an object, got %s", jobNode.typeName())
			return nil, failed(c)
		}
		k.at = positions{}
	}
	k.object(jobNode, jobTree, "")
	var job spec.Job
	dec := json.NewDecoder(bytes.NewReader(jobNode.appendJSON(nil)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&job); err != nil {
		// The check above should have caught everything encoding/json
		// refuses; say what it said rather than nothing.
		c.add(k.pos(jobNode), "", "%v", err)
		return nil, failed(c)
	}
	return finish(&job, c, k.at)
}

// jsonMessage rewords encoding/json's syntax errors for a person.
func jsonMessage(msg string) string {
	if msg == "the job file is empty" {
		return msg
	}
	return "JSON syntax error: " + msg
}
