package jobfile

import (
	"os"
	"strings"
	"testing"
)

// Every HCL job file shown in the README decodes and validates: the
// reference must not teach what drover refuses.
func TestREADMEJobFilesDecode(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(string(b), "```hcl\n")
	if len(parts) < 2 {
		t.Fatal("no ```hcl block in the README; update this test")
	}
	for i, p := range parts[1:] {
		block, _, ok := strings.Cut(p, "```")
		if !ok {
			t.Fatalf("hcl block %d is not closed", i+1)
		}
		if _, err := Decode("README.hcl", []byte(block)); err != nil {
			t.Errorf("README hcl block %d does not decode:\n%v\n%s", i+1, err, block)
		}
	}
}
