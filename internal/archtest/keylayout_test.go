package archtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// keyTableHeading opens the section of docs/architecture.md whose table
// lists every etcd key with its writer.
const keyTableHeading = "## The etcd key layout"

// keyConst is the name of a registry constant that is a key or a key
// prefix: dirJobs, keyACLBoot.
var keyConst = regexp.MustCompile(`^(dir|key)[A-Z]`)

// registryKeys returns the value of every key constant declared in the
// registry's non-test files, by name.
func registryKeys(dir string) (map[string]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	keys := map[string]string{}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if !keyConst.MatchString(name.Name) || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					keys[name.Name], _ = strconv.Unquote(lit.Value)
				}
			}
		}
	}
	return keys, nil
}

// keyRows returns the key pattern of each row of the key table: the first
// cell's code span, as in "| `jobs/<name>` | ...".
func keyRows(doc string) []string {
	_, section, _ := strings.Cut(doc, "\n"+keyTableHeading+"\n")
	section, _, _ = strings.Cut(section, "\n## ")
	var rows []string
	for line := range strings.Lines(section) {
		if rest, ok := strings.CutPrefix(line, "| `"); ok {
			pattern, _, _ := strings.Cut(rest, "`")
			rows = append(rows, pattern)
		}
	}
	return rows
}

// missingKeys says which keys no row's pattern starts with.
func missingKeys(keys map[string]string, rows []string) []string {
	var out []string
	for name, key := range keys {
		if !slices.ContainsFunc(rows, func(r string) bool { return strings.HasPrefix(r, key) }) {
			out = append(out, fmt.Sprintf("internal/registry's %s (%q) has no row in the key table of docs/architecture.md (%q): add one, with what it holds, its writer and its lease", name, key, keyTableHeading))
		}
	}
	slices.Sort(out)
	return out
}

// The architecture document's key table must name every key the registry
// declares, so that it cannot silently fall behind the key layout.
func TestArchitectureDocNamesEveryKey(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := registryKeys(filepath.Join(root, "internal", "registry"))
	if err != nil {
		t.Fatal(err)
	}
	if keys["dirJobs"] != "jobs/" || keys["dirAllocs"] != "allocs/" {
		t.Fatalf("internal/registry's key constants were not found (got %v); update registryKeys", keys)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := keyRows(string(doc))
	if len(rows) == 0 {
		t.Fatalf("docs/architecture.md has no key table under %q", keyTableHeading)
	}
	for _, m := range missingKeys(keys, rows) {
		t.Error(m)
	}
}

// The check must be able to fail: a table without a key's row, or a key
// table in another section, is caught.
func TestKeyTableCheckCatchesAMissingRow(t *testing.T) {
	keys := map[string]string{"dirJobs": "jobs/", "dirJobVersions": "job_versions/", "dirLeader": "leader"}
	doc := "# x\n\n" + keyTableHeading + "\n\n| key | holds |\n|---|---|\n| `jobs/<name>` | the job |\n| `leader/<id>` | a candidate |\n\n" +
		"## Next\n\n| `job_versions/<name>` | not the key table |\n"
	got := missingKeys(keys, keyRows(doc))
	if len(got) != 1 || !strings.Contains(got[0], "dirJobVersions") {
		t.Errorf("want dirJobVersions reported missing, and only it; got %q", got)
	}
}
