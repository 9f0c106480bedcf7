// Package dist holds what a release and an install are made of: the
// release build (release.sh), the image (Dockerfile) and the systemd
// units (systemd/). It has no Go code, only these tests: the release
// script cross-builds static binaries whose `drover version` says what was
// stamped and whose SHA256SUMS match; the image builds and runs; the units
// pass `systemd-analyze verify` and start commands that exist; and
// docs/operations.md names only commands and flags that exist, with config
// examples whose every key is a flag.
package dist

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coreos/go-systemd/v22/unit"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/drover-org/drover/internal/dockertest"
	"github.com/drover-org/drover/internal/testbin"
)

// release is one run of release.sh for the whole package.
var release struct {
	once    sync.Once
	dir     string
	version string
	arches  []string
	out     string
	err     error
}

// releaseArches are the architectures the test builds: both under CI=true
// (or DROVER_TEST_RELEASE=all), else this machine's alone, since a cold
// cross-build of the other takes minutes on a shared two-core machine.
func releaseArches() []string {
	if os.Getenv("CI") == "true" || os.Getenv("DROVER_TEST_RELEASE") == "all" {
		return []string{"amd64", "arm64"}
	}
	return []string{runtime.GOARCH}
}

// built runs release.sh once and returns its output directory.
func built(t *testing.T) string {
	t.Helper()
	if runtime.GOOS != "linux" || (runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64") {
		t.Skipf("release binaries are linux/amd64 and linux/arm64; this is %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	release.once.Do(func() {
		testbin.TouchSources("..")
		release.dir, release.err = os.MkdirTemp("", "drover-release-test-")
		if release.err != nil {
			return
		}
		release.version = fmt.Sprintf("v0.0.0-test.%d", os.Getpid())
		release.arches = releaseArches()
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", "release.sh")
		cmd.Env = append(os.Environ(), "OUT="+release.dir, "VERSION="+release.version, "ARCHES="+strings.Join(release.arches, " "))
		out, err := cmd.CombinedOutput()
		release.out = string(out)
		if err != nil {
			release.err = fmt.Errorf("release.sh: %v\n%s", err, out)
		}
	})
	if release.err != nil {
		t.Fatal(release.err)
	}
	return release.dir
}

// hostBinary is the release binary this machine runs.
func hostBinary(t *testing.T) string {
	return filepath.Join(built(t), "drover-linux-"+runtime.GOARCH)
}

func TestMain(m *testing.M) {
	code := m.Run()
	if release.dir != "" {
		os.RemoveAll(release.dir)
	}
	os.Exit(code)
}

// TestReleaseBuild: release.sh makes a static ELF binary per architecture
// for the right machine, SHA256SUMS lists each with its real hash, and
// the binary's `drover version` says the stamped version and this
// checkout's commit.
func TestReleaseBuild(t *testing.T) {
	dir := built(t)
	t.Logf("release.sh:\n%s", release.out)
	sums, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(sums)), "\n") {
		sum, name, ok := strings.Cut(line, "  ")
		if !ok {
			t.Fatalf("SHA256SUMS line %q is not \"HASH  NAME\"", line)
		}
		listed[name] = sum
	}
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	for _, arch := range release.arches {
		name := "drover-linux-" + arch
		path := filepath.Join(dir, name)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		if got := listed[name]; got != hex.EncodeToString(sum[:]) {
			t.Errorf("SHA256SUMS says %s is %q; it is %x", name, got, sum)
		}
		delete(listed, name)
		f, err := elf.NewFile(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if f.Machine != machines[arch] {
			t.Errorf("%s is for %s, want %s", name, f.Machine, machines[arch])
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("%s has a program interpreter: it is not static", name)
			}
		}
		if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
			t.Errorf("%s needs shared libraries %v: it is not static", name, libs)
		}
		f.Close()
	}
	if len(listed) > 0 {
		t.Errorf("SHA256SUMS lists files that were not built: %v", listed)
	}

	out, err := exec.Command(hostBinary(t), "version", "-o", "json").Output()
	if err != nil {
		t.Fatalf("drover version: %v", err)
	}
	var v struct {
		Version    string `json:"version"`
		Commit     string `json:"commit"`
		CommitDate string `json:"commit_date"`
		GoVersion  string `json:"go_version"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("drover version -o json: %v\n%s", err, out)
	}
	if v.Version != release.version || v.GoVersion != runtime.Version() {
		t.Errorf("drover version says %+v; want version %s, Go %s", v, release.version, runtime.Version())
	}
	if head, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil {
		if want := strings.TrimSpace(string(head)); v.Commit != want || v.CommitDate == "unknown" {
			t.Errorf("drover version says commit %s of %s; the checkout is at %s", v.Commit, v.CommitDate, want)
		}
	} else {
		t.Logf("not in a git checkout (%v): the commit is not compared", err)
	}

	// A bad version is refused before anything is built.
	cmd := exec.Command("bash", "release.sh")
	cmd.Env = append(os.Environ(), "OUT="+t.TempDir(), "VERSION=v1 2", "ARCHES=amd64")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "VERSION") {
		t.Errorf("release.sh with VERSION=\"v1 2\": %v\n%s", err, out)
	}
}

// TestDockerImage builds dist/Dockerfile (FROM scratch) from the release
// output with `docker build` and runs the image's `drover version`.
func TestDockerImage(t *testing.T) {
	dockertest.Require(t)
	dir := built(t)
	tag := fmt.Sprintf("drover-release-test:%d", os.Getpid())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", "build", "-q", "-f", "Dockerfile", "--build-arg", "ARCH="+runtime.GOARCH, "-t", tag, dir).CombinedOutput()
	if err != nil {
		t.Fatalf("docker build: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("docker", "image", "rm", "-f", tag).Run() })
	out, err = exec.CommandContext(ctx, "docker", "run", "--rm", "--network", "none", tag, "version", "-o", "json").Output()
	if err != nil {
		t.Fatalf("docker run %s version: %v\n%s", tag, err, out)
	}
	var v struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(out, &v); err != nil || v.Version != release.version {
		t.Fatalf("the image's drover version: %v, %s; want version %s", err, out, release.version)
	}
	// The default command is version too; the image holds the binary alone.
	out, err = exec.CommandContext(ctx, "docker", "run", "--rm", "--network", "none", tag).Output()
	if err != nil || !strings.HasPrefix(string(out), "drover "+release.version+"\n") {
		t.Fatalf("docker run %s: %v\n%s", tag, err, out)
	}
}

// units are the systemd units in the repository, by file name.
var units = []string{"drover-server.service", "drover-agent.service"}

// TestSystemdUnitsVerify runs `systemd-analyze verify` on the units (with
// ExecStart pointing at a real drover binary, which it checks exists) and
// requires it to say nothing: it prints a warning, and still exits 0, for
// an unknown key or a value it cannot parse.
func TestSystemdUnitsVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("systemd-analyze is not installed (CI=true): apt-get install -y systemd")
		}
		t.Skip("systemd-analyze not installed; apt-get install systemd to run this test")
	}
	bin := hostBinary(t)
	dir := t.TempDir()
	var paths []string
	for _, u := range units {
		text, err := os.ReadFile(filepath.Join("systemd", u))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(text, []byte("ExecStart=/usr/local/bin/drover ")) {
			t.Fatalf("%s: no ExecStart=/usr/local/bin/drover", u)
		}
		p := filepath.Join(dir, u)
		if err := os.WriteFile(p, bytes.ReplaceAll(text, []byte("/usr/local/bin/drover"), []byte(bin)), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, analyze, append([]string{"verify"}, paths...)...).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// unitOptions parses a unit file with go-systemd's parser: section.key ->
// values.
func unitOptions(t *testing.T, name string) map[string][]string {
	t.Helper()
	f, err := os.Open(filepath.Join("systemd", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	opts, err := unit.DeserializeOptions(f)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	m := map[string][]string{}
	for _, o := range opts {
		m[o.Section+"."+o.Name] = append(m[o.Section+"."+o.Name], o.Value)
	}
	return m
}

// TestSystemdUnitsRunWhatExists: each unit starts a drover command with
// flags that command has, with the config file docs/operations.md
// installs; the server runs unprivileged and sandboxed; the agent runs as
// root with nothing that would break the exec driver's cgroups or kill
// tasks with it.
func TestSystemdUnitsRunWhatExists(t *testing.T) {
	bin := hostBinary(t)
	server, agent := unitOptions(t, "drover-server.service"), unitOptions(t, "drover-agent.service")
	for name, want := range map[string]string{
		"drover-server.service": "/usr/local/bin/drover server -config /etc/drover/server.hcl",
		"drover-agent.service":  "/usr/local/bin/drover agent -config /etc/drover/agent.hcl",
	} {
		got := unitOptions(t, name)["Service.ExecStart"]
		if len(got) != 1 || got[0] != want {
			t.Errorf("%s: ExecStart %q, want %q", name, got, want)
			continue
		}
		checkCommandLine(t, bin, name, strings.Fields(want)[1:])
	}
	for key, want := range map[string]string{
		"Service.User": "drover", "Service.NoNewPrivileges": "yes", "Service.ProtectSystem": "strict",
		"Service.CapabilityBoundingSet": "", "Service.ProtectControlGroups": "yes",
	} {
		if got := server[key]; !slices.Equal(got, []string{want}) {
			t.Errorf("drover-server.service: %s = %q, want %q", key, got, want)
		}
	}
	for key, want := range map[string]string{"Service.User": "root", "Service.KillMode": "process", "Service.Delegate": "yes"} {
		if got := agent[key]; !slices.Equal(got, []string{want}) {
			t.Errorf("drover-agent.service: %s = %q, want %q", key, got, want)
		}
	}
	// Each of these would stop the exec driver making cgroups or running
	// a task as its user, or would apply to every task.
	for _, key := range []string{"ProtectControlGroups", "ProtectSystem", "ReadOnlyPaths", "NoNewPrivileges", "CapabilityBoundingSet",
		"PrivateDevices", "DevicePolicy", "DeviceAllow", "ProtectClock", "RestrictNamespaces", "SystemCallFilter",
		"MemoryDenyWriteExecute", "RestrictSUIDSGID", "PrivateTmp", "ProtectHome", "DynamicUser", "PrivateUsers"} {
		if v, ok := agent["Service."+key]; ok {
			t.Errorf("drover-agent.service sets %s=%v: it would break the exec driver or its tasks", key, v)
		}
	}
}

// helpCache holds `drover ... --help` outputs by command path.
var helpCache sync.Map

// help runs `bin args... --help`.
func help(t *testing.T, bin string, args []string) string {
	t.Helper()
	key := strings.Join(args, " ")
	if h, ok := helpCache.Load(key); ok {
		return h.(string)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, append(slices.Clone(args), "--help")...).CombinedOutput()
	if err != nil {
		t.Fatalf("drover %s --help: %v\n%s", key, err, out)
	}
	helpCache.Store(key, string(out))
	return string(out)
}

// checkCommandLine checks that args (after "drover") name a command that
// exists and give only flags it has.
func checkCommandLine(t *testing.T, bin, where string, args []string) {
	t.Helper()
	var words []string
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			break
		}
		words = append(words, a)
	}
	// The command is the longest run of words whose help names it.
	depth := 0
	var h string
	for k := len(words); k >= 0; k-- {
		h = help(t, bin, words[:k])
		if strings.Contains(h, "\n  "+strings.TrimSpace("drover "+strings.Join(words[:k], " "))+" ") {
			depth = k
			break
		}
	}
	if depth < len(words) && strings.Contains(h, "Available Commands:") {
		t.Errorf("%s: drover %s: %q is no command of drover %s", where, strings.Join(args, " "), words[depth], strings.Join(words[:depth], " "))
		return
	}
	for _, a := range args {
		if !strings.HasPrefix(a, "-") || a == "-" || a == "--" {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		var ok bool
		if len(name) == 1 {
			ok = strings.Contains(h, "-"+name+", --")
		} else {
			ok = strings.Contains(h, "--"+name+" ") || strings.Contains(h, "--"+name+"\n")
		}
		switch {
		case ok:
		default:
			t.Errorf("%s: drover %s has no flag %s", where, strings.Join(words[:depth], " "), a)
		}
	}
}

// droverCommands are the drover command lines of a shell block: lines
// continued with \ joined, comments cut, split at && ; | and do.
func droverCommands(sh string) [][]string {
	sh = strings.ReplaceAll(sh, "\\\n", " ")
	var out [][]string
	for _, line := range strings.Split(sh, "\n") {
		if i := strings.Index(line, " #"); i >= 0 {
			line = line[:i]
		}
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		for _, sep := range []string{"&&", "||", "|", ";", "$(", "(", ")"} {
			line = strings.ReplaceAll(line, sep, "\n")
		}
		for _, seg := range strings.Split(line, "\n") {
			f := strings.Fields(seg)
			for len(f) > 0 && (f[0] == "do" || f[0] == "then" || f[0] == "sudo" || strings.Contains(f[0], "=") && !strings.HasPrefix(f[0], "-")) {
				f = f[1:]
			}
			if len(f) > 0 && f[0] == "drover" {
				out = append(out, f[1:])
			}
		}
	}
	return out
}

// TestOperationsGuideCommands: every drover command in
// docs/operations.md's shell blocks and in its text exists with the flags
// it is given; every config file example there is HCL whose keys are
// flags of its command; the etcd settings are etcd flags.
func TestOperationsGuideCommands(t *testing.T) {
	bin := hostBinary(t)
	md, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	n, configs := 0, 0
	for _, b := range testbin.CodeBlocks(string(md)) {
		where := fmt.Sprintf("docs/operations.md:%d", b.Line)
		switch {
		case b.Lang == "sh" && strings.HasPrefix(b.Text, "# /etc/default/etcd"):
			checkEtcdSettings(t, where, b.Text)
		case b.Lang == "sh":
			for _, args := range droverCommands(b.Text) {
				checkCommandLine(t, bin, where, args)
				n++
			}
		case b.Lang == "hcl":
			checkConfigExample(t, bin, where, b.Text)
			configs++
		}
	}
	// Commands quoted in the text: `drover ...`.
	for _, m := range regexp.MustCompile("`drover ([^`]+)`").FindAllStringSubmatch(string(md), -1) {
		for _, args := range droverCommands("drover " + m[1]) {
			checkCommandLine(t, bin, "docs/operations.md (text)", args)
			n++
		}
	}
	if n < 30 || configs != 2 {
		t.Fatalf("found %d drover commands and %d config examples in docs/operations.md: the blocks are not read as they should be", n, configs)
	}
	t.Logf("%d drover commands and %d config files checked", n, configs)
}

// checkConfigExample parses an HCL block whose first line names its file
// (# /etc/drover/server.hcl) and checks that each key is a flag of that
// command, with a constant value.
func checkConfigExample(t *testing.T, bin, where, text string) {
	t.Helper()
	first, _, _ := strings.Cut(text, "\n")
	var cmd string
	switch strings.TrimSpace(strings.TrimPrefix(first, "#")) {
	case "/etc/drover/server.hcl":
		cmd = "server"
	case "/etc/drover/agent.hcl":
		cmd = "agent"
	default:
		t.Errorf("%s: an hcl block should start with # /etc/drover/server.hcl or agent.hcl, not %q", where, first)
		return
	}
	f, diags := hclsyntax.ParseConfig([]byte(text), where, hcl.InitialPos)
	if diags.HasErrors() {
		t.Errorf("%s: %s", where, diags.Error())
		return
	}
	body := f.Body.(*hclsyntax.Body)
	if len(body.Attributes) == 0 || len(body.Blocks) > 0 {
		t.Errorf("%s: %d keys and %d blocks; want keys alone", where, len(body.Attributes), len(body.Blocks))
	}
	args := []string{cmd}
	for name, attr := range body.Attributes {
		if _, diags := attr.Expr.Value(nil); diags.HasErrors() {
			t.Errorf("%s: %s: %s", where, name, diags.Error())
		}
		args = append(args, "--"+strings.ReplaceAll(name, "_", "-"))
	}
	checkCommandLine(t, bin, where, args)
}

// checkEtcdSettings checks the ETCD_* lines against the flags of the etcd
// binary, when there is one.
func checkEtcdSettings(t *testing.T, where, text string) {
	t.Helper()
	etcd, err := exec.LookPath("etcd")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("etcd is not installed (CI=true): apt-get install -y etcd-server")
		}
		t.Logf("%s: etcd not installed: its settings are not checked", where)
		return
	}
	out, _ := exec.Command(etcd, "--help").CombinedOutput()
	for _, line := range strings.Split(text, "\n") {
		key, _, ok := strings.Cut(line, "=")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		flag := "--" + strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(key, "ETCD_")), "_", "-")
		if !strings.HasPrefix(key, "ETCD_") || !strings.Contains(string(out), flag+" ") && !strings.Contains(string(out), flag+"\n") {
			t.Errorf("%s: %s is no etcd setting (etcd --help has no %s)", where, key, flag)
		}
	}
}
