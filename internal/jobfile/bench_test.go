package jobfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkDecodeGoodFiles decodes the example job files of testdata/good,
// one sub-benchmark per format, each op decoding every file of it.
func BenchmarkDecodeGoodFiles(b *testing.B) {
	files, err := filepath.Glob("testdata/good/*")
	if err != nil || len(files) == 0 {
		b.Fatalf("no good files: %v", err)
	}
	byFormat := map[string]map[string][]byte{}
	for _, path := range files {
		src, err := os.ReadFile(path)
		if err != nil {
			b.Fatal(err)
		}
		format := strings.TrimPrefix(filepath.Ext(path), ".")
		switch format {
		case "nomad":
			format = "hcl"
		case "yml":
			format = "yaml"
		}
		if byFormat[format] == nil {
			byFormat[format] = map[string][]byte{}
		}
		byFormat[format][filepath.Base(path)] = src
	}
	for _, format := range []string{"hcl", "json", "yaml"} {
		b.Run(format, func(b *testing.B) {
			for b.Loop() {
				for name, src := range byFormat[format] {
					if _, err := Decode(name, src); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
