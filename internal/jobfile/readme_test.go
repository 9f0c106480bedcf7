package jobfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every HCL job file shown in the README and the job file reference
// (docs/jobs.md) decodes and validates: the reference must not teach what drover refuses.
func TestREADMEJobFilesDecode(t *testing.T) {
	blocks := 0
	for _, name := range []string{"../../README.md", "../../docs/jobs.md"} {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		parts := strings.Split(string(b), "```hcl\n")
		for i, p := range parts[1:] {
			block, _, ok := strings.Cut(p, "```")
			if !ok {
				t.Fatalf("%s: hcl block %d is not closed", name, i+1)
			}
			blocks++
			if _, err := Decode(filepath.Base(name)+".hcl", []byte(block)); err != nil {
				t.Errorf("%s: hcl block %d does not decode:\n%v\n%s", name, i+1, err, block)
			}
		}
	}
	if blocks < 5 {
		t.Fatalf("only %d ```hcl blocks in the README and docs/jobs.md; the job file reference moved? update this test", blocks)
	}
}
