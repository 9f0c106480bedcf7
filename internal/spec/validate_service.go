package spec

import (
	"fmt"
	"slices"
	"strings"
)

// DriverDocker is the driver that runs a task as a container.
const DriverDocker = "docker"

// dockerConfigKeys are the config keys only the docker driver reads.
var dockerConfigKeys = []string{"image", "entrypoint", "ports", "labels", "privileged", "network_mode", "pid_mode", "volumes",
	"port_map", "mounts", "mount", "cap_add", "cap_drop", "ulimit", "sysctl", "force_pull", "image_pull_timeout",
	"hostname", "dns_servers", "dns_search_domains", "dns_options", "extra_hosts", "init", "readonly_rootfs", "shm_size"}

// ConfigKeyRefusal says why driver does not take the config key, with what
// to do instead, or "" when it does. Drivers this build does not know take
// anything: what their config holds is theirs to say, and the unknown
// driver is reported on its own. The decoders call it for every key
// written, validation for every key set, so a file and an API body get the
// same message.
func ConfigKeyRefusal(driver, key string) string {
	switch {
	case driver == DriverDocker && (key == "prestart" || key == "stop" || key == "poststop"):
		// The agent runs them on the node, outside the container, where
		// the image's files and tools are not.
		return fmt.Sprintf("the docker driver does not run %s commands; do that work in the image's entrypoint", key)
	case (driver == "exec" || driver == "raw_exec") && key == "pid_mode":
		// Their tasks share the node's process namespace: "host" says
		// what they do; validation refuses any other value.
		return ""
	case (driver == "exec" || driver == "raw_exec") && slices.Contains(dockerConfigKeys, key):
		return fmt.Sprintf("only the docker driver uses %s; remove it, or set driver = \"docker\"", key)
	}
	return ""
}

// setKeys returns the config keys, by their JSON names, that hold a value
// some driver may refuse.
func (c *TaskConfig) setKeys() []string {
	var out []string
	add := func(key string, set bool) {
		if set {
			out = append(out, key)
		}
	}
	add("image", c.Image != "")
	add("entrypoint", len(c.Entrypoint) > 0)
	add("ports", len(c.Ports) > 0)
	add("labels", len(c.Labels) > 0)
	add("privileged", c.Privileged)
	add("network_mode", c.NetworkMode != "")
	add("pid_mode", c.PidMode != "")
	add("volumes", len(c.Volumes) > 0)
	add("port_map", len(c.PortMap) > 0)
	add("mounts", len(c.Mounts) > 0)
	add("cap_add", len(c.CapAdd) > 0)
	add("cap_drop", len(c.CapDrop) > 0)
	add("ulimit", len(c.Ulimit) > 0)
	add("sysctl", len(c.Sysctl) > 0)
	add("force_pull", c.ForcePull)
	add("image_pull_timeout", c.ImagePullTimeout != 0)
	add("hostname", c.Hostname != "")
	add("dns_servers", len(c.DNSServers) > 0)
	add("dns_search_domains", len(c.DNSSearchDomains) > 0)
	add("dns_options", len(c.DNSOptions) > 0)
	add("extra_hosts", len(c.ExtraHosts) > 0)
	add("init", c.Init)
	add("readonly_rootfs", c.ReadonlyRootfs)
	add("shm_size", c.ShmSize != 0)
	add("prestart", len(c.Prestart) > 0)
	add("stop", c.Stop != nil)
	add("poststop", len(c.Poststop) > 0)
	return out
}

// validateDockerConfig checks a docker task's config; path is the config's.
func validateDockerConfig(ps *Problems, path string, t *Task, g *Group) {
	c := &t.Config
	if c.Image == "" {
		ps.Add(path+".image", "task %q uses the docker driver and needs an image, such as image = \"redis:7\"", t.Name)
	} else if strings.TrimSpace(c.Image) != c.Image || strings.ContainsAny(c.Image, " \t\n") {
		ps.Add(path+".image", "image %q must not contain spaces", c.Image)
	}
	for i, label := range c.Ports {
		if !hasPort(g, label) {
			ps.Add(fmt.Sprintf("%s.ports[%d]", path, i), "port %q is not a port of group %q; %s", label, g.Name, portHint(g, label))
		}
		if slices.Index(c.Ports, label) < i {
			ps.Add(fmt.Sprintf("%s.ports[%d]", path, i), "port %q is listed twice; list it once", label)
		}
	}
	for _, k := range sortedKeys(c.Labels) {
		switch {
		case k == "":
			ps.Add(path+".labels", "label names must not be empty")
		case strings.HasPrefix(k, "drover."):
			ps.Add(path+".labels", "label %q: names starting with \"drover.\" are set by drover to find its containers; use another prefix", k)
		}
	}
	switch {
	case c.NetworkMode == "", validNetworkName(c.NetworkMode):
	default:
		ps.Add(path+".network_mode", "network_mode %q is not a network name; use \"bridge\" (the default), \"host\", \"none\", or the name of a docker network (letters, digits, '_', '.', '-')", c.NetworkMode)
	}
	if c.PidMode != "" && c.PidMode != "host" {
		ps.Add(path+".pid_mode", "pid_mode %q is not known; use \"host\" to share the node's process namespace, or leave it out", c.PidMode)
	}
	for i, v := range c.Volumes {
		if msg := checkVolume(v); msg != "" {
			ps.Add(fmt.Sprintf("%s.volumes[%d]", path, i), "volume %q %s; write \"/host/path:/container/path\", with \":ro\" to mount it read-only", v, msg)
		}
	}
	validateDockerExtras(ps, path, c, g)
}

func validNetworkName(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-') {
			return false
		}
	}
	return s != ""
}

// checkVolume says what is wrong with a bind mount "host:container[:ro|rw]",
// or "". Both paths must be absolute: a relative host path would depend on
// the agent's working directory, and docker would take a bare name for a
// named volume, which drover does not manage.
func checkVolume(v string) string {
	parts := strings.Split(v, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return "is not host_path:container_path[:ro|rw]"
	}
	if len(parts) == 3 && parts[2] != "ro" && parts[2] != "rw" {
		return fmt.Sprintf("has mode %q, not ro or rw", parts[2])
	}
	for i, what := range []string{"host path", "container path"} {
		if !strings.HasPrefix(parts[i], "/") {
			return fmt.Sprintf("has %s %q, which is not absolute", what, parts[i])
		}
	}
	return ""
}

// validatePortTargets checks the ports' To, which only docker tasks use
// but which is allowed anywhere: a group may hold docker and exec tasks.
func validatePortTargets(ps *Problems, path string, n *Network) {
	if n == nil {
		return
	}
	for i, p := range n.Ports {
		if p.To < 0 || p.To > 65535 {
			ps.Add(fmt.Sprintf("%s.ports[%d].to", path, i), "to %d is out of range; use 1 to 65535, or leave it out (or -1, as Nomad writes it) to map to the same port number as the host's", p.To)
		}
	}
}

func hasPort(g *Group, label string) bool {
	return slices.ContainsFunc(g.Ports(), func(p Port) bool { return p.Label == label })
}

// servicePortProblem says what is wrong with a service's or check's port
// (a label of g's ports, or a number: NumericPort), or "".
func servicePortProblem(g *Group, port string) string {
	if port == "" || hasPort(g, port) {
		return ""
	}
	if port[0] >= '0' && port[0] <= '9' {
		if _, ok := NumericPort(port); ok {
			return ""
		}
		return fmt.Sprintf("port %q is not a port number: write one from 1 to 65535, or a label of the group's ports", port)
	}
	return fmt.Sprintf("port %q is not a port of group %q; %s", port, g.Name, portHint(g, port))
}

// portHint says which ports a group has, or how to give it the port label.
func portHint(g *Group, label string) string {
	var labels []string
	for _, p := range g.Ports() {
		labels = append(labels, fmt.Sprintf("%q", p.Label))
	}
	if len(labels) == 0 {
		return fmt.Sprintf("the group has no ports; add one: network { port %q {} }", label)
	}
	return "the group's ports are " + strings.Join(labels, ", ")
}

// MaxServiceNameLen is a DNS label's limit: a service is served as
// <name>.service.drover.
const MaxServiceNameLen = 63

// CheckServiceName reports what is wrong with a service name, or "". Its
// ${...} interpolations (TaskRuntime.Service) are checked as one letter:
// what they hold is known only where the task runs.
func CheckServiceName(s string) string {
	if s == "" {
		return "is empty; name the service, such as name = \"web\""
	}
	bare := interpolation.ReplaceAllString(s, "x")
	if len(bare) > MaxServiceNameLen {
		return fmt.Sprintf("%q is %d characters long; the limit is %d (it becomes <name>.service.drover)", s, len(s), MaxServiceNameLen)
	}
	for _, r := range bare {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return fmt.Sprintf("%q contains %q; use lowercase letters, digits and '-' (it becomes <name>.service.drover)", s, r)
		}
	}
	if bare[0] == '-' || bare[len(bare)-1] == '-' {
		return fmt.Sprintf("%q must not start or end with '-' (it becomes <name>.service.drover)", s)
	}
	return ""
}

// validateServices checks a task's services; path is the task's. Two
// tasks of a group may register the same service name (their instances
// are one service), but one task may not register a name twice: its
// instances would be listed twice.
func validateServices(ps *Problems, path string, t *Task, g *Group) {
	names := map[string]int{}
	checks := map[string]string{}
	for i, s := range t.Services {
		sp := fmt.Sprintf("%s.services[%d]", path, i)
		if s == nil {
			ps.Add(sp, "service is null")
			continue
		}
		if msg := CheckServiceName(s.Name); msg != "" {
			ps.Add(sp+".name", "service name %s", msg)
		} else if prev, dup := names[s.Name]; dup {
			ps.Add(sp+".name", "task %q already registers service %q at %s.services[%d]; register it once, with all its checks", t.Name, s.Name, path, prev)
		} else {
			names[s.Name] = i
		}
		if msg := servicePortProblem(g, s.PortLabel); msg != "" {
			ps.Add(sp+".port", "service %s", msg)
		}
		for k, tag := range s.Tags {
			if strings.TrimSpace(tag) == "" {
				ps.Add(fmt.Sprintf("%s.tags[%d]", sp, k), "tags must not be empty")
			}
		}
		for k, c := range s.Checks {
			cp := fmt.Sprintf("%s.checks[%d]", sp, k)
			if c == nil {
				ps.Add(cp, "check is null")
				continue
			}
			if prev, dup := checks[c.Name]; dup && c.Name != "" {
				ps.Add(cp+".name", "check %q is already defined at %s; give each check of a task its own name", c.Name, prev)
			} else {
				checks[c.Name] = cp
			}
			c.validate(ps, cp, s, g)
		}
	}
}

func (c *Check) validate(ps *Problems, path string, s *Service, g *Group) {
	switch c.Type {
	case CheckHTTP, CheckTCP:
		port := c.PortLabel
		if port == "" {
			port = s.PortLabel
		}
		if port == "" {
			ps.Add(path+".port", "%s checks need a port: set port on the service or on the check", c.Type)
		}
	case CheckScript:
		if c.Command == "" {
			ps.Add(path+".command", "a script check needs a command, run in the task's environment; exit 0 passes")
		}
	case "":
		ps.Add(path+".type", "a check needs a type: \"http\", \"tcp\" or \"script\"")
	default:
		ps.Add(path+".type", "unknown check type %q; use \"http\", \"tcp\" or \"script\"", c.Type)
	}
	if msg := servicePortProblem(g, c.PortLabel); msg != "" {
		ps.Add(path+".port", "check %s", msg)
	}
	if c.Type == CheckHTTP && !strings.HasPrefix(c.Path, "/") {
		ps.Add(path+".path", "path %q must start with '/'", c.Path)
	}
	if c.Type != CheckHTTP && c.Type != "" && c.Path != "" {
		ps.Add(path+".path", "only http checks use a path; remove it")
	}
	if c.Type != CheckScript && c.Type != "" && (c.Command != "" || len(c.Args) > 0) {
		ps.Add(path+".command", "only script checks run a command; remove command and args, or use type = \"script\"")
	}
	if c.Interval < MinCheckInterval {
		ps.Add(path+".interval", "interval %s is too short; use at least %s", c.Interval, MinCheckInterval)
	}
	switch {
	case c.Timeout <= 0:
		ps.Add(path+".timeout", "timeout %s must be positive", c.Timeout)
	case c.Timeout > c.Interval && c.Interval >= MinCheckInterval:
		ps.Add(path+".timeout", "timeout %s is longer than the interval %s; a probe must end before the next starts", c.Timeout.Short(), c.Interval.Short())
	}
	if c.Grace < 0 {
		ps.Add(path+".grace", "grace %s must not be negative", c.Grace)
	}
	if r := c.Restart; r != nil {
		if r.Limit < 1 {
			ps.Add(path+".check_restart.limit", "limit %d must be at least 1: the number of failed probes in a row that restart the task", r.Limit)
		}
		if r.Grace < 0 {
			ps.Add(path+".check_restart.grace", "grace %s must not be negative", r.Grace)
		}
	}
}

// canonicalizeServices fills in check defaults. A check's default name
// counts the checks of its type in the service, written names included, so
// that adding a name to one check does not rename the others.
func canonicalizeServices(t *Task) {
	for _, s := range t.Services {
		if s == nil {
			continue
		}
		seen := map[CheckType]int{}
		for _, c := range s.Checks {
			if c == nil {
				continue
			}
			seen[c.Type]++
			if c.Name == "" {
				c.Name = s.Name + "-" + string(c.Type)
				if n := seen[c.Type]; n > 1 {
					c.Name += fmt.Sprintf("-%d", n)
				}
			}
			if c.Interval == 0 {
				c.Interval = DefaultCheckInterval
			}
			if c.Timeout == 0 {
				// A short interval shortens the default timeout with
				// it, so that leaving timeout out is never an error.
				c.Timeout = DefaultCheckTimeout
				if c.Interval > 0 {
					c.Timeout = min(c.Timeout, c.Interval)
				}
			}
			if c.Type == CheckHTTP && c.Path == "" {
				c.Path = "/"
			}
			if c.Restart != nil && c.Restart.Grace == 0 {
				c.Restart.Grace = c.Grace
			}
		}
	}
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
