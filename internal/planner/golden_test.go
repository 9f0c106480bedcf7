package planner

// Golden transcripts: each testdata/golden/NAME.txt is a script that builds
// the state a pass reads and runs passes over it; NAME.golden is the script
// echoed line by line with the plan of every `pass` after it. A person
// reads the .golden to judge whether the pass did the right thing, and its
// diff to see what a change did:
//
//	go test ./internal/planner -run TestGolden           compare
//	go test ./internal/planner -run TestGolden -update   rewrite, then review git diff
//
// The script language, one directive a line, words split on blanks; `#`
// starts a comment line; options are key=value; [...] is optional, with
// the default shown:
//
//	node ID [cpu=4000] [mem=8192] [status=ready]
//	    A node named ID; status is ready or down.
//	down NODE
//	    The node stops heartbeating: its status becomes down.
//	job NAME [type=service] [priority=50] [version=1]
//	    Opens a job; the group lines below it add to it.
//	group NAME [count=1] [cpu=100] [mem=300] [command=true] [update=0]
//	      [auto_revert=false] [progress_deadline=10m]
//	    A group of one task running command. update=N gives the group an
//	    update block with max_parallel N (and auto_revert, progress_deadline;
//	    progress_deadline=0s fails a deployment at its first unhealthy
//	    instance): its versions
//	    roll out as deployments.
//	alloc ID NODE JOB.GROUP[INDEX] [version=the job's] [command=the group's]
//	      [status=running] [desired=run] [deployment=] [healthy=]
//	    An existing alloc of the group as declared, told to run command
//	    (another command than the group's makes it outdated). deployment
//	    is the deployment that placed it, and healthy (true or false) its
//	    agent's verdict on it.
//	status ID CLIENT_STATUS
//	    The alloc's agent reports it: pending, running, complete, failed.
//	deployment ID JOB [version=1] [status=running]
//	    A deployment of the job's version.
//	schedule JOB [version=1]
//	    The job's schedule record, with no failures.
//	pass [at=0s]
//	    Marks the allocs on down nodes (MarkDown), then calls Decide at
//	    at after the script's start (never earlier than the previous
//	    pass), with new IDs id-1, id-2, ... in the order asked, and
//	    prints, on lines that start with "> ", the plan in its order:
//	    each alloc written (placed, stopped or evicted, with its cause and
//	    reason; "node-down" marks an alloc of a down node); each placement
//	    scheduled but not written, as it waits for a stopping alloc; the
//	    allocs forgotten; each schedule record written, with its
//	    failures; the schedules and deployments deleted; each deployment
//	    written; each revert asked for; each event; and when the next
//	    pass is due. The plan is then applied (allocs, schedules,
//	    deployments), so that the next pass reads what this one wrote.
//
// Any other directive, or a bad option, fails the test at file:line.

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/spec"
	"github.com/drover-org/drover/internal/testkit"
)

var update = flag.Bool("update", false, "rewrite testdata/golden/*.golden from the scripts")

func TestGolden(t *testing.T) { testkit.Golden(t, "internal/planner", *update, runScript) }

// start is the time a script begins at; `pass at=D` runs at start+D.
var start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// script is the state a golden script has built so far: the store as a
// pass reads it.
type script struct {
	out         strings.Builder
	nodes       []*spec.Node
	jobs        []*spec.Job // in declaration order
	job         *spec.Job   // the open job
	allocs      []*spec.Alloc
	deployments []*spec.Deployment
	schedules   map[string]*spec.JobSchedule
	now         time.Time
	ids         int   // new IDs given so far
	created     int64 // the CreateIndex of the newest alloc
}

func runScript(file, src string) (string, error) {
	s := &script{schedules: map[string]*spec.JobSchedule{}, now: start}
	for i, text := range strings.Split(strings.TrimRight(src, "\n"), "\n") {
		s.out.WriteString(text + "\n")
		words := strings.Fields(text)
		if len(words) == 0 || strings.HasPrefix(words[0], "#") {
			continue
		}
		if err := s.do(words[0], words[1:]); err != nil {
			return "", fmt.Errorf("%s:%d: %s: %w", file, i+1, words[0], err)
		}
	}
	return s.out.String(), nil
}

func (s *script) do(directive string, args []string) error {
	switch directive {
	case "node":
		return s.node(args)
	case "down":
		return s.down(args)
	case "job":
		return s.newJob(args)
	case "group":
		return s.newGroup(args)
	case "alloc":
		return s.alloc(args)
	case "status":
		return s.status(args)
	case "deployment":
		return s.deployment(args)
	case "schedule":
		return s.schedule(args)
	case "pass":
		return s.pass(args)
	}
	return errors.New("unknown directive; use node, down, job, group, alloc, status, deployment, schedule or pass (see golden_test.go)")
}

// options are a line's positional words and key=value options.
type options struct {
	pos  []string
	opts map[string]string
}

func parseOptions(args []string, allowed ...string) (options, error) {
	o := options{opts: map[string]string{}}
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			o.pos = append(o.pos, a)
			continue
		}
		if !slices.Contains(allowed, k) {
			return o, fmt.Errorf("unknown option %q; use %s", k, strings.Join(allowed, ", "))
		}
		if _, dup := o.opts[k]; dup {
			return o, fmt.Errorf("option %s given twice", k)
		}
		o.opts[k] = v
	}
	return o, nil
}

func (o options) str(key, def string) string {
	return cmp.Or(o.opts[key], def)
}

func (o options) int(key string, def int) (int, error) {
	v, ok := o.opts[key]
	if !ok {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s=%s: want a whole number", key, v)
	}
	return n, nil
}

func (o options) bool(key string) (*bool, error) {
	v, ok := o.opts[key]
	if !ok {
		return nil, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return nil, fmt.Errorf("%s=%s: want true or false", key, v)
	}
	return &b, nil
}

func wantArgs(o options, n int, usage string) error {
	if len(o.pos) != n {
		return fmt.Errorf("got %q; usage: %s", o.pos, usage)
	}
	return nil
}

func (s *script) node(args []string) error {
	o, err := parseOptions(args, "cpu", "mem", "status")
	if err != nil {
		return err
	}
	if err := wantArgs(o, 1, "node ID [cpu=] [mem=] [status=ready|down]"); err != nil {
		return err
	}
	id := o.pos[0]
	if s.nodeByID(id) != nil {
		return fmt.Errorf("node %s is already declared", id)
	}
	n := &spec.Node{ID: id, Name: id, Drivers: []string{"exec"}, Status: spec.NodeStatus(o.str("status", string(spec.NodeReady)))}
	if n.Status != spec.NodeReady && n.Status != spec.NodeDown {
		return fmt.Errorf("status=%s: use ready or down", n.Status)
	}
	var errs [2]error
	n.Resources.CPU, errs[0] = o.int("cpu", 4000)
	n.Resources.MemoryMB, errs[1] = o.int("mem", 8192)
	s.nodes = append(s.nodes, n)
	return errors.Join(errs[:]...)
}

// down replaces the node's value, as the store does: what an earlier pass
// read is never changed under it.
func (s *script) down(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("got %q; usage: down NODE", args)
	}
	i := slices.IndexFunc(s.nodes, func(n *spec.Node) bool { return n.ID == args[0] })
	if i < 0 {
		return fmt.Errorf("no node %s; declare it with a node line first", args[0])
	}
	n := *s.nodes[i]
	n.Status = spec.NodeDown
	s.nodes[i] = &n
	return nil
}

func (s *script) newJob(args []string) error {
	o, err := parseOptions(args, "type", "priority", "version")
	if err != nil {
		return err
	}
	if err := wantArgs(o, 1, "job NAME [type=] [priority=] [version=]"); err != nil {
		return err
	}
	if s.jobByName(o.pos[0]) != nil {
		return fmt.Errorf("job %s is already declared", o.pos[0])
	}
	j := &spec.Job{Name: o.pos[0], Type: spec.JobType(o.str("type", string(spec.JobService)))}
	if j.Priority, err = o.int("priority", spec.DefaultPriority); err != nil {
		return err
	}
	v, err := o.int("version", 1)
	if err != nil {
		return err
	}
	j.Version = uint64(v)
	s.jobs = append(s.jobs, j)
	s.job = j
	return nil
}

func (s *script) newGroup(args []string) error {
	if s.job == nil {
		return errors.New("group before any job; write a job line first")
	}
	o, err := parseOptions(args, "count", "cpu", "mem", "command", "update", "auto_revert", "progress_deadline")
	if err != nil {
		return err
	}
	if err := wantArgs(o, 1, "group NAME [count=] [cpu=] [mem=] [command=] [update=N] [auto_revert=]"); err != nil {
		return err
	}
	t := &spec.Task{Name: "t", Driver: "exec", Config: spec.TaskConfig{Command: o.str("command", "true")}}
	var errs [3]error
	t.Resources.CPU, errs[0] = o.int("cpu", spec.DefaultCPU)
	t.Resources.MemoryMB, errs[1] = o.int("mem", spec.DefaultMemoryMB)
	g := &spec.Group{Name: o.pos[0], Tasks: []*spec.Task{t}}
	g.Count, errs[2] = o.int("count", 1)
	if err := errors.Join(errs[:]...); err != nil {
		return err
	}
	if parallel, err := o.int("update", 0); err != nil {
		return err
	} else if parallel > 0 {
		g.Update = &spec.UpdateStrategy{MaxParallel: &parallel}
		if g.Update.AutoRevert, err = o.bool("auto_revert"); err != nil {
			return err
		}
		if v, ok := o.opts["progress_deadline"]; ok {
			d, err := time.ParseDuration(v)
			if err != nil {
				return fmt.Errorf("progress_deadline=%s: %w", v, err)
			}
			pd := spec.Duration(d)
			g.Update.ProgressDeadline = &pd
		}
	} else if _, ok := o.opts["auto_revert"]; ok {
		return errors.New("auto_revert needs an update block: give update=N too")
	}
	s.job.Groups = append(s.job.Groups, g)
	return nil
}

var allocName = regexp.MustCompile(`^([^.\[\]]+)\.([^.\[\]]+)\[(\d+)\]$`)

func (s *script) alloc(args []string) error {
	o, err := parseOptions(args, "version", "command", "status", "desired", "deployment", "healthy")
	if err != nil {
		return err
	}
	if err := wantArgs(o, 3, "alloc ID NODE JOB.GROUP[INDEX] [version=] [command=] [status=] [desired=] [deployment=] [healthy=]"); err != nil {
		return err
	}
	if s.allocByID(o.pos[0]) != nil {
		return fmt.Errorf("alloc %s is already declared", o.pos[0])
	}
	n := s.nodeByID(o.pos[1])
	if n == nil {
		return fmt.Errorf("no node %s; declare it with a node line first", o.pos[1])
	}
	m := allocName.FindStringSubmatch(o.pos[2])
	if m == nil {
		return fmt.Errorf("alloc name %q: want JOB.GROUP[INDEX], such as web.api[0]", o.pos[2])
	}
	j := s.jobByName(m[1])
	if j == nil || j.Group(m[2]) == nil {
		return fmt.Errorf("no group %s.%s; declare its job and group first", m[1], m[2])
	}
	g := j.Group(m[2])
	index, _ := strconv.Atoi(m[3])
	version, err := o.int("version", int(j.Version))
	if err != nil {
		return err
	}
	task := *g.Tasks[0]
	task.Config.Command = o.str("command", task.Config.Command)
	s.created++
	a := &spec.Alloc{
		ID: o.pos[0], Name: spec.AllocName(j.Name, g.Name, index), Job: j.Name, JobVersion: uint64(version), JobType: j.Type,
		Group: g.Name, Index: index, NodeID: n.ID, NodeName: n.Name, Resources: g.Resources(), Tasks: []*spec.Task{&task},
		DeploymentID: o.opts["deployment"], DesiredStatus: spec.DesiredStatus(o.str("desired", string(spec.DesiredRun))),
		Status:      &spec.AllocStatus{ClientStatus: spec.ClientStatus(o.str("status", string(spec.ClientRunning))), UpdateTime: s.now},
		CreateIndex: s.created, CreateTime: s.now, ModifyTime: s.now,
	}
	if healthy, err := o.bool("healthy"); err != nil {
		return err
	} else if healthy != nil {
		a.Status.DeploymentHealth = &spec.DeploymentHealth{Healthy: *healthy, Time: s.now}
		if !*healthy {
			a.Status.DeploymentHealth.Reason = "check http failing"
		}
	}
	s.allocs = append(s.allocs, a)
	return nil
}

func (s *script) status(args []string) error {
	if len(args) != 2 {
		return fmt.Errorf("got %q; usage: status ID CLIENT_STATUS", args)
	}
	i := slices.IndexFunc(s.allocs, func(a *spec.Alloc) bool { return a.ID == args[0] })
	if i < 0 {
		return fmt.Errorf("no alloc %s", args[0])
	}
	a := *s.allocs[i]
	a.Status = &spec.AllocStatus{ClientStatus: spec.ClientStatus(args[1]), UpdateTime: s.now}
	s.allocs[i] = &a
	return nil
}

func (s *script) deployment(args []string) error {
	o, err := parseOptions(args, "version", "status")
	if err != nil {
		return err
	}
	if err := wantArgs(o, 2, "deployment ID JOB [version=] [status=]"); err != nil {
		return err
	}
	v, err := o.int("version", 1)
	if err != nil {
		return err
	}
	s.deployments = append(s.deployments, &spec.Deployment{ID: o.pos[0], Job: o.pos[1], JobVersion: uint64(v),
		Status: spec.DeploymentStatus(o.str("status", string(spec.DeploymentRunning))), Groups: map[string]*spec.DeploymentGroup{},
		CreateTime: s.now, ModifyTime: s.now})
	return nil
}

func (s *script) schedule(args []string) error {
	o, err := parseOptions(args, "version")
	if err != nil {
		return err
	}
	if err := wantArgs(o, 1, "schedule JOB [version=]"); err != nil {
		return err
	}
	v, err := o.int("version", 1)
	if err != nil {
		return err
	}
	s.schedules[o.pos[0]] = &spec.JobSchedule{Job: o.pos[0], JobVersion: uint64(v), UpdateTime: s.now}
	return nil
}

// input is what a pass reads of the script's state, as the server's store
// gives it: every job, every alloc.
func (s *script) input() (*Input, error) {
	jobs := slices.Clone(s.jobs)
	for _, j := range jobs {
		j.Canonicalize()
		if ps := j.Validate(); len(ps) > 0 {
			return nil, fmt.Errorf("job %s is not valid: %v", j.Name, ps)
		}
	}
	slices.SortFunc(jobs, func(a, b *spec.Job) int { return strings.Compare(a.Name, b.Name) })
	return &Input{
		Jobs: jobs, AllJobs: jobs, Allocs: slices.Clone(s.allocs), All: slices.Clone(s.allocs), Nodes: slices.Clone(s.nodes),
		Schedules: s.schedules, Deployments: slices.Clone(s.deployments),
		NodeAllocs: func(id string) []*spec.Alloc {
			return slices.DeleteFunc(slices.Clone(s.allocs), func(a *spec.Alloc) bool { return a.NodeID != id })
		},
		Node: s.nodeByID,
	}, nil
}

func (s *script) pass(args []string) error {
	o, err := parseOptions(args, "at")
	if err != nil {
		return err
	}
	if err := wantArgs(o, 0, "pass [at=DURATION]"); err != nil {
		return err
	}
	if at, ok := o.opts["at"]; ok {
		d, err := time.ParseDuration(at)
		if err != nil || start.Add(d).Before(s.now) {
			return fmt.Errorf("at=%s: want a duration since the script's start, not before the previous pass (%s)", at, s.at(s.now))
		}
		s.now = start.Add(d)
	}
	in, err := s.input()
	if err != nil {
		return err
	}
	in.MarkDown()
	d := Decide(in, s.now, nil, Policy{}, func() string {
		s.ids++
		return fmt.Sprintf("id-%d", s.ids)
	})
	for _, l := range s.describe(d) {
		s.out.WriteString("> " + l + "\n")
	}
	s.apply(d.Plan)
	return nil
}

// describe is the plan of d, line by line, in the order the plan holds it.
func (s *script) describe(d Decision) []string {
	var out []string
	p := d.Plan
	for _, a := range p.Allocs {
		verb := "place"
		switch {
		case a.DesiredStatus == spec.DesiredStop && a.Evicted():
			verb = "evict"
		case a.DesiredStatus == spec.DesiredStop:
			verb = "stop"
		}
		line := fmt.Sprintf("%s %s %s on %s v%d (%s): %s", verb, a.ID, a.Name, a.NodeID, a.JobVersion, a.DesiredCause, a.DesiredReason)
		if a.NodeDown {
			line += " [node-down]"
		}
		if a.DeploymentID != "" {
			line += " [deployment " + a.DeploymentID + "]"
		}
		out = append(out, line)
	}
	for _, pl := range d.Scheduler.Placements {
		if r := pl.Request; r.WaitFor != "" {
			out = append(out, fmt.Sprintf("wait %s on %s for %s (%s): %s [scheduled, not written]",
				spec.AllocName(r.Job.Name, r.Group.Name, r.Index), pl.NodeID, r.WaitFor, r.Cause, r.Reason))
		}
	}
	for _, id := range p.DeleteAllocs {
		out = append(out, "forget alloc "+id)
	}
	for _, js := range p.Schedules {
		out = append(out, fmt.Sprintf("schedule %s v%d", js.Job, js.JobVersion))
		for _, f := range js.Failures {
			hints := f.Hints
			f.Hints = nil
			out = append(out, fmt.Sprintf("  failed %s.%s (missing %d): %s", js.Job, f.Group, f.Missing, f))
			for _, h := range hints {
				out = append(out, "    hint: "+h)
			}
		}
	}
	for _, name := range p.DeleteSchedules {
		out = append(out, "forget schedule "+name)
	}
	for _, dep := range p.Deployments {
		out = append(out, fmt.Sprintf("deployment %s %s v%d %s: %s", dep.ID, dep.Job, dep.JobVersion, dep.Status, dep.Description))
	}
	for _, id := range p.DeleteDeployments {
		out = append(out, "forget deployment "+id)
	}
	for _, rv := range d.Reconcile.Reverts {
		out = append(out, fmt.Sprintf("revert %s to v%d: %s", rv.Job, rv.ToVersion, rv.Reason))
	}
	for _, e := range p.Events {
		about := cmp.Or(e.Alloc, e.DeploymentID)
		out = append(out, fmt.Sprintf("event %s %s %s: %s", e.Topic, e.Type, about, e.Message))
	}
	if next := d.Reconcile.NextRun; !next.IsZero() {
		out = append(out, "next pass "+s.at(next))
	}
	if len(out) == 0 {
		out = append(out, "nothing to do")
	}
	return out
}

// at is t as the time since the script's start.
func (s *script) at(t time.Time) string {
	return "at=" + t.Sub(start).String()
}

// apply stores the plan as the registry would: an alloc written keeps its
// agent's status and loses the NodeDown flag (a pass marks it afresh), a
// new one gets the next CreateIndex.
func (s *script) apply(p *spec.Plan) {
	for _, a := range p.Allocs {
		c := *a
		c.NodeDown = false
		if i := slices.IndexFunc(s.allocs, func(o *spec.Alloc) bool { return o.ID == a.ID }); i >= 0 {
			c.Status, c.CreateIndex = s.allocs[i].Status, s.allocs[i].CreateIndex
			s.allocs[i] = &c
			continue
		}
		s.created++
		c.CreateIndex = s.created
		s.allocs = append(s.allocs, &c)
	}
	s.allocs = slices.DeleteFunc(s.allocs, func(a *spec.Alloc) bool { return slices.Contains(p.DeleteAllocs, a.ID) })
	for _, js := range p.Schedules {
		s.schedules[js.Job] = js
	}
	for _, name := range p.DeleteSchedules {
		delete(s.schedules, name)
	}
	for _, d := range p.Deployments {
		if i := slices.IndexFunc(s.deployments, func(o *spec.Deployment) bool { return o.ID == d.ID }); i >= 0 {
			s.deployments[i] = d
		} else {
			s.deployments = append(s.deployments, d)
		}
	}
	s.deployments = slices.DeleteFunc(s.deployments, func(d *spec.Deployment) bool { return slices.Contains(p.DeleteDeployments, d.ID) })
}

func (s *script) nodeByID(id string) *spec.Node {
	for _, n := range s.nodes {
		if n.ID == id {
			return n
		}
	}
	return nil
}

func (s *script) jobByName(name string) *spec.Job {
	for _, j := range s.jobs {
		if j.Name == name {
			return j
		}
	}
	return nil
}

func (s *script) allocByID(id string) *spec.Alloc {
	for _, a := range s.allocs {
		if a.ID == id {
			return a
		}
	}
	return nil
}

// TestGoldenScriptErrors checks that a mistake in a script is reported at
// its file and line, with what to write instead.
func TestGoldenScriptErrors(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"node n1\nnode n2 cpus=4000\n", `x.txt:2: node: unknown option "cpus"; use cpu, mem, status`},
		{"# comment\n\nlaunch web\n", "x.txt:3: launch: unknown directive; use node, down, job, group, alloc, status, deployment, schedule or pass (see golden_test.go)"},
		{"node n1\nalloc a1 n1 web.api[0]\n", "x.txt:2: alloc: no group web.api; declare its job and group first"},
		{"pass at=1m\npass at=30s\n", "x.txt:2: pass: at=30s: want a duration since the script's start, not before the previous pass (at=1m0s)"},
		{"job web\ngroup api auto_revert=true\n", "x.txt:2: group: auto_revert needs an update block: give update=N too"},
	} {
		_, err := runScript("x.txt", tc.src)
		if err == nil || err.Error() != tc.want {
			t.Errorf("script %q:\n got %v\nwant %s", tc.src, err, tc.want)
		}
	}
}
