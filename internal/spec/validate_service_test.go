package spec

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// serviceJob is a valid job with a docker task and an exec task, each
// registering a service with checks; tests break one thing at a time.
func serviceJob() *Job {
	return &Job{
		Name: "shop",
		Groups: []*Group{{
			Name: "web", Count: 1,
			Network: &Network{Ports: []Port{{Label: "http", To: 8080}, {Label: "admin", Static: 9000}}},
			Tasks: []*Task{
				{
					Name: "app", Driver: "docker",
					Config: TaskConfig{
						Image: "drover-testapp:1", Entrypoint: []string{"/testapp"}, Ports: []string{"http"},
						Labels: map[string]string{"team": "a"}, NetworkMode: "bridge", PidMode: "host",
						Volumes: []string{"/srv/data:/data:ro", "/srv/log:/log:rw", "/tmp:/tmp"},
					},
					Services: []*Service{{
						Name: "web", PortLabel: "http", Tags: []string{"v1"},
						Checks: []*Check{
							{Type: CheckHTTP, Path: "/health", Restart: &CheckRestart{Limit: 3}},
							{Type: CheckTCP, PortLabel: "admin"},
							{Type: CheckScript, Command: "/bin/check"},
						},
					}},
				},
				{
					Name: "admin", Driver: "raw_exec", Config: TaskConfig{Command: "/bin/admin"},
					// The same service name as app's: one service.
					Services: []*Service{{Name: "web", PortLabel: "admin", Checks: []*Check{{Type: CheckHTTP}}}},
				},
			},
		}},
	}
}

func TestServiceJobIsValid(t *testing.T) {
	j := serviceJob()
	j.Canonicalize()
	if ps := j.Validate(); ps != nil {
		t.Fatalf("valid job has problems:\n%v", ps)
	}
}

func TestCanonicalizeChecks(t *testing.T) {
	j := serviceJob()
	s := j.Groups[0].Tasks[0].Services[0]
	s.Checks = append(s.Checks,
		&Check{Type: CheckHTTP, Interval: Duration(time.Second), Grace: Duration(5 * time.Second), Restart: &CheckRestart{Limit: 1}},
		&Check{Name: "mine", Type: CheckHTTP, Timeout: Duration(3 * time.Second), Restart: &CheckRestart{Limit: 1, Grace: Duration(time.Minute)}},
		&Check{Type: CheckHTTP, Interval: Duration(500 * time.Millisecond)},
		nil,
	)
	j.Canonicalize()
	want := []*Check{
		{Name: "web-http", Type: CheckHTTP, Path: "/health", Interval: DefaultCheckInterval, Timeout: DefaultCheckTimeout, Restart: &CheckRestart{Limit: 3}},
		{Name: "web-tcp", Type: CheckTCP, PortLabel: "admin", Interval: DefaultCheckInterval, Timeout: DefaultCheckTimeout},
		{Name: "web-script", Type: CheckScript, Command: "/bin/check", Interval: DefaultCheckInterval, Timeout: DefaultCheckTimeout},
		{Name: "web-http-2", Type: CheckHTTP, Path: "/", Interval: Duration(time.Second), Timeout: Duration(time.Second),
			Grace: Duration(5 * time.Second), Restart: &CheckRestart{Limit: 1, Grace: Duration(5 * time.Second)}},
		{Name: "mine", Type: CheckHTTP, Path: "/", Interval: DefaultCheckInterval, Timeout: Duration(3 * time.Second),
			Restart: &CheckRestart{Limit: 1, Grace: Duration(time.Minute)}},
		{Name: "web-http-4", Type: CheckHTTP, Path: "/", Interval: Duration(500 * time.Millisecond), Timeout: Duration(500 * time.Millisecond)},
		nil,
	}
	if diff := cmp.Diff(want, s.Checks); diff != "" {
		t.Errorf("checks (-want +got):\n%s", diff)
	}
	// Canonicalize is idempotent: a canonical job comes back unchanged.
	again := j.Clone()
	again.Canonicalize()
	if diff := cmp.Diff(j, again); diff != "" {
		t.Errorf("second Canonicalize changed the job (-first +second):\n%s", diff)
	}
}

// TestValidateServices breaks a valid job one way at a time and compares
// all the problems reported.
func TestValidateServices(t *testing.T) {
	const app, admin = "groups[0].tasks[0]", "groups[0].tasks[1]"
	for _, c := range []struct {
		name   string
		mutate func(j *Job)
		want   Problems
	}{
		{"docker without image", func(j *Job) { j.Groups[0].Tasks[0].Config.Image = "" },
			Problems{{Field: app + ".config.image", Message: `task "app" uses the docker driver and needs an image, such as image = "redis:7"`}}},
		{"docker with prestart and stop", func(j *Job) {
			j.Groups[0].Tasks[0].Config.Prestart = []Command{{Command: "/bin/true"}}
			j.Groups[0].Tasks[0].Config.Stop = &Command{Command: "/bin/true"}
		}, Problems{
			{Field: app + ".config.prestart", Message: "the docker driver does not run prestart commands; do that work in the image's entrypoint"},
			{Field: app + ".config.stop", Message: "the docker driver does not run stop commands; do that work in the image's entrypoint"},
		}},
		{"docker keys for raw_exec", func(j *Job) {
			c := &j.Groups[0].Tasks[1].Config
			c.Image, c.Privileged, c.Volumes = "x:1", true, []string{"/a:/b"}
		}, Problems{
			{Field: admin + ".config.image", Message: `only the docker driver uses image; remove it, or set driver = "docker"`},
			{Field: admin + ".config.privileged", Message: `only the docker driver uses privileged; remove it, or set driver = "docker"`},
			{Field: admin + ".config.volumes", Message: `only the docker driver uses volumes; remove it, or set driver = "docker"`},
		}},
		{"exec needs a command, docker does not", func(j *Job) {
			j.Groups[0].Tasks[1].Config.Command = ""
			j.Groups[0].Tasks[0].Config.Command = ""
		}, Problems{{Field: admin + ".config.command", Message: `task "admin" needs a command to run`}}},
		{"docker config values", func(j *Job) {
			c := &j.Groups[0].Tasks[0].Config
			c.Ports = []string{"http", "grpc"}
			c.Labels = map[string]string{"drover.job": "x", "": "y"}
			c.NetworkMode, c.PidMode = "container:db", "private"
			c.Volumes = []string{"rel:/data", "/a:/b:ro:x"}
			j.Groups[0].Network.Ports[0].To = 65536
		}, Problems{
			{Field: "groups[0].network.ports[0].to", Message: "to 65536 is out of range; use 1 to 65535, or leave it out (or -1, as Nomad writes it) to map to the same port number as the host's"},
			{Field: app + ".config.ports[1]", Message: `port "grpc" is not a port of group "web"; the group's ports are "http", "admin"`},
			{Field: app + ".config.labels", Message: "label names must not be empty"},
			{Field: app + ".config.labels", Message: `label "drover.job": names starting with "drover." are set by drover to find its containers; use another prefix`},
			{Field: app + ".config.network_mode", Message: `network_mode "container:db" is not a network name; use "bridge" (the default), "host", "none", or the name of a docker network (letters, digits, '_', '.', '-')`},
			{Field: app + ".config.pid_mode", Message: `pid_mode "private" is not known; use "host" to share the node's process namespace, or leave it out`},
			{Field: app + ".config.volumes[0]", Message: `volume "rel:/data" has host path "rel", which is not absolute; write "/host/path:/container/path", with ":ro" to mount it read-only`},
			{Field: app + ".config.volumes[1]", Message: `volume "/a:/b:ro:x" is not host_path:container_path[:ro|rw]; write "/host/path:/container/path", with ":ro" to mount it read-only`},
		}},
		{"a user network name", func(j *Job) { j.Groups[0].Tasks[0].Config.NetworkMode = "my-net_1.a" }, nil},
		{"service names", func(j *Job) {
			ss := &j.Groups[0].Tasks[1].Services
			*ss = append(*ss, &Service{Name: "web"}, &Service{Name: "-web"}, &Service{Name: fmt.Sprintf("%064d", 0)}, &Service{}, nil)
		}, Problems{
			{Field: admin + ".services[1].name", Message: `task "admin" already registers service "web" at groups[0].tasks[1].services[0]; register it once, with all its checks`},
			{Field: admin + ".services[2].name", Message: `service name "-web" must not start or end with '-' (it becomes <name>.service.drover)`},
			{Field: admin + ".services[3].name", Message: fmt.Sprintf(`service name %q is 64 characters long; the limit is 63 (it becomes <name>.service.drover)`, fmt.Sprintf("%064d", 0))},
			{Field: admin + ".services[4].name", Message: `service name is empty; name the service, such as name = "web"`},
			{Field: admin + ".services[5]", Message: "service is null"},
		}},
		{"service port and tags", func(j *Job) {
			s := j.Groups[0].Tasks[0].Services[0]
			s.PortLabel, s.Tags = "grpc", []string{"v1", " "}
		}, Problems{
			{Field: app + ".services[0].port", Message: `service port "grpc" is not a port of group "web"; the group's ports are "http", "admin"`},
			{Field: app + ".services[0].tags[1]", Message: "tags must not be empty"},
		}},
		{"a service port written as a number needs no group port, and a tcp check probes it", func(j *Job) {
			s := j.Groups[0].Tasks[0].Services[0]
			s.PortLabel = "9001"
			s.Checks = []*Check{{Type: CheckTCP}, {Type: CheckHTTP, PortLabel: "65535"}}
		}, nil},
		{"a port number out of range", func(j *Job) {
			s := j.Groups[0].Tasks[0].Services[0]
			s.PortLabel = "70000"
			s.Checks = []*Check{{Type: CheckTCP, PortLabel: "0"}, {Type: CheckTCP, PortLabel: "9x"}}
		}, Problems{
			{Field: app + ".services[0].port", Message: `service port "70000" is not a port number: write one from 1 to 65535, or a label of the group's ports`},
			{Field: app + ".services[0].checks[0].port", Message: `check port "0" is not a port number: write one from 1 to 65535, or a label of the group's ports`},
			{Field: app + ".services[0].checks[1].port", Message: `check port "9x" is not a port number: write one from 1 to 65535, or a label of the group's ports`},
		}},
		{"checks", func(j *Job) {
			s := j.Groups[0].Tasks[0].Services[0]
			s.PortLabel = ""
			s.Checks = []*Check{
				{Type: CheckTCP},
				{Type: CheckHTTP, PortLabel: "http", Path: "health", Interval: Duration(50 * time.Millisecond)},
				{Type: CheckScript, Path: "/x", Timeout: Duration(time.Minute)},
				{Type: "grpc"},
				{Type: CheckTCP, PortLabel: "nope", Command: "/bin/x", Restart: &CheckRestart{}},
				{Name: "web-tcp", Type: CheckScript, Command: "/bin/x"},
			}
		}, Problems{
			{Field: app + ".services[0].checks[0].port", Message: "tcp checks need a port: set port on the service or on the check"},
			{Field: app + ".services[0].checks[1].path", Message: `path "health" must start with '/'`},
			{Field: app + ".services[0].checks[1].interval", Message: "interval 50ms is too short; use at least 100ms"},
			{Field: app + ".services[0].checks[2].command", Message: "a script check needs a command, run in the task's environment; exit 0 passes"},
			{Field: app + ".services[0].checks[2].path", Message: "only http checks use a path; remove it"},
			{Field: app + ".services[0].checks[2].timeout", Message: "timeout 1m is longer than the interval 10s; a probe must end before the next starts"},
			{Field: app + ".services[0].checks[3].type", Message: `unknown check type "grpc"; use "http", "tcp" or "script"`},
			{Field: app + ".services[0].checks[4].port", Message: `check port "nope" is not a port of group "web"; the group's ports are "http", "admin"`},
			{Field: app + ".services[0].checks[4].command", Message: `only script checks run a command; remove command and args, or use type = "script"`},
			{Field: app + ".services[0].checks[4].check_restart.limit", Message: "limit 0 must be at least 1: the number of failed probes in a row that restart the task"},
			{Field: app + ".services[0].checks[5].name", Message: "check \"web-tcp\" is already defined at groups[0].tasks[0].services[0].checks[0]; give each check of a task its own name"},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := serviceJob()
			c.mutate(j)
			j.Canonicalize()
			if diff := cmp.Diff(c.want, j.Validate()); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}
