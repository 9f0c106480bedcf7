package jobfile

// A systemd unit file with fleet's [X-Fleet] section, read as one job.
//
// The file is parsed by go-systemd's unit package, which gives options in
// file order but no line numbers; indexUnit scans the same text for the
// line each option starts on, and the two are matched by section, name and
// occurrence. Everything else here is the mapping to spec.Job, written out
// in docs/fleet.md: [Service] becomes one exec task, [X-Fleet] becomes job
// constraints, template units are instantiated from their file name.

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/coreos/go-systemd/v22/unit"

	"github.com/drover-org/drover/internal/inputlimit"
	"github.com/drover-org/drover/internal/spec"
	"github.com/drover-org/drover/internal/suggest"
)

const unitSuffix = ".service"

// systemd's defaults, used where a unit leaves a key out, so that a unit
// behaves as it did under fleet.
const (
	// RestartSec's default.
	unitRestartDelay = 100 * time.Millisecond
	// DefaultStartLimitBurst and DefaultStartLimitIntervalSec: systemd
	// gives up on a unit that starts 5 times within 10s. drover waits for
	// the interval to pass and goes on (restart mode "delay"), because a
	// cluster job that stops for good needs a person to notice.
	unitStartLimitBurst    = 5
	unitStartLimitInterval = 10 * time.Second
)

// unitName is a unit's name taken apart: "web@1.service" has prefix "web"
// and instance "1"; "web@.service" is a template.
type unitName struct {
	full, prefix, instance string
	instanced              bool // has an '@'
}

func parseUnitName(base string) unitName {
	stem := strings.TrimSuffix(base, unitSuffix)
	prefix, instance, instanced := strings.Cut(stem, "@")
	return unitName{full: base, prefix: prefix, instance: instance, instanced: instanced}
}

func (u unitName) template() bool { return u.instanced && u.instance == "" }

// job is the drover job name: the unit name without ".service".
func (u unitName) job() string { return strings.TrimSuffix(u.full, unitSuffix) }

// decodeUnitFile reads a unit file. An instance such as web@1.service that
// is not on disk is read from its template, web@.service, next to it, as
// systemd and fleet do.
func decodeUnitFile(path string, nodeHas func(string) bool) (*spec.Job, spec.Problems, error) {
	name := parseUnitName(filepath.Base(path))
	src, err := readFile(path)
	if errors.Is(err, fs.ErrNotExist) && name.instanced && !name.template() {
		tmpl := filepath.Join(filepath.Dir(path), name.prefix+"@"+unitSuffix)
		if tsrc, terr := readFile(tmpl); terr == nil {
			return decodeUnit(tmpl, name, tsrc, nodeHas)
		} else if !errors.Is(terr, fs.ErrNotExist) {
			return nil, nil, fmt.Errorf("reading template unit %s for %s: %w", tmpl, name.full, terr)
		}
		return nil, nil, fmt.Errorf("reading job file %s: neither it nor its template %s exists", path, tmpl)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading job file %s: %w", path, err)
	}
	return decodeUnit(path, name, src, nodeHas)
}

// unitOption is one Key=Value of the file, with the line it starts on.
type unitOption struct {
	section, key, value string
	at                  pos
}

// unitLine is where indexUnit found an option.
type unitLine struct {
	section, key string
	line         int
}

// indexUnit finds the line of every option in src, following the rules of
// go-systemd's lexer (comments with '#' or ';', values continued by a
// trailing backslash, a comment continued the same way). It also reports
// what that lexer refuses without a line (a line without '=') or skips in
// silence (text before the first section).
func indexUnit(src []byte) ([]unitLine, []located) {
	var out []unitLine
	var bad []located
	lines := strings.Split(string(src), "\n")
	section, inSection := "", false
	for i := 0; i < len(lines); i++ {
		n := i + 1
		raw := strings.TrimSuffix(lines[i], "\r")
		text := strings.TrimSpace(raw)
		// continued skips the lines a trailing backslash continues. The
		// lexer strips one trailing space before looking for it on a
		// comment line, none on an option line.
		continued := func(comment bool) {
			for i+1 < len(lines) {
				if comment {
					raw = strings.TrimSuffix(raw, " ")
				}
				if !strings.HasSuffix(raw, `\`) {
					return
				}
				i++
				raw = strings.TrimSuffix(lines[i], "\r")
				if strings.TrimSpace(raw) == "" {
					break
				}
			}
		}
		switch {
		case text == "":
		case text[0] == '#' || text[0] == ';':
			continued(true)
		case text[0] == '[':
			end := strings.IndexByte(text, ']')
			if end < 0 {
				bad = append(bad, located{at: pos{line: n}, msg: fmt.Sprintf("section header %q has no closing ']'", text)})
				return out, bad
			}
			if rest := strings.TrimSpace(text[end+1:]); rest != "" {
				bad = append(bad, located{at: pos{line: n}, msg: fmt.Sprintf("unexpected %q after the section header", rest)})
			}
			section, inSection = text[1:end], true
		case !inSection:
			bad = append(bad, located{at: pos{line: n}, msg: "this line is outside any section; put options under [Service] or [X-Fleet]"})
		default:
			key, _, ok := strings.Cut(text, "=")
			if !ok {
				bad = append(bad, located{at: pos{line: n}, msg: fmt.Sprintf("expected Key=Value, got %q", text)})
				continue
			}
			out = append(out, unitLine{section: section, key: strings.TrimSpace(key), line: n})
			if strings.TrimSpace(text[len(key)+1:]) != "" {
				continued(false)
			}
		}
	}
	return out, bad
}

// readUnitOptions parses src into options with their lines; ok is false
// when the file cannot be read as a unit file at all.
func readUnitOptions(src []byte, c *collector) (opts []unitOption, ok bool) {
	index, bad := indexUnit(src)
	c.problems = append(c.problems, bad...)
	parsed, err := unit.DeserializeOptions(bytes.NewReader(src))
	if err != nil {
		if len(bad) == 0 {
			c.add(pos{}, "", "cannot parse the unit file: %v", err)
		}
		return nil, false
	}
	// The nth option of a section and key is on the nth line of the index
	// that sets it (looked up by key: scanning the index for each option
	// took seconds for a file of 100,000 lines).
	lines := map[[2]string][]int{}
	for _, l := range index {
		k := [2]string{l.section, l.key}
		lines[k] = append(lines[k], l.line)
	}
	seen := map[[2]string]int{}
	var out []unitOption
	for _, o := range parsed {
		k := [2]string{o.Section, o.Name}
		nth := seen[k]
		seen[k]++
		var at pos
		if ls := lines[k]; nth < len(ls) {
			at = pos{line: ls[nth]}
		}
		// systemd joins a continued line to the next with a space.
		v := strings.TrimSpace(strings.ReplaceAll(o.Value, "\\\n", " "))
		out = append(out, unitOption{section: o.Section, key: o.Name, value: v, at: at})
	}
	return out, true
}

// Keys drover implements in each section (unitkeys.go has those it
// accepts and ignores, with the reason); docs/fleet.md lists them all.
var (
	unitKeys = []string{"Description", "Documentation", "StartLimitBurst", "StartLimitIntervalSec"}
	// StartLimitInterval= and StartLimitBurst= were [Service] keys before
	// systemd 229, in the days of fleet.
	serviceKeys = []string{"Type", "ExecStart", "ExecStartPre", "ExecStop", "ExecStopPost", "Environment",
		"WorkingDirectory", "User", "Restart", "RestartSec", "TimeoutStopSec", "TimeoutStartSec", "TimeoutSec",
		"KillMode", "KillSignal", "SendSIGKILL", "StartLimitInterval", "StartLimitBurst"}
	fleetKeys    = []string{"MachineID", "MachineOf", "MachineMetadata", "Conflicts", "Replaces", "Global"}
	fleetAliases = map[string]string{
		// fleet's older names, still accepted by fleet 1.0.
		"X-ConditionMachineID":       "MachineID",
		"X-ConditionMachineOf":       "MachineOf",
		"X-ConditionMachineMetadata": "MachineMetadata",
		"X-Conflicts":                "Conflicts",
	}
)

// unitDecoder collects what the options say before the job is built:
// exec lines wait for every Environment= so that $VAR can be expanded.
type unitDecoder struct {
	c    *collector
	at   positions
	name unitName

	typ                       *unitOption
	exec                      []unitOption // ExecStart, after resets
	prestart                  []unitOption
	stop                      []unitOption
	poststop                  []unitOption
	env                       map[string]string
	envAt                     pos
	workDir, user             *unitOption
	restart, restartSec       *unitOption
	timeoutStop               *unitOption
	startLimitBurst           *unitOption
	startLimitInterval        *unitOption
	description               string
	descAt                    pos
	documentation             []string
	installWarned             bool
	machineID                 *unitOption
	global                    *unitOption
	metaKeys                  []string // MachineMetadata keys in first-seen order
	metaValues                map[string][]string
	metaAt                    map[string]pos
	machineOf, conflicts, rep []unitOption
	badSections               map[string]bool
}

// decodeUnit decodes src, the text of the unit file at file, as the unit
// named name (an instance may be read from its template's file).
func decodeUnit(file string, name unitName, src []byte, nodeHas func(string) bool) (*spec.Job, spec.Problems, error) {
	c := newCollector(file, nodeHas)
	if !strings.HasSuffix(name.full, unitSuffix) {
		c.add(pos{}, "", "a unit file's name must end in %s, got %q", unitSuffix, name.full)
		return nil, nil, c.result()
	}
	if name.template() {
		c.add(pos{}, "", "%s is a template unit; run an instance such as %s@1%s", name.full, name.prefix, unitSuffix)
		return nil, nil, c.result()
	}
	// A unit is read line by line and does not nest: only its size is
	// bounded.
	if err := inputlimit.Size(len(src)); err != nil {
		addLimit(c, err, false)
		return nil, nil, failed(c)
	}
	d := &unitDecoder{c: c, at: positions{}, name: name, env: map[string]string{},
		metaValues: map[string][]string{}, metaAt: map[string]pos{}, badSections: map[string]bool{}}
	opts, ok := readUnitOptions(src, c)
	if !ok {
		// Nothing in an unreadable file can be trusted; its syntax is the
		// problem to fix first.
		return nil, nil, c.result()
	}
	for _, o := range opts {
		if !literal(o) {
			o.value = d.specifiers(o)
		}
		d.option(o)
	}
	job, err := finish(d.build(), c, d.at)
	return job, c.warningsResult(), err
}

// ignored reports whether o is an ordinary systemd key of [Unit] or
// [Service] that drover accepts without implementing it.
func ignored(o unitOption) bool {
	why, _ := ignoredWhy(o.section, o.key)
	return why != ""
}

// literal reports whether the option's value is kept as written, without
// expanding specifiers: what drover ignores (all of [Install], and the
// ordinary systemd keys it does not implement), whatever it holds, and
// Documentation=, URLs whose %-escapes systemd does not expand either.
func literal(o unitOption) bool {
	switch o.section {
	case "Install":
		return true
	case "Unit":
		return o.key == "Documentation" || !slices.Contains(unitKeys, o.key) && ignored(o)
	case "Service":
		return !slices.Contains(serviceKeys, o.key) && ignored(o)
	}
	return false
}

func (d *unitDecoder) add(at pos, format string, args ...any) { d.c.add(at, "", format, args...) }

// specifiers expands %n %N %p %i and %% in an option's value, as fleet did.
// Other specifiers would be expanded by systemd on the host (%H, %m, ...);
// drover does not know them when reading the file, so they are refused
// rather than passed on as text.
func (d *unitDecoder) specifiers(o unitOption) string {
	v := o.value
	if !strings.Contains(v, "%") {
		return v
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] != '%' {
			b.WriteByte(v[i])
			continue
		}
		if i+1 == len(v) {
			d.add(o.at, "%s= ends in a lone %%; write %%%% for a literal %%", o.key)
			break
		}
		i++
		switch v[i] {
		case '%':
			b.WriteByte('%')
		case 'n':
			b.WriteString(d.name.full)
		case 'N':
			// fleet's own expansion, in [X-Fleet], is the name without
			// its suffix; systemd's, elsewhere, the unescaped full name.
			if o.section == "X-Fleet" {
				b.WriteString(d.name.job())
			} else {
				b.WriteString(unit.UnitNameUnescape(d.name.full))
			}
		case 'p':
			b.WriteString(d.name.prefix)
		case 'i':
			b.WriteString(d.name.instance)
		default:
			d.add(o.at, "%s=: specifier %%%c is not supported; drover expands %%n, %%N, %%p and %%i (write %%%% for a literal %%)", o.key, v[i])
		}
	}
	return b.String()
}

func (d *unitDecoder) option(o unitOption) {
	switch o.section {
	case "Unit":
		d.unit(o)
	case "Service":
		d.service(o)
	case "X-Fleet":
		d.fleet(o)
	case "Install":
		// [Install] says which host target pulls the unit in; drover
		// starts it when it is run. fleet ignored it as well.
		if !d.installWarned {
			d.installWarned = true
			d.c.warn(o.at, "[Install] is ignored, as fleet ignored it: drover starts the job when it is run (drover run), on the nodes its scheduler picks")
		}
	default:
		if !d.badSections[o.section] {
			d.badSections[o.section] = true
			d.add(o.at, "section [%s] is not supported; drover reads [Unit], [Service] and [X-Fleet] (and ignores [Install])", o.section)
		}
	}
}

// unsupported handles a key of section that drover does not implement:
// an ordinary systemd key is accepted with a warning that says what
// drover does instead, a likely typo of a key drover knows is refused, and
// any other key is accepted with a warning, as systemd accepts keys it
// does not know. In [X-Fleet] (known is fleetKeys), fleet refused keys it
// did not know, and so does drover.
func (d *unitDecoder) unsupported(o unitOption, known []string) {
	fleet := o.section == "X-Fleet"
	why, family := ignoredWhy(o.section, o.key)
	if fleet {
		why = ""
	}
	if why != "" && !family {
		d.c.warn(o.at, "%s= in [%s]: %s", o.key, o.section, why)
		return
	}
	if s := suggest.Closest(o.key, known); s != "" {
		d.add(o.at, "unknown key %s= in [%s]; did you mean %s=?", o.key, o.section, s)
		return
	}
	switch {
	case why != "":
		d.c.warn(o.at, "%s= in [%s]: %s", o.key, o.section, why)
		return
	case fleet:
		d.add(o.at, "%s= in [%s] is not an option fleet or drover knows; remove it (docs/fleet.md lists the [X-Fleet] options)", o.key, o.section)
		return
	}
	d.c.warn(o.at, "%s= in [%s] is not a key drover knows; ignored, as systemd ignores keys it does not know (docs/fleet.md lists the keys drover reads)", o.key, o.section)
}

func (d *unitDecoder) unit(o unitOption) {
	one := func(p **unitOption) { c := o; *p = &c }
	switch o.key {
	case "Description":
		d.description, d.descAt = o.value, o.at
	case "Documentation":
		if o.value == "" {
			d.documentation = nil
		} else {
			d.documentation = append(d.documentation, strings.Fields(o.value)...)
		}
	case "StartLimitBurst":
		one(&d.startLimitBurst)
	case "StartLimitIntervalSec":
		one(&d.startLimitInterval)
	default:
		d.unsupported(o, unitKeys)
	}
}

func (d *unitDecoder) service(o unitOption) {
	one := func(p **unitOption) { c := o; *p = &c }
	switch o.key {
	case "Type":
		one(&d.typ)
	case "ExecStart":
		if o.value == "" { // an empty assignment resets the list, as in systemd
			d.exec = nil
		} else {
			d.exec = append(d.exec, o)
		}
	case "ExecStartPre":
		if o.value == "" {
			d.prestart = nil
		} else {
			d.prestart = append(d.prestart, o)
		}
	case "ExecStop":
		if o.value == "" {
			d.stop = nil
		} else {
			d.stop = append(d.stop, o)
		}
	case "ExecStopPost":
		if o.value == "" {
			d.poststop = nil
		} else {
			d.poststop = append(d.poststop, o)
		}
	case "Environment":
		if o.value == "" {
			clear(d.env)
			return
		}
		words, err := splitWords(o.value)
		if err != nil {
			d.add(o.at, "Environment=: %v", err)
			return
		}
		if d.envAt.line == 0 {
			d.envAt = o.at
		}
		for _, w := range words {
			k, v, ok := strings.Cut(w, "=")
			if !ok || k == "" {
				d.add(o.at, "Environment=: %q is not NAME=value", w)
				continue
			}
			d.env[k] = v
		}
	case "WorkingDirectory":
		one(&d.workDir)
	case "User":
		one(&d.user)
	case "Restart":
		one(&d.restart)
	case "RestartSec":
		one(&d.restartSec)
	case "TimeoutStopSec":
		one(&d.timeoutStop)
	case "TimeoutSec":
		// Both timeouts; an explicit TimeoutStopSec= wins wherever it is.
		if d.timeoutStop == nil || d.timeoutStop.key == "TimeoutSec" {
			one(&d.timeoutStop)
		}
		d.startTimeout(o)
	case "TimeoutStartSec":
		d.startTimeout(o)
	case "StartLimitBurst":
		one(&d.startLimitBurst)
	case "StartLimitInterval":
		one(&d.startLimitInterval)
	case "KillMode":
		switch o.value {
		case "control-group":
			// What drover does: every process of the task gets the signals.
		case "mixed", "process", "none":
			d.c.warn(o.at, "KillMode=%s: drover stops every process of the task, the main one and the others alike, as KillMode=control-group does", o.value)
		default:
			d.add(o.at, "KillMode=%s is not a kill mode; use control-group, mixed, process or none", o.value)
		}
	case "KillSignal":
		if s := strings.TrimPrefix(strings.ToUpper(o.value), "SIG"); s != "TERM" && s != "15" {
			d.c.warn(o.at, "KillSignal=%s: drover stops a task with SIGTERM (then SIGKILL after TimeoutStopSec=), not %s", o.value, o.value)
		}
	case "SendSIGKILL":
		if v, ok := parseUnitBool(o.value); !ok || !v {
			d.c.warn(o.at, "SendSIGKILL=%s: drover always sends SIGKILL to a task still running TimeoutStopSec= after SIGTERM", o.value)
		}
	default:
		d.unsupported(o, serviceKeys)
	}
}

// startTimeout warns about a start timeout drover does not apply. drover
// does not wait for a start to finish: a task runs once its process has
// started. fleet units set it to 0 (none) for slow image pulls, which is
// what drover does.
func (d *unitDecoder) startTimeout(o unitOption) {
	if o.value == "0" || o.value == "infinity" {
		return
	}
	d.c.warn(o.at, "%s=%s: drover does not time out a start: a task runs once its process has started (each ExecStartPre= command may take 5 minutes)", o.key, o.value)
}

func (d *unitDecoder) fleet(o unitOption) {
	key := o.key
	if k, ok := fleetAliases[key]; ok {
		key = k
	}
	if key == "MachineBootID" || key == "X-ConditionMachineBootID" {
		d.add(o.at, "%s= is not supported: drover nodes have no boot ID; use MachineID= with a node ID from `drover nodes`", o.key)
		return
	}
	if !slices.Contains(fleetKeys, key) {
		d.unsupported(o, fleetKeys)
		return
	}
	if o.value == "" {
		d.add(o.at, "%s= needs a value", o.key)
		return
	}
	if key == "MachineID" || key == "Global" {
		c := o
		if key == "MachineID" {
			d.machineID = &c
		} else {
			d.global = &c
		}
		return
	}
	words, err := splitWords(o.value)
	if err != nil {
		d.add(o.at, "%s=: %v", o.key, err)
		return
	}
	for _, w := range words {
		wo := o
		wo.value = w
		switch key {
		case "MachineOf":
			d.machineOf = append(d.machineOf, wo)
		case "Conflicts":
			d.conflicts = append(d.conflicts, wo)
		case "Replaces":
			d.rep = append(d.rep, wo)
		case "MachineMetadata":
			d.metadata(wo)
		}
	}
}

// metadata records one k=v of MachineMetadata. fleet's rule: values of one
// key are alternatives, different keys must all match.
func (d *unitDecoder) metadata(o unitOption) {
	k, v, ok := strings.Cut(o.value, "=")
	switch {
	case !ok || k == "" || v == "":
		d.add(o.at, "%s=: %q is not key=value", o.key, o.value)
		return
	case strings.ContainsAny(k, "!<>"):
		d.add(o.at, "%s=: %q: only key=value is supported, not other comparisons; use a drover job file's constraint for those", o.key, o.value)
		return
	case strings.Contains(v, ","):
		d.add(o.at, "%s=: value %q contains ','; a node's meta value cannot be matched against a list item that contains ','", o.key, v)
		return
	}
	if _, seen := d.metaValues[k]; !seen {
		d.metaKeys = append(d.metaKeys, k)
		d.metaAt[k] = o.at
	}
	if !slices.Contains(d.metaValues[k], v) {
		d.metaValues[k] = append(d.metaValues[k], v)
	}
}

// build turns what was collected into the job.
func (d *unitDecoder) build() *spec.Job {
	name := d.name.job()
	jobType := spec.JobService
	if d.typ != nil {
		switch d.typ.value {
		case "simple", "exec":
		case "oneshot":
			jobType = spec.JobBatch
			d.at["type"] = d.typ.at
		default:
			d.add(d.typ.at, "Type=%s is not supported; use simple or exec (the program stays in the foreground) or oneshot (it runs to completion: a batch job)", d.typ.value)
		}
	}
	if d.global != nil {
		g, ok := parseUnitBool(d.global.value)
		switch {
		case !ok:
			d.add(d.global.at, "%s=%s is not a boolean; use true or false", d.global.key, d.global.value)
		case g && jobType == spec.JobBatch:
			d.add(d.global.at, "Global=true cannot be combined with Type=oneshot: a system job runs on every node until stopped")
		case g:
			jobType = spec.JobSystem
			d.at["type"] = d.global.at
		}
	}
	if msg := spec.CheckName(name); msg != "" {
		// The group and the task carry the same name; one message is enough.
		d.add(pos{}, "job name %s; the job is named after the unit file, so rename the file", msg)
		for _, f := range []string{"name", "groups[0].name", "groups[0].tasks[0].name"} {
			d.c.markReported(f)
		}
	}
	task := &spec.Task{Name: name, Driver: "exec"}
	job := &spec.Job{Name: name, Type: jobType, Groups: []*spec.Group{{Name: name, Count: 1, Tasks: []*spec.Task{task}}}}
	if d.description != "" || len(d.documentation) > 0 {
		job.Meta = map[string]string{}
		d.at["meta"] = d.descAt
	}
	if d.description != "" {
		job.Meta["description"] = d.description
	}
	if len(d.documentation) > 0 {
		job.Meta["documentation"] = strings.Join(d.documentation, " ")
	}
	const tp = "groups[0].tasks[0]"
	if len(d.env) > 0 {
		task.Env = d.env
		d.at[tp+".env"] = d.envAt
	}

	switch {
	case len(d.exec) == 0:
		d.add(pos{}, "the unit has no ExecStart=; add one under [Service], such as ExecStart=/usr/bin/myserver --port 8080")
		d.c.markReported(tp + ".config")
	case len(d.exec) > 1 && jobType != spec.JobBatch:
		d.add(d.exec[1].at, "only Type=oneshot units may have more than one ExecStart=; run the others with ExecStartPre=")
		d.c.markReported(tp + ".config")
	default:
		last := d.exec[len(d.exec)-1]
		d.at[tp+".config"] = last.at
		if cmd, ok := d.command(last, false); ok {
			task.Config.Command, task.Config.Args = cmd.Command, cmd.Args
		} else {
			d.c.markReported(tp + ".config")
		}
	}
	// A oneshot's ExecStart lines run one after another, each to success:
	// exactly what prestart commands are.
	pre := d.prestart
	if len(d.exec) > 1 && jobType == spec.JobBatch {
		pre = append(slices.Clone(pre), d.exec[:len(d.exec)-1]...)
	}
	for _, o := range pre {
		if cmd, ok := d.command(o, o.key == "ExecStartPre"); ok {
			task.Config.Prestart = append(task.Config.Prestart, cmd)
		}
	}
	if len(d.stop) > 1 {
		d.add(d.stop[1].at, "only one ExecStop= is supported; combine the commands in a script")
	} else if len(d.stop) == 1 {
		if cmd, ok := d.command(d.stop[0], true); ok {
			task.Config.Stop = &cmd
		}
	}
	for _, o := range d.poststop {
		if cmd, ok := d.command(o, true); ok {
			task.Config.Poststop = append(task.Config.Poststop, cmd)
		}
	}
	if o := d.workDir; o != nil {
		if !filepath.IsAbs(o.value) {
			d.add(o.at, "WorkingDirectory=%s must be an absolute path", o.value)
		}
		task.Config.WorkDir = o.value
	}
	if o := d.user; o != nil {
		task.Config.User = o.value
	}
	task.Restart = d.restartPolicy(jobType)
	if o := d.timeoutStop; o != nil {
		if o.value == "0" || o.value == "infinity" {
			d.c.warn(o.at, "%s=%s: drover does not wait for a stop forever; it sends SIGKILL after its default %s", o.key, o.value, spec.DefaultKillTimeout)
		} else if t, ok := d.timespan(*o); ok {
			if t <= 0 {
				d.add(o.at, "%s= must be more than 0; drover always ends a task that does not stop", o.key)
			}
			task.KillTimeout = spec.Duration(t)
		}
	}
	d.checkFleetRules(jobType == spec.JobSystem)
	job.Constraints = d.jobConstraints()
	return job
}

func (d *unitDecoder) restartPolicy(jobType spec.JobType) *spec.RestartPolicy {
	delay := unitRestartDelay
	if o := d.restartSec; o != nil {
		if t, ok := d.timespan(*o); ok {
			delay = t
		}
		d.at["groups[0].tasks[0].restart"] = o.at
	}
	mode := "no" // systemd's default
	if o := d.restart; o != nil {
		mode = o.value
		d.at["groups[0].tasks[0].restart"] = o.at
	}
	interval, burst := unitStartLimitInterval, unitStartLimitBurst
	if o := d.startLimitInterval; o != nil {
		if t, ok := d.timespan(*o); ok && t > 0 {
			interval = t
		} else if ok {
			d.c.warn(o.at, "%s=%s: drover always limits restarts; it keeps its %s", o.key, o.value, unitStartLimitInterval)
		}
	}
	if o := d.startLimitBurst; o != nil {
		if n, err := strconv.Atoi(o.value); err != nil || n < 1 {
			d.add(o.at, "%s=%s: give a number of starts, 1 or more", o.key, o.value)
		} else {
			burst = n
		}
	}
	none := 0 // systemd restarts nothing unless Restart= says so
	p := &spec.RestartPolicy{Attempts: &none, Interval: spec.Duration(interval), Delay: spec.Duration(delay)}
	switch mode {
	case "no":
		p.Mode = spec.RestartFail
	case "always", "on-failure", "on-abnormal", "on-abort", "on-watchdog":
		if mode == "always" && jobType == spec.JobBatch {
			d.add(d.restart.at, "Restart=always cannot be used with Type=oneshot (systemd refuses it too); use Restart=on-failure")
		}
		p.Attempts, p.Mode = &burst, spec.RestartDelay
	default:
		d.add(d.restart.at, "Restart=%s is not supported; use no, always, on-failure, on-abnormal, on-abort or on-watchdog", mode)
	}
	return p
}

// fleetExclusive are the pairs of [X-Fleet] options fleet refuses in one
// unit, with what to do instead. Global= counts only when true.
var fleetExclusive = []struct{ a, b, fix string }{
	{"MachineID", "MachineOf", "MachineID= already names the machine; keep one of them"},
	{"MachineID", "Conflicts", "on the one machine MachineID= names, Conflicts= can only keep the unit from running; keep one of them"},
	{"MachineID", "Replaces", "on the one machine MachineID= names, Replaces= has nowhere to send the units it replaces; keep one of them"},
	{"MachineID", "Global", "a global unit runs on every machine; remove one of them"},
	{"Global", "MachineOf", "a global unit runs on every machine, not only beside another unit; remove one of them"},
	{"Global", "Replaces", "a global unit runs on every machine and cannot take another unit's place; remove one of them"},
	{"Conflicts", "Replaces", "Replaces= already keeps this unit and the matching units apart; keep one of them"},
}

// checkFleetRules refuses what fleet's unit validation refuses: the pairs
// of fleetExclusive, and a MachineOf= unit that the unit's own Conflicts=
// or Replaces= keeps it away from ("unresolvable requirements").
func (d *unitDecoder) checkFleetRules(global bool) {
	first := func(os []unitOption) *unitOption {
		if len(os) == 0 {
			return nil
		}
		return &os[0]
	}
	written := map[string]*unitOption{"MachineID": d.machineID, "MachineOf": first(d.machineOf),
		"Conflicts": first(d.conflicts), "Replaces": first(d.rep)}
	if global {
		written["Global"] = d.global
	}
	for _, r := range fleetExclusive {
		a, b := written[r.a], written[r.b]
		if a == nil || b == nil {
			continue
		}
		if b.at.line < a.at.line {
			a, b = b, a
		}
		d.add(b.at, "%s cannot be used with %s (line %d), as in fleet: %s", fleetName(*b), fleetName(*a), a.at.line, r.fix)
	}
	for _, m := range d.machineOf {
		for _, o := range slices.Concat(d.conflicts, d.rep) {
			rule := spec.Constraint{Operator: spec.OpConflicts, Value: jobName(o.value)}
			if rule.MatchJob(jobName(m.value)) {
				d.add(m.at, "unresolvable requirements: %s=%s needs the machine of %s, but %s=%s (line %d) keeps this unit off every machine that runs it; remove one of them",
					m.key, m.value, m.value, o.key, o.value, o.at.line)
			}
		}
	}
}

// fleetName is how a refusal names an [X-Fleet] option: "MachineOf=" as
// written (or its older name), "Global=true" with the value that made it
// count.
func fleetName(o unitOption) string {
	if o.key == "Global" {
		return o.key + "=" + o.value
	}
	return o.key + "="
}

func (d *unitDecoder) jobConstraints() []*spec.Constraint {
	var cs []*spec.Constraint
	add := func(at pos, c *spec.Constraint) {
		d.at[fmt.Sprintf("constraints[%d]", len(cs))] = at
		cs = append(cs, c)
	}
	if o := d.machineID; o != nil {
		add(o.at, &spec.Constraint{Attribute: "${node.id}", Operator: spec.OpEqual, Value: o.value})
	}
	for _, o := range d.machineOf {
		add(o.at, &spec.Constraint{Operator: spec.OpColocate, Value: d.jobOf(o)})
	}
	for _, k := range d.metaKeys {
		vs := d.metaValues[k]
		c := &spec.Constraint{Attribute: "${meta." + k + "}", Operator: spec.OpEqual, Value: vs[0]}
		if len(vs) > 1 {
			c.Operator, c.Value = spec.OpSetContainsAny, strings.Join(vs, ",")
		}
		add(d.metaAt[k], c)
	}
	for _, o := range d.conflicts {
		add(o.at, &spec.Constraint{Operator: spec.OpConflicts, Value: d.jobOf(o)})
	}
	for _, o := range d.rep {
		add(o.at, &spec.Constraint{Operator: spec.OpReplaces, Value: d.jobOf(o)})
	}
	return cs
}

// jobOf turns a unit name or glob into a job name or glob: "apache@1.service"
// is job "apache@1", and "apache*" still matches it. Only services are
// jobs, so another unit type can never match.
func (d *unitDecoder) jobOf(o unitOption) string {
	v := o.value
	if ext := filepath.Ext(v); slices.Contains(otherUnitTypes, ext) {
		d.add(o.at, "%s=%s names a %s unit; drover jobs are .service units only", o.key, v, ext)
	}
	return jobName(v)
}

// jobName is the job name (or glob) of a unit name (or glob).
func jobName(unit string) string { return strings.TrimSuffix(unit, unitSuffix) }

var otherUnitTypes = []string{".socket", ".timer", ".path", ".mount", ".automount", ".device", ".target", ".slice", ".scope", ".swap"}

// command reads an Exec line: systemd's prefixes, word splitting, and
// $VAR expansion from the unit's Environment=. ignorable says whether the
// '-' prefix (ignore the exit status) can be honoured here.
func (d *unitDecoder) command(o unitOption, ignorable bool) (spec.Command, bool) {
	v := o.value
	ignoreFail, noExpand := false, false
	for len(v) > 0 && strings.ContainsRune("-@:+!", rune(v[0])) {
		switch v[0] {
		case '-':
			ignoreFail = true
		case ':':
			noExpand = true
		case '@':
			d.add(o.at, "%s=: the '@' prefix (a separate argv[0]) is not supported; remove it and the argv[0] word after the program", o.key)
			return spec.Command{}, false
		default:
			d.add(o.at, "%s=: the %q prefix (privileged execution) is not supported; drover runs the command as User= or as the agent's user", o.key, v[0])
			return spec.Command{}, false
		}
		v = v[1:]
	}
	if ignoreFail && !ignorable {
		d.add(o.at, "%s=: the '-' prefix (ignore the exit status) is not supported on ExecStart=; make the program exit 0, or wrap it: /bin/sh -c '... || true'", o.key)
		return spec.Command{}, false
	}
	words, err := splitWords(v)
	if err != nil {
		d.add(o.at, "%s=: %v", o.key, err)
		return spec.Command{}, false
	}
	if slices.Contains(words, ";") {
		d.add(o.at, "%s=: several commands on one line separated by ';' are not supported; write one %s= line for each", o.key, o.key)
		return spec.Command{}, false
	}
	if !noExpand {
		var missing []string
		words, missing = expandVars(words, d.env)
		if len(missing) > 0 {
			d.add(o.at, "%s=: %s; systemd would expand %s to nothing, and drover expands only variables the unit sets. Set %s with Environment=, or write $$%s to pass a literal $ on to a shell",
				o.key, notSet(missing), pick(len(missing), "it", "them"), pick(len(missing), "it", "them"), missing[0])
			return spec.Command{}, false
		}
	}
	if len(words) == 0 || words[0] == "" {
		d.add(o.at, "%s= has no program to run", o.key)
		return spec.Command{}, false
	}
	cmd := spec.Command{Command: words[0], Args: words[1:]}
	if ignoreFail && o.key == "ExecStartPre" {
		// A failed prestart fails the task; "|| true" through sh keeps
		// the words exactly as they are ($0 and "$@" are not re-split).
		cmd = spec.Command{Command: "/bin/sh", Args: append([]string{"-c", `"$0" "$@" || true`}, words...)}
	}
	// On ExecStop a '-' changes nothing: the stop signal follows however
	// the stop command ends.
	if len(cmd.Args) == 0 {
		cmd.Args = nil
	}
	return cmd, true
}

// notSet says which variables are not set: "$i is not set", "$i and $HOME
// are not set".
func notSet(names []string) string {
	vars := make([]string, len(names))
	for i, n := range names {
		vars[i] = "$" + n
	}
	if len(vars) == 1 {
		return vars[0] + " is not set"
	}
	return strings.Join(vars[:len(vars)-1], ", ") + " and " + vars[len(vars)-1] + " are not set"
}

func pick(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// splitWords splits a value into words the way systemd does for command
// lines and lists: whitespace separates, single and double quotes group
// (also inside a word: a"b c" is one word), and C escapes (\n \t \\ \"
// \' \s for a space, \xHH) are undone.
func splitWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote byte
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == '\\':
			if i+1 == len(s) {
				return nil, errors.New("the value ends in a lone backslash")
			}
			i++
			switch e := s[i]; e {
			case 'n':
				cur.WriteByte('\n')
			case 't':
				cur.WriteByte('\t')
			case 'r':
				cur.WriteByte('\r')
			case 's', ' ':
				cur.WriteByte(' ')
			case '\\', '"', '\'', ';':
				cur.WriteByte(e)
			case 'x':
				if i+2 >= len(s) {
					return nil, errors.New(`\x needs two hex digits`)
				}
				n, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
				if err != nil {
					return nil, fmt.Errorf(`bad escape \x%s`, s[i+1:i+3])
				}
				cur.WriteByte(byte(n))
				i += 2
			default:
				return nil, fmt.Errorf(`unknown escape \%c; write \\ for a backslash`, e)
			}
			inWord = true
		case quote != 0:
			if ch == quote {
				quote = 0
			} else {
				cur.WriteByte(ch)
			}
		case ch == '"' || ch == '\'':
			quote, inWord = ch, true
		case ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(ch)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("a %c quote is not closed", quote)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// expandVars does systemd's variable expansion on command words: a word
// that is exactly $NAME becomes the value's whitespace-separated words;
// ${NAME}, and $NAME inside a word, become the value; $$ is a '$'. It
// returns the names used but not in env, in order, without repeats.
func expandVars(words []string, env map[string]string) ([]string, []string) {
	var out, missing []string
	miss := func(n string) {
		if !slices.Contains(missing, n) {
			missing = append(missing, n)
		}
	}
	for _, w := range words {
		if n, ok := strings.CutPrefix(w, "$"); ok && n != "" && varNameLen(n) == len(n) {
			v, set := env[n]
			if !set {
				miss(n)
			}
			out = append(out, strings.Fields(v)...)
			continue
		}
		var b strings.Builder
		for i := 0; i < len(w); i++ {
			if w[i] != '$' || i+1 == len(w) {
				b.WriteByte(w[i])
				continue
			}
			rest := w[i+1:]
			switch {
			case rest[0] == '$':
				b.WriteByte('$')
				i++
			case rest[0] == '{':
				end := strings.IndexByte(rest, '}')
				if end < 0 {
					b.WriteByte('$')
					continue
				}
				n := rest[1:end]
				if v, set := env[n]; set {
					b.WriteString(v)
				} else {
					miss(n)
				}
				i += end + 1
			case varNameLen(rest) > 0:
				n := rest[:varNameLen(rest)]
				if v, set := env[n]; set {
					b.WriteString(v)
				} else {
					miss(n)
				}
				i += len(n)
			default:
				b.WriteByte('$')
			}
		}
		out = append(out, b.String())
	}
	return out, missing
}

// varNameLen is the length of the variable name s starts with.
func varNameLen(s string) int {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return i
		}
	}
	return len(s)
}

// parseUnitBool reads a boolean as systemd does (fleet's Global= took
// the same true values).
func parseUnitBool(s string) (v, ok bool) {
	switch strings.ToLower(s) {
	case "1", "yes", "y", "true", "t", "on":
		return true, true
	case "0", "no", "n", "false", "f", "off":
		return false, true
	}
	return false, false
}

// timespan parses a systemd time span: "100ms", "5" (seconds), "1min 30s".
func (d *unitDecoder) timespan(o unitOption) (time.Duration, bool) {
	t, err := parseTimespan(o.value)
	if err != nil {
		d.add(o.at, "%s=%s: %v", o.key, o.value, err)
		return 0, false
	}
	return t, true
}

var timespanUnits = map[string]time.Duration{
	"us": time.Microsecond, "usec": time.Microsecond,
	"ms": time.Millisecond, "msec": time.Millisecond,
	"": time.Second, "s": time.Second, "sec": time.Second, "second": time.Second, "seconds": time.Second,
	"m": time.Minute, "min": time.Minute, "minute": time.Minute, "minutes": time.Minute,
	"h": time.Hour, "hr": time.Hour, "hour": time.Hour, "hours": time.Hour,
	"d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
}

func parseTimespan(s string) (time.Duration, error) {
	if s == "infinity" {
		return 0, errors.New("infinity is not supported; give a duration such as 30s")
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, errors.New("needs a duration such as 5s or 100ms")
	}
	var total time.Duration
	for s != "" {
		n := 0
		for n < len(s) && (s[n] >= '0' && s[n] <= '9' || s[n] == '.') {
			n++
		}
		num := s[:n]
		s = strings.TrimLeft(s[n:], " ")
		u := 0
		for u < len(s) && (s[u] >= 'a' && s[u] <= 'z' || s[u] >= 'A' && s[u] <= 'Z') {
			u++
		}
		unitName := s[:u]
		s = strings.TrimLeft(s[u:], " ")
		f, err := strconv.ParseFloat(num, 64)
		scale, known := timespanUnits[unitName]
		if num == "" || err != nil || !known {
			return 0, errors.New("not a duration; write it like 5s, 100ms or 1min 30s")
		}
		total += time.Duration(f * float64(scale))
	}
	return total, nil
}
