package archtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/drover-org/drover"

// pure packages decide; they take a snapshot (including now) and return
// data. They may import only these standard packages and each other: the
// planner joins the reconciler and the scheduler, and every one speaks
// spec.
var pure = map[string]bool{
	"internal/scheduler": true,
	"internal/reconcile": true,
	"internal/planner":   true,
	"internal/spec":      true,
	"internal/catalog":   true,
	"internal/periodic":  true,
}

// pureLibs are the libraries a pure package may import, by package: each
// computes and does no I/O in what the package calls.
var pureLibs = map[string][]string{
	// Parsing cron expressions and stepping through their ticks; its
	// runner (cron.New) is never called.
	"internal/periodic": {"github.com/robfig/cron/v3"},
}

var pureStd = []string{
	"bytes", "cmp", "container/heap", "encoding/base64", "encoding/json", "errors", "fmt", "maps", "math", "net/netip", "path", "regexp",
	"slices", "sort", "strconv", "strings", "text/template", "time", "unicode", "unicode/utf8",
}

// clockAndChance are the calls a pure package must not make: time is an
// input, and randomness would make decisions unrepeatable.
var clockAndChance = map[string][]string{
	"time": {"Now", "Since", "Until", "Sleep", "After", "AfterFunc", "Tick", "NewTimer", "NewTicker"},
	// A template renders what it is given (spec's job templates); it
	// reads no file of its own.
	"template": {"ParseFiles", "ParseGlob", "ParseFS"},
}

// owners: an import path prefix that only these packages may import. The
// docker client has a second owner, dockertest, which only tests import: it
// builds their image through the same API. etcd's client has a second
// owner, chaos, the fault-injection harness: it reads etcd directly, as
// evidence drover does not produce, and writes keys of its own there as a
// shared etcd's other users do. HCL has four: job files, ACL policies and
// the daemons' config files (flagfile) are written in it, and inputlimit
// lexes them before they are parsed. Network namespaces, links,
// nftables and iptables rules belong to netbridge (the exec driver joins
// a namespace with setns alone).
var owners = map[string][]string{
	"go.etcd.io/":                       {"internal/registry", "internal/chaos"},
	"github.com/moby/moby/":             {"internal/driver/dockerdriver", "internal/dockertest"},
	"github.com/docker/docker/":         {"internal/driver/dockerdriver", "internal/dockertest"},
	"github.com/hashicorp/hcl/v2":       {"internal/jobfile", "internal/acl", "internal/flagfile", "internal/inputlimit"},
	"github.com/miekg/dns":              {"internal/dns"},
	"github.com/opencontainers/cgroups": {"internal/driver/execdriver"},
	"github.com/vishvananda/":           {"internal/netbridge"},
	"github.com/google/nftables":        {"internal/netbridge"},
	"github.com/coreos/go-iptables":     {"internal/netbridge"},
}

// apart: a package and the imports it must not have. The leader's loop
// reaches the API's server through its interfaces, never its HTTP.
var apart = map[string][]string{
	"internal/leader": {"net/http", module + "/internal/server"},
}

// pureList names the pure packages, for a violation's message.
func pureList() string {
	return strings.Join(slices.Sorted(maps.Keys(pure)), ", ")
}

// violations returns every rule a package's non-test file breaks.
func violations(pkg, filename string, f *ast.File) []string {
	var out []string
	aliases := map[string]string{} // local name -> import path
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		name := path[strings.LastIndex(path, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		aliases[name] = path
		for prefix, owned := range owners {
			if strings.HasPrefix(path, prefix) && !slices.ContainsFunc(owned, func(o string) bool { return pkg == o || strings.HasPrefix(pkg, o+"/") }) {
				out = append(out, fmt.Sprintf("%s imports %s; only %s may", filename, path, strings.Join(owned, " and ")))
			}
		}
		if slices.Contains(apart[pkg], path) {
			out = append(out, fmt.Sprintf("%s imports %s; %s must not", filename, path, pkg))
		}
		if pure[pkg] {
			rel, internal := strings.CutPrefix(path, module+"/")
			if internal && !pure[rel] {
				out = append(out, fmt.Sprintf("%s (pure) imports %s; pure packages import only other pure packages (%s)", filename, path, pureList()))
			}
			if !internal && !slices.Contains(pureStd, path) && !slices.Contains(pureLibs[pkg], path) {
				out = append(out, fmt.Sprintf("%s (pure) imports %s, which is not on the pure allow-list", filename, path))
			}
		}
	}
	if pure[pkg] {
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			id, ok := sel.X.(*ast.Ident)
			if !ok {
				return true
			}
			if banned := clockAndChance[aliases[id.Name]]; slices.Contains(banned, sel.Sel.Name) {
				out = append(out, fmt.Sprintf("%s (pure) calls %s.%s; take time as an input", filename, aliases[id.Name], sel.Sel.Name))
			}
			return true
		})
	}
	return out
}

func TestArchitecture(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := map[string]bool{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		pkg := filepath.ToSlash(filepath.Dir(rel))
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if pure[pkg] {
			if f, err = parser.ParseFile(fset, path, nil, parser.SkipObjectResolution); err != nil {
				return err
			}
		}
		checked[pkg] = true
		for _, v := range violations(pkg, rel, f) {
			t.Error(v)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for p := range pure {
		if !checked[p] {
			t.Errorf("pure package %s was not found; update the rules", p)
		}
	}
	for _, p := range append(slices.Sorted(maps.Keys(apart)), "internal/registry") {
		if !checked[p] {
			t.Errorf("%s was not found; update the rules", p)
		}
	}
}

// The checker must be able to fail: feed it files that break each rule.
func TestArchitectureCatchesViolations(t *testing.T) {
	cases := []struct {
		pkg, src, want string
	}{
		{"internal/scheduler", "package s\nimport \"time\"\nvar _ = time.Now()", "calls time.Now"},
		{"internal/reconcile", "package r\nimport t \"time\"\nfunc f() { t.Sleep(1) }", "calls time.Sleep"},
		{"internal/scheduler", "package s\nimport \"os\"\nvar _ = os.Args", "imports os"},
		{"internal/scheduler", "package s\nimport \"math/rand\"\nvar _ = rand.Int", "imports math/rand"},
		{"internal/reconcile", "package r\nimport \"" + module + "/internal/registry\"\nvar _ = registry.X", "pure packages import only other pure packages"},
		{"internal/planner", "package p\nimport \"" + module + "/internal/state\"\nvar _ = state.New", "internal/state; pure packages import only other pure packages"},
		{"internal/planner", "package p\nimport \"github.com/google/uuid\"\nvar _ = uuid.NewString", "imports github.com/google/uuid, which is not on the pure allow-list"},
		{"internal/planner", "package p\nimport \"time\"\nvar _ = time.Since", "calls time.Since"},
		{"internal/server", "package s\nimport \"go.etcd.io/etcd/client/v3\"\nvar _ = clientv3.New", "only internal/registry and internal/chaos may"},
		{"internal/leader", "package l\nimport \"net/http\"\nvar _ = http.Get", "imports net/http; internal/leader must not"},
		{"internal/leader", "package l\nimport \"" + module + "/internal/server\"\nvar _ = server.New", "internal/leader must not"},
	}
	for _, c := range cases {
		f, err := parser.ParseFile(token.NewFileSet(), "x.go", c.src, 0)
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Join(violations(c.pkg, "x.go", f), "\n")
		if !strings.Contains(got, c.want) {
			t.Errorf("%s: %q: want a violation containing %q, got %q", c.pkg, c.src, c.want, got)
		}
	}
	f, _ := parser.ParseFile(token.NewFileSet(), "x.go", "package s\nimport \"time\"\nvar _ time.Duration", 0)
	if v := violations("internal/scheduler", "x.go", f); len(v) != 0 {
		t.Errorf("time types are allowed in pure packages, got %v", v)
	}
	f, _ = parser.ParseFile(token.NewFileSet(), "x.go", "package p\nimport \""+module+"/internal/scheduler\"\nvar _ = scheduler.Place", 0)
	if v := violations("internal/planner", "x.go", f); len(v) != 0 {
		t.Errorf("a pure package may import another pure package, got %v", v)
	}
}
