package flagfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
)

// flags is a command's flags of every kind a config file sets.
type flags struct {
	fs       *pflag.FlagSet
	dataDir  string
	port     int
	tls      bool
	ttl      time.Duration
	ratio    float64
	servers  []string
	drivers  []string
	ports    []int
	meta     map[string]string
	hidden   string
	config   []string
	dnsAddr  string
	logLevel string
}

func newFlags() *flags {
	f := &flags{fs: pflag.NewFlagSet("test", pflag.ContinueOnError)}
	f.fs.StringVar(&f.dataDir, "data-dir", "", "")
	f.fs.IntVar(&f.port, "min-dynamic-port", 20000, "")
	f.fs.BoolVar(&f.tls, "tls", true, "")
	f.fs.DurationVar(&f.ttl, "leader-ttl", 10*time.Second, "")
	f.fs.Float64Var(&f.ratio, "ratio", 0.5, "")
	f.fs.StringSliceVar(&f.servers, "servers", nil, "")
	f.fs.StringArrayVar(&f.drivers, "drivers", []string{"exec"}, "")
	f.fs.IntSliceVar(&f.ports, "ports", nil, "")
	f.fs.Var(NewStringMap(&f.meta), "meta", "")
	f.fs.StringVar(&f.hidden, "pprof-addr", "", "")
	f.fs.MarkHidden("pprof-addr")
	f.fs.StringArrayVar(&f.config, "config", nil, "")
	f.fs.StringVar(&f.dnsAddr, "dns-addr", "", "")
	f.fs.StringVar(&f.logLevel, "log-level", "info", "")
	return f
}

// load parses args as the command line, then the config files it names.
func (f *flags) load(t *testing.T, args ...string) error {
	t.Helper()
	if err := f.fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	err := Load(Keys(f.fs, "config"), f.config)
	return err
}

func write(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Every kind of flag is set from its key, with the value its type takes.
func TestEveryKindOfFlag(t *testing.T) {
	p := write(t, t.TempDir(), "a.hcl", `
data_dir         = "/var/lib/drover"
min_dynamic_port = 30000
tls              = false
leader_ttl       = "1m30s"
ratio            = 0.25
servers          = ["10.0.0.1:4646", "10.0.0.2:4646"]
drivers          = ["exec", "raw_exec", "docker"]
ports            = [1, 2]
meta {
  rack = "r1"
  zone = "a,b=c" # commas and = stay in the value
}
`)
	f := newFlags()
	if err := f.load(t, "--config", p); err != nil {
		t.Fatal(err)
	}
	got := []any{f.dataDir, f.port, f.tls, f.ttl, f.ratio, f.servers, f.drivers, f.ports, f.meta}
	want := []any{"/var/lib/drover", 30000, false, 90 * time.Second, 0.25,
		[]string{"10.0.0.1:4646", "10.0.0.2:4646"}, []string{"exec", "raw_exec", "docker"}, []int{1, 2},
		map[string]string{"rack": "r1", "zone": "a,b=c"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	// What a file set counts as given, as cobra and the commands ask.
	if !f.fs.Changed("data-dir") || !f.fs.Changed("meta") || f.fs.Changed("log-level") {
		t.Errorf("Changed: data-dir %v, meta %v, log-level %v", f.fs.Changed("data-dir"), f.fs.Changed("meta"), f.fs.Changed("log-level"))
	}
	// meta may be an object attribute too.
	f = newFlags()
	if err := f.load(t, "--config", write(t, t.TempDir(), "m.hcl", `meta = { rack = "r2" }`)); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(map[string]string{"rack": "r2"}, f.meta); d != "" {
		t.Errorf("meta = {...}: %s", d)
	}
}

// The command line wins over every file; later files win over earlier
// ones; a directory's *.hcl files are read in lexical order.
func TestPrecedence(t *testing.T) {
	dir := t.TempDir()
	confd := filepath.Join(dir, "conf.d")
	os.Mkdir(confd, 0o755)
	write(t, confd, "20-b.hcl", `log_level = "debug"
dns_addr = "127.0.0.1:8600"`)
	write(t, confd, "10-a.hcl", `log_level = "warn"
data_dir = "/a"
servers = ["a"]`)
	write(t, confd, "notes.txt", `not = "read"`)
	base := write(t, dir, "base.hcl", `data_dir = "/base"
servers = ["x", "y"]
meta { a = "1" }`)
	f := newFlags()
	if err := f.load(t, "--config", base, "--config", confd, "--dns-addr", "0.0.0.0:53", "--meta", "b=2"); err != nil {
		t.Fatal(err)
	}
	got := []any{f.logLevel, f.dataDir, f.servers, f.dnsAddr, f.meta}
	want := []any{"debug", "/a", []string{"a"}, "0.0.0.0:53", map[string]string{"b": "2"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	files, err := Files([]string{base, confd})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{base, filepath.Join(confd, "10-a.hcl"), filepath.Join(confd, "20-b.hcl")}, files); d != "" {
		t.Errorf("Files (-want +got):\n%s", d)
	}
}

// Every problem of every file comes back at once, each at its
// file:line:col, with what to write instead.
func TestProblemsAtTheirPlace(t *testing.T) {
	dir := t.TempDir()
	a := write(t, dir, "a.hcl", `data_dri = "/x"
min_dynamic_port = "30000"
tls = "yes"
servers = "10.0.0.1:4646"
meta = ["rack=r1"]
pprof_addr = "127.0.0.1:6060"
leader-ttl = "1m"
`)
	b := write(t, dir, "b.hcl", `ratio = 1
ports = [1.5]
drivers = ["exec", 3]
data_dir "x" {}
config = ["c.hcl"]
meta {
  nested { a = "b" }
}
min_dynamic_port = 1.5
`)
	f := newFlags()
	err := f.load(t, "--config", a, "--config", b)
	want := []string{
		a + `:1:1: unknown key "data_dri"; did you mean "data_dir"?`,
		a + `:2:20: min_dynamic_port: want a whole number, got a string`,
		a + `:3:7: tls: want true or false, got a string`,
		a + `:4:11: servers: want a list of strings, such as ["a", "b"], got a string`,
		a + `:5:8: meta: want an object of strings, such as { key = "value" }, got a list`,
		a + `:6:1: unknown key "pprof_addr"; `,
		a + `:7:1: unknown key "leader-ttl"; did you mean "leader_ttl"?`,
		b + `:2:9: ports: want a list of whole numbers, such as [1, 2]; an element is a number`,
		b + `:3:11: drivers: want a list of strings, such as ["a", "b"]; an element is a number`,
		b + `:4:1: data_dir is not a block: write data_dir = "value"`,
		b + `:5:1: unknown key "config"; `,
		b + `:6:1: meta is not a block: write meta = { key = "value" }`,
		b + `:9:20: min_dynamic_port: want a whole number, got a number`,
	}
	if err == nil {
		t.Fatal("no error")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%v", len(lines), len(want), err)
	}
	for i := range want {
		if !strings.HasPrefix(lines[i], want[i]) {
			t.Errorf("problem %d:\n got %s\nwant %s...", i, lines[i], want[i])
		}
	}
	// Nothing was applied from files with problems.
	if f.dataDir != "" || f.port != 20000 {
		t.Errorf("a file with problems set flags: data_dir %q, min_dynamic_port %d", f.dataDir, f.port)
	}
}

// A value of the right type that the flag refuses is refused at its place;
// syntax errors and expressions that need variables are too; a path that
// does not exist or an empty directory is an error naming it.
func TestValuesSyntaxAndPaths(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ text, want string }{
		{`leader_ttl = "90"`, `:1:14: leader_ttl: time: missing unit in duration "90"`},
		{`meta = { "" = "x" }`, ``}, // an empty key is the map's business: accepted as written
		{"data_dir = \"/x\"\ntls = \n", `:2:7: Invalid expression`},
		{`data_dir = var.dir`, `:1:12: Variables not allowed`},
		{`data_dir = "/x"` + "\n" + `data_dir = "/y"`, `:2:1: Attribute redefined`},
	} {
		f := newFlags()
		p := write(t, dir, "c.hcl", c.text)
		err := f.load(t, "--config", p)
		if c.want == "" {
			if err != nil {
				t.Errorf("%q: %v", c.text, err)
			}
			continue
		}
		if err == nil || !strings.HasPrefix(err.Error(), p+c.want) {
			t.Errorf("%q: got %v, want %s%s...", c.text, err, p, c.want)
		}
	}
	empty := filepath.Join(dir, "empty")
	os.Mkdir(empty, 0o755)
	for path, want := range map[string]string{
		filepath.Join(dir, "missing.hcl"): "config file " + filepath.Join(dir, "missing.hcl") + " does not exist",
		empty:                             "config directory " + empty + " has no .hcl file",
	} {
		if err := Load(Keys(newFlags().fs), []string{path}); err == nil || err.Error() != want {
			t.Errorf("%s: got %v, want %s", path, err, want)
		}
	}
}

// The StringMap flag: repeatable k=v, the first replacing the default.
func TestStringMapFlag(t *testing.T) {
	m := map[string]string{"default": "x"}
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fs.Var(NewStringMap(&m), "meta", "")
	if err := fs.Parse([]string{"--meta", "a=1", "--meta", "b=x=y"}); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(map[string]string{"a": "1", "b": "x=y"}, m); d != "" {
		t.Error(d)
	}
	if err := fs.Parse([]string{"--meta", "novalue"}); err == nil || !strings.Contains(err.Error(), `want key=value, got "novalue"`) {
		t.Errorf("--meta novalue: %v", err)
	}
}
