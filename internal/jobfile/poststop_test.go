package jobfile

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/drover-org/drover/internal/spec"
)

// TestPoststopInEveryFormat: the poststop commands a unit's ExecStopPost=
// becomes are written the same way in HCL and JSON, in order, and refused
// for docker, whose tasks' hooks would run outside the container.
func TestPoststopInEveryFormat(t *testing.T) {
	want := []spec.Command{{Command: "/bin/rm", Args: []string{"-f", "pid"}}, {Command: "/bin/echo", Args: []string{"bye"}}}
	hcl := `job "p" {
  group "g" {
    task "t" {
      driver = "exec"
      config {
        command = "/bin/sleep"
        args    = ["60"]
        poststop {
          command = "/bin/rm"
          args    = ["-f", "pid"]
        }
        poststop {
          command = "/bin/echo"
          args    = ["bye"]
        }
      }
    }
  }
}
`
	json := `{"name":"p","groups":[{"name":"g","tasks":[{"name":"t","driver":"exec","config":{"command":"/bin/sleep","args":["60"],
"poststop":[{"command":"/bin/rm","args":["-f","pid"]},{"command":"/bin/echo","args":["bye"]}]}}]}]}`
	for name, src := range map[string]string{"p.hcl": hcl, "p.json": json} {
		job, err := Decode(name, []byte(src))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if diff := cmp.Diff(want, job.Groups[0].Tasks[0].Config.Poststop); diff != "" {
			t.Errorf("%s: poststop (-want +got):\n%s", name, diff)
		}
	}
	docker := strings.Replace(hcl, `driver = "exec"`, `driver = "docker"`, 1)
	docker = strings.Replace(docker, `command = "/bin/sleep"`, `image = "busybox"`, 1)
	_, err := Decode("d.hcl", []byte(docker))
	if err == nil || !strings.Contains(err.Error(), "d.hcl:8:9: the docker driver does not run poststop commands") {
		t.Errorf("docker with poststop: %v", err)
	}
}

// TestLifecycleInEveryFormat: a task's lifecycle block reads the same in
// HCL and JSON, and a wrong hook is refused where it is written.
func TestLifecycleInEveryFormat(t *testing.T) {
	hcl := `job "l" {
  group "g" {
    task "init" {
      driver = "raw_exec"
      lifecycle {
        hook    = "prestart"
        sidecar = true
      }
      config {
        command = "/bin/true"
      }
    }
    task "main" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
    }
  }
}
`
	json := `{"name":"l","groups":[{"name":"g","tasks":[
{"name":"init","driver":"raw_exec","lifecycle":{"hook":"prestart","sidecar":true},"config":{"command":"/bin/true"}},
{"name":"main","driver":"raw_exec","config":{"command":"/bin/true"}}]}]}`
	want := &spec.Lifecycle{Hook: spec.HookPrestart, Sidecar: true}
	for name, src := range map[string]string{"l.hcl": hcl, "l.json": json} {
		job, err := Decode(name, []byte(src))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if diff := cmp.Diff(want, job.Groups[0].Tasks[0].Lifecycle); diff != "" {
			t.Errorf("%s: lifecycle (-want +got):\n%s", name, diff)
		}
		if job.Groups[0].Tasks[1].Lifecycle != nil {
			t.Errorf("%s: the main task has a lifecycle", name)
		}
	}
	_, err := Decode("bad.hcl", []byte(strings.Replace(hcl, `"prestart"`, `"before"`, 1)))
	if err == nil || !strings.Contains(err.Error(), `bad.hcl:6:19: groups[0].tasks[0].lifecycle.hook: task "init": unknown lifecycle hook "before"; use "prestart", "poststart" or "poststop"`) {
		t.Errorf("unknown hook: %v", err)
	}
}

// TestTaskOptionsInEveryFormat: Nomad's task and group options read the
// same in HCL and JSON.
func TestTaskOptionsInEveryFormat(t *testing.T) {
	hcl := `job "o" {
  group "g" {
    ephemeral_disk {
      size    = 500
      sticky  = true
      migrate = true
    }
    task "t" {
      driver         = "exec"
      user           = "nobody"
      leader         = true
      kill_signal    = "SIGINT"
      kill_timeout   = "20s"
      shutdown_delay = "5s"
      config {
        command = "/bin/true"
      }
      resources {
        memory     = 256
        memory_max = 1024
      }
    }
  }
}
`
	json := `{"name":"o","groups":[{"name":"g","ephemeral_disk":{"size":500,"sticky":true,"migrate":true},"tasks":[
{"name":"t","driver":"exec","user":"nobody","leader":true,"kill_signal":"SIGINT","kill_timeout":"20s","shutdown_delay":"5s",
"config":{"command":"/bin/true"},"resources":{"memory":256,"memory_max":1024}}]}]}`
	for name, src := range map[string]string{"o.hcl": hcl, "o.json": json} {
		job, err := Decode(name, []byte(src))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		g := job.Groups[0]
		tk := g.Tasks[0]
		got := []any{*g.EphemeralDisk, tk.User, tk.Leader, tk.KillSignal, tk.KillTimeout, tk.ShutdownDelay, tk.Resources.MemoryMB, tk.Resources.MemoryMaxMB}
		want := []any{spec.EphemeralDisk{SizeMB: 500, Sticky: true, Migrate: true}, "nobody", true, "SIGINT",
			spec.Duration(20 * time.Second), spec.Duration(5 * time.Second), 256, 1024}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}

// TestTemplateInEveryFormat: a template block, with a heredoc's data,
// reads the same in HCL and JSON.
func TestTemplateInEveryFormat(t *testing.T) {
	hcl := `job "t" {
  group "g" {
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
      template {
        data          = <<EOT
{{ range service "db" }}{{ .Address }}:{{ .Port }}
{{ end }}
EOT
        destination   = "${NOMAD_SECRETS_DIR}/db"
        change_mode   = "signal"
        change_signal = "SIGHUP"
        perms         = "0600"
      }
      template {
        source      = "local/env.tpl"
        destination = "local/env"
        env         = true
      }
    }
  }
}
`
	json := `{"name":"t","groups":[{"name":"g","tasks":[{"name":"t","driver":"raw_exec","config":{"command":"/bin/true"},"templates":[
{"data":"{{ range service \"db\" }}{{ .Address }}:{{ .Port }}\n{{ end }}\n","destination":"${NOMAD_SECRETS_DIR}/db","change_mode":"signal","change_signal":"SIGHUP","perms":"0600"},
{"source":"local/env.tpl","destination":"local/env","env":true}]}]}]}`
	want := []*spec.Template{
		{Data: "{{ range service \"db\" }}{{ .Address }}:{{ .Port }}\n{{ end }}\n", Destination: "${NOMAD_SECRETS_DIR}/db",
			ChangeMode: spec.ChangeSignal, ChangeSignal: "SIGHUP", Perms: "0600"},
		{Source: "local/env.tpl", Destination: "local/env", Env: true},
	}
	for name, src := range map[string]string{"t.hcl": hcl, "t.json": json} {
		job, err := Decode(name, []byte(src))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if diff := cmp.Diff(want, job.Groups[0].Tasks[0].Templates); diff != "" {
			t.Errorf("%s: templates (-want +got):\n%s", name, diff)
		}
	}
}
