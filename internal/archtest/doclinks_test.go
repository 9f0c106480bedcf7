package archtest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// mdLink is a markdown link's target: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// heading is a markdown heading outside a code block.
var heading = regexp.MustCompile(`^#{1,6} (.*)$`)

// anchor is the fragment GitHub gives a heading: lower case, punctuation
// other than - and _ dropped, spaces as -.
func anchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors lists the headings' fragments of a markdown file.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	inCode := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			inCode = !inCode
		}
		if m := heading.FindStringSubmatch(line); m != nil && !inCode {
			out[anchor(m[1])] = true
		}
	}
	return out
}

// Every link in the README and docs/ points inside the repository at a
// file that exists, and at a heading that exists when it names one: the
// docs stand alone, and moving a section cannot leave a link behind.
func TestDocLinksResolve(t *testing.T) {
	root := "../.."
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := append([]string{filepath.Join(root, "README.md")}, docs...)
	if len(files) < 5 {
		t.Fatalf("found only %v", files)
	}
	texts := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		texts[filepath.Clean(f)] = string(b)
	}
	links := 0
	for _, f := range files {
		for _, m := range mdLink.FindAllStringSubmatch(texts[filepath.Clean(f)], -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			links++
			path, frag, _ := strings.Cut(target, "#")
			dest := filepath.Clean(f)
			if path != "" {
				dest = filepath.Clean(filepath.Join(filepath.Dir(f), path))
			}
			rel, _ := filepath.Rel(root, dest)
			if strings.HasPrefix(rel, "..") {
				t.Errorf("%s: link %q leaves the repository", f, target)
				continue
			}
			if _, err := os.Stat(dest); err != nil {
				t.Errorf("%s: link %q: no such file", f, target)
				continue
			}
			if frag == "" || !strings.HasSuffix(dest, ".md") {
				continue
			}
			text, ok := texts[dest]
			if !ok {
				b, err := os.ReadFile(dest)
				if err != nil {
					t.Fatal(err)
				}
				text = string(b)
			}
			if !anchors(text)[frag] {
				t.Errorf("%s: link %q: %s has no heading with that anchor", f, target, rel)
			}
		}
	}
	if links < 20 {
		t.Fatalf("only %d links checked: is the pattern wrong?", links)
	}
}
