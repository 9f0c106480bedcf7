package spec

import (
	"fmt"
	"net/netip"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// DockerMount is one of a docker task's mount blocks, as Nomad's docker
// driver writes them: a bind mount of a node's path (Source absolute, or
// relative to the task's directory), a docker volume named Source, or a
// tmpfs; at Target in the container.
type DockerMount struct {
	Type     string `json:"type,omitempty"`
	Target   string `json:"target"`
	Source   string `json:"source,omitempty"`
	ReadOnly bool   `json:"readonly,omitempty"`
}

// The types of a docker mount; "" is MountBind, as in Nomad.
const (
	MountBind   = "bind"
	MountVolume = "volume"
	MountTmpfs  = "tmpfs"
)

// TypeOf is the mount's type, MountBind when unset.
func (m *DockerMount) TypeOf() string {
	if m.Type == "" {
		return MountBind
	}
	return m.Type
}

// DefaultImagePullTimeout bounds an image pull without image_pull_timeout,
// as Nomad's.
const DefaultImagePullTimeout = Duration(5 * time.Minute)

// validateDockerExtras checks the docker keys Nomad's files write beside
// drover's first ones: port_map, mount, ulimit, image_pull_timeout.
func validateDockerExtras(ps *Problems, path_ string, c *TaskConfig, g *Group) {
	for _, label := range sortedKeys(c.PortMap) {
		if !hasPort(g, label) {
			ps.Add(path_+".port_map", "port_map names %q, which is not a port of group %q; %s", label, g.Name, portHint(g, label))
		}
		if n, err := strconv.Atoi(c.PortMap[label]); err != nil || n < 1 || n > 65535 {
			ps.Add(path_+".port_map", "port_map %s = %q is not a port number (1 to 65535)", label, c.PortMap[label])
		}
	}
	for i, m := range c.Mounts {
		mp := fmt.Sprintf("%s.mounts[%d]", path_, i)
		if m == nil {
			ps.Add(mp, "mount is null")
			continue
		}
		switch m.TypeOf() {
		case MountBind, MountVolume:
			if m.Source == "" {
				ps.Add(mp+".source", "a %s mount needs a source: the node's path (absolute, or relative to the task's directory) for bind, the docker volume's name for volume", m.TypeOf())
			}
		case MountTmpfs:
			if m.Source != "" {
				ps.Add(mp+".source", "a tmpfs mount takes no source; remove it")
			}
		default:
			ps.Add(mp+".type", "mount type %q is not known; use \"bind\", \"volume\" or \"tmpfs\"", m.Type)
		}
		if !path.IsAbs(m.Target) {
			ps.Add(mp+".target", "mount target %q must be an absolute path in the container, such as \"/data\"", m.Target)
		}
		if m.TypeOf() == MountBind && strings.Contains(m.Source, "..") {
			ps.Add(mp+".source", "mount source %q must not hold \"..\"", m.Source)
		}
	}
	for _, name := range sortedKeys(c.Ulimit) {
		if _, _, err := ParseUlimit(c.Ulimit[name]); err != nil {
			ps.Add(path_+".ulimit", "ulimit %s = %q %v; write \"1024\" or \"1024:2048\" (soft:hard)", name, c.Ulimit[name], err)
		}
	}
	if c.ImagePullTimeout < 0 {
		ps.Add(path_+".image_pull_timeout", "image_pull_timeout %s must not be negative", c.ImagePullTimeout.Short())
	}
	validateDockerNames(ps, path_, c)
	for _, list := range []struct {
		key  string
		caps []string
	}{{"cap_add", c.CapAdd}, {"cap_drop", c.CapDrop}} {
		for i, cp := range list.caps {
			if cp == "" || strings.ContainsAny(cp, " \t") {
				ps.Add(fmt.Sprintf("%s.%s[%d]", path_, list.key, i), "capability %q is not a name such as \"NET_ADMIN\" or \"ALL\"", cp)
			}
		}
	}
}

// ParseUlimit reads a ulimit value: "n" (soft and hard) or "soft:hard".
func ParseUlimit(v string) (soft, hard int64, err error) {
	s, h, two := strings.Cut(v, ":")
	if soft, err = strconv.ParseInt(s, 10, 64); err != nil || soft < 0 {
		return 0, 0, fmt.Errorf("is not a number")
	}
	hard = soft
	if two {
		if hard, err = strconv.ParseInt(h, 10, 64); err != nil || hard < 0 {
			return 0, 0, fmt.Errorf("has a hard limit that is not a number")
		}
		if hard < soft {
			return 0, 0, fmt.Errorf("has a soft limit above its hard limit")
		}
	}
	return soft, hard, nil
}

// DefaultCapabilities are the capabilities docker gives a container
// unless told otherwise; adding one of them back (after cap_drop = ALL)
// reaches no further than a default container.
var DefaultCapabilities = []string{"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
	"NET_BIND_SERVICE", "NET_RAW", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}

// BeyondDefaultCaps returns the capabilities of add outside docker's
// default set, in docker's names without CAP_.
func BeyondDefaultCaps(add []string) []string {
	var out []string
	for _, c := range add {
		c = strings.TrimPrefix(strings.ToUpper(c), "CAP_")
		if !slices.Contains(DefaultCapabilities, c) {
			out = append(out, c)
		}
	}
	return out
}

// validateDockerNames checks a docker task's host name, resolver and
// extra hosts, and its /dev/shm size; a value with an interpolation in it
// is checked by docker at the start, once it is known.
func validateDockerNames(ps *Problems, path string, c *TaskConfig) {
	validateResolver(ps, path, "hostname", c.Hostname, "dns_servers", c.DNSServers, "dns_search_domains", c.DNSSearchDomains, "dns_options", c.DNSOptions)
	for i, e := range c.ExtraHosts {
		name, addr, ok := strings.Cut(e, ":")
		if strings.Contains(e, "${") {
			continue
		}
		if !ok || !validHostname(name) || !validIP(addr) {
			ps.Add(fmt.Sprintf("%s.extra_hosts[%d]", path, i), "extra host %q is not \"name:address\", such as \"db.internal:10.0.0.5\"", e)
		}
	}
	if c.ShmSize < 0 {
		ps.Add(path+".shm_size", "shm_size %d must not be negative; it is /dev/shm's size in bytes", c.ShmSize)
	}
}

// validateNames checks a group network's hostname and dns block.
func validateNames(ps *Problems, path, hostname string, dns *DNSConfig) {
	if dns == nil {
		dns = &DNSConfig{}
	}
	validateResolver(ps, path, "hostname", hostname, "dns.servers", dns.Servers, "dns.searches", dns.Searches, "dns.options", dns.Options)
}

// validateResolver checks a host name, resolver servers, search domains
// and options, each under its key; a value with an interpolation in it is
// checked by docker at the start, once it is known.
func validateResolver(ps *Problems, path, hKey, hostname, sKey string, servers []string, dKey string, domains []string, oKey string, options []string) {
	later := func(v string) bool { return strings.Contains(v, "${") }
	if hostname != "" && !later(hostname) && !validHostname(hostname) {
		ps.Add(path+"."+hKey, "hostname %q is not a host name: letters, digits, '-' and '.', at most 63 characters between dots, such as \"web-1\"", hostname)
	}
	for i, ip := range servers {
		if !later(ip) && !validIP(ip) {
			ps.Add(fmt.Sprintf("%s.%s[%d]", path, sKey, i), "dns server %q is not an IP address, such as \"10.0.0.2\"", ip)
		}
	}
	for i, d := range domains {
		if !later(d) && !validHostname(d) {
			ps.Add(fmt.Sprintf("%s.%s[%d]", path, dKey, i), "search domain %q is not a domain name, such as \"service.internal\"", d)
		}
	}
	for i, o := range options {
		if o == "" || strings.ContainsAny(o, " \t\n") {
			ps.Add(fmt.Sprintf("%s.%s[%d]", path, oKey, i), "dns option %q is not one resolv.conf option, such as \"ndots:2\"", o)
		}
	}
}

// validIP reports whether s is an IPv4 or IPv6 address.
func validIP(s string) bool {
	_, err := netip.ParseAddr(s)
	return err == nil
}

// validHostname reports whether h is a host or domain name: labels of
// letters, digits and '-', 1 to 63 characters, not starting or ending
// with '-', joined by dots, 253 characters at most.
func validHostname(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, l := range strings.Split(h, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, r := range l {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return false
			}
		}
	}
	return true
}
