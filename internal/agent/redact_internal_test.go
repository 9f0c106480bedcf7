package agent

import (
	"testing"

	"github.com/drover-org/drover/internal/spec"
)

func TestRedact(t *testing.T) {
	ar := &allocRunner{redactor: newRedactor([]*spec.Task{
		{Name: "a", Env: map[string]string{"TOKEN": "abcdefgh", "LONG": "abcdefgh-ijkl", "MODE": "running", "PORT": "8080"}},
		{Name: "b", Env: map[string]string{"PATH": "/opt/secret/bin:/bin"}},
	})}
	for _, tc := range []struct{ in, want string }{
		{"token abcdefgh here", "token <env TOKEN> here"},
		// The longer value wins where both match: no tail of it is left.
		{"abcdefgh-ijkl", "<env LONG>"},
		// Short values are words and numbers, not secrets.
		{"task running on port 8080", "task running on port 8080"},
		{`command "x" not found in PATH /opt/secret/bin:/bin`, `command "x" not found in PATH <env PATH>`},
		{"", ""},
	} {
		if got := ar.redact(tc.in); got != tc.want {
			t.Errorf("redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if r := newRedactor([]*spec.Task{{Env: map[string]string{"A": "1"}}}); r != nil {
		t.Errorf("nothing to redact should give no redactor")
	}
}
