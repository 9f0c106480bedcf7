package jobfile

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/bad/*.golden from the decoder's output")

// TestBadFiles decodes each broken file in testdata/bad and compares the
// whole error text, one problem per line, with its .golden file. Run
// `go test -run TestBadFiles -update` after a deliberate change, and read
// the diff: the messages are what users see.
func TestBadFiles(t *testing.T) {
	files, err := filepath.Glob("testdata/bad/*")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, path := range files {
		if strings.HasSuffix(path, ".golden") {
			continue
		}
		n++
		golden := strings.TrimSuffix(path, filepath.Ext(path)) + ".golden"
		t.Run(filepath.Base(path), func(t *testing.T) {
			job, err := decodeTestFile(t, path)
			if err == nil {
				t.Fatalf("decoded without error: %+v", job)
			}
			if job != nil {
				t.Errorf("returned a job along with the error")
			}
			got := err.Error() + "\n"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("error text differs from %s\n--- got:\n%s--- want:\n%s", golden, got, want)
			}
		})
	}
	if n < 24 {
		t.Errorf("only %d bad files; keep at least 24", n)
	}
}
