package spec

import (
	"fmt"
	"slices"
	"strings"
)

// Problem is one thing wrong with an input, located by a field path such as
// "groups[0].tasks[1].resources.memory". Decoders that know where in a file
// the problem is fill in Pos ("web.hcl:12:5").
type Problem struct {
	Field   string `json:"field,omitempty"`
	Pos     string `json:"pos,omitempty"`
	Message string `json:"message"`
}

func (p Problem) String() string {
	switch {
	case p.Pos != "" && p.Field != "":
		return fmt.Sprintf("%s: %s: %s", p.Pos, p.Field, p.Message)
	case p.Pos != "":
		return p.Pos + ": " + p.Message
	case p.Field != "":
		return p.Field + ": " + p.Message
	}
	return p.Message
}

// Problems is every problem found in one input. It is an error so that a
// caller can return it whole; nothing should stop at the first problem.
type Problems []Problem

func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Add appends a problem at field.
func (ps *Problems) Add(field, format string, args ...any) {
	*ps = append(*ps, Problem{Field: field, Message: fmt.Sprintf(format, args...)})
}

// Err returns ps as an error, or nil when there are none.
func (ps Problems) Err() error {
	if len(ps) == 0 {
		return nil
	}
	return ps
}

// MaxNameLen bounds names, which become registry key segments and log prefixes.
const MaxNameLen = 128

// CheckName reports what is wrong with a name used as a key segment (job,
// group, task, node names and IDs), or "" when it is fine. Names are an
// allow-list: letters, digits, '-', '_', '.' and '@' (fleet's template
// instances, "web@1"), starting with a letter or digit, so that '/', "..",
// spaces and control characters can never address another key.
func CheckName(s string) string {
	if s == "" {
		return "must not be empty"
	}
	if len(s) > MaxNameLen {
		return fmt.Sprintf("is %d characters long; the limit is %d", len(s), MaxNameLen)
	}
	for i, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
			(i > 0 && (r == '-' || r == '_' || r == '.' || r == '@'))
		if !ok {
			if i == 0 {
				return fmt.Sprintf("%q must start with a letter or digit", s)
			}
			return fmt.Sprintf("%q contains %q; use only letters, digits, '-', '_', '.' and '@'", s, r)
		}
	}
	if strings.Contains(s, "..") {
		return fmt.Sprintf("%q must not contain \"..\"", s)
	}
	return ""
}

// Drivers known to this build. A node advertises the subset it can run.
var KnownDrivers = []string{"exec", "raw_exec", "docker"}

// Validate returns every problem with a canonicalized job, each with its
// field path. It checks the job alone; whether some node can run it is the
// scheduler's question.
func (j *Job) Validate() Problems {
	var ps Problems
	if msg := CheckName(j.Name); msg != "" {
		ps.Add("name", "job name %s", msg)
	}
	if msg := CheckName(j.Namespace); msg != "" && j.Namespace != "" {
		ps.Add("namespace", "namespace %s", msg)
	}
	for i, dc := range j.Datacenters {
		if strings.TrimSpace(dc) == "" {
			ps.Add(fmt.Sprintf("datacenters[%d]", i), "a datacenter must not be empty; name one, or write \"*\" for every datacenter")
		}
	}
	if msg := CheckName(j.NodePool); msg != "" && j.NodePool != "" {
		ps.Add("node_pool", "node pool %s", msg)
	}
	switch j.Type {
	case JobService, JobBatch, JobSystem, JobSysBatch:
	default:
		ps.Add("type", "unknown job type %q; use \"service\", \"batch\", \"system\" or \"sysbatch\"", j.Type)
	}
	if j.Scoring != "" && !slices.Contains(Scorings, j.Scoring) {
		ps.Add("scoring", "unknown scoring %q; use \"binpack\", \"least_loaded\" or \"epvm\"", j.Scoring)
	}
	if j.Priority < MinPriority || j.Priority > MaxPriority {
		ps.Add("priority", "priority %d is out of range; use %d to %d", j.Priority, MinPriority, MaxPriority)
	}
	checkMeta(&ps, "meta", j.Meta)
	validateConstraints(&ps, "constraints", j.Constraints)
	validateAffinities(&ps, "affinities", j.Affinities)
	validateSpreads(&ps, "spreads", j.Spreads)
	// A group's reschedule policy holds what it inherited from the job's,
	// so a mistake in the job's policy would be found again in each group;
	// it is reported once, at the job.
	var jobResched Problems
	if j.Reschedule != nil {
		j.Reschedule.validate(&jobResched, "reschedule")
		ps = append(ps, jobResched...)
	}
	var jobUpdate Problems
	if j.Update != nil {
		j.Update.validate(&jobUpdate, "update", j.Type)
		ps = append(ps, jobUpdate...)
	}
	var jobMigrate Problems
	j.Migrate.validate(&jobMigrate, "migrate", j.Type)
	ps = append(ps, jobMigrate...)
	jobResched = append(jobResched, jobUpdate...)
	jobResched = append(jobResched, jobMigrate...)
	j.validateKinds(&ps)
	if len(j.Groups) == 0 {
		ps.Add("groups", "a job needs at least one group")
	}
	seen := map[string]int{}
	for i, g := range j.Groups {
		path := fmt.Sprintf("groups[%d]", i)
		if g == nil {
			ps.Add(path, "group is null")
			continue
		}
		if prev, dup := seen[g.Name]; dup && g.Name != "" {
			ps.Add(path+".name", "group %q is already defined at groups[%d]", g.Name, prev)
		}
		seen[g.Name] = i
		var gps Problems
		g.validate(&gps, path, j.Type)
		for _, p := range gps {
			if !slices.ContainsFunc(jobResched, func(q Problem) bool {
				return q.Message == p.Message && path+"."+q.Field == p.Field
			}) {
				ps = append(ps, p)
			}
		}
	}
	return ps
}

func (g *Group) validate(ps *Problems, path string, jt JobType) {
	if msg := CheckName(g.Name); msg != "" {
		ps.Add(path+".name", "group name %s", msg)
	}
	if g.Count < 0 || g.Count > MaxCount {
		ps.Add(path+".count", "count %d is out of range; use 0 to %d", g.Count, MaxCount)
	}
	if g.Restart != nil {
		g.Restart.validate(ps, path+".restart")
	}
	validateDisconnect(ps, path, g)
	validateMaxRunDuration(ps, path, g, jt)
	if g.Reschedule != nil {
		g.Reschedule.validate(ps, path+".reschedule")
	}
	g.Migrate.validate(ps, path+".migrate", jt)
	if g.Update != nil {
		g.Update.validate(ps, path+".update", jt)
		if c := g.Update.Canary; c != nil && *c > g.Count && g.Count > 0 {
			ps.Add(path+".update.canary", "canary %d is more than the group's count %d", *c, g.Count)
		}
	}
	// Moving instances to even out load only makes sense for instances
	// meant to run indefinitely: batch ones finish where they are, and a
	// system job has one per node by definition.
	if g.Rebalance && jt != JobService {
		ps.Add(path+".rebalance", "rebalance applies to service jobs only")
	}
	checkMeta(ps, path+".meta", g.Meta)
	validateConstraints(ps, path+".constraints", g.Constraints)
	validateAffinities(ps, path+".affinities", g.Affinities)
	validateSpreads(ps, path+".spreads", g.Spreads)
	validateNetwork(ps, path+".network", g.Network)
	validatePortTargets(ps, path+".network", g.Network)
	if len(g.Tasks) == 0 {
		ps.Add(path+".tasks", "group %q needs at least one task", g.Name)
	}
	seen := map[string]int{}
	for i, t := range g.Tasks {
		tp := fmt.Sprintf("%s.tasks[%d]", path, i)
		if t == nil {
			ps.Add(tp, "task is null")
			continue
		}
		if prev, dup := seen[t.Name]; dup && t.Name != "" {
			ps.Add(tp+".name", "task %q is already defined at %s.tasks[%d]", t.Name, path, prev)
		}
		seen[t.Name] = i
		t.validate(ps, tp, g)
	}
	validateLifecycles(ps, path, g)
	validateGroupOptions(ps, path, g)
	validateVolumes(ps, path, g)
	validateGroupServices(ps, path, g)
	validateScaling(ps, path, jt, g)
}

func (t *Task) validate(ps *Problems, path string, g *Group) {
	if msg := CheckName(t.Name); msg != "" {
		ps.Add(path+".name", "task name %s", msg)
	} else if t.Name == SharedAllocDir {
		ps.Add(path+".name", "task name %q is the directory the group's tasks share (alloc/); rename the task", t.Name)
	}
	// A driver drover does not have (podman, java) is accepted: the job
	// is kept, and placement says that no node has the driver (Nomad's
	// files name drivers a cluster may lack; that is not a file error).
	switch {
	case t.Driver == "":
		ps.Add(path+".driver", "task %q needs a driver; use one of %s", t.Name, strings.Join(KnownDrivers, ", "))
	case strings.TrimSpace(t.Driver) != t.Driver || strings.ContainsAny(t.Driver, " \t\n${}"):
		ps.Add(path+".driver", "driver %q is not a driver name; use one of %s", t.Driver, strings.Join(KnownDrivers, ", "))
	}
	switch {
	case t.Driver == DriverDocker:
		validateDockerConfig(ps, path+".config", t, g)
	case !slices.Contains(KnownDrivers, t.Driver):
		// What its config holds is the driver's to say.
	case t.Config.Command == "":
		ps.Add(path+".config.command", "task %q needs a command to run", t.Name)
	}
	if t.Driver != DriverDocker && slices.Contains(KnownDrivers, t.Driver) && t.Config.PidMode != "" && t.Config.PidMode != "host" {
		ps.Add(path+".config.pid_mode", "pid_mode %q: %s tasks run in the node's process namespace; write \"host\", which says so, or leave it out", t.Config.PidMode, t.Driver)
	}
	for _, key := range t.Config.setKeys() {
		if why := ConfigKeyRefusal(t.Driver, key); why != "" {
			ps.Add(path+".config."+key, "%s", why)
		}
	}
	for i, c := range t.Config.Prestart {
		if c.Command == "" {
			ps.Add(fmt.Sprintf("%s.config.prestart[%d].command", path, i), "prestart command %d of task %q needs a command to run", i+1, t.Name)
		}
	}
	for i, c := range t.Config.Poststop {
		if c.Command == "" {
			ps.Add(fmt.Sprintf("%s.config.poststop[%d].command", path, i), "poststop command %d of task %q needs a command to run", i+1, t.Name)
		}
	}
	if t.Config.Stop != nil && t.Config.Stop.Command == "" {
		ps.Add(path+".config.stop.command", "the stop block of task %q needs a command to run", t.Name)
	}
	for k := range t.Env {
		switch {
		case k == "" || strings.ContainsAny(k, "=\x00"):
			ps.Add(path+".env", "environment variable name %q must not be empty or contain '=' or NUL", k)
		case strings.HasPrefix(k, "DROVER_"):
			ps.Add(path+".env", "%s: names starting with DROVER_ are set by drover and cannot be overridden", k)
		}
	}
	if t.Resources.CPU < 0 {
		ps.Add(path+".resources.cpu", "cpu %d MHz must not be negative", t.Resources.CPU)
	}
	if t.Resources.MemoryMB < 0 {
		ps.Add(path+".resources.memory", "memory %d MB must not be negative", t.Resources.MemoryMB)
	}
	if t.Resources.DiskMB < 0 {
		ps.Add(path+".resources.disk", "disk %d MB must not be negative", t.Resources.DiskMB)
	}
	if t.Restart != nil {
		t.Restart.validate(ps, path+".restart")
	}
	validateTaskOptions(ps, path, t)
	validateTemplates(ps, path, t)
	validateArtifacts(ps, path, t)
	checkMeta(ps, path+".meta", t.Meta)
	validateConstraints(ps, path+".constraints", t.Constraints)
	validateAffinities(ps, path+".affinities", t.Affinities)
	validateServices(ps, path, t, g)
}

func (r *RestartPolicy) validate(ps *Problems, path string) {
	if r.Allowed() < 0 {
		ps.Add(path+".attempts", "attempts %d must not be negative", r.Allowed())
	}
	switch r.Mode {
	case "", RestartFail, RestartDelay:
	default:
		ps.Add(path+".mode", "unknown restart mode %q; use \"fail\" or \"delay\"", r.Mode)
	}
	if r.Allowed() > 0 && r.Interval == 0 {
		ps.Add(path+".interval", "interval must be set when attempts > 0")
	}
}

// validate checks a reschedule policy.
func (r *ReschedulePolicy) validate(ps *Problems, path string) {
	attempts, unlimited := r.Limit()
	if attempts < 0 {
		ps.Add(path+".attempts", "attempts %d must not be negative", attempts)
	}
	for _, d := range []struct {
		name string
		v    Duration
	}{{"interval", r.Interval}, {"delay", r.Delay}, {"max_delay", r.MaxDelay}} {
		if d.v < 0 {
			ps.Add(path+"."+d.name, "%s %s must not be negative", d.name, d.v.Short())
		}
	}
	switch r.DelayFunction {
	case "", DelayConstant, DelayExponential:
	default:
		ps.Add(path+".delay_function", "unknown delay_function %q; use \"constant\" or \"exponential\"", r.DelayFunction)
	}
	if attempts > 0 && !unlimited && r.Interval <= 0 {
		ps.Add(path+".interval", "interval must be set when attempts > 0, unless unlimited = true")
	}
	if r.Delay >= 0 && r.MaxDelay >= 0 && r.MaxDelay < r.Delay {
		ps.Add(path+".max_delay", "max_delay %s must not be less than delay %s", r.MaxDelay.Short(), r.Delay.Short())
	}
}

func checkMeta(ps *Problems, path string, m map[string]string) {
	for k := range m {
		if k == "" {
			ps.Add(path, "meta keys must not be empty")
		}
	}
}

func sortStrings(s []string) { slices.Sort(s) }

// validateMaxRunDuration: only instances that run to an end have a bound on
// how long they run (Nomad takes max_run_duration in batch and sysbatch
// jobs only); a service or system instance runs until it is stopped.
func validateMaxRunDuration(ps *Problems, path string, g *Group, jt JobType) {
	switch d := g.MaxRunDuration; {
	case d < 0:
		ps.Add(path+".max_run_duration", "max_run_duration %s is negative; write a positive duration such as \"30m\", or leave it out for no bound", d)
	case d > 0 && !jt.Completes():
		ps.Add(path+".max_run_duration", "max_run_duration applies to batch and sysbatch jobs only, not to a %s job, whose instances run until stopped; leave it out, or make the job type \"batch\"", jt)
	}
}
