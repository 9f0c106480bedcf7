package jobfile

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestNomadDocNamesTheSchema: docs/nomad.md's compatibility table has a row
// for every block and attribute the HCL decoder takes, by the block that
// holds it, so that a field added to the spec without a row fails here. A
// row's first cell names blocks, then after a colon what they hold
// (`restart`: `attempts`, `mode`); a row covers each of its blocks
// wherever written, `block.name`, and the blocks' names after the colon.
// The top-level blocks (variable, variables, locals) and what a variable
// block holds need rows too, as does dynamic.
func TestNomadDocNamesTheSchema(t *testing.T) {
	b, err := os.ReadFile("../../docs/nomad.md")
	if err != nil {
		t.Fatal(err)
	}
	code := regexp.MustCompile("`([^`]+)`")
	covered := map[[2]string]bool{}
	for line := range strings.Lines(string(b)) {
		cells := strings.Split(line, "|")
		if !strings.HasPrefix(line, "| ") || len(cells) < 3 {
			continue
		}
		// The blocks a row is about come before a colon, what they
		// hold after it: `restart`: `attempts`, `mode`.
		subject, members, ok := strings.Cut(cells[1], ":")
		spans := func(text string) []string {
			var out []string
			for _, m := range code.FindAllStringSubmatch(text, -1) {
				out = append(out, m[1])
			}
			return out
		}
		blocks := spans(subject)
		if !ok && len(blocks) > 0 {
			blocks, members = blocks[:1], ""
		}
		for _, b := range blocks {
			covered[[2]string{"", b}] = true // a row of its own
			if block, name, ok := strings.Cut(b, "."); ok {
				covered[[2]string{block, name}] = true
			}
			for _, m := range spans(members) {
				covered[[2]string{b, m}] = true
			}
		}
	}
	var missing []string
	need := func(block, name string) {
		if !covered[[2]string{block, name}] && !covered[[2]string{"", name}] && !slices.Contains(missing, block+"."+name) {
			missing = append(missing, block+"."+name)
		}
	}
	if !covered[[2]string{"", "job"}] {
		missing = append(missing, "job")
	}
	var visit func(block string, s *schema)
	visit = func(block string, s *schema) {
		for _, f := range s.fields {
			switch {
			case f.hcl == "":
			case f.obj != nil:
				need(block, f.hcl)
				visit(f.hcl, f.obj)
			default:
				need(block, f.hcl)
			}
		}
	}
	visit("job", jobTree)
	// The top level's blocks, what a variable block holds, and dynamic.
	for name := range topSchema.members {
		need("", name)
	}
	for name := range variableSchema.members {
		need("variable", name)
	}
	for name := range validationSchema.members {
		need("validation", name)
	}
	need("", "dynamic")
	if len(missing) > 0 {
		t.Errorf("docs/nomad.md has no row for %d of the job language's names; add them:\n%s", len(missing), strings.Join(missing, "\n"))
	}
}
