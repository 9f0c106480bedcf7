package jobfile

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/drover-org/drover/internal/inputlimit"
	"github.com/drover-org/drover/internal/spec"
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
	// refused are names drover knows that this body does not take, with
	// why and what to do instead (a docker key in an exec task's config).
	refused map[string]string
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
var topSchema = bodySchema{members: map[string]member{"job": asBlock | repeated}}

// configSchema is what a config block may hold for driver: the keys it
// reads, and the other drivers' keys refused with the reason. With no
// driver (itself reported), every key is taken.
func configSchema(driver string) bodySchema {
	s := bodySchema{members: map[string]member{}, refused: map[string]string{}}
	for name, m := range configTree.body.members {
		if why := spec.ConfigKeyRefusal(driver, name); why != "" {
			s.refused[name] = why
		} else {
			s.members[name] = m
		}
	}
	return s
}

// homes says where a name drover knows does belong, for a name written in
// the wrong block ("count belongs in a group block").
var homes = map[string]string{
	"type": "job", "priority": "job", "group": "job", "datacenters": "job", "node_pool": "job",
	"count": "group", "task": "group",
	"driver": "task", "config": "task", "env": "task", "resources": "task", "kill_timeout": "task",
	"restart": "group or task", "reschedule": "job or group", "mode": "restart",
	"attempts": "restart or reschedule", "interval": "restart, reschedule or check", "delay": "restart or reschedule",
	"delay_function": "reschedule", "max_delay": "reschedule", "unlimited": "reschedule",
	"update": "job or group", "max_parallel": "update", "health_check": "update", "min_healthy_time": "update",
	"healthy_deadline": "update", "progress_deadline": "update", "auto_revert": "update", "canary": "update",
	"auto_promote": "update", "disconnect": "group", "stop_after": "disconnect", "rebalance": "group",
	"constraint": "job, group or task", "attribute": "constraint, affinity or spread",
	"operator": "constraint or affinity", "value": "constraint or affinity",
	"namespace": "job", "scoring": "job", "preempt": "job", "affinity": "job, group or task", "spread": "job or group",
	"weight": "affinity or spread", "target": "spread", "percent": "target",
	"network": "group", "port": "network", "static": "port", "to": "port",
	"service": "task", "tags": "service", "check": "service", "check_restart": "check",
	"path": "check", "timeout": "check", "grace": "check or check_restart", "limit": "check_restart",
	"image": "config", "entrypoint": "config", "labels": "config", "privileged": "config",
	"network_mode": "config", "pid_mode": "config", "volumes": "config",
	"cpu": "resources", "memory": "resources", "disk": "resources",
	"command": "config", "args": "config", "work_dir": "config", "user": "config", "prestart": "config", "stop": "config",
	"poststop": "config",
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

func decodeHCL(name string, src []byte) (*spec.Job, error) {
	c := newCollector(name)
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
	d := &hclDecoder{c: c, at: positions{}}
	job := d.file(body)
	if job == nil {
		return nil, failed(c)
	}
	return finish(job, c, d.at)
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
	return pos{line: r.Start.Line, col: r.Start.Column}
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
	c  *collector
	at positions
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
	attr  *hclsyntax.Attribute
	block *hclsyntax.Block
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
// written twice is reported and dropped, except job, group, task and
// constraint blocks, which repeat.
func (d *hclDecoder) content(body *hclsyntax.Body, s bodySchema, in, path string) []item {
	var all []item
	for name, a := range body.Attributes {
		all = append(all, item{name: name, attr: a})
	}
	for _, b := range body.Blocks {
		all = append(all, item{name: b.Type, block: b})
	}
	slices.SortFunc(all, func(a, b item) int { return a.nameRange().Start.Byte - b.nameRange().Start.Byte })

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
		case s.refused[it.name] != "":
			d.errAt(it.nameRange(), "%s", s.refused[it.name])
			d.c.markReported(join(path, it.name))
		case (unsupported[it.name] || slices.Contains(s.unsupported, it.name)) && isBlock:
			d.errAt(it.nameRange(), "%s blocks are not supported yet%s", it.name, insteadHint(it.name))
		case unsupported[it.name] || slices.Contains(s.unsupported, it.name):
			d.errAt(it.nameRange(), "%s is not supported yet %s%s", it.name, in, insteadHint(it.name))
		case it.name == "job":
			d.errAt(it.nameRange(), "job blocks belong at the top level of the file, not %s", in)
		case homes[it.name] != "":
			d.errAt(it.nameRange(), "%s belongs in %s block, not %s", it.name, withArticle(homes[it.name]), in)
		default:
			kind := "attribute"
			if isBlock {
				kind = "block"
			}
			d.errAt(it.nameRange(), "unknown %s %q %s; %s", kind, it.name, in, hint(it.name, s.names()))
			if sug := suggest(it.name, s.names()); sug != "" && labelled[sug].example == "" {
				d.c.markReported(join(path, sug))
			}
		}
	}
	return out
}

// label returns the label of a labelled block (a job's name, a port's
// label), recording its position as field.
func (d *hclDecoder) label(b *hclsyntax.Block, field string) string {
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
func (d *hclDecoder) noLabels(b *hclsyntax.Block) {
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
	var job *spec.Job
	var first hcl.Range
	for _, it := range d.content(body, topSchema, "at the top level", "") {
		if job != nil {
			d.errAt(it.block.TypeRange, "only one job block is allowed per file; the first is at %s", d.where(first))
			continue
		}
		first = it.block.TypeRange
		job = d.job(it.block)
	}
	if job == nil && len(d.c.problems) == before {
		d.errAt(body.SrcRange, "no job block; a job file needs a job \"name\" { ... } block")
	}
	return job
}

func (d *hclDecoder) job(b *hclsyntax.Block) *spec.Job {
	job := &spec.Job{}
	d.mark("", b.TypeRange)
	job.Name = d.label(b, "name")
	in := fmt.Sprintf("in job %q", job.Name)
	for _, it := range d.content(b.Body, bodyOf[spec.Job](), in, "") {
		switch it.name {
		case "type":
			if s, ok := d.str(it.attr, "type"); ok {
				job.Type = spec.JobType(s)
			}
		case "namespace":
			if s, ok := d.str(it.attr, "namespace"); ok {
				job.Namespace = s
			}
		case "datacenters":
			// An empty list is every datacenter, as no list is.
			if dcs := d.stringList(it.attr, "datacenters"); len(dcs) > 0 {
				job.Datacenters = dcs
			}
		case "node_pool":
			if s, ok := d.str(it.attr, "node_pool"); ok {
				job.NodePool = s
			}
		case "priority":
			if n, ok := d.int(it.attr, "priority"); ok {
				job.Priority = n
			}
		case "scoring":
			if s, ok := d.str(it.attr, "scoring"); ok {
				job.Scoring = spec.Scoring(s)
			}
		case "preempt":
			if v, ok := d.bool(it.attr, "preempt"); ok {
				job.Preempt = &v
			}
		case "affinity":
			job.Affinities = append(job.Affinities, d.affinity(it.block, fmt.Sprintf("affinities[%d]", len(job.Affinities)), fmt.Sprintf("in an affinity block of job %q", job.Name)))
		case "spread":
			job.Spreads = append(job.Spreads, d.spread(it.block, fmt.Sprintf("spreads[%d]", len(job.Spreads)), fmt.Sprintf("in a spread block of job %q", job.Name)))
		case "meta":
			job.Meta = d.stringMap(it, "meta")
		case "reschedule":
			job.Reschedule = d.reschedule(it.block, "reschedule", fmt.Sprintf("in the reschedule block of job %q", job.Name))
		case "update":
			job.Update = d.update(it.block, "update", fmt.Sprintf("in the update block of job %q", job.Name))
		case "constraint":
			job.Constraints = append(job.Constraints, d.constraint(it.block, fmt.Sprintf("constraints[%d]", len(job.Constraints)), fmt.Sprintf("in a constraint block of job %q", job.Name)))
		case "group":
			job.Groups = append(job.Groups, d.group(it.block, fmt.Sprintf("groups[%d]", len(job.Groups))))
		}
	}
	return job
}

func (d *hclDecoder) group(b *hclsyntax.Block, path string) *spec.Group {
	g := &spec.Group{Count: spec.DefaultCount}
	d.mark(path, b.TypeRange)
	g.Name = d.label(b, path+".name")
	in := fmt.Sprintf("in group %q", g.Name)
	for _, it := range d.content(b.Body, bodyOf[spec.Group](), in, path) {
		switch it.name {
		case "count":
			if n, ok := d.int(it.attr, path+".count"); ok {
				g.Count = n
			}
		case "restart":
			g.Restart = d.restart(it.block, path+".restart", fmt.Sprintf("in the restart block of group %q", g.Name))
		case "reschedule":
			g.Reschedule = d.reschedule(it.block, path+".reschedule", fmt.Sprintf("in the reschedule block of group %q", g.Name))
		case "update":
			g.Update = d.update(it.block, path+".update", fmt.Sprintf("in the update block of group %q", g.Name))
		case "disconnect":
			g.Disconnect = d.disconnect(it.block, path+".disconnect", fmt.Sprintf("in the disconnect block of group %q", g.Name))
		case "rebalance":
			if v, ok := d.bool(it.attr, path+".rebalance"); ok {
				g.Rebalance = v
			}
		case "meta":
			g.Meta = d.stringMap(it, path+".meta")
		case "constraint":
			g.Constraints = append(g.Constraints, d.constraint(it.block, fmt.Sprintf("%s.constraints[%d]", path, len(g.Constraints)), fmt.Sprintf("in a constraint block of group %q", g.Name)))
		case "affinity":
			g.Affinities = append(g.Affinities, d.affinity(it.block, fmt.Sprintf("%s.affinities[%d]", path, len(g.Affinities)), fmt.Sprintf("in an affinity block of group %q", g.Name)))
		case "spread":
			g.Spreads = append(g.Spreads, d.spread(it.block, fmt.Sprintf("%s.spreads[%d]", path, len(g.Spreads)), fmt.Sprintf("in a spread block of group %q", g.Name)))
		case "network":
			g.Network = d.network(it.block, path+".network", g.Name)
		case "task":
			g.Tasks = append(g.Tasks, d.task(it.block, fmt.Sprintf("%s.tasks[%d]", path, len(g.Tasks))))
		}
	}
	return g
}

func (d *hclDecoder) task(b *hclsyntax.Block, path string) *spec.Task {
	t := &spec.Task{}
	d.mark(path, b.TypeRange)
	t.Name = d.label(b, path+".name")
	in := fmt.Sprintf("in task %q", t.Name)
	var config *hclsyntax.Block
	for _, it := range d.content(b.Body, bodyOf[spec.Task](), in, path) {
		switch it.name {
		case "driver":
			if s, ok := d.str(it.attr, path+".driver"); ok {
				t.Driver = s
			}
		case "config":
			// What config may hold depends on the driver, which may
			// come after it.
			config = it.block
		case "env":
			t.Env = d.stringMap(it, path+".env")
		case "resources":
			t.Resources = d.resources(it.block, path+".resources", fmt.Sprintf("in the resources block of task %q", t.Name))
		case "restart":
			t.Restart = d.restart(it.block, path+".restart", fmt.Sprintf("in the restart block of task %q", t.Name))
		case "kill_timeout":
			if v, ok := d.duration(it.attr, path+".kill_timeout"); ok {
				t.KillTimeout = v
			}
		case "meta":
			t.Meta = d.stringMap(it, path+".meta")
		case "constraint":
			t.Constraints = append(t.Constraints, d.constraint(it.block, fmt.Sprintf("%s.constraints[%d]", path, len(t.Constraints)), fmt.Sprintf("in a constraint block of task %q", t.Name)))
		case "affinity":
			t.Affinities = append(t.Affinities, d.affinity(it.block, fmt.Sprintf("%s.affinities[%d]", path, len(t.Affinities)), fmt.Sprintf("in an affinity block of task %q", t.Name)))
		case "service":
			t.Services = append(t.Services, d.service(it.block, fmt.Sprintf("%s.services[%d]", path, len(t.Services)), t.Name))
		}
	}
	if config != nil {
		t.Config = d.config(config, path+".config", t.Driver, t.Name)
	}
	return t
}

// config decodes a task's config block. For the drivers drover has, only
// their keys are allowed (configSchema); when the driver is missing, any
// key of any of them. For a driver it does not have, the keys are not
// checked (they depend on the driver, and the driver itself is already
// reported), but command and args are still read.
func (d *hclDecoder) config(b *hclsyntax.Block, path, driver, task string) spec.TaskConfig {
	var tc spec.TaskConfig
	d.mark(path, b.TypeRange)
	d.noLabels(b)
	var items []item
	switch {
	case slices.Contains(spec.KnownDrivers, driver):
		items = d.content(b.Body, configSchema(driver), fmt.Sprintf("in the config block for the %s driver", driver), path)
	case driver == "":
		items = d.content(b.Body, configSchema(driver), "in the config block", path)
	default:
		for _, name := range []string{"command", "args"} {
			if a, ok := b.Body.Attributes[name]; ok {
				items = append(items, item{name: name, attr: a})
			}
		}
	}
	for _, it := range items {
		switch it.name {
		case "command":
			if s, ok := d.str(it.attr, path+".command"); ok {
				tc.Command = s
			}
		case "args":
			tc.Args = d.stringList(it.attr, path+".args")
		case "work_dir":
			if s, ok := d.str(it.attr, path+".work_dir"); ok {
				tc.WorkDir = s
			}
		case "user":
			if s, ok := d.str(it.attr, path+".user"); ok {
				tc.User = s
			}
		case "prestart":
			tc.Prestart = append(tc.Prestart, d.command(it.block, fmt.Sprintf("%s.prestart[%d]", path, len(tc.Prestart)), fmt.Sprintf("in a prestart block of task %q", task)))
		case "stop":
			c := d.command(it.block, path+".stop", fmt.Sprintf("in the stop block of task %q", task))
			tc.Stop = &c
		case "poststop":
			tc.Poststop = append(tc.Poststop, d.command(it.block, fmt.Sprintf("%s.poststop[%d]", path, len(tc.Poststop)), fmt.Sprintf("in a poststop block of task %q", task)))
		case "image":
			if s, ok := d.str(it.attr, path+".image"); ok {
				tc.Image = s
			}
		case "network_mode":
			if s, ok := d.str(it.attr, path+".network_mode"); ok {
				tc.NetworkMode = s
			}
		case "pid_mode":
			if s, ok := d.str(it.attr, path+".pid_mode"); ok {
				tc.PidMode = s
			}
		case "entrypoint":
			tc.Entrypoint = d.stringList(it.attr, path+".entrypoint")
		case "ports":
			tc.Ports = d.stringList(it.attr, path+".ports")
		case "volumes":
			tc.Volumes = d.stringList(it.attr, path+".volumes")
		case "labels":
			tc.Labels = d.stringMap(it, path+".labels")
		case "privileged":
			if v, ok := d.bool(it.attr, path+".privileged"); ok {
				tc.Privileged = v
			}
		}
	}
	return tc
}

// command decodes a prestart, stop or poststop block: a program and its arguments.
func (d *hclDecoder) command(b *hclsyntax.Block, path, in string) spec.Command {
	var c spec.Command
	d.mark(path, b.TypeRange)
	d.noLabels(b)
	for _, it := range d.content(b.Body, bodyOf[spec.Command](), in, path) {
		switch it.name {
		case "command":
			if s, ok := d.str(it.attr, path+".command"); ok {
				c.Command = s
			}
		case "args":
			c.Args = d.stringList(it.attr, path+".args")
		}
	}
	return c
}

func (d *hclDecoder) restart(b *hclsyntax.Block, path, in string) *spec.RestartPolicy {
	r := &spec.RestartPolicy{}
	d.mark(path, b.TypeRange)
	d.noLabels(b)
	for _, it := range d.content(b.Body, bodyOf[spec.RestartPolicy](), in, path) {
		field := path + "." + it.name
		switch it.name {
		case "attempts":
			if n, ok := d.int(it.attr, field); ok {
				r.Attempts = &n
			}
		case "interval":
			if v, ok := d.duration(it.attr, field); ok {
				r.Interval = v
			}
		case "delay":
			if v, ok := d.duration(it.attr, field); ok {
				r.Delay = v
			}
		case "mode":
			if s, ok := d.str(it.attr, field); ok {
				r.Mode = spec.RestartMode(s)
			}
		}
	}
	return r
}

func (d *hclDecoder) disconnect(b *hclsyntax.Block, path, in string) *spec.DisconnectPolicy {
	p := &spec.DisconnectPolicy{}
	d.mark(path, b.TypeRange)
	d.noLabels(b)
	for _, it := range d.content(b.Body, bodyOf[spec.DisconnectPolicy](), in, path) {
		if it.name == "stop_after" {
			if v, ok := d.duration(it.attr, path+".stop_after"); ok {
				p.StopAfter = v
			}
		}
	}
	return p
}

func (d *hclDecoder) reschedule(b *hclsyntax.Block, path, in string) *spec.ReschedulePolicy {
	r := &spec.ReschedulePolicy{}
	d.mark(path, b.TypeRange)
	d.noLabels(b)
	for _, it := range d.content(b.Body, bodyOf[spec.ReschedulePolicy](), in, path) {
		field := path + "." + it.name
		switch it.name {
		case "attempts":
			if n, ok := d.int(it.attr, field); ok {
				r.Attempts = &n
			}
		case "interval":
			if v, ok := d.duration(it.attr, field); ok {
				r.Interval = v
			}
		case "delay":
			if v, ok := d.duration(it.attr, field); ok {
				r.Delay = v
			}
		case "delay_function":
			if s, ok := d.str(it.attr, field); ok {
				r.DelayFunction = spec.DelayFunction(s)
			}
		case "max_delay":
			if v, ok := d.duration(it.attr, field); ok {
				r.MaxDelay = v
			}
		case "unlimited":
			if v, ok := d.bool(it.attr, field); ok {
				r.Unlimited = &v
			}
		}
	}
	return r
}

func (d *hclDecoder) update(b *hclsyntax.Block, path, in string) *spec.UpdateStrategy {
	u := &spec.UpdateStrategy{}
	d.mark(path, b.TypeRange)
	d.noLabels(b)
	for _, it := range d.content(b.Body, bodyOf[spec.UpdateStrategy](), in, path) {
		field := path + "." + it.name
		switch it.name {
		case "max_parallel":
			if n, ok := d.int(it.attr, field); ok {
				u.MaxParallel = &n
			}
		case "health_check":
			if s, ok := d.str(it.attr, field); ok {
				u.HealthCheck = s
			}
		case "min_healthy_time":
			if v, ok := d.duration(it.attr, field); ok {
				u.MinHealthyTime = v
			}
		case "healthy_deadline":
			if v, ok := d.duration(it.attr, field); ok {
				u.HealthyDeadline = v
			}
		case "progress_deadline":
			if v, ok := d.duration(it.attr, field); ok {
				u.ProgressDeadline = v
			}
		case "auto_revert":
			if v, ok := d.bool(it.attr, field); ok {
				u.AutoRevert = &v
			}
		case "canary":
			if n, ok := d.int(it.attr, field); ok {
				u.Canary = &n
			}
		case "auto_promote":
			if v, ok := d.bool(it.attr, field); ok {
				u.AutoPromote = &v
			}
		}
	}
	return u
}

func (d *hclDecoder) resources(b *hclsyntax.Block, path, in string) spec.Resources {
	var r spec.Resources
	d.mark(path, b.TypeRange)
	d.noLabels(b)
	for _, it := range d.content(b.Body, bodyOf[spec.Resources](), in, path) {
		field := path + "." + it.name
		switch it.name {
		case "cpu":
			if n, ok := d.int(it.attr, field); ok {
				r.CPU = n
			}
		case "memory":
			if n, ok := d.int(it.attr, field); ok {
				r.MemoryMB = n
			}
		case "disk":
			if n, ok := d.int(it.attr, field); ok {
				r.DiskMB = n
			}
		}
	}
	return r
}

// constraint decodes a constraint block. Its attribute and value may name
// node targets as Nomad writes them ("${meta.rack}"); those are kept as
// text for the scheduler, not evaluated here.
func (d *hclDecoder) constraint(b *hclsyntax.Block, path, in string) *spec.Constraint {
	c := &spec.Constraint{}
	d.mark(path, b.TypeRange)
	d.noLabels(b)
	for _, it := range d.content(b.Body, bodyOf[spec.Constraint](), in, path) {
		field := path + "." + it.name
		s, ok := d.targetText(it.attr, field)
		if !ok {
			continue
		}
		switch it.name {
		case "attribute":
			c.Attribute = s
		case "operator":
			c.Operator = s
		case "value":
			c.Value = s
		}
	}
	return c
}

// targetText reads a string that may interpolate node targets, such as
// "${attr.cpu.count}" (keepRuntimeRefs keeps them as written). A number
// is read as its text (value = 3), as Nomad does.
func (d *hclDecoder) targetText(a *hclsyntax.Attribute, field string) (string, bool) {
	if e, ok := a.Expr.(*hclsyntax.LiteralValueExpr); ok && e.Val.Type() == cty.Number {
		d.mark(field, a.Expr.Range())
		return e.Val.AsBigFloat().Text('f', -1), true
	}
	return d.str(a, field)
}
