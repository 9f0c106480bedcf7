package spec

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// DefaultRegion is Nomad's region, for what drover does not have: every
// task runs in one region.
const DefaultRegion = "global"

// DefaultNodeIP is the address of a node whose NodeIPAttribute is not set,
// where its ports are reserved.
const DefaultNodeIP = "127.0.0.1"

// TaskRuntime is where one task of an alloc runs: what its runtime
// variables (DROVER_* and Nomad's NOMAD_*) and the ${...} interpolation of
// its job are made of. The agent builds one at each start.
type TaskRuntime struct {
	Alloc *Alloc
	Task  *Task
	// Node is the node the task runs on; nil leaves ${attr.*}, ${node.*}
	// and ${meta.*} as written, and NOMAD_DC out.
	Node *Node
	// Dirs are the task's directories as it sees them (host paths, or a
	// container's mount points); "" leaves a directory's variables out.
	Dirs TaskDirs
	// AllocIP is the alloc's own address in network mode bridge (its
	// namespace's, on the node's bridge); "" otherwise.
	AllocIP string
}

// SharedAllocDir is the name of the alloc's directory its tasks share,
// beside each task's own, named after the task.
const SharedAllocDir = "alloc"

// TaskDirs are a task's directories, as Nomad lays them out: Alloc is
// the alloc's directory shared by its tasks (alloc/ with logs/, data/ and
// tmp/), Task the task's own (its working directory), Local and Secrets
// the task's local/ and secrets/ inside it. DroverAlloc is drover's older
// DROVER_ALLOC_DIR, the directory holding them all.
type TaskDirs struct {
	DroverAlloc, Alloc, Task, Local, Secrets string
}

// Env returns the task's runtime variables with the job's env on top, its
// values interpolated (see Interpolate) with the runtime variables and the
// node's values. The job's env cannot set DROVER_* (validation refuses it).
func (r TaskRuntime) Env() map[string]string {
	a, t := r.Alloc, r.Task
	m := map[string]string{}
	set := func(name, v string) {
		m["DROVER_"+name], m["NOMAD_"+name] = v, v
	}
	set("JOB_NAME", a.Job)
	set("GROUP_NAME", a.Group)
	set("TASK_NAME", t.Name)
	set("ALLOC_ID", a.ID)
	set("ALLOC_NAME", a.Name)
	set("ALLOC_INDEX", strconv.Itoa(a.Index))
	set("CPU_LIMIT", strconv.Itoa(t.Resources.CPU))
	set("MEMORY_LIMIT", strconv.Itoa(t.Resources.MemoryMB))
	if t.Resources.MemoryMaxMB > 0 {
		set("MEMORY_MAX_LIMIT", strconv.Itoa(t.Resources.MemoryMaxMB))
	}
	m["DROVER_JOB_VERSION"] = strconv.FormatUint(a.JobVersion, 10)
	m["DROVER_NODE_ID"], m["DROVER_NODE_NAME"] = a.NodeID, a.NodeName
	m["NOMAD_SHORT_ALLOC_ID"] = a.ID[:min(8, len(a.ID))]
	m["NOMAD_JOB_ID"] = a.Job
	m["NOMAD_NAMESPACE"] = NamespaceOf(a.Namespace)
	m["NOMAD_REGION"] = DefaultRegion
	if r.Node != nil {
		m["NOMAD_DC"] = r.Node.DatacenterOf()
	}
	dirs := r.Dirs
	for name, dir := range map[string]string{
		"DROVER_ALLOC_DIR": dirs.DroverAlloc, "DROVER_TASK_DIR": dirs.Task,
		"NOMAD_ALLOC_DIR": dirs.Alloc, "NOMAD_TASK_DIR": dirs.Local, "NOMAD_SECRETS_DIR": dirs.Secrets,
	} {
		if dir != "" {
			m[name] = dir
		}
	}
	bridge := a.NetworkModeOf() == NetworkBridge
	for _, p := range a.Ports {
		ip := cmp.Or(p.HostIP, DefaultNodeIP)
		host := strconv.Itoa(p.Value)
		// What the task listens on: the host port, or for a container
		// that maps the port, the container's, or in bridge mode the
		// port the host's maps to in the alloc's namespace. IP and ADDR
		// stay the node's, where others reach it, as Nomad's.
		port := host
		switch {
		case t.Driver == DriverDocker:
			if p.To != 0 && slices.Contains(t.Config.Ports, p.Label) {
				port = strconv.Itoa(p.To)
			}
		case bridge && p.To != 0:
			port = strconv.Itoa(p.To)
		}
		set("PORT_"+p.Label, port)
		set("HOST_PORT_"+p.Label, host)
		set("ADDR_"+p.Label, joinHostPort(ip, host))
		m["NOMAD_IP_"+p.Label] = ip
		if bridge && r.AllocIP != "" && t.Driver != DriverDocker {
			// The alloc's side, as Nomad's NOMAD_ALLOC_*.
			m["NOMAD_ALLOC_IP_"+p.Label] = r.AllocIP
			m["NOMAD_ALLOC_PORT_"+p.Label] = port
			m["NOMAD_ALLOC_ADDR_"+p.Label] = joinHostPort(r.AllocIP, port)
		}
	}
	// Nomad's meta: the job's, the group's, then the task's, each over
	// the one before.
	for k, v := range a.Meta {
		m["NOMAD_META_"+k] = v
	}
	for k, v := range t.Meta {
		m["NOMAD_META_"+k] = v
	}
	base := maps.Clone(m)
	for k, v := range t.Env {
		m[k] = r.Interpolate(v, base)
	}
	return m
}

// Interpolate replaces each ${name} in s that names a runtime variable or a
// node value with its value, and leaves any other ${...} as written, as
// Nomad does:
//
//	${NOMAD_ALLOC_ID}, ${DROVER_PORT_http}, ${X}  a variable of env (Env's)
//	${env.X}                                      the same, written as Nomad's env.X
//	${attr.<key>}, ${meta.<key>}                  the node's attribute or meta
//	${node.unique.id}, ${node.unique.name}, ...   the node's ID, name (constraint targets)
//	${node.datacenter}                            its datacenter
func (r TaskRuntime) Interpolate(s string, env map[string]string) string {
	if !strings.Contains(s, "${") {
		return s
	}
	return interpolation.ReplaceAllStringFunc(s, func(ref string) string {
		if v, ok := r.lookup(ref[2:len(ref)-1], env); ok {
			return v
		}
		return ref
	})
}

// interpolation is one ${name}; a name is what Nomad's job files write:
// letters, digits, '_', '.', '-'.
var interpolation = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_.\-]*)\}`)

func (r TaskRuntime) lookup(name string, env map[string]string) (string, bool) {
	if v, ok := env[name]; ok {
		return v, true
	}
	if k, ok := strings.CutPrefix(name, "env."); ok {
		v, ok := env[k]
		return v, ok
	}
	if r.Node == nil {
		return "", false
	}
	return r.Node.Value(name)
}

// Config returns c with every string in it interpolated (see
// Interpolate): command, args, image, labels' values, prestart and stop
// commands, and whatever a driver's config holds, in lists and maps at
// any depth. Map keys are kept as written.
func (r TaskRuntime) Config(c TaskConfig, env map[string]string) (TaskConfig, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return c, err
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return c, err
	}
	if b, err = json.Marshal(r.walk(v, env)); err != nil {
		return c, err
	}
	var out TaskConfig
	if err := json.Unmarshal(b, &out); err != nil {
		return c, fmt.Errorf("interpolating the task's config: %w", err)
	}
	return out, nil
}

// MergeMeta returns the meta maps merged, each over the ones before it;
// nil when all are empty.
func MergeMeta(ms ...map[string]string) map[string]string {
	var out map[string]string
	for _, m := range ms {
		if len(m) > 0 && out == nil {
			out = map[string]string{}
		}
		maps.Copy(out, m)
	}
	return out
}

func (r TaskRuntime) walk(v any, env map[string]string) any {
	switch v := v.(type) {
	case string:
		return r.Interpolate(v, env)
	case []any:
		for i := range v {
			v[i] = r.walk(v[i], env)
		}
	case map[string]any:
		for k := range v {
			v[k] = r.walk(v[k], env)
		}
	}
	return v
}

// Service returns svc with its name and tags interpolated with the
// runtime variables that do not depend on the driver (no directories),
// and the node's values: the server's catalog and the agent's checks
// both name a service this way, and must agree.
func (r TaskRuntime) Service(svc *Service) *Service {
	if svc == nil || !strings.Contains(svc.Name, "${") && !slices.ContainsFunc(svc.Tags, func(s string) bool { return strings.Contains(s, "${") }) {
		return svc
	}
	r.Dirs = TaskDirs{}
	env := r.Env()
	c := *svc
	c.Name = r.Interpolate(svc.Name, env)
	c.Tags = make([]string, len(svc.Tags))
	for i, tag := range svc.Tags {
		c.Tags[i] = r.Interpolate(tag, env)
	}
	return &c
}

// joinHostPort is net.JoinHostPort, which a pure package cannot import.
func joinHostPort(host, port string) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]:" + port
	}
	return host + ":" + port
}
