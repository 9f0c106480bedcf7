package jobfile

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/spec"
)

// TestDriverDroverLacksIsAccepted: a task whose driver drover does not
// have decodes, in HCL and JSON, with its config's other keys unchecked,
// its command kept, and a warning at the driver's line that says it is
// never placed and why.
func TestDriverDroverLacksIsAccepted(t *testing.T) {
	hcl := `job "pod" {
  group "g" {
    task "web" {
      driver = "podman"
      config {
        image   = "docker.io/library/redis"
        command = "redis-server"
        ports   = ["db"]
        volumes = ["/srv:/data"]
      }
    }
  }
}
`
	json := `{"name": "pod", "groups": [{"name": "g", "tasks": [{"name": "web", "driver": "podman",
  "config": {"image": "docker.io/library/redis", "command": "redis-server", "socket": "x"}}]}]}`
	for _, tc := range []struct{ file, src, at string }{{"pod.hcl", hcl, "pod.hcl:4:16"}, {"pod.json", json, "pod.json:1:78"}} {
		job, warns, err := DecodeWarn(tc.file, []byte(tc.src))
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		task := job.Groups[0].Tasks[0]
		if task.Driver != "podman" || task.Config.Command != "redis-server" {
			t.Errorf("%s: task %+v, want driver podman, command kept", tc.file, task.Config)
		}
		if len(warns) != 1 || warns[0].Pos != tc.at || !strings.Contains(warns[0].Message, `waits with "no node has driver podman"`) {
			t.Errorf("%s: warnings %v, want one at %s saying the job waits for the driver", tc.file, warns, tc.at)
		}
	}
}

// TestBlocksDroverLacksWarn: vault, consul, identity, csi_plugin, connect
// and a CSI volume, where Nomad takes them, make a valid job and one
// warning each at the block's line (the volume's type) saying what drover
// does instead; the rest of the job is kept, the volume_mount of the CSI
// volume with it.
func TestBlocksDroverLacksWarn(t *testing.T) {
	src := `job "lacks" {
  vault { policies = ["a"] }
  group "g" {
    consul { namespace = "x" }
    volume "data" {
      type   = "csi"
      source = "db"
    }
    task "t" {
      driver = "raw_exec"
      config { command = "/bin/true" }
      identity { env = true }
      csi_plugin {
        id   = "p"
        type = "node"
      }
      volume_mount {
        volume      = "data"
        destination = "/data"
      }
      service {
        name = "web"
        connect {
          sidecar_service {}
        }
      }
    }
  }
}
`
	job, warns, err := DecodeWarn("lacks.hcl", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if m := job.Groups[0].Tasks[0].VolumeMounts; len(m) != 1 || m[0].Volume != "data" || m[0].Destination != "/data" {
		t.Errorf("volume_mount not kept: %+v", m)
	}
	if job.Groups[0].Tasks[0].Services[0].Name != "web" {
		t.Errorf("the service beside connect was lost: %+v", job.Groups[0].Tasks[0].Services)
	}
	want := map[string]string{
		"lacks.hcl:2:3":  "vault block in job \"lacks\": drover has no Vault",
		"lacks.hcl:4:5":  "consul block in group \"g\": drover has no Consul",
		"lacks.hcl:6:16": "volume \"data\" in group \"g\": drover has no CSI",
		"lacks.hcl:12:7": "identity block in task \"t\": drover issues no workload identities",
		"lacks.hcl:13:7": "csi_plugin block in task \"t\": drover has no CSI",
		"lacks.hcl:23:9": "connect block in a service block of task \"t\": drover has no Consul Connect",
	}
	for _, w := range warns {
		if p, ok := want[w.Pos]; !ok || !strings.HasPrefix(w.Message, p) {
			t.Errorf("unexpected warning %s: %s", w.Pos, w.Message)
		}
		delete(want, w.Pos)
	}
	for at, p := range want {
		t.Errorf("no warning at %s (%s...)", at, p)
	}

	// In JSON too, an object under one of these names is a warning.
	_, warns, err = DecodeWarn("lacks.json", []byte(`{"name": "lacks", "vault": {"policies": ["a"]}, "groups": [{"name": "g",
  "tasks": [{"name": "t", "driver": "raw_exec", "config": {"command": "/bin/true"}}]}]}`))
	if err != nil || len(warns) != 1 || !strings.Contains(warns[0].Message, "drover has no Vault") {
		t.Errorf("JSON vault: %v, warnings %v", err, warns)
	}
}

// TestSystemJobUpdateIsWarned: a system job's update blocks, job's and
// group's, and an update's stagger are accepted with a warning each at
// their line; the job keeps no update (its changed instances are replaced
// at once), in HCL as through JSON.
func TestSystemJobUpdateIsWarned(t *testing.T) {
	src := `job "sys" {
  type = "system"
  update {
    max_parallel = 1
    stagger      = "10s"
  }
  group "g" {
    update { max_parallel = 2 }
    task "t" {
      driver = "raw_exec"
      config { command = "/bin/true" }
    }
  }
}
`
	job, warns, err := DecodeWarn("sys.hcl", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if job.Update != nil || job.Groups[0].Update != nil {
		t.Errorf("a system job kept an update: job %+v, group %+v", job.Update, job.Groups[0].Update)
	}
	want := map[string]string{
		"sys.hcl:3:3": "update in a system job is accepted and not applied",
		"sys.hcl:5:5": "stagger in the update block of job \"sys\": drover paces a rollout by each batch's health",
		"sys.hcl:8:5": "update in a system job is accepted and not applied",
	}
	for _, w := range warns {
		if p, ok := want[w.Pos]; !ok || !strings.HasPrefix(w.Message, p) {
			t.Errorf("unexpected warning %s: %s", w.Pos, w.Message)
		}
		delete(want, w.Pos)
	}
	for at, p := range want {
		t.Errorf("no warning at %s (%s...)", at, p)
	}

	// A service job's stagger is a warning too; its update is kept.
	job, warns, err = DecodeWarn("svc.json", []byte(`{"name": "svc", "update": {"max_parallel": 2, "stagger": "30s"},
  "groups": [{"name": "g", "tasks": [{"name": "t", "driver": "raw_exec", "config": {"command": "/bin/true"}}]}]}`))
	if err != nil || len(warns) != 1 || !strings.Contains(warns[0].Message, "stagger does nothing") {
		t.Fatalf("service stagger: %v, warnings %v", err, warns)
	}
	if job.Groups[0].Update == nil || job.Groups[0].Update.Parallel() != 2 {
		t.Errorf("the service job's update was not kept: %+v", job.Groups[0].Update)
	}
}

// TestNomadDockerKeys: the docker keys Nomad's files write decode into
// the config (port_map, mount, cap_add, cap_drop, ulimit, sysctl,
// force_pull, image_pull_timeout); auth, auth_soft_fail, logging and a
// mount's options are warnings at their line; the exec driver refuses the
// docker keys with what to do.
func TestNomadDockerKeys(t *testing.T) {
	src := `job "d" {
  group "g" {
    network {
      port "http" {}
    }
    task "t" {
      driver = "docker"
      config {
        image    = "redis:7"
        port_map { http = 8080 }
        mount {
          type   = "bind"
          source = "local/conf"
          target = "/etc/app"
          readonly = true
          bind_options { propagation = "rshared" }
        }
        mount {
          type   = "tmpfs"
          target = "/scratch"
        }
        cap_add  = ["NET_ADMIN"]
        cap_drop = ["ALL"]
        ulimit { nofile = "2048:4096" }
        sysctl = { "net.core.somaxconn" = "16384" }
        force_pull         = true
        image_pull_timeout = "2m"
        auth {
          username = "u"
          password = "p"
        }
        auth_soft_fail = true
        logging {
          type = "journald"
        }
      }
    }
  }
}
`
	job, warns, err := DecodeWarn("d.hcl", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	c := job.Groups[0].Tasks[0].Config
	if c.PortMap["http"] != "8080" || len(c.Mounts) != 2 || *c.Mounts[0] != (spec.DockerMount{Type: "bind", Source: "local/conf", Target: "/etc/app", ReadOnly: true}) ||
		c.Mounts[1].Type != "tmpfs" || c.CapAdd[0] != "NET_ADMIN" || c.CapDrop[0] != "ALL" || c.Ulimit["nofile"] != "2048:4096" ||
		c.Sysctl["net.core.somaxconn"] != "16384" || !c.ForcePull || c.ImagePullTimeout != spec.Duration(2*time.Minute) {
		t.Errorf("config %+v", c)
	}
	want := map[string]string{
		"d.hcl:16:11": "bind_options in a mount block of task \"t\": bind_options are not applied",
		"d.hcl:28:9":  "auth in the config block for the docker driver: drover does not pass registry credentials",
		"d.hcl:32:9":  "auth_soft_fail in the config block",
		"d.hcl:33:9":  "logging in the config block for the docker driver: drover reads the container's output",
	}
	for _, w := range warns {
		if p, ok := want[w.Pos]; !ok || !strings.HasPrefix(w.Message, p) {
			t.Errorf("unexpected warning %s: %s", w.Pos, w.Message)
		}
		delete(want, w.Pos)
	}
	for at, p := range want {
		t.Errorf("no warning at %s (%s...)", at, p)
	}

	_, err = Decode("e.hcl", []byte(`job "e" {
  group "g" {
    task "t" {
      driver = "exec"
      config {
        command  = "/bin/true"
        cap_add  = ["NET_ADMIN"]
        mount {
          type   = "tmpfs"
          target = "/x"
        }
      }
    }
  }
}
`))
	if err == nil || !strings.Contains(err.Error(), `e.hcl:7:9: only the docker driver uses cap_add; remove it, or set driver = "docker"`) ||
		!strings.Contains(err.Error(), "e.hcl:8:9: only the docker driver uses mount") {
		t.Errorf("docker keys in an exec task: %v", err)
	}

	// Problems are told where they are.
	_, err = Decode("bad.hcl", []byte(`job "b" {
  group "g" {
    task "t" {
      driver = "docker"
      config {
        image    = "redis:7"
        port_map { db = "x" }
        mount { target = "rel" }
        ulimit { nofile = "9:1" }
      }
    }
  }
}
`))
	for _, w := range []string{`port_map names "db", which is not a port of group "g"`, `port_map db = "x" is not a port number`,
		"a bind mount needs a source", `mount target "rel" must be an absolute path`, `ulimit nofile = "9:1" has a soft limit above its hard limit`} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("bad docker keys: %v, want %q", err, w)
		}
	}
}

// TestGroupServices: a group's service goes to the task its checks name,
// else to the group's first main task, with its checks canonical and no
// task left on it; in JSON the same. A problem in a moved service is
// reported where it was written; a service that names no task of the
// group, or two, is refused at its line; a task's own service may not
// name a task.
func TestGroupServices(t *testing.T) {
	src := `job "gs" {
  group "g" {
    network {
      port "http" {}
    }
    service {
      name = "web"
      port = "http"
      check {
        type    = "script"
        task    = "server"
        command = "/bin/true"
      }
    }
    service {
      name = "plain"
    }
    task "prep" {
      lifecycle { hook = "prestart" }
      driver = "raw_exec"
      config { command = "/bin/true" }
    }
    task "main" {
      driver = "raw_exec"
      config { command = "/bin/sleep" }
    }
    task "server" {
      driver = "raw_exec"
      config { command = "/bin/sleep" }
    }
  }
}
`
	job, err := Decode("gs.hcl", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	g := job.Groups[0]
	if len(g.Services) != 0 {
		t.Errorf("services left in the group: %+v", g.Services)
	}
	server, main := g.Task("server"), g.Task("main")
	if len(server.Services) != 1 || server.Services[0].Name != "web" || server.Services[0].PortLabel != "http" ||
		server.Services[0].Checks[0].Name != "web-script" || server.Services[0].Checks[0].Task != "" {
		t.Errorf("server's services: %+v", server.Services)
	}
	if len(main.Services) != 1 || main.Services[0].Name != "plain" || len(g.Task("prep").Services) != 0 {
		t.Errorf("the service without a task went to %+v, not to the first main task", main.Services)
	}

	// JSON: the same job.
	jsonJob, err := Decode("gs.json", []byte(`{"name": "gs", "groups": [{"name": "g", "network": {"ports": [{"label": "http"}]},
  "services": [{"name": "web", "port": "http", "checks": [{"type": "script", "task": "server", "command": "/bin/true"}]}, {"name": "plain"}],
  "tasks": [{"name": "prep", "lifecycle": {"hook": "prestart"}, "driver": "raw_exec", "config": {"command": "/bin/true"}},
    {"name": "main", "driver": "raw_exec", "config": {"command": "/bin/sleep"}},
    {"name": "server", "driver": "raw_exec", "config": {"command": "/bin/sleep"}}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := mustJSON(t, jsonJob), mustJSON(t, job); string(got) != string(want) {
		t.Errorf("JSON and HCL differ:\n%s\n%s", got, want)
	}

	// Nomad's API form: TaskGroups[].Services, the check's TaskName.
	api, err := Decode("api.json", []byte(`{"Job": {"ID": "apigs", "TaskGroups": [{"Name": "g",
  "Networks": [{"DynamicPorts": [{"Label": "http"}]}],
  "Services": [{"Name": "web", "PortLabel": "http", "Checks": [{"Type": "script", "TaskName": "server", "Command": "/bin/true"}]}],
  "Tasks": [{"Name": "main", "Driver": "raw_exec", "Config": {"command": "/bin/sleep"}},
    {"Name": "server", "Driver": "raw_exec", "Config": {"command": "/bin/sleep"}}]}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if s := api.Groups[0].Task("server").Services; len(s) != 1 || s[0].Name != "web" || s[0].Checks[0].Command != "/bin/true" {
		t.Errorf("API form: server's services %+v", s)
	}

	for _, tc := range []struct{ name, body, want string }{
		{"bad port", `service {
      name = "web"
      port = "httpp"
    }`, `bad.hcl:8:14: groups[0].tasks[0].services[0].port: service port "httpp" is not a port of group "g"`},
		{"no such task", `service {
      name = "web"
      task = "nosuch"
    }`, `bad.hcl:8:14: groups[0].services[0].task: group service "web" names task "nosuch", which is not a task of group "g"; its tasks are "server"`},
		{"two tasks", `service {
      name = "web"
      task = "server"
      check {
        type    = "script"
        task    = "other"
        command = "/bin/true"
      }
    }`, `group service "web" would run in task "server" and in task "other"`},
	} {
		_, err := Decode("bad.hcl", []byte(`job "b" {
  group "g" {
    network {
      port "http" {}
    }
    `+tc.body+`
    task "server" {
      driver = "raw_exec"
      config { command = "/bin/sleep" }
    }
  }
}
`))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	_, err = Decode("own.hcl", []byte(`job "o" {
  group "g" {
    task "server" {
      driver = "raw_exec"
      config { command = "/bin/sleep" }
      service {
        name = "web"
        task = "server"
      }
    }
  }
}
`))
	if err == nil || !strings.Contains(err.Error(), `own.hcl:8:16: groups[0].tasks[0].services[0].task: task = is for a group's services; this service is in task "server" already: remove it`) {
		t.Errorf("a task's service naming a task: %v", err)
	}
}

// TestNomadCompatCorpus: each Nomad-style file of testdata/nomadcompat,
// written in Nomad's HCL or in the JSON of Nomad's API, one or more per
// feature of Nomad's job language (node attributes, interpolation, HCL2
// variables, quoted numbers, group services, network modes, templates,
// artifacts, lifecycle hooks, job kinds, task options, policy merges,
// docker keys, Vault/Consul/CSI, a driver drover lacks), is valid, and its
// warnings are those of its .warnings file, one a line. The files
// validate-only.txt names exist. Run with -update after a deliberate
// change and read the diff.
func TestNomadCompatCorpus(t *testing.T) {
	var files []string
	for _, pattern := range []string{"testdata/nomadcompat/*.nomad", "testdata/nomadcompat/*.json"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 20 {
		t.Fatalf("corpus: %d files, want one or more per feature", len(files))
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			_, warns, err := DecodeFileWarn(path)
			if err != nil {
				t.Fatalf("not valid: %v", err)
			}
			var got strings.Builder
			for _, w := range warns {
				fmt.Fprintf(&got, "%s: %s\n", w.Pos, w.Message)
			}
			golden := strings.TrimSuffix(path, filepath.Ext(path)) + ".warnings"
			if *update {
				if err := os.WriteFile(golden, []byte(got.String()), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got.String() != string(want) {
				t.Errorf("warnings differ from %s\n--- got:\n%s--- want:\n%s", golden, got.String(), want)
			}
		})
	}
	only, err := os.ReadFile("testdata/nomadcompat/validate-only.txt")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(only)) {
		name, reason, ok := strings.Cut(strings.TrimSpace(line), ": ")
		if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
			continue
		}
		if !ok || reason == "" || !slices.Contains(files, filepath.Join("testdata/nomadcompat", name)) {
			t.Errorf("validate-only.txt: %q is not FILE: reason of a file of the corpus", strings.TrimSpace(line))
		}
	}
}

// TestDriverTypoIsRefused: a driver one typo away from one of drover's
// is refused with the did-you-mean; Nomad's exec2, as close to exec, is
// a driver drover lacks and is accepted.
func TestDriverTypoIsRefused(t *testing.T) {
	job := func(driver string) string {
		return `job "x" {
  group "g" {
    task "t" {
      driver = "` + driver + `"
      config { command = "/bin/true" }
    }
  }
}
`
	}
	_, err := Decode("typo.hcl", []byte(job("dockr")))
	if err == nil || err.Error() != `typo.hcl:4:16: groups[0].tasks[0].driver: unknown driver "dockr"; did you mean "docker"?` {
		t.Errorf("dockr: %v", err)
	}
	if _, warns, err := DecodeWarn("exec2.hcl", []byte(job("exec2"))); err != nil || len(warns) != 1 || !strings.Contains(warns[0].Message, "drover has no exec2 driver") {
		t.Errorf("exec2: %v, warnings %v", err, warns)
	}
}

// TestJobLevelTask: a task written directly in the job block is read as a
// group of its own named after it, in file order, its problems told at
// their lines; a group of that name already there is a conflict.
func TestJobLevelTask(t *testing.T) {
	job, err := DecodeFile("testdata/nomadcompat/job-level-task.nomad")
	if err != nil {
		t.Fatal(err)
	}
	if len(job.Groups) != 2 || job.Groups[0].Name != "first" || job.Groups[1].Name != "second" ||
		len(job.Groups[0].Tasks) != 1 || job.Groups[0].Tasks[0].Name != "first" || job.Groups[0].Count != 1 {
		t.Fatalf("groups %+v", job.Groups)
	}
	_, err = Decode("tl.hcl", []byte(`job "x" {
  group "t" {
    task "a" {
      driver = "raw_exec"
      config { command = "/bin/true" }
    }
  }
  task "t" {
    driver = "raw_exec"
    config { command = "/bin/true" }
    bogus = 1
  }
}
`))
	for _, w := range []string{`tl.hcl:8:8: groups[1].name: group "t" is already defined`, `tl.hcl:11:5: unknown attribute "bogus" in task "t"`} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("%v, want %q", err, w)
		}
	}
}

// TestTaskNetworkLifted: a network in a task's resources is its group's
// (task-network.nomad), but not where the group has its own or two tasks
// have one: there it is refused at its line with where it belongs.
func TestTaskNetworkLifted(t *testing.T) {
	job, err := DecodeFile("testdata/nomadcompat/task-network.nomad")
	if err != nil {
		t.Fatal(err)
	}
	if n := job.Groups[0].Network; n == nil || len(n.Ports) != 1 || n.Ports[0].Label != "http" {
		t.Fatalf("the group's network: %+v", n)
	}
	task := func(name string) string {
		return `    task "` + name + `" {
      driver = "raw_exec"
      config { command = "/bin/true" }
      resources {
        network {
          port "p` + name + `" {}
        }
      }
    }
`
	}
	_, err = Decode("two.hcl", []byte("job \"x\" {\n  group \"g\" {\n"+task("a")+task("b")+"  }\n}\n"))
	if err == nil || !strings.Contains(err.Error(), `two.hcl:7:9: network belongs in a group block, not in the resources block of task "a"`) {
		t.Errorf("two tasks' networks: %v", err)
	}
}

// TestDockerMountsList: the docker driver's older mounts = [{ ... }] is
// read as mount blocks beside those written as blocks, with a warning at
// its line; a list that is not of plain objects stays an unknown
// attribute.
func TestDockerMountsList(t *testing.T) {
	job, warns, err := DecodeFileWarn("testdata/nomadcompat/docker-keys.nomad")
	if err != nil {
		t.Fatal(err)
	}
	m := job.Groups[0].Tasks[0].Config.Mounts
	if len(m) != 2 || m[0].Type != "tmpfs" || *m[1] != (spec.DockerMount{Type: "bind", Source: "local", Target: "/etc/nginx/conf.d", ReadOnly: true}) {
		t.Errorf("mounts %+v", m)
	}
	if !slices.ContainsFunc(warns, func(w spec.Problem) bool {
		return strings.HasSuffix(w.Pos, ":30:9") && strings.Contains(w.Message, "mounts = [...] in task \"nginx\" is Nomad's older form of mount blocks")
	}) {
		t.Errorf("no warning at the mounts line: %v", warns)
	}
	_, err = Decode("m.hcl", []byte(`job "m" {
  group "g" {
    task "t" {
      driver = "docker"
      config {
        image  = "redis:7"
        mounts = ["/a:/b"]
      }
    }
  }
}
`))
	if err == nil || !strings.Contains(err.Error(), `m.hcl:7:9: unknown attribute "mounts"`) {
		t.Errorf("mounts of strings: %v", err)
	}
}

// TestExecHostNamespaces: an exec or raw_exec task's pid_mode = "host"
// says what it does and is taken (exec-host-namespaces.nomad), any other
// value is refused at its line; ipc_mode is a warning for every driver.
func TestExecHostNamespaces(t *testing.T) {
	_, err := Decode("pm.hcl", []byte(`job "p" {
  group "g" {
    task "t" {
      driver = "raw_exec"
      config {
        command  = "/bin/true"
        pid_mode = "private"
      }
    }
  }
}
`))
	if err == nil || !strings.Contains(err.Error(), `pm.hcl:7:20: groups[0].tasks[0].config.pid_mode: pid_mode "private": raw_exec tasks run in the node's process namespace; write "host"`) {
		t.Errorf("pid_mode private: %v", err)
	}
	job, warns, err := DecodeFileWarn("testdata/nomadcompat/exec-host-namespaces.nomad")
	if err != nil || job.Groups[0].Tasks[0].Config.PidMode != "host" || len(warns) != 1 || !strings.Contains(warns[0].Message, "ipc_mode does nothing") {
		t.Errorf("%v; pid_mode %q; warnings %v", err, job.Groups[0].Tasks[0].Config.PidMode, warns)
	}
}
