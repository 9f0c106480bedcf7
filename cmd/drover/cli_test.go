package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// runDrover runs the drover command line with args, stdin as its input,
// and returns what it printed (stdout and stderr) and the exit code main
// would give.
func runDrover(t *testing.T, stdin string, args ...string) (string, int) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(args)
	err := root.Execute()
	var ee *exitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &ee):
		return out.String(), ee.code
	}
	return out.String() + "Error: " + err.Error() + "\n", exitFailure
}

// A word drover has no command for exits 1 with cobra's suggestion, under
// drover and under every command that groups others; such a command
// alone still prints its help and exits 0.
func TestUnknownCommandsExit1WithASuggestion(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"deploymnt"}, `unknown command "deploymnt" for "drover"; did you mean "deployment"?`},
		{[]string{"deployment", "lst"}, `unknown command "lst" for "drover deployment"; did you mean "deployment list"?`},
		{[]string{"deployment", "stats", "web"}, `unknown command "stats" for "drover deployment"; did you mean "deployment status"?`},
		{[]string{"acl", "token", "craete"}, `unknown command "craete" for "drover acl token"; did you mean "acl token create"?`},
		{[]string{"tls", "frobnicate"}, `unknown command "frobnicate" for "drover tls"; drover tls --help lists its commands`},
		{[]string{"completion", "bassh"}, `unknown command "bassh" for "drover completion"; did you mean "completion bash"?`},
		{[]string{"ps", "extra"}, `unknown command "extra" for "drover ps"`},
	} {
		out, code := runDrover(t, "", c.args...)
		if code != exitFailure || !strings.Contains(out, c.want) {
			t.Errorf("drover %s: exit %d, printed:\n%s\nwant exit 1 and %q", strings.Join(c.args, " "), code, out, c.want)
		}
	}
	for _, args := range [][]string{{"deployment"}, {"acl", "token"}, {}} {
		if out, code := runDrover(t, "", args...); code != 0 || !strings.Contains(out, "Available Commands:") {
			t.Errorf("drover %s: exit %d, printed:\n%s\nwant its help and exit 0", strings.Join(args, " "), code, out)
		}
	}
}
