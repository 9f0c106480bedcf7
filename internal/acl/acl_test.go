package acl

import (
	"errors"
	"strings"
	"testing"

	"github.com/drover-org/drover/internal/inputlimit"
)

func mustParse(t *testing.T, src string) *Rules {
	t.Helper()
	r, err := Parse("p.hcl", []byte(src))
	if err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	return r
}

func TestNamespaceGlobs(t *testing.T) {
	a := New(mustParse(t, `
namespace "default" { capabilities = ["read", "submit"] }
namespace "team-*"  { capabilities = ["read"] }
`), mustParse(t, `namespace "team-a" { capabilities = ["logs"] }`))
	cases := []struct {
		ns, capability string
		want           bool
	}{
		{"default", Read, true},
		{"default", Submit, true},
		{"default", Logs, false},
		{"", Submit, true}, // "" is default
		{"team-a", Read, true},
		{"team-a", Logs, true}, // the union of both policies
		{"team-a", Submit, false},
		{"team-b", Read, true},
		{"team-", Read, true},
		{"teamx", Read, false}, // the glob needs its '-'
		{"other", Read, false},
		{"defaults", Read, false}, // exact names are exact
	}
	for _, c := range cases {
		if got := a.Allow(c.ns, c.capability); got != c.want {
			t.Errorf("Allow(%q, %q) = %v, want %v", c.ns, c.capability, got, c.want)
		}
	}
	if a.AllowNode(NodeRead) || a.IsManagement() {
		t.Error("namespace rules granted node read or management")
	}
	star := New(mustParse(t, `namespace "*" { capabilities = ["read"] }
node { capabilities = ["read"] }`))
	if !star.Allow("anything", Read) || star.Allow("anything", Submit) || !star.AllowNode(NodeRead) || star.AllowNode(NodeWrite) {
		t.Error("namespace \"*\" with node read: wrong answers")
	}
	if m := Management(); !m.Allow("x", Submit) || !m.AllowNode(NodeWrite) || !m.IsManagement() {
		t.Error("management may not do everything")
	}
	if New().Allow("default", Read) {
		t.Error("no policy granted read")
	}
}

func TestBadPoliciesSayWhatIsWrong(t *testing.T) {
	cases := []struct{ src, want string }{
		{``, "grants nothing"},
		{`namespace "default" { capabilities = ["write"] }`, `unknown capability "write"`},
		{`namespace "a/b" { capabilities = ["read"] }`, `contains '/'`},
		{`namespace "x" { capabilities = ["read"] }` + "\nnode { capabilities = [\"submit\"] }", `node: unknown capability "submit"`},
		{`namespace "x" { caps = ["read"] }`, "caps"},
		{`host_volume "x" { policy = "read" }`, "host_volume"},
		{`namespace "x" {`, "p.hcl:1"},
	}
	for _, c := range cases {
		_, err := Parse("p.hcl", []byte(c.src))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want it to mention %q", c.src, err, c.want)
		}
	}
}

// TestParseRefusesDeepPolicies: a policy nested deeper than the limit is
// refused before HCL parses it (60,000 levels overflowed the parser's
// stack, killing the server), with an error inputlimit's type is in.
func TestParseRefusesDeepPolicies(t *testing.T) {
	src := `namespace "default" { capabilities = ` + strings.Repeat("[", 60000) + strings.Repeat("]", 60000) + ` }`
	_, err := Parse("p.hcl", []byte(src))
	var deep *inputlimit.TooDeepError
	if !errors.As(err, &deep) || err.Error() != "p.hcl: the policy nests 60001 levels deep (line 1, column 101); the limit is 64" {
		t.Errorf("Parse: %v; want a TooDeepError", err)
	}
}
