package jobfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-org/drover/internal/spec"
)

// FuzzDecode feeds arbitrary bytes through every format. Decoding must never
// panic, must return either a valid job or a non-empty spec.Problems, and a
// job it returns must survive the JSON round trip.
func FuzzDecode(f *testing.F) {
	for _, pattern := range []string{"testdata/good/*", "testdata/bad/*", "../../examples/*"} {
		files, _ := filepath.Glob(pattern)
		for _, path := range files {
			if st, err := os.Stat(path); strings.HasSuffix(path, ".golden") || err == nil && st.IsDir() {
				continue // examples/config holds config files, not jobs
			}
			src, err := os.ReadFile(path)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(src, uint8(0))
		}
	}
	f.Add([]byte(Example), uint8(0))
	f.Add([]byte(ExampleShort), uint8(1))
	names := []string{"f.hcl", "f.json", "f.yaml", "-"}
	f.Fuzz(func(t *testing.T, src []byte, format uint8) {
		checkDecode(t, names[int(format)%len(names)], src)
	})
}

// checkDecode decodes src as a file named name and checks what every fuzz
// target of the package asks: no panic, a bounded time, and either a valid
// job that survives the JSON round trip or a non-empty spec.Problems.
func checkDecode(t *testing.T, name string, src []byte) {
	t.Helper()
	start := time.Now()
	job, err := Decode(name, src)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("decoding %d bytes took %v", len(src), d)
	}
	if err != nil {
		var ps spec.Problems
		if !errors.As(err, &ps) || len(ps) == 0 {
			t.Fatalf("error is not a non-empty spec.Problems: %#v", err)
		}
		if job != nil {
			t.Fatalf("job returned with an error")
		}
		return
	}
	if job == nil {
		t.Fatal("no job and no error")
	}
	if ps := job.Validate(); len(ps) > 0 {
		t.Fatalf("decoded job does not validate: %v", ps)
	}
	if _, err := DecodeJSONBody(mustJSON(t, job)); err != nil {
		t.Fatalf("decoded job's JSON does not decode: %v", err)
	}
}

func mustJSON(t *testing.T, job *spec.Job) []byte {
	t.Helper()
	b, err := jsonMarshal(job)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
