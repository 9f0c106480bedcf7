package scheduler

// Golden transcripts: each testdata/golden/NAME.txt is a script that builds
// a cluster and asks Place for placements; NAME.golden is the script echoed
// line by line with the output of every `run` after it. A person reads the
// .golden to judge whether the scheduler did the right thing, and its diff
// to see what a change did:
//
//	go test ./internal/scheduler -run TestGolden           compare
//	go test ./internal/scheduler -run TestGolden -update   rewrite, then review git diff
//
// The script language, one directive a line, words split on blanks; `#`
// starts a comment line; options are key=value; [...] is optional, with
// the default shown:
//
//	node ID [cpu=4000] [mem=8192] [disk=0] [drivers=exec] [status=ready]
//	     [ineligible=false] [drain=false] [ip=ADDR] [meta.KEY=VALUE]...
//	     [attr.KEY=VALUE]...
//	    A node named ID. ip sets attr network.ip, the address ports are
//	    reserved on. ineligible=true and drain=true are an operator's
//	    `drover node eligibility ID off` and `drover node drain ID`.
//	job NAME [type=service] [priority=50] [scoring=binpack] [preempt=unset]
//	    Opens a job; the lines below it, up to its first group, add to
//	    the job.
//	group NAME [count=1] [cpu=100] [mem=300] [disk=0] [drivers=exec]
//	      [ports=LABEL[:STATIC],...]
//	    Opens a group of the last job; the lines below it add to the
//	    group. One task per driver; the first reserves all the resources.
//	    A port without :STATIC is dynamic.
//	constraint [ATTR] OP [VALUE...]
//	    On the open group, else the open job. ATTR is a ${...} target; it
//	    is left out for distinct_hosts, colocate, conflicts and replaces.
//	    VALUE is the rest of the line.
//	affinity ATTR OP [VALUE] [weight=50]
//	spread ATTR [weight=50] [targets=VALUE:PERCENT,...]
//	alloc NODE JOB.GROUP[INDEX] [cpu=] [mem=] [disk=] [ports=[LABEL:]PORT,...]
//	      [status=running] [desired=run]
//	    An existing alloc. Resources default to the group's when the job
//	    is declared above (then its priority counts for preemption),
//	    else to 0.
//	place JOB[.GROUP] [INDEX | FROM..TO]
//	    Requests for the instances: every group and index up to count by
//	    default. For a system job, one request per node pinned to it, in
//	    node order, index = the node's position: unlike the reconciler,
//	    which pins only eligible ready nodes, so that every node's reason
//	    shows.
//	pin JOB.GROUP INDEX NODE
//	    One request pinned to NODE.
//	run
//	    Calls Place with the nodes, the live allocs, every declared job
//	    (validated) and the requests since the last run,
//	    and prints, on lines that start with "> ": each placement in the
//	    order returned, each eviction, each failure with its hints, then a
//	    table of the nodes' use and allocs. Placements then become running
//	    allocs and evicted allocs go away, so that the next run starts
//	    from the cluster this one left.
//
// Any other directive, or a bad option, fails the test at file:line.

import (
	"errors"
	"flag"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"

	"github.com/drover-org/drover/internal/spec"
	"github.com/drover-org/drover/internal/testkit"
)

var update = flag.Bool("update", false, "rewrite testdata/golden/*.golden from the scripts")

func TestGolden(t *testing.T) { testkit.Golden(t, "internal/scheduler", *update, runScript) }

// script is what a golden script has built so far.
type script struct {
	out     strings.Builder
	nodes   []*spec.Node
	jobs    map[string]*spec.Job
	jobLine map[string]string // file:line of each job, for Validate's problems
	order   []string          // job names in declaration order
	job     *spec.Job         // the open job
	group   *spec.Group       // the open group of job; nil before its first
	allocs  []*spec.Alloc
	reqs    []Request
	nextID  int
}

func runScript(file, src string) (string, error) {
	s := &script{jobs: map[string]*spec.Job{}, jobLine: map[string]string{}}
	for i, text := range strings.Split(strings.TrimRight(src, "\n"), "\n") {
		s.out.WriteString(text + "\n")
		words := strings.Fields(text)
		if len(words) == 0 || strings.HasPrefix(words[0], "#") {
			continue
		}
		pos := fmt.Sprintf("%s:%d", file, i+1)
		if err := s.do(pos, words[0], words[1:]); err != nil {
			return "", fmt.Errorf("%s: %s: %w", pos, words[0], err)
		}
	}
	return s.out.String(), nil
}

func (s *script) do(pos, directive string, args []string) error {
	switch directive {
	case "node":
		return s.node(args)
	case "job":
		return s.newJob(pos, args)
	case "group":
		return s.newGroup(args)
	case "constraint":
		return s.constraint(args)
	case "affinity":
		return s.affinity(args)
	case "spread":
		return s.spread(args)
	case "alloc":
		return s.alloc(args)
	case "place":
		return s.place(args)
	case "pin":
		return s.pin(args)
	case "run":
		if len(args) > 0 {
			return fmt.Errorf("run takes no arguments, got %q", args)
		}
		return s.run()
	}
	return errors.New("unknown directive; use node, job, group, constraint, affinity, spread, alloc, place, pin or run (see golden_test.go)")
}

// options splits args into positional words and key=value options. A word
// is an option when its key is in allowed, or starts with an allowed key
// that ends in "." (meta.rack for "meta."); a word like "=" or "a=b" with
// another key stays positional, so constraint values can hold "=".
type options struct {
	pos  []string
	opts map[string]string
}

// optionKey is what a mistyped option looks like, as opposed to a
// constraint value such as "=" or "!=".
var optionKey = regexp.MustCompile(`^[a-z_.]+$`)

func parseOptions(args []string, allowed ...string) (options, error) {
	o := options{opts: map[string]string{}}
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		isOpt := ok && slices.ContainsFunc(allowed, func(key string) bool {
			return k == key || strings.HasSuffix(key, ".") && strings.HasPrefix(k, key) && len(k) > len(key)
		})
		if !isOpt {
			if ok && optionKey.MatchString(k) {
				return o, fmt.Errorf("unknown option %q; use %s", k, strings.Join(allowed, ", "))
			}
			o.pos = append(o.pos, a)
			continue
		}
		if _, dup := o.opts[k]; dup {
			return o, fmt.Errorf("option %s given twice", k)
		}
		o.opts[k] = v
	}
	return o, nil
}

func (o options) str(key, def string) string {
	if v, ok := o.opts[key]; ok {
		return v
	}
	return def
}

func (o options) int(key string, def int) (int, error) {
	v, ok := o.opts[key]
	if !ok {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
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

// resources reads cpu, mem and disk, each defaulting to def's.
func (o options) resources(def spec.Resources) (spec.Resources, error) {
	var errs [3]error
	var r spec.Resources
	r.CPU, errs[0] = o.int("cpu", def.CPU)
	r.MemoryMB, errs[1] = o.int("mem", def.MemoryMB)
	r.DiskMB, errs[2] = o.int("disk", def.DiskMB)
	return r, errors.Join(errs[:]...)
}

func wantArgs(o options, lo, hi int, usage string) error {
	if len(o.pos) < lo || len(o.pos) > hi {
		return fmt.Errorf("got %q; usage: %s", o.pos, usage)
	}
	return nil
}

func (s *script) node(args []string) error {
	o, err := parseOptions(args, "cpu", "mem", "disk", "drivers", "status", "ineligible", "drain", "ip", "meta.", "attr.")
	if err != nil {
		return err
	}
	if err := wantArgs(o, 1, 1, "node ID [cpu=] [mem=] [disk=] [drivers=a,b] [status=ready|down] [ineligible=true] [drain=true] [ip=] [meta.K=V] [attr.K=V]"); err != nil {
		return err
	}
	id := o.pos[0]
	if slices.ContainsFunc(s.nodes, func(n *spec.Node) bool { return n.ID == id }) {
		return fmt.Errorf("node %s is already declared", id)
	}
	res, err := o.resources(spec.Resources{CPU: 4000, MemoryMB: 8192})
	if err != nil {
		return err
	}
	n := &spec.Node{ID: id, Name: id, Resources: res, Drivers: strings.Split(o.str("drivers", "exec"), ","),
		Status: spec.NodeStatus(o.str("status", string(spec.NodeReady)))}
	if n.Status != spec.NodeReady && n.Status != spec.NodeDown {
		return fmt.Errorf("status=%s: use ready or down", n.Status)
	}
	ineligible, err := o.bool("ineligible")
	if err != nil {
		return err
	}
	n.Ineligible = ineligible != nil && *ineligible
	if drain, err := o.bool("drain"); err != nil {
		return err
	} else if drain != nil && *drain {
		n.Drain = &spec.DrainStrategy{}
	}
	for k, v := range o.opts {
		if key, ok := strings.CutPrefix(k, "meta."); ok {
			n.Meta = setKey(n.Meta, key, v)
		}
		if key, ok := strings.CutPrefix(k, "attr."); ok {
			n.Attributes = setKey(n.Attributes, key, v)
		}
	}
	if ip, ok := o.opts["ip"]; ok {
		n.Attributes = setKey(n.Attributes, spec.NodeIPAttribute, ip)
	}
	s.nodes = append(s.nodes, n)
	return nil
}

func setKey(m map[string]string, k, v string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	m[k] = v
	return m
}

func (s *script) newJob(pos string, args []string) error {
	o, err := parseOptions(args, "type", "priority", "scoring", "preempt")
	if err != nil {
		return err
	}
	if err := wantArgs(o, 1, 1, "job NAME [type=] [priority=] [scoring=] [preempt=]"); err != nil {
		return err
	}
	name := o.pos[0]
	if s.jobs[name] != nil {
		return fmt.Errorf("job %s is already declared at %s", name, s.jobLine[name])
	}
	j := &spec.Job{Name: name, Type: spec.JobType(o.str("type", string(spec.JobService))), Scoring: spec.Scoring(o.str("scoring", "")), Version: 1}
	if j.Priority, err = o.int("priority", spec.DefaultPriority); err != nil {
		return err
	}
	if j.Preempt, err = o.bool("preempt"); err != nil {
		return err
	}
	s.jobs[name], s.jobLine[name] = j, pos
	s.order = append(s.order, name)
	s.job, s.group = j, nil
	return nil
}

func (s *script) newGroup(args []string) error {
	if s.job == nil {
		return errors.New("group before any job; write a job line first")
	}
	o, err := parseOptions(args, "count", "cpu", "mem", "disk", "drivers", "ports")
	if err != nil {
		return err
	}
	if err := wantArgs(o, 1, 1, "group NAME [count=] [cpu=] [mem=] [disk=] [drivers=a,b] [ports=LABEL[:STATIC],...]"); err != nil {
		return err
	}
	g := &spec.Group{Name: o.pos[0]}
	if g.Count, err = o.int("count", 1); err != nil {
		return err
	}
	res, err := o.resources(spec.Resources{CPU: spec.DefaultCPU, MemoryMB: spec.DefaultMemoryMB})
	if err != nil {
		return err
	}
	for i, d := range strings.Split(o.str("drivers", "exec"), ",") {
		t := &spec.Task{Name: fmt.Sprintf("t%d", i), Driver: d, Config: spec.TaskConfig{Command: "true"}}
		if i == 0 {
			t.Resources = res
		}
		g.Tasks = append(g.Tasks, t)
	}
	if ports, ok := o.opts["ports"]; ok {
		g.Network = &spec.Network{}
		for _, p := range strings.Split(ports, ",") {
			label, static, hasStatic := strings.Cut(p, ":")
			port := spec.Port{Label: label}
			if hasStatic {
				if port.Static, err = strconv.Atoi(static); err != nil {
					return fmt.Errorf("port %q: want LABEL or LABEL:NUMBER", p)
				}
			}
			g.Network.Ports = append(g.Network.Ports, port)
		}
	}
	s.job.Groups = append(s.job.Groups, g)
	s.group = g
	return nil
}

func (s *script) constraint(args []string) error {
	if s.job == nil {
		return errors.New("constraint before any job; write it under a job or group line")
	}
	if len(args) == 0 {
		return errors.New("usage: constraint [ATTR] OP [VALUE...]")
	}
	var c spec.Constraint
	if strings.HasPrefix(args[0], "${") {
		if len(args) < 2 {
			return errors.New("usage: constraint ATTR OP [VALUE...]: the operator is missing")
		}
		c.Attribute, args = args[0], args[1:]
	}
	c.Operator, c.Value = args[0], strings.Join(args[1:], " ")
	if s.group != nil {
		s.group.Constraints = append(s.group.Constraints, &c)
	} else {
		s.job.Constraints = append(s.job.Constraints, &c)
	}
	return nil
}

func (s *script) affinity(args []string) error {
	if s.job == nil {
		return errors.New("affinity before any job; write it under a job or group line")
	}
	o, err := parseOptions(args, "weight")
	if err != nil {
		return err
	}
	if err := wantArgs(o, 2, 3, "affinity ATTR OP [VALUE] [weight=]"); err != nil {
		return err
	}
	a := &spec.Affinity{Attribute: o.pos[0], Operator: o.pos[1]}
	if len(o.pos) == 3 {
		a.Value = o.pos[2]
	}
	if a.Weight, err = o.int("weight", 0); err != nil {
		return err
	}
	if s.group != nil {
		s.group.Affinities = append(s.group.Affinities, a)
	} else {
		s.job.Affinities = append(s.job.Affinities, a)
	}
	return nil
}

func (s *script) spread(args []string) error {
	if s.job == nil {
		return errors.New("spread before any job; write it under a job or group line")
	}
	o, err := parseOptions(args, "weight", "targets")
	if err != nil {
		return err
	}
	if err := wantArgs(o, 1, 1, "spread ATTR [weight=] [targets=VALUE:PERCENT,...]"); err != nil {
		return err
	}
	sp := &spec.Spread{Attribute: o.pos[0]}
	if sp.Weight, err = o.int("weight", 0); err != nil {
		return err
	}
	if targets, ok := o.opts["targets"]; ok {
		for _, t := range strings.Split(targets, ",") {
			v, p, _ := strings.Cut(t, ":")
			pct, err := strconv.Atoi(p)
			if err != nil {
				return fmt.Errorf("target %q: want VALUE:PERCENT", t)
			}
			sp.Targets = append(sp.Targets, spec.SpreadTarget{Value: v, Percent: pct})
		}
	}
	if s.group != nil {
		s.group.Spreads = append(s.group.Spreads, sp)
	} else {
		s.job.Spreads = append(s.job.Spreads, sp)
	}
	return nil
}

var allocName = regexp.MustCompile(`^([^.\[\]]+)\.([^.\[\]]+)\[(\d+)\]$`)

func (s *script) alloc(args []string) error {
	o, err := parseOptions(args, "cpu", "mem", "disk", "ports", "status", "desired")
	if err != nil {
		return err
	}
	if err := wantArgs(o, 2, 2, "alloc NODE JOB.GROUP[INDEX] [cpu=] [mem=] [disk=] [ports=[LABEL:]PORT,...] [status=] [desired=]"); err != nil {
		return err
	}
	n := s.nodeByID(o.pos[0])
	if n == nil {
		return fmt.Errorf("no node %s; declare it with a node line first", o.pos[0])
	}
	m := allocName.FindStringSubmatch(o.pos[1])
	if m == nil {
		return fmt.Errorf("alloc name %q: want JOB.GROUP[INDEX], such as web.api[0]", o.pos[1])
	}
	index, _ := strconv.Atoi(m[3])
	var def spec.Resources
	if j := s.jobs[m[1]]; j != nil && j.Group(m[2]) != nil {
		def = j.Group(m[2]).Resources()
	}
	res, err := o.resources(def)
	if err != nil {
		return err
	}
	a := s.newAlloc(m[1], m[2], index, n, res)
	a.Status.ClientStatus = spec.ClientStatus(o.str("status", string(spec.ClientRunning)))
	a.DesiredStatus = spec.DesiredStatus(o.str("desired", string(spec.DesiredRun)))
	if ports, ok := o.opts["ports"]; ok {
		for _, p := range strings.Split(ports, ",") {
			label, value, hasLabel := strings.Cut(p, ":")
			if !hasLabel {
				label, value = "port", p
			}
			v, err := strconv.Atoi(value)
			if err != nil {
				return fmt.Errorf("port %q: want [LABEL:]NUMBER", p)
			}
			a.Ports = append(a.Ports, spec.AllocPort{Label: label, Value: v, HostIP: hostIP(n)})
		}
	}
	s.allocs = append(s.allocs, a)
	return nil
}

// newAlloc makes a running alloc with the next script-wide ID, so that IDs
// (which break ties between allocs) follow the order of the script.
func (s *script) newAlloc(job, group string, index int, n *spec.Node, res spec.Resources) *spec.Alloc {
	s.nextID++
	return &spec.Alloc{
		ID: fmt.Sprintf("a%03d", s.nextID), Name: spec.AllocName(job, group, index), Job: job, Group: group, Index: index,
		NodeID: n.ID, NodeName: n.Name, Resources: res, DesiredStatus: spec.DesiredRun,
		Status: &spec.AllocStatus{ClientStatus: spec.ClientRunning},
	}
}

func hostIP(n *spec.Node) string {
	if ip := n.Attributes[spec.NodeIPAttribute]; ip != "" {
		return ip
	}
	return "127.0.0.1"
}

func (s *script) nodeByID(id string) *spec.Node {
	for _, n := range s.nodes {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// target reads JOB or JOB.GROUP.
func (s *script) target(name string) (*spec.Job, []*spec.Group, error) {
	jobName, groupName, hasGroup := strings.Cut(name, ".")
	j := s.jobs[jobName]
	if j == nil {
		return nil, nil, fmt.Errorf("no job %s; declare it with a job line first", jobName)
	}
	if !hasGroup {
		return j, j.Groups, nil
	}
	g := j.Group(groupName)
	if g == nil {
		return nil, nil, fmt.Errorf("job %s has no group %s", jobName, groupName)
	}
	return j, []*spec.Group{g}, nil
}

func (s *script) place(args []string) error {
	if len(args) < 1 || len(args) > 2 {
		return fmt.Errorf("got %q; usage: place JOB[.GROUP] [INDEX | FROM..TO]", args)
	}
	j, groups, err := s.target(args[0])
	if err != nil {
		return err
	}
	for _, g := range groups {
		if j.Type == spec.JobSystem {
			if len(args) > 1 {
				return errors.New("a system job's instances go one per node; use pin JOB.GROUP INDEX NODE for one of them")
			}
			for i, n := range s.nodes {
				s.reqs = append(s.reqs, Request{Job: j, Group: g, Index: i, Node: n.ID})
			}
			continue
		}
		from, to := 0, g.Count-1
		if len(args) > 1 {
			lo, hi, isRange := strings.Cut(args[1], "..")
			if !isRange {
				hi = lo
			}
			var err1, err2 error
			from, err1 = strconv.Atoi(lo)
			to, err2 = strconv.Atoi(hi)
			if err1 != nil || err2 != nil || from > to {
				return fmt.Errorf("indexes %q: want INDEX or FROM..TO", args[1])
			}
		}
		for i := from; i <= to; i++ {
			s.reqs = append(s.reqs, Request{Job: j, Group: g, Index: i})
		}
	}
	return nil
}

func (s *script) pin(args []string) error {
	if len(args) != 3 {
		return fmt.Errorf("got %q; usage: pin JOB.GROUP INDEX NODE", args)
	}
	j, groups, err := s.target(args[0])
	if err != nil {
		return err
	}
	if len(groups) != 1 || !strings.Contains(args[0], ".") {
		return fmt.Errorf("pin needs one group: JOB.GROUP, got %s", args[0])
	}
	index, err := strconv.Atoi(args[1])
	if err != nil {
		return fmt.Errorf("index %q: want a whole number", args[1])
	}
	// An unknown node is allowed: Place must say it cannot use it.
	s.reqs = append(s.reqs, Request{Job: j, Group: groups[0], Index: index, Node: args[2]})
	return nil
}

func (s *script) run() error {
	// Jobs are validated, not canonicalized: Canonicalize would give the
	// extra tasks of a multi-driver group the default resources.
	jobs := map[string]*spec.Job{}
	for _, name := range s.order {
		j := s.jobs[name]
		if ps := j.Validate(); len(ps) > 0 {
			return fmt.Errorf("job %s (declared at %s) is not valid: %v", name, s.jobLine[name], ps)
		}
		jobs[name] = j
	}
	res := Place(Input{Nodes: s.nodes, Allocs: s.allocs, Requests: s.reqs, Jobs: jobs})
	s.reqs = nil

	var out []string
	for _, p := range res.Placements {
		line := fmt.Sprintf("%s -> %s", requestName(p.Request), p.NodeID)
		if len(p.Ports) > 0 {
			line += " ports"
			for _, port := range p.Ports {
				line += " " + port.Label + "=" + portString(port)
			}
		}
		out = append(out, line)
	}
	for _, e := range res.Evictions {
		out = append(out, fmt.Sprintf("evict %s on %s (%s): %s", e.Alloc.Name, e.Alloc.NodeID, e.Cause, e.Reason))
	}
	for _, f := range res.Failures {
		pf := f.PlacementFailure
		hints := pf.Hints
		pf.Hints = nil // printed one a line below
		out = append(out, fmt.Sprintf("fail %s (missing %d): %s", failedNames(f), f.Missing, pf.String()))
		for _, h := range hints {
			out = append(out, "  hint: "+h)
		}
	}
	s.carry(res)
	out = append(out, s.table()...)
	for _, l := range out {
		s.out.WriteString(strings.TrimRight("> "+l, " ") + "\n")
	}
	return nil
}

// requestName is "web.api[2]", with "@n3" when the request is pinned.
func requestName(r Request) string {
	name := spec.AllocName(r.Job.Name, r.Group.Name, r.Index)
	if r.Node != "" {
		name += "@" + r.Node
	}
	return name
}

// failedNames is "web.api[2,3]", or for pinned requests each name with
// its node: "agent.g[1]@n2 agent.g[3]@n4".
func failedNames(f Failure) string {
	var idx, names []string
	for _, r := range f.Requests {
		idx = append(idx, strconv.Itoa(r.Index))
		names = append(names, requestName(r))
	}
	if slices.ContainsFunc(f.Requests, func(r Request) bool { return r.Node != "" }) {
		return strings.Join(names, " ")
	}
	return fmt.Sprintf("%s.%s[%s]", f.Job, f.Group, strings.Join(idx, ","))
}

// portString is the port, with its address when that is not the default.
func portString(p spec.AllocPort) string {
	if p.HostIP == "127.0.0.1" {
		return strconv.Itoa(p.Value)
	}
	return p.HostIP + ":" + strconv.Itoa(p.Value)
}

// carry makes the run's placements running allocs and drops the evicted
// ones, so that the next run sees the cluster this one left.
func (s *script) carry(res Result) {
	evicted := map[string]bool{}
	for _, e := range res.Evictions {
		evicted[e.Alloc.ID] = true
	}
	s.allocs = slices.DeleteFunc(s.allocs, func(a *spec.Alloc) bool { return evicted[a.ID] })
	for _, p := range res.Placements {
		n := s.nodeByID(p.NodeID)
		if n == nil {
			n = &spec.Node{ID: p.NodeID, Name: p.NodeName} // a wrong answer; the table shows it
		}
		a := s.newAlloc(p.Request.Job.Name, p.Request.Group.Name, p.Request.Index, n, p.Request.Group.Resources())
		a.Ports = p.Ports
		s.allocs = append(s.allocs, a)
	}
}

// table is each node's use and live allocs, counted here rather than by
// the scheduler so that it checks the scheduler: a resource used beyond
// the node's total ends in "!", and so does a port held twice.
func (s *script) table() []string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, n := range s.nodes {
		var used spec.Resources
		var names []string
		ports := map[int]int{}
		for _, a := range s.allocs {
			if a.NodeID != n.ID || a.Terminal() {
				continue
			}
			used = used.Add(a.Resources)
			names = append(names, a.Name)
			for _, p := range a.Ports {
				ports[p.Value]++
			}
		}
		var ps []string
		for _, p := range slices.Sorted(func(yield func(int) bool) {
			for p := range ports {
				if !yield(p) {
					return
				}
			}
		}) {
			ps = append(ps, strconv.Itoa(p)+over(ports[p], 1))
		}
		portCol := ""
		if len(ps) > 0 {
			portCol = "ports " + strings.Join(ps, ",")
		}
		diskCol := "" // most scripts leave disk out
		if used.DiskMB != 0 || n.Resources.DiskMB != 0 {
			diskCol = fmt.Sprintf("disk %d/%d%s", used.DiskMB, n.Resources.DiskMB, over(used.DiskMB, n.Resources.DiskMB))
		}
		status := string(n.Status)
		if n.Drain != nil {
			status += ",draining"
		}
		if n.Ineligible {
			status += ",ineligible"
		}
		fmt.Fprintf(w, "  %s\t%s\tcpu %d/%d%s\tmem %d/%d%s\t%s\t%s\t%s\n", n.ID, status,
			used.CPU, n.Resources.CPU, over(used.CPU, n.Resources.CPU),
			used.MemoryMB, n.Resources.MemoryMB, over(used.MemoryMB, n.Resources.MemoryMB),
			diskCol, portCol, strings.Join(names, " "))
	}
	w.Flush()
	return strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
}

func over(used, total int) string {
	if used > total {
		return "!"
	}
	return ""
}

// TestGoldenScriptErrors checks that a mistake in a script is reported at
// its file and line, with what to write instead.
func TestGoldenScriptErrors(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"node n1\nnode n2 cpus=4000\n", `x.txt:2: node: unknown option "cpus"; use cpu, mem, disk, drivers, status, ineligible, drain, ip, meta., attr.`},
		{"# comment\n\nlaunch web\n", "x.txt:3: launch: unknown directive; use node, job, group, constraint, affinity, spread, alloc, place, pin or run (see golden_test.go)"},
		{"place web\n", "x.txt:1: place: no job web; declare it with a job line first"},
		{"job web priority=500\n  group g\nrun\n", "x.txt:3: run: job web (declared at x.txt:1) is not valid: priority: priority 500 is out of range; use 1 to 100"},
		{"node n1\nalloc n1 web-0\n", "x.txt:2: alloc: alloc name \"web-0\": want JOB.GROUP[INDEX], such as web.api[0]"},
	} {
		_, err := runScript("x.txt", tc.src)
		if err == nil || err.Error() != tc.want {
			t.Errorf("script %q:\n got %v\nwant %s", tc.src, err, tc.want)
		}
	}
}
