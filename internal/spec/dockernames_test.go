package spec

import (
	"strings"
	"testing"
)

// TestDockerNamesValidation: a docker task's hostname, dns_servers,
// dns_search_domains, dns_options, extra_hosts and shm_size are refused
// at their field when they cannot be what they say, and taken when they
// can (or hold an interpolation, known only at the start).
func TestDockerNamesValidation(t *testing.T) {
	docker := func(edit func(c *TaskConfig)) func(*Group, *Task) {
		return func(_ *Group, t *Task) {
			t.Driver, t.Config = "docker", TaskConfig{Image: "redis:7"}
			edit(&t.Config)
		}
	}
	for _, c := range []struct {
		name string
		edit func(g *Group, t *Task)
		want string // "" for valid
	}{
		{"all good", docker(func(c *TaskConfig) {
			c.Hostname, c.DNSServers, c.DNSSearchDomains = "cache-1.svc", []string{"10.0.0.2", "fd00::53"}, []string{"svc.internal"}
			c.DNSOptions, c.ExtraHosts, c.ReadonlyRootfs, c.ShmSize = []string{"ndots:2"}, []string{"db:10.0.0.5", "v6:::1"}, true, 64<<20
		}), ""},
		{"interpolated", docker(func(c *TaskConfig) {
			c.Hostname, c.DNSServers, c.ExtraHosts = "web-${NOMAD_ALLOC_INDEX}", []string{"${attr.unique.network.ip-address}"}, []string{"self:${NOMAD_IP_http}"}
		}), ""},
		{"hostname", docker(func(c *TaskConfig) { c.Hostname = "web_1" }),
			`groups[0].tasks[0].config.hostname: hostname "web_1" is not a host name`},
		{"hostname label too long", docker(func(c *TaskConfig) { c.Hostname = strings.Repeat("a", 64) }),
			`is not a host name: letters, digits, '-' and '.', at most 63 characters between dots`},
		{"dns server", docker(func(c *TaskConfig) { c.DNSServers = []string{"10.0.0.2", "dns.google"} }),
			`groups[0].tasks[0].config.dns_servers[1]: dns server "dns.google" is not an IP address`},
		{"search domain", docker(func(c *TaskConfig) { c.DNSSearchDomains = []string{"-bad"} }),
			`groups[0].tasks[0].config.dns_search_domains[0]: search domain "-bad" is not a domain name`},
		{"dns option", docker(func(c *TaskConfig) { c.DNSOptions = []string{"ndots:2 rotate"} }),
			`groups[0].tasks[0].config.dns_options[0]: dns option "ndots:2 rotate" is not one resolv.conf option`},
		{"extra host", docker(func(c *TaskConfig) { c.ExtraHosts = []string{"db=10.0.0.5"} }),
			`groups[0].tasks[0].config.extra_hosts[0]: extra host "db=10.0.0.5" is not "name:address"`},
		{"shm_size", docker(func(c *TaskConfig) { c.ShmSize = -1 }),
			`groups[0].tasks[0].config.shm_size: shm_size -1 must not be negative`},
		{"exec hostname", func(_ *Group, t *Task) { t.Config.Hostname = "x" },
			`only the docker driver uses hostname; remove it, or set driver = "docker"`},
	} {
		err := optionsJob(c.edit).Validate().Err()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
}
