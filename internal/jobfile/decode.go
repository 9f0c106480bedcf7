package jobfile

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/drover-org/drover/internal/inputlimit"
	"github.com/drover-org/drover/internal/periodic"
	"github.com/drover-org/drover/internal/spec"
	"github.com/drover-org/drover/internal/suggest"
)

// DecodeWith parses src as a job file named filename. The format comes
// from the extension (.hcl, .nomad: HCL; .json: JSON; .yaml, .yml: YAML;
// .service: a systemd unit with fleet's [X-Fleet] section, see unit.go).
// For any other name (such as "-" for stdin) it is sniffed: a first
// non-space byte '{' means JSON, else a file that parses as HCL with a job
// block is HCL, else YAML.
//
// Before any parsing, src is checked against the limits every drover
// decoder applies (inputlimit): its size, the one a server accepts, and
// how deep it nests.
//
// On success the job is canonicalized and valid. Otherwise the error is a
// spec.Problems holding every problem found, decoding and validation
// together, each with its position ("web.hcl:12:5") where it is known.
// Positions use filename as given. The warnings are what the file says
// that drover accepts but does otherwise than asked (a systemd key it
// ignores), each with its position, whether or not the file is valid.
//
// o gives an HCL file's variables their values (-var, -var-file, the
// environment); its filesystem functions (file("x")) read paths relative
// to filename's folder. Only HCL files have variables: o's -var and
// -var-file on another format are a problem.
func DecodeWith(filename string, src []byte, o Options) (*spec.Job, spec.Problems, error) {
	name := filename
	dir := filepath.Dir(filename)
	if name == "-" || name == "" {
		name, dir = "<stdin>", "."
	}
	hclFile := func() (*spec.Job, spec.Problems, error) {
		return decodeHCL(name, src, o, dir)
	}
	notHCL := func(job *spec.Job, warns spec.Problems, err error) (*spec.Job, spec.Problems, error) {
		if err == nil && o.given() {
			return nil, warns, spec.Problems{{Pos: name, Message: "-var and -var-file set the variables of HCL job files; this file is not HCL, so remove them"}}
		}
		return job, warns, err
	}
	switch strings.ToLower(filepath.Ext(filename)) {
	case ".hcl", ".nomad":
		return hclFile()
	case ".json":
		return notHCL(decodeJSONWarn(name, src, true, o.NodeHas))
	case ".yaml", ".yml":
		return notHCL(decodeYAML(name, src, o.NodeHas))
	case unitSuffix:
		if o.given() {
			return notHCL(nil, nil, nil)
		}
		return decodeUnit(name, parseUnitName(filepath.Base(filename)), src, o.NodeHas)
	}
	trimmed := bytes.TrimSpace(src)
	switch {
	case len(trimmed) == 0:
		return nil, nil, spec.Problems{{Pos: name, Message: "the job file is empty"}}
	case trimmed[0] == '{':
		return notHCL(decodeJSONWarn(name, src, true, o.NodeHas))
	case looksLikeHCL(name, src):
		return hclFile()
	}
	return notHCL(decodeYAML(name, src, o.NodeHas))
}

// DecodeFileWith reads the file at path and decodes it with DecodeWith. A
// unit instance such as web@1.service that is not on disk is read from its
// template web@.service.
func DecodeFileWith(path string, o Options) (*spec.Job, spec.Problems, error) {
	if strings.ToLower(filepath.Ext(path)) == unitSuffix && !o.given() {
		return decodeUnitFile(path, o.NodeHas)
	}
	src, err := readFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("reading job file %s: %w", path, err)
	}
	return DecodeWith(path, src, o)
}

// readFile reads path up to one byte past inputlimit.MaxBytes: enough for
// the decoders to refuse a larger file without reading all of it.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, inputlimit.MaxBytes+1))
}

// addLimit adds the problem of an input that inputlimit refused: where it
// first nests too deep when withPos, for a file whose positions are known.
func addLimit(c *collector, err error, withPos bool) {
	var deep *inputlimit.TooDeepError
	if errors.As(err, &deep) {
		at := pos{}
		if withPos {
			at = pos{line: deep.Line, col: deep.Col}
		}
		c.add(at, "", "the job file nests %d levels deep; the limit is %d (a job needs about ten)", deep.Depth, inputlimit.MaxDepth)
		return
	}
	c.add(pos{}, "", "the job file %v: make it smaller (fewer groups, shorter meta or env)", err)
}

// DecodeJSONBody decodes an HTTP request body: strict JSON holding either a
// Job or a JobStatus-shaped wrapper {"job": {...}, ...}, of which only the
// job is used. The job comes back canonicalized and valid; otherwise the
// error is a spec.Problems with field paths, and "line:col" positions.
func DecodeJSONBody(src []byte) (*spec.Job, error) {
	return decodeJSON("", src, true)
}

// pos is a place in a file; line 0 means unknown, col 0 means "the line".
// file, when set, names the place instead of the file being decoded: a
// -var argument, a variable in the environment.
type pos struct {
	line, col int
	file      string
}

// located is a problem before its position is rendered, kept apart so that
// problems sort by line and column rather than by text.
type located struct {
	at    pos
	field string
	msg   string
}

// collector gathers every problem of one decode, and its warnings.
type collector struct {
	file     string
	problems []located
	warnings []located
	// reported holds field paths that already have a decoding problem, so
	// that validation does not report the same mistake again in other words
	// (a count that was not a number is not also "out of range").
	reported map[string]bool
	// nodeHas is Options.NodeHas: whether some node has a node attribute
	// or meta key; nil when the cluster's nodes are not known.
	nodeHas func(name string) bool
}

func newCollector(file string, nodeHas func(string) bool) *collector {
	return &collector{file: file, reported: map[string]bool{}, nodeHas: nodeHas}
}

func (c *collector) add(at pos, field, format string, args ...any) {
	c.problems = append(c.problems, located{at: at, field: field, msg: fmt.Sprintf(format, args...)})
}

// warn records something the file asks that drover accepts but does
// otherwise: the job is still made.
func (c *collector) warn(at pos, format string, args ...any) {
	c.warnings = append(c.warnings, located{at: at, msg: fmt.Sprintf(format, args...)})
}

// warnField is warn for a warning about one field, which it names.
func (c *collector) warnField(at pos, field, format string, args ...any) {
	c.warnings = append(c.warnings, located{at: at, field: field, msg: fmt.Sprintf(format, args...)})
}

// markReported records that field (and everything under it) has a problem.
func (c *collector) markReported(field string) {
	c.reported[field] = true
}

// suppressed reports whether field or one of its parents was marked.
func (c *collector) suppressed(field string) bool {
	for f := field; ; f = parentPath(f) {
		if c.reported[f] {
			return true
		}
		if f == "" {
			return false
		}
	}
}

func (c *collector) render(at pos) string {
	switch {
	case at.file != "" && at.file == c.file:
		at.file = ""
		return c.render(at)
	case at.file != "" && at.line == 0:
		return at.file
	case at.file != "":
		return fmt.Sprintf("%s:%d:%d", at.file, at.line, at.col)
	case at.line == 0:
		// The file is still worth naming when the place in it is not
		// known (YAML loses positions on its way to JSON).
		return c.file
	case c.file == "" && at.col == 0:
		return fmt.Sprintf("%d", at.line)
	case c.file == "":
		return fmt.Sprintf("%d:%d", at.line, at.col)
	case at.col == 0:
		return fmt.Sprintf("%s:%d", c.file, at.line)
	}
	return fmt.Sprintf("%s:%d:%d", c.file, at.line, at.col)
}

// result returns the problems sorted by position (unknown positions last),
// then field, without repeats, or nil.
func (c *collector) result() spec.Problems { return c.sorted(c.problems) }

// warningsResult returns the warnings as result returns the problems.
func (c *collector) warningsResult() spec.Problems { return c.sorted(c.warnings) }

func (c *collector) sorted(list []located) spec.Problems {
	ps := slices.Clone(list)
	slices.SortStableFunc(ps, func(a, b located) int {
		if (a.at.line == 0) != (b.at.line == 0) {
			if a.at.line == 0 {
				return 1
			}
			return -1
		}
		return cmp.Or(cmp.Compare(a.at.line, b.at.line), cmp.Compare(a.at.col, b.at.col),
			cmp.Compare(a.field, b.field), cmp.Compare(a.msg, b.msg))
	})
	var out spec.Problems
	seen := map[[2]string]bool{}
	for _, p := range ps {
		where := c.render(p.at)
		// The same message at the same place says nothing new: a group's
		// restart policy copied into each task fails validation once per
		// copy, but the user wrote it once.
		key := [2]string{where, p.msg}
		if where != "" && seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, spec.Problem{Field: p.field, Pos: where, Message: p.msg})
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// parentPath strips the last segment of a field path:
// "groups[0].tasks[1].config" -> "groups[0].tasks[1]" -> "groups[0]" ->
// "groups" -> "".
func parentPath(f string) string {
	i := strings.LastIndexAny(f, ".[")
	if i < 0 {
		return ""
	}
	return f[:i]
}

// positions maps field paths to where in the file they were written.
type positions map[string]pos

// lookup returns the position of field, or of its nearest written parent: a
// missing command is reported at the config block, a missing config block
// at the task.
func (m positions) lookup(field string) pos {
	for f := field; ; f = parentPath(f) {
		if p, ok := m[f]; ok {
			return p
		}
		if f == "" {
			return pos{}
		}
	}
}

// finish canonicalizes and validates job, adds the validation problems to
// those already found, and returns the job or every problem.
func finish(job *spec.Job, c *collector, at positions) (*spec.Job, error) {
	checkGroupUpdates(job, c, at)
	warnVolumes(job, c, at)
	moveGroupServices(job, at)
	job.Canonicalize()
	inheritRestartPositions(job, at)
	inheritUpdatePositions(job, at)
	// A task whose driver is not supported cannot be checked for a command:
	// what its config needs depends on the driver, and the driver problem
	// already says what to change.
	for i, g := range job.Groups {
		if g == nil {
			continue
		}
		for j, t := range g.Tasks {
			if t != nil && t.Driver != "" && !slices.Contains(spec.KnownDrivers, t.Driver) {
				tp := fmt.Sprintf("groups[%d].tasks[%d]", i, j)
				c.markReported(tp + ".config")
				if sug := suggest.Closest(t.Driver, spec.KnownDrivers); sug != "" && !slices.Contains(otherDrivers, t.Driver) {
					// A typo, not a driver of Nomad's drover lacks.
					c.add(at.lookup(tp+".driver"), tp+".driver", "unknown driver %q; did you mean %q?", t.Driver, sug)
					c.markReported(tp + ".driver")
					continue
				}
				c.warn(at.lookup(tp+".driver"), "%s", unknownDriver(t))
			}
		}
	}
	for _, p := range append(job.Validate(), periodic.Check(job, time.LoadLocation)...) {
		if c.suppressed(p.Field) {
			continue
		}
		c.add(at.lookup(p.Field), p.Field, "%s", p.Message)
	}
	warnNodeTargets(job, c, at)
	if ps := c.result(); ps != nil {
		return nil, ps
	}
	return job, nil
}

// inheritRestartPositions points each task that has no restart policy of its
// own at its group's, which Canonicalize copied into it, so that a bad group
// policy is reported where it was written.
func inheritRestartPositions(job *spec.Job, at positions) {
	// The fields of each group's restart block, found in one pass: a pass
	// per task made a file of 20,000 groups take minutes.
	under := map[string][]string{} // "groups[i].restart" -> it and its fields
	for f := range at {
		rest, ok := strings.CutPrefix(f, "groups[")
		if !ok {
			continue
		}
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			continue
		}
		gp := f[:len("groups[")+end+1] + ".restart"
		if f == gp || strings.HasPrefix(f, gp+".") {
			under[gp] = append(under[gp], f)
		}
	}
	for i, g := range job.Groups {
		if g == nil {
			continue
		}
		gp := fmt.Sprintf("groups[%d].restart", i)
		fields, ok := under[gp]
		if !ok {
			continue
		}
		for j := range g.Tasks {
			tp := fmt.Sprintf("groups[%d].tasks[%d].restart", i, j)
			if _, ok := at[tp]; ok {
				continue
			}
			for _, f := range fields {
				at[tp+strings.TrimPrefix(f, gp)] = at[f]
			}
		}
	}
}

// checkGroupUpdates reports a group's update block in a job that is not a
// service. It must run before Canonicalize, which drops such a block
// (spec.Job.UpdateOf) where validation would never see it, and the file
// would seem to ask for deployments it does not get. The message is the one
// validation gives for the job's own block.
//
// A system job's update blocks, which Nomad takes, are warnings: drover
// replaces its changed instances on every node at once, and Canonicalize
// drops the blocks.
func checkGroupUpdates(job *spec.Job, c *collector, at positions) {
	if job.Type == "" || job.Type == spec.JobService {
		return
	}
	if job.Type == spec.JobSystem && job.Update != nil {
		c.warn(at.lookup("update"), "%s", systemUpdate)
	}
	for i, g := range job.Groups {
		if g == nil || g.Update == nil {
			continue
		}
		f := fmt.Sprintf("groups[%d].update", i)
		if job.Type == spec.JobSystem {
			c.warn(at.lookup(f), "%s", systemUpdate)
			continue
		}
		c.add(at.lookup(f), f, "update applies to service jobs only; a %s job's changed instances are replaced at once", job.Type)
	}
}

// systemUpdate is the warning for an update block in a system job.
const systemUpdate = "update in a system job is accepted and not applied: drover replaces a system job's changed instances on every node at once, not max_parallel at a time"

// inheritUpdatePositions points each group that has no update block of its
// own at the job's, whose fields Canonicalize copied into it, so that a
// group's problem with an inherited field (canary more than its count) is
// reported where the field was written.
func inheritUpdatePositions(job *spec.Job, at positions) {
	if _, ok := at["update"]; !ok {
		return
	}
	// Found once, not once per group (which took seconds for 20,000).
	var fields []string
	for f := range at {
		if f == "update" || strings.HasPrefix(f, "update.") {
			fields = append(fields, f)
		}
	}
	for i := range job.Groups {
		gp := fmt.Sprintf("groups[%d].update", i)
		if _, ok := at[gp]; ok {
			continue
		}
		for _, f := range fields {
			at[gp+strings.TrimPrefix(f, "update")] = at[f]
		}
	}
}

// lineCol converts a byte offset in src to a 1-based line and column, the
// column counted in characters.
func lineCol(src []byte, off int) pos {
	off = min(max(off, 0), len(src))
	line := 1 + bytes.Count(src[:off], []byte("\n"))
	start := bytes.LastIndexByte(src[:off], '\n') + 1
	return pos{line: line, col: 1 + len([]rune(string(src[start:off])))}
}

// unknownDriver is the warning for a task whose driver drover does not
// have: the job is accepted, and never placed.
func unknownDriver(t *spec.Task) string {
	return fmt.Sprintf("task %q: drover has no %s driver (it has %s), so no node runs this task: the job is accepted and waits with \"no node has driver %s\"; its config is not checked. Port the task to one of drover's drivers to run it",
		t.Name, t.Driver, strings.Join(spec.KnownDrivers, ", "), t.Driver)
}

// moveGroupServices moves each group's services into their tasks, as
// Canonicalize would (spec.Group.MoveServices), and their positions with
// them, so that a problem with one is reported where it was written.
func moveGroupServices(job *spec.Job, at positions) {
	dest := map[string]string{} // "groups[i].services[k]" -> where it is now
	for i, g := range job.Groups {
		if g == nil || len(g.Services) == 0 {
			continue
		}
		for _, m := range g.MoveServices() {
			to := fmt.Sprintf("groups[%d].services[%d]", i, m.To)
			if m.Task >= 0 {
				to = fmt.Sprintf("groups[%d].tasks[%d].services[%d]", i, m.Task, m.To)
			}
			dest[fmt.Sprintf("groups[%d].services[%d]", i, m.From)] = to
		}
	}
	if len(dest) == 0 {
		return
	}
	moved := positions{}
	for f, p := range at {
		i := strings.Index(f, "].services[")
		if !strings.HasPrefix(f, "groups[") || i < 0 || strings.Contains(f[:i], ".") {
			continue
		}
		end := i + len("].services[") + strings.IndexByte(f[i+len("].services["):], ']') + 1
		if to, ok := dest[f[:end]]; ok {
			moved[to+f[end:]] = p
			delete(at, f)
		}
	}
	maps.Copy(at, moved)
}

// warnVolumes says what a group's volume blocks that drover takes without
// doing what Nomad does mean here: a CSI volume attaches nothing.
func warnVolumes(job *spec.Job, c *collector, at positions) {
	for i, g := range job.Groups {
		if g == nil {
			continue
		}
		for k, v := range g.Volumes {
			if v == nil {
				continue
			}
			vp := fmt.Sprintf("groups[%d].volumes[%d]", i, k)
			if v.TypeOf() == spec.VolumeCSI {
				c.warn(at.lookup(vp+".type"), "volume %q in group %q: drover has no CSI, so nothing is attached: what the tasks write at its volume_mount destinations stays in the instance's directory and is lost with it; use a host volume (type = \"host\") to keep data", v.Name, g.Name)
			}
		}
	}
}
