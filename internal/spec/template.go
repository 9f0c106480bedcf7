package spec

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"
)

// TemplateChangeMode is what the agent does when a template's rendering
// changes while its task runs.
type TemplateChangeMode string

const (
	// ChangeRestart restarts the task (the default), without counting it
	// against the restart policy.
	ChangeRestart TemplateChangeMode = "restart"
	// ChangeSignal sends the task the template's change_signal.
	ChangeSignal TemplateChangeMode = "signal"
	// ChangeNoop only rewrites the file.
	ChangeNoop TemplateChangeMode = "noop"
)

// Template is a task's template block, as Nomad's: a file rendered into
// the task's directory before the task starts, from inline data or a
// source file, with Go's text/template and the functions of
// TemplateFuncNames (consul-template's names, for what drover can back).
type Template struct {
	// Data is the template itself; Source a file on the node holding it
	// (relative to the task's directory, or absolute). One of the two.
	Data   string `json:"data,omitempty"`
	Source string `json:"source,omitempty"`
	// Destination is where the rendering goes: relative to the task's
	// directory, or under ${NOMAD_TASK_DIR}, ${NOMAD_SECRETS_DIR} or
	// ${NOMAD_ALLOC_DIR}; never outside the alloc's directory.
	Destination string `json:"destination"`
	// Env reads the rendered file as KEY=value lines into the task's
	// environment.
	Env          bool               `json:"env,omitempty"`
	ChangeMode   TemplateChangeMode `json:"change_mode,omitempty"`
	ChangeSignal string             `json:"change_signal,omitempty"`
	// Perms are the file's permissions in octal, "0644" by default.
	Perms          string `json:"perms,omitempty"`
	LeftDelimiter  string `json:"left_delimiter,omitempty"`
	RightDelimiter string `json:"right_delimiter,omitempty"`
}

// ChangeModeOf is the template's change_mode, ChangeRestart when unset.
func (tp *Template) ChangeModeOf() TemplateChangeMode {
	if tp.ChangeMode == "" {
		return ChangeRestart
	}
	return tp.ChangeMode
}

// FileMode is the rendered file's mode: Perms, or 0644.
func (tp *Template) FileMode() uint32 {
	if m, err := strconv.ParseUint(tp.Perms, 8, 32); err == nil && tp.Perms != "" {
		return uint32(m)
	}
	return 0o644
}

// TemplateService is one instance of a service, as a template's service
// function lists it (consul-template's field names).
type TemplateService struct {
	ID      string // the alloc ID and task: unique per instance
	Name    string
	Address string
	Port    int
	Tags    []string
	Node    string // the node's name
	NodeID  string
	Job     string
	AllocID string
}

// TemplateServiceName is one service of the services function's list.
type TemplateServiceName struct {
	Name string
	Tags []string
}

// TemplateData is what a rendering reads: Lookup is a runtime variable or
// node value by name (TaskRuntime.lookup: "NOMAD_ALLOC_ID", "attr.cpu.arch",
// "meta.rack"); Service the healthy instances of a service in drover's
// catalog, Services its list. A nil function reads as nothing.
type TemplateData struct {
	Lookup   func(name string) (string, bool)
	Service  func(name string) ([]TemplateService, error)
	Services func() ([]TemplateServiceName, error)
}

// templateFuncs are the functions a template may call, by name: the one
// declaration that validation and rendering share.
func templateFuncs(d TemplateData) template.FuncMap {
	env := func(name string) string {
		if d.Lookup == nil {
			return ""
		}
		if v, ok := d.Lookup(name); ok {
			return v
		}
		return ""
	}
	service := func(name string) ([]TemplateService, error) {
		if d.Service == nil {
			return nil, nil
		}
		return d.Service(name)
	}
	services := func() ([]TemplateServiceName, error) {
		if d.Services == nil {
			return nil, nil
		}
		return d.Services()
	}
	return template.FuncMap{
		"env": env,
		"envOrDefault": func(name, def string) string {
			if d.Lookup != nil {
				if v, ok := d.Lookup(name); ok {
					return v
				}
			}
			return def
		},
		"service":       service,
		"nomadService":  service,
		"services":      services,
		"nomadServices": services,
		"toLower":       strings.ToLower,
		"toUpper":       strings.ToUpper,
		"trimSpace":     strings.TrimSpace,
		"split":         func(sep, s string) []string { return strings.Split(s, sep) },
		"join":          func(sep string, l []string) string { return strings.Join(l, sep) },
		"replaceAll":    func(old, new, s string) string { return strings.ReplaceAll(s, old, new) },
		"contains":      func(v string, l []string) bool { return slices.Contains(l, v) },
		"in":            func(l []string, v string) bool { return slices.Contains(l, v) },
		"parseInt":      func(s string) (int64, error) { return strconv.ParseInt(strings.TrimSpace(s), 10, 64) },
		"parseBool":     func(s string) (bool, error) { return strconv.ParseBool(strings.TrimSpace(s)) },
		"toJSON": func(v any) (string, error) {
			b, err := json.Marshal(v)
			return string(b), err
		},
		"base64Encode": func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) },
		"base64Decode": func(s string) (string, error) {
			b, err := base64.StdEncoding.DecodeString(s)
			return string(b), err
		},
	}
}

// TemplateFuncNames are the functions a template may call, sorted.
var TemplateFuncNames = func() []string {
	var out []string
	for name := range templateFuncs(TemplateData{}) {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}()

// consulOnly are consul-template's and Nomad's template functions that
// read what drover does not have, and what each reads, for messages.
var consulOnly = map[string]string{
	"key": "Consul's KV store", "keyOrDefault": "Consul's KV store", "keyExists": "Consul's KV store",
	"ls": "Consul's KV store", "safeLs": "Consul's KV store", "tree": "Consul's KV store", "safeTree": "Consul's KV store",
	"secret": "Vault", "secrets": "Vault", "pkiCert": "Vault", "caRoots": "Consul Connect", "caLeaf": "Consul Connect",
	"node": "Consul's node catalog", "nodes": "Consul's node catalog", "datacenters": "Consul's datacenters",
	"connect": "Consul Connect", "nomadVar": "Nomad variables", "nomadVarList": "Nomad variables",
	"nomadVarListSafe": "Nomad variables", "nomadVarExists": "Nomad variables", "executeTemplate": "named templates",
}

var undefinedFunc = regexp.MustCompile(`function "([^"]+)" not defined`)

// Parse parses text, the template's data or its source file's content,
// with its delimiters and the template functions. The error of a function
// drover does not have says so, and which it has.
func (tp *Template) Parse(text string, d TemplateData) (*template.Template, error) {
	t, err := template.New(path.Base(tp.Destination)).Delims(tp.LeftDelimiter, tp.RightDelimiter).
		Funcs(templateFuncs(d)).Option("missingkey=zero").Parse(text)
	if err == nil {
		return t, nil
	}
	if m := undefinedFunc.FindStringSubmatch(err.Error()); m != nil {
		what := "drover does not have it"
		if w, ok := consulOnly[m[1]]; ok {
			what = "it reads " + w + ", which drover does not have"
		}
		return nil, fmt.Errorf("template function %q is not available: %s; the functions are %s", m[1], what, strings.Join(TemplateFuncNames, ", "))
	}
	return nil, err
}

// Render renders text (Parse) with d.
func (tp *Template) Render(text string, d TemplateData) (string, error) {
	t, err := tp.Parse(text, d)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	if err := t.Execute(&b, nil); err != nil {
		return "", err
	}
	return b.String(), nil
}

// ParseEnvFile reads a rendered env = true template: KEY=value lines;
// blank lines and lines starting with # are skipped, and a value may be
// quoted ("..." with Go's escapes, or '...').
func ParseEnvFile(s string) (map[string]string, error) {
	out := map[string]string{}
	for i, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		k, v, ok := strings.Cut(line, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" || strings.ContainsAny(k, " \t\x00") {
			return nil, fmt.Errorf("line %d: %q is not KEY=value", i+1, line)
		}
		v = strings.TrimSpace(v)
		switch {
		case len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"':
			u, err := strconv.Unquote(v)
			if err != nil {
				return nil, fmt.Errorf("line %d: value of %s: %v", i+1, k, err)
			}
			v = u
		case len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'':
			v = v[1 : len(v)-1]
		}
		out[k] = v
	}
	return out, nil
}

// TemplateDirVars are the variables of the task's directories a
// destination may start with; past them its literal path is checked. A
// destination with another runtime variable (${NOMAD_META_dir},
// ${NOMAD_TASK_NAME}) is checked when the agent has resolved it.
var TemplateDirVars = []string{"${NOMAD_TASK_DIR}", "${NOMAD_SECRETS_DIR}", "${NOMAD_ALLOC_DIR}"}

// interpolationStart opens a runtime variable in a destination.
const interpolationStart = "${"

// sharedFromTask is the alloc's shared directory as a path from the
// task's directory, Nomad's "../alloc".
const sharedFromTask = "../alloc"

func validateTemplates(ps *Problems, path string, t *Task) {
	dests := map[string]int{}
	for i, tp := range t.Templates {
		p := fmt.Sprintf("%s.templates[%d]", path, i)
		if tp == nil {
			ps.Add(p, "template is null")
			continue
		}
		switch {
		case tp.Data == "" && tp.Source == "":
			ps.Add(p, "task %q: template %d needs data (the template inline) or source (a file on the node)", t.Name, i+1)
		case tp.Data != "" && tp.Source != "":
			ps.Add(p+".source", "task %q: template %d has both data and source; keep one", t.Name, i+1)
		case tp.Data != "":
			if _, err := tp.Parse(tp.Data, TemplateData{}); err != nil {
				ps.Add(p+".data", "task %q: template %d: %v", t.Name, i+1, err)
			}
		}
		if msg := checkDestination(tp.Destination); msg != "" {
			ps.Add(p+".destination", "task %q: template %d: %s", t.Name, i+1, msg)
		} else if prev, dup := dests[cleanPath(tp.Destination)]; dup {
			ps.Add(p+".destination", "task %q: templates %d and %d both write %s; give each its own destination", t.Name, prev+1, i+1, tp.Destination)
		} else {
			dests[cleanPath(tp.Destination)] = i
		}
		switch tp.ChangeMode {
		case "", ChangeRestart, ChangeNoop:
			if tp.ChangeSignal != "" {
				ps.Add(p+".change_signal", "task %q: template %d: change_signal is for change_mode = \"signal\"; remove it or set that mode", t.Name, i+1)
			}
		case ChangeSignal:
			if tp.ChangeSignal == "" {
				ps.Add(p+".change_signal", "task %q: template %d: change_mode \"signal\" needs a change_signal, such as \"SIGHUP\"", t.Name, i+1)
			} else if msg := CheckSignal(tp.ChangeSignal); msg != "" {
				ps.Add(p+".change_signal", "task %q: template %d: %s", t.Name, i+1, msg)
			}
		default:
			ps.Add(p+".change_mode", "task %q: template %d: unknown change_mode %q; use \"restart\", \"signal\" or \"noop\"", t.Name, i+1, tp.ChangeMode)
		}
		if tp.Perms != "" {
			if m, err := strconv.ParseUint(tp.Perms, 8, 32); err != nil || m > 0o7777 {
				ps.Add(p+".perms", "task %q: template %d: perms %q is not an octal file mode; write it as \"0644\"", t.Name, i+1, tp.Perms)
			}
		}
		if (tp.LeftDelimiter == "") != (tp.RightDelimiter == "") {
			ps.Add(p, "task %q: template %d: set both left_delimiter and right_delimiter, or neither", t.Name, i+1)
		}
	}
}

func cleanPath(p string) string { return path.Clean(p) }

// checkDestination reports what is wrong with a template's destination,
// or "".
func checkDestination(dest string) string {
	if dest == "" {
		return "needs a destination: a file in the task's directory, such as \"local/app.conf\""
	}
	rest := dest
	for _, v := range TemplateDirVars {
		if r, ok := strings.CutPrefix(dest, v); ok {
			rest = strings.TrimPrefix(r, "/")
			break
		}
	}
	switch {
	case strings.Contains(rest, interpolationStart):
		return "" // another runtime variable: the agent resolves it and keeps the file inside the task's or the alloc's directory
	case path.IsAbs(rest):
		return fmt.Sprintf("destination %q is absolute; write it relative to the task's directory (\"local/app.conf\") or under ${NOMAD_TASK_DIR}", dest)
	case rest == "" || path.Clean(rest) == ".":
		return fmt.Sprintf("destination %q names a directory, not a file", dest)
	case path.Clean(rest) == sharedFromTask:
		return fmt.Sprintf("destination %q names a directory, not a file", dest)
	case strings.HasPrefix(path.Clean(rest), sharedFromTask+"/"):
		// Nomad's "../alloc/": the alloc's shared directory, beside
		// the task's, as ${NOMAD_ALLOC_DIR} is.
	case path.Clean(rest) == ".." || strings.HasPrefix(path.Clean(rest), "../"):
		return fmt.Sprintf("destination %q leaves the task's directory; write it inside (\"local/app.conf\"), or in the alloc's shared directory (\"../alloc/app.conf\")", dest)
	}
	return ""
}
