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

// BenchmarkDecodeLarge decodes the large files the linear-time test and
// the fuzz seeds hold: a 100k-element HCL list of the wrong type (100k
// problems) and a one-line JSON job of 100k groups.
func BenchmarkDecodeLarge(b *testing.B) {
	hcl := "job \"web\" {\n  datacenters = [" + strings.Repeat("0,", 100000-1) + "0]\n}\n"
	json := `{"name":"web","groups":[` + strings.Repeat("{},", 100000-1) + "{}]}"
	for _, c := range []struct{ name, file, src string }{{"hcl-list-100k", "f.hcl", hcl}, {"json-groups-100k", "f.json", json}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				Decode(c.file, []byte(c.src))
			}
		})
	}
}
