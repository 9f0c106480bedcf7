package main

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/drover-org/drover/internal/flagfile"
)

// The example config files parse against the commands' real flags and
// set every key there is: a new flag fails this test until the example
// shows it.
func TestConfigExamplesSetEveryFlag(t *testing.T) {
	for file, newCmd := range map[string]func() *cobra.Command{
		"../../examples/config/server.hcl": newServerCmd,
		"../../examples/config/agent.hcl":  newAgentCmd,
	} {
		cmd := newCmd()
		cmd.InitDefaultHelpFlag()
		keys := configKeys(cmd)
		if len(keys) < 10 || keys["data_dir"] == nil || keys["config"] != nil || keys["help"] != nil {
			t.Fatalf("%s: the keys are wrong: %v", file, slices.Sorted(maps.Keys(keys)))
		}
		if err := flagfile.Load(keys, []string{file}); err != nil {
			t.Errorf("%s:\n%v", file, err)
			continue
		}
		for k, f := range keys {
			if !f.Changed {
				t.Errorf("%s does not set %s (--%s)", file, k, f.Name)
			}
		}
	}
	// And the settings arrive: the agent's meta block, a list, a number.
	cmd := newAgentCmd()
	if err := flagfile.Load(configKeys(cmd), []string{"../../examples/config/agent.hcl"}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"meta": "rack=r1", "servers": "[https://10.0.0.1:4646,https://10.0.0.2:4646,https://10.0.0.3:4646]", "max-dynamic-port": "32000"} {
		if got := cmd.Flags().Lookup(name).Value.String(); got != want {
			t.Errorf("--%s from the example: %q, want %q", name, got, want)
		}
	}
}

// Through drover server itself: a file's values reach the command's
// checks, a flag on the command line wins over the file, a later file
// over an earlier one, and a mistyped key stops the server before it
// starts, at its file:line:col with the key it meant.
func TestServerConfigFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a := write("a.hcl", "log_level = \"loud\"\nmax_heartbeats_per_second = 0\ndata_dir = \""+dir+"\"\n")
	b := write("b.hcl", "max_heartbeats_per_second = -3\n")
	typo := write("typo.hcl", "data_dir = \"/x\"\nmax_heartbeat_per_second = 5\n")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"server", "--config", a}, `unknown log level "loud"`},
		{[]string{"server", "--config", a, "--log-level", "warn"}, "--max-heartbeats-per-second must be at least 1, got 0"},
		{[]string{"server", "-config", a, "-config", b, "-log-level", "warn"}, "--max-heartbeats-per-second must be at least 1, got -3"},
		{[]string{"server", "--config", b, "--config", a, "--log-level", "warn"}, "--max-heartbeats-per-second must be at least 1, got 0"},
		{[]string{"server", "--config", a, "--log-level", "warn", "--max-heartbeats-per-second", "-7"}, "got -7"},
		{[]string{"server", "--config", typo}, typo + `:2:1: unknown key "max_heartbeat_per_second"; did you mean "max_heartbeats_per_second"?`},
		{[]string{"agent", "--config", write("agent.hcl", "datacenter = 3\n")}, `agent.hcl:1:14: datacenter: want a string, got a number`},
		{[]string{"dev", "--config", write("dev.hcl", "min_dynamic_port = 80\n")}, "--min-dynamic-port 80 and --max-dynamic-port 32000: give 1024 <= min <= max <= 65535"},
		{[]string{"agent", "--config", write("arts.hcl", "data_dir = \""+dir+"\"\nartifact_timeout = \"0s\"\n")}, "--artifact-timeout 0s and --artifact-max-mb 102400: give both above 0"},
		{[]string{"dev", "--artifact-max-mb", "-1"}, "--artifact-timeout 30m0s and --artifact-max-mb -1: give both above 0"},
		{[]string{"dev", "--config", filepath.Join(dir, "none.hcl")}, "config file " + filepath.Join(dir, "none.hcl") + " does not exist"},
	} {
		out, code := runDrover(t, "", c.args...)
		if code != exitFailure || !strings.Contains(out, c.want) {
			t.Errorf("drover %s: exit %d, printed:\n%s\nwant exit 1 and %q", strings.Join(c.args, " "), code, out, c.want)
		}
	}
}

// TestHostVolumeConfig: host_volume is read as a list of NAME=PATH[:ro]
// and as Nomad's client blocks, host_volume "name" { path, read_only },
// a name with an instance index ("data[0]", for per_alloc) in both;
// a block without a path, with an attribute it does not take, or beside
// the list form is an error at its line.
func TestHostVolumeConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	load := func(file string) (string, error) {
		cmd := newAgentCmd()
		err := flagfile.Load(configKeys(cmd), []string{file})
		return cmd.Flags().Lookup("host-volume").Value.String(), err
	}
	got, err := load(write("blocks.hcl", `
host_volume "shared" {
  path = "/srv/shared"
}
host_volume "certs" {
  path      = "/etc/ssl/certs"
  read_only = true
}
host_volume "data[0]" {
  path = "/srv/data0"
}
`))
	if err != nil || got != "[shared=/srv/shared,certs=/etc/ssl/certs:ro,data[0]=/srv/data0]" {
		t.Errorf("blocks: %q, %v", got, err)
	}
	got, err = load(write("list.hcl", `host_volume = ["shared=/srv/shared", "certs=/etc/ssl/certs:ro", "data[1]=/srv/data1"]`))
	if err != nil || got != "[shared=/srv/shared,certs=/etc/ssl/certs:ro,data[1]=/srv/data1]" {
		t.Errorf("list: %q, %v", got, err)
	}
	for file, want := range map[string]string{
		"nopath.hcl:1:1":  "host_volume \"a\" {\n  read_only = true\n}\n",
		"unknown.hcl:1:1": "host_volume \"a\" {\n  path = \"/x\"\n  mode = \"rw\"\n}\n",
		"both.hcl:2:1":    "host_volume = [\"a=/x\"]\nhost_volume \"b\" {\n  path = \"/y\"\n}\n",
		"badlist.hcl:1:1": "host_volume = [\"nopath\"]\n",
	} {
		name, _, _ := strings.Cut(file, ":")
		_, err := load(write(name, want))
		if err == nil || !strings.Contains(err.Error(), file) {
			t.Errorf("%s: error %v, want one at %s", name, err, file)
		}
	}
}
