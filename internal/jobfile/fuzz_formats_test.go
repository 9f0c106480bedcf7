package jobfile

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// One fuzz target per job file format, each seeded with that format's files
// (FuzzDecode's seeds all go in as HCL, so its JSON and YAML coverage
// depends on the mutator flipping the format byte). The nasty seeds (10k
// levels of nesting, 100k-element arrays, NUL bytes, invalid UTF-8,
// duplicate keys, trailing garbage) are committed in testdata/fuzz/<name>/.
// .ci/fuzz runs every target for a bounded time; `go test` runs the seeds.

func FuzzDecodeHCL(f *testing.F) {
	addFormatSeeds(f, ".hcl", ".nomad")
	f.Add([]byte(Example))
	f.Add([]byte(ExampleShort))
	f.Fuzz(func(t *testing.T, src []byte) { checkDecode(t, "f.hcl", src) })
}

func FuzzDecodeJSON(f *testing.F) {
	addFormatSeeds(f, ".json")
	f.Fuzz(func(t *testing.T, src []byte) { checkDecode(t, "f.json", src) })
}

func FuzzDecodeYAML(f *testing.F) {
	addFormatSeeds(f, ".yaml", ".yml")
	f.Fuzz(func(t *testing.T, src []byte) { checkDecode(t, "f.yaml", src) })
}

// addFormatSeeds adds every job file of the repository's examples and of
// testdata (good and bad) whose extension is one of exts.
func addFormatSeeds(f *testing.F, exts ...string) {
	f.Helper()
	n := 0
	for _, pattern := range []string{"testdata/good/*", "testdata/bad/*", "../../examples/*"} {
		files, err := filepath.Glob(pattern)
		if err != nil {
			f.Fatal(err)
		}
		for _, path := range files {
			if !slices.Contains(exts, strings.ToLower(filepath.Ext(path))) {
				continue
			}
			src, err := os.ReadFile(path)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(src)
			n++
		}
	}
	if n == 0 {
		f.Fatalf("no %v files to seed the fuzzer with", exts)
	}
}
