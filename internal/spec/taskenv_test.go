package spec

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func testRuntime(driver string) TaskRuntime {
	task := &Task{
		Name: "server", Driver: driver,
		Config:    TaskConfig{Ports: []string{"http"}},
		Env:       map[string]string{"ADDR": "${NOMAD_IP_http}:${NOMAD_PORT_http}", "RACK": "${meta.rack}", "SELF": "${ADDR}"},
		Meta:      map[string]string{"owner": "task"},
		Resources: Resources{CPU: 250, MemoryMB: 128},
	}
	return TaskRuntime{
		Alloc: &Alloc{
			ID: "0123456789abcdef", Name: "web.api[2]", Job: "web", Group: "api", Index: 2, NodeID: "n-1", NodeName: "node-1",
			Ports: []AllocPort{{Label: "http", Value: 25000, HostIP: "10.0.0.5", To: 8080}, {Label: "admin", Value: 25001}},
			Meta:  map[string]string{"owner": "job", "team": "a"},
			Tasks: []*Task{task},
		},
		Task: task,
		Node: &Node{ID: "n-1", Name: "node-1", Attributes: map[string]string{"os": "linux", "unique.network.ip-address": "10.0.0.5"},
			Meta: map[string]string{"rack": "r1"}},
		Dirs: TaskDirs{DroverAlloc: "/d/a", Alloc: "/d/a/alloc", Task: "/d/a/server", Local: "/d/a/server/local", Secrets: "/d/a/server/secrets"},
	}
}

func TestTaskRuntimeEnv(t *testing.T) {
	for _, c := range []struct {
		driver, port string
	}{
		{"raw_exec", "25000"},  // a process listens on the host's port
		{DriverDocker, "8080"}, // a container, on the port its mapping leads to
	} {
		env := testRuntime(c.driver).Env()
		want := map[string]string{
			"NOMAD_ALLOC_ID": "0123456789abcdef", "NOMAD_SHORT_ALLOC_ID": "01234567", "NOMAD_ALLOC_NAME": "web.api[2]",
			"NOMAD_ALLOC_INDEX": "2", "NOMAD_JOB_NAME": "web", "NOMAD_JOB_ID": "web", "NOMAD_GROUP_NAME": "api",
			"NOMAD_TASK_NAME": "server", "NOMAD_NAMESPACE": "default", "NOMAD_REGION": "global", "NOMAD_DC": "dc1",
			"NOMAD_CPU_LIMIT": "250", "NOMAD_MEMORY_LIMIT": "128",
			"NOMAD_ALLOC_DIR": "/d/a/alloc", "NOMAD_TASK_DIR": "/d/a/server/local", "NOMAD_SECRETS_DIR": "/d/a/server/secrets",
			"NOMAD_PORT_http": c.port, "NOMAD_HOST_PORT_http": "25000", "NOMAD_IP_http": "10.0.0.5", "NOMAD_ADDR_http": "10.0.0.5:25000",
			"NOMAD_PORT_admin": "25001", "NOMAD_HOST_PORT_admin": "25001", "NOMAD_IP_admin": "127.0.0.1", "NOMAD_ADDR_admin": "127.0.0.1:25001",
			"NOMAD_META_owner": "task", "NOMAD_META_team": "a",
			"DROVER_ALLOC_ID": "0123456789abcdef", "DROVER_ALLOC_NAME": "web.api[2]", "DROVER_ALLOC_INDEX": "2",
			"DROVER_JOB_NAME": "web", "DROVER_GROUP_NAME": "api", "DROVER_TASK_NAME": "server", "DROVER_JOB_VERSION": "0",
			"DROVER_NODE_ID": "n-1", "DROVER_NODE_NAME": "node-1", "DROVER_CPU_LIMIT": "250", "DROVER_MEMORY_LIMIT": "128",
			"DROVER_ALLOC_DIR": "/d/a", "DROVER_TASK_DIR": "/d/a/server",
			"DROVER_PORT_http": c.port, "DROVER_HOST_PORT_http": "25000", "DROVER_ADDR_http": "10.0.0.5:25000",
			"DROVER_PORT_admin": "25001", "DROVER_HOST_PORT_admin": "25001", "DROVER_ADDR_admin": "127.0.0.1:25001",
			// The job's env, interpolated with the runtime variables and
			// the node's values; one of its own variables is not one of
			// those, and stays as written.
			"ADDR": "10.0.0.5:" + c.port, "RACK": "r1", "SELF": "${ADDR}",
		}
		if diff := cmp.Diff(want, env); diff != "" {
			t.Errorf("%s: env (-want +got):\n%s", c.driver, diff)
		}
	}
}

func TestInterpolate(t *testing.T) {
	r := testRuntime("raw_exec")
	env := r.Env()
	for in, want := range map[string]string{
		"--port=${NOMAD_PORT_http}":             "--port=25000",
		"${NOMAD_ALLOC_DIR}/logs":               "/d/a/alloc/logs",
		"${attr.unique.network.ip-address}":     "10.0.0.5",
		"${node.unique.name}/${node.unique.id}": "node-1/n-1",
		"${node.datacenter}":                    "dc1",
		"${meta.rack}":                          "r1",
		"${env.ADDR}":                           "10.0.0.5:25000",
		"${ADDR}":                               "10.0.0.5:25000",
		// Unknown: as Nomad, left as written.
		"${NOMAD_PORT_nope} ${attr.nope} ${meta.nope} ${env.NOPE} ${var.x}": "${NOMAD_PORT_nope} ${attr.nope} ${meta.nope} ${env.NOPE} ${var.x}",
		// Not a name: a shell's, left alone.
		"${HOME:-/tmp} $NOMAD_ALLOC_ID ${": "${HOME:-/tmp} $NOMAD_ALLOC_ID ${",
	} {
		if got := r.Interpolate(in, env); got != want {
			t.Errorf("Interpolate(%q) = %q, want %q", in, got, want)
		}
	}
	// Without a node, node values stay as written.
	r.Node = nil
	if got := r.Interpolate("${attr.os} ${NOMAD_TASK_NAME}", r.Env()); got != "${attr.os} server" {
		t.Errorf("without a node: %q", got)
	}
}

func TestTaskRuntimeConfig(t *testing.T) {
	r := testRuntime(DriverDocker)
	env := r.Env()
	in := TaskConfig{
		Command:    "${NOMAD_TASK_DIR}/run",
		Args:       []string{"--id", "${NOMAD_ALLOC_ID}", "${attr.os}"},
		WorkDir:    "${NOMAD_ALLOC_DIR}",
		Prestart:   []Command{{Command: "/bin/mkdir", Args: []string{"-p", "${NOMAD_ALLOC_DIR}/data/${NOMAD_ALLOC_INDEX}"}}},
		Stop:       &Command{Command: "/bin/echo", Args: []string{"bye ${NOMAD_ALLOC_NAME}"}},
		Image:      "registry/${meta.rack}/app:${NOMAD_META_team}",
		Entrypoint: []string{"/bin/sh", "-c", "exec app ${NOMAD_PORT_http}"},
		Ports:      []string{"http"},
		Labels:     map[string]string{"${NOMAD_TASK_NAME}": "alloc-${NOMAD_SHORT_ALLOC_ID}"},
		Volumes:    []string{"/srv/${NOMAD_JOB_NAME}:/data"},
	}
	got, err := r.Config(in, env)
	if err != nil {
		t.Fatal(err)
	}
	want := TaskConfig{
		Command:    "/d/a/server/local/run",
		Args:       []string{"--id", "0123456789abcdef", "linux"},
		WorkDir:    "/d/a/alloc",
		Prestart:   []Command{{Command: "/bin/mkdir", Args: []string{"-p", "/d/a/alloc/data/2"}}},
		Stop:       &Command{Command: "/bin/echo", Args: []string{"bye web.api[2]"}},
		Image:      "registry/r1/app:a",
		Entrypoint: []string{"/bin/sh", "-c", "exec app 8080"},
		Ports:      []string{"http"},
		// Keys are kept as written; values are interpolated.
		Labels:  map[string]string{"${NOMAD_TASK_NAME}": "alloc-01234567"},
		Volumes: []string{"/srv/web:/data"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
	if in.Args[1] != "${NOMAD_ALLOC_ID}" || in.Prestart[0].Args[1] != "${NOMAD_ALLOC_DIR}/data/${NOMAD_ALLOC_INDEX}" {
		t.Errorf("the job's own config changed: %+v", in)
	}
}

func TestTaskRuntimeService(t *testing.T) {
	r := testRuntime("raw_exec")
	svc := &Service{Name: "api-${NOMAD_ALLOC_INDEX}", Tags: []string{"${node.unique.name}", "dir-${NOMAD_ALLOC_DIR}"}, PortLabel: "http"}
	got := r.Service(svc)
	// Directories differ by driver; a service is named alike everywhere.
	want := &Service{Name: "api-2", Tags: []string{"node-1", "dir-${NOMAD_ALLOC_DIR}"}, PortLabel: "http"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("service (-want +got):\n%s", diff)
	}
	if svc.Name != "api-${NOMAD_ALLOC_INDEX}" {
		t.Errorf("the job's service changed: %+v", svc)
	}
	if msg := CheckServiceName(svc.Name); msg != "" {
		t.Errorf("CheckServiceName(%q) = %q, want it valid", svc.Name, msg)
	}
	if msg := CheckServiceName("API-${NOMAD_ALLOC_INDEX}"); msg == "" {
		t.Errorf("an upper-case name with an interpolation passed")
	}
}

func TestTaskNamedAllocRefused(t *testing.T) {
	j := &Job{Name: "web", Type: JobService, Groups: []*Group{{Name: "g", Count: 1, Tasks: []*Task{
		{Name: SharedAllocDir, Driver: "raw_exec", Config: TaskConfig{Command: "/bin/true"}},
	}}}}
	want := `groups[0].tasks[0].name: task name "alloc" is the directory the group's tasks share (alloc/); rename the task`
	if err := j.Validate(); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Validate() = %v, want %s", err, want)
	}
}

// In network mode bridge, a process listens on its port's to inside its
// alloc's namespace: NOMAD_PORT_ is to, the host's port and address stay
// where others reach it, and NOMAD_ALLOC_* are the alloc's own. A docker
// task keeps docker's mapping.
func TestTaskRuntimeEnvBridge(t *testing.T) {
	rt := testRuntime("raw_exec")
	rt.Alloc.NetworkMode = NetworkBridge
	rt.AllocIP = "172.26.64.7"
	env := rt.Env()
	for k, want := range map[string]string{
		"NOMAD_PORT_http": "8080", "DROVER_PORT_http": "8080", "NOMAD_HOST_PORT_http": "25000",
		"NOMAD_IP_http": "10.0.0.5", "NOMAD_ADDR_http": "10.0.0.5:25000",
		"NOMAD_ALLOC_IP_http": "172.26.64.7", "NOMAD_ALLOC_PORT_http": "8080", "NOMAD_ALLOC_ADDR_http": "172.26.64.7:8080",
		// No to: the host port's number, in the namespace.
		"NOMAD_PORT_admin": "25001", "NOMAD_ALLOC_PORT_admin": "25001",
	} {
		if env[k] != want {
			t.Errorf("%s = %q, want %q", k, env[k], want)
		}
	}
	host := testRuntime("raw_exec").Env()
	if host["NOMAD_PORT_http"] != "25000" || host["NOMAD_ALLOC_IP_http"] != "" {
		t.Errorf("host mode: NOMAD_PORT_http %q (want 25000), NOMAD_ALLOC_IP_http %q (want none)", host["NOMAD_PORT_http"], host["NOMAD_ALLOC_IP_http"])
	}
	d := testRuntime(DriverDocker)
	d.Alloc.NetworkMode, d.AllocIP = NetworkBridge, "172.26.64.7"
	if env := d.Env(); env["NOMAD_PORT_http"] != "8080" || env["NOMAD_ALLOC_IP_http"] != "" {
		t.Errorf("docker in bridge mode: NOMAD_PORT_http %q, NOMAD_ALLOC_IP_http %q; want 8080 and none (docker's own network)", env["NOMAD_PORT_http"], env["NOMAD_ALLOC_IP_http"])
	}
}

func TestValidateNetworkMode(t *testing.T) {
	for _, c := range []struct {
		net  Network
		want string // in the problems; "" none
	}{
		{Network{Mode: "bridge", Ports: []Port{{Label: "http", To: 8080}}}, ""},
		{Network{Mode: "host"}, ""},
		{Network{Mode: "none"}, ""},
		{Network{Mode: "cni/mynet"}, `network mode "cni/mynet" is not one drover has`},
		{Network{Mode: "none", Ports: []Port{{Label: "http"}}}, `network mode "none" has no network`},
	} {
		var ps Problems
		validateNetwork(&ps, "groups[0].network", &c.net)
		got := ps.Error()
		if c.want == "" && len(ps) != 0 || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("mode %q ports %v: problems %q, want %q", c.net.Mode, c.net.Ports, got, c.want)
		}
	}
}
