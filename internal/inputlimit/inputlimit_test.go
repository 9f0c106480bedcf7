package inputlimit

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRealFilesNestFarBelowTheLimit: every job file and policy in the
// repository nests at most a quarter of MaxDepth, so the limit refuses
// nothing a real job needs.
func TestRealFilesNestFarBelowTheLimit(t *testing.T) {
	var files []string
	for _, pattern := range []string{"../../examples/*", "../jobfile/testdata/good/*", "../jobfile/testdata/bad/*"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	deepest, name, n := 0, "", 0
	for _, path := range files {
		scan := map[string]func([]byte) depth{".hcl": hclDepth, ".nomad": hclDepth, ".json": jsonDepth}[filepath.Ext(path)]
		if scan == nil || strings.Contains(filepath.Base(path), "deep") {
			continue // the files made to pass the limit
		}
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		n++
		if d := scan(src); d.max > deepest {
			deepest, name = d.max, path
		}
	}
	if n < 20 {
		t.Fatalf("found %d job files to measure; the globs are wrong", n)
	}
	t.Logf("the deepest of %d files is %s, %d levels", n, name, deepest)
	if deepest > MaxDepth/4 {
		t.Errorf("%s nests %d levels deep: MaxDepth (%d) is no longer far above what real jobs need", name, deepest, MaxDepth)
	}
}

// TestDeepInputIsRefusedInLinearTime: each shape that recursed once per
// level in a parser, or made a tree that deep, filling the size limit, is
// refused as too deep, where it first passes the limit, in a bounded time
// (HCL's lexer, which the parser runs too, takes about a second for 1 MiB
// of brackets). Before inputlimit, the 1 MiB HCL list, parentheses, "!",
// "-", "+", objects, templates and blocks each crashed drover with "fatal
// error: stack overflow"; the other shapes did not at 1 MiB, but their
// trees are as deep.
func TestDeepInputIsRefusedInLinearTime(t *testing.T) {
	fill := func(head, open, mid, close, tail string) string {
		n := (MaxBytes - len(head) - len(mid) - len(tail)) / (len(open) + len(close))
		return head + strings.Repeat(open, n) + mid + strings.Repeat(close, n) + tail
	}
	const job = "job \"x\" {\n  meta = "
	cases := []struct {
		what, src string
		check     func([]byte) error
		line, col int
	}{
		{"a JSON array", fill(`{"meta":`, "[", "", "]", "}"), JSON, 1, 9 + MaxDepth - 1},
		{"JSON objects", fill("", `{"a":`, "1", "}", ""), JSON, 1, 1 + 5*MaxDepth},
		{"an HCL list", fill(job, "[", "", "]", "\n}"), HCL, 2, 10 + MaxDepth - 1},
		{"HCL parentheses", fill(job, "(", "1", ")", "\n}"), HCL, 2, 10 + MaxDepth - 1},
		{"HCL objects", fill(job, "{a=", "1", "}", "\n}"), HCL, 2, 10 + 3*(MaxDepth-1)},
		{"HCL templates", fill(job, `"${`, "1", `}"`, "\n}"), HCL, 2, 11 + 3*((MaxDepth-2)/2)},
		{"HCL blocks", fill("job \"x\" {\n", "a {\n", "", "}\n", "}\n"), HCL, MaxDepth + 1, 3},
		{"HCL nots", fill(job, "!", "true", "", "\n}"), HCL, 2, 10 + MaxDepth - 1},
		{"HCL negations", fill(job, "-", "1", "", "\n}"), HCL, 2, 10 + MaxDepth - 1},
		{"an HCL sum", fill(job, "1+", "1", "", "\n}"), HCL, 2, 10 + 2*(MaxDepth-1) + 1},
		{"HCL conditionals", fill(job, "true?1:", "1", "", "\n}"), HCL, 2, 10 + 7*(MaxDepth-1) + 4},
		{"HCL indexes", fill(job+"[1]", "", "", "[0]", "\n}"), HCL, 2, 13 + 3*(MaxDepth-2)},
		{"HCL attributes", fill(job+"{a=1}", "", "", ".a", "\n}"), HCL, 2, 15 + 2*(MaxDepth-1)},
		{"HCL template directives", fill(job+`"`, "%{if true}", "", "", `"`+"\n}"), HCL, 2, 11 + 10*(MaxDepth-3)},
	}
	for _, c := range cases {
		start := time.Now()
		err := c.check([]byte(c.src))
		took := time.Since(start)
		var deep *TooDeepError
		if !errors.As(err, &deep) {
			t.Errorf("%s: %v, want a TooDeepError", c.what, err)
			continue
		}
		if deep.Depth <= MaxDepth || deep.Line != c.line || deep.Col != c.col {
			t.Errorf("%s: nests %d at %d:%d, want more than %d at %d:%d", c.what, deep.Depth, deep.Line, deep.Col, MaxDepth, c.line, c.col)
		}
		if took > 5*time.Second {
			t.Errorf("%s: %d bytes took %v", c.what, len(c.src), took)
		}
	}
}

// TestDepthCountsStructureOnly: nesting up to the limit passes and one
// level more does not; brackets in strings, comments and heredocs do not
// count, nor do operators in separate expressions.
func TestDepthCountsStructureOnly(t *testing.T) {
	nested := func(open, close string, n int) string { return strings.Repeat(open, n) + strings.Repeat(close, n) }
	brackets := strings.Repeat("[{(", 100)
	cases := []struct {
		what, src string
		check     func([]byte) error
		deep      bool
	}{
		{"JSON at the limit", nested("[", "]", MaxDepth), JSON, false},
		{"JSON past the limit", nested("[", "]", MaxDepth+1), JSON, true},
		{"JSON brackets in strings", `{"a":"` + brackets + `\"` + brackets + `"}`, JSON, false},
		{"JSON stray closers first", strings.Repeat("]", 100) + nested("[", "]", MaxDepth+1), JSON, true},
		{"HCL at the limit", "a = " + nested("[", "]", MaxDepth), HCL, false},
		{"HCL past the limit", "a = " + nested("[", "]", MaxDepth+1), HCL, true},
		{"HCL blocks at the limit", nested("a {\n", "}\n", MaxDepth), HCL, false},
		{"HCL brackets in strings and comments", "# " + brackets + "\n// " + brackets + "\n/* " + brackets + " */\na = \"" + brackets + "\"\n", HCL, false},
		{"HCL brackets in a heredoc", "a = <<EOF\n" + brackets + "\nEOF\n", HCL, false},
		{"HCL operators on many lines", strings.Repeat("a = -1 + 2\n", 1000), HCL, false},
		{"HCL operators in many list items", "a = [" + strings.Repeat("-1, ", 1000) + "]\n", HCL, false},
		{"HCL operators on many lines in parentheses", "a = (" + strings.Repeat("!\n", MaxDepth) + "true)\n", HCL, true},
	}
	for _, c := range cases {
		err := c.check([]byte(c.src))
		var deep *TooDeepError
		if errors.As(err, &deep) != c.deep || (!c.deep && err != nil) {
			t.Errorf("%s: %v; want too deep: %v", c.what, err, c.deep)
		}
	}
}

func TestSize(t *testing.T) {
	at := []byte("[" + strings.Repeat(" ", MaxBytes-2) + "]")
	if err := JSON(at); err != nil {
		t.Errorf("an input of MaxBytes: %v", err)
	}
	var large *TooLargeError
	for _, check := range []func([]byte) error{JSON, HCL} {
		if err := check(append(at, ' ')); !errors.As(err, &large) || large.Size != MaxBytes+1 {
			t.Errorf("an input of MaxBytes+1: %v, want a TooLargeError", err)
		}
	}
	if err := Size(20 << 20); err == nil || err.Error() != "is 20971520 bytes; the limit is 1048576 (1 MiB)" {
		t.Errorf("Size(20 MiB) = %v", err)
	}
}
